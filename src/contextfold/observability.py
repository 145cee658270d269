"""Logs and traces of what contextfold does: builds, compactions, summarizer fallbacks.

**Logging.** Records go to standard :mod:`logging` loggers under ``contextfold``, which has
only a :class:`logging.NullHandler`: nothing is printed until the application configures
logging (``logging.basicConfig(level=logging.INFO)``, say). Three child loggers, so each
kind can be turned up or down on its own:

* ``contextfold.build`` (DEBUG): every context built, with its tokens before and after;
* ``contextfold.compaction`` (INFO): a summary was written (a new checkpoint);
* ``contextfold.fallback`` (WARNING): the summarizer failed and the strategy fell back to the
  sliding window, with the reason.

Each record carries the figures as ``record.contextfold`` (a dict of the span attributes
below), for structured handlers.

**Tracing.** With ``opentelemetry-api`` installed (the ``otel`` extra) and a tracer provider
configured by the application, every build is a ``contextfold.build`` span (a child of the
application's current span) and each compaction a ``contextfold.compaction`` span inside
it. Attribute names follow the OpenTelemetry GenAI semantic conventions where one exists
(``gen_ai.request.model`` and ``gen_ai.usage.*`` for the summarizer's model and tokens) and
are ours, under ``contextfold.``, otherwise: ``contextfold.strategy``,
``contextfold.tokens.before`` / ``.after``, ``contextfold.fallback.reason`` ...
Without a configured provider the spans are OpenTelemetry's no-op spans and nothing is
computed for them.

Both are reported once a build has finished (by :func:`record_build`, which the memory and
:func:`~contextfold.strategies.run` call), so a span's start is the build's start and its
end the build's end; the summarizer's own HTTP call is traced by its SDK's instrumentation.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from contextfold.memory._stats import MemoryStats
    from contextfold.strategies.base import StrategyResult

__all__ = [
    "BUILD_LOGGER",
    "COMPACTION_LOGGER",
    "FALLBACK_LOGGER",
    "LOGGER",
    "TRACER_NAME",
    "build_attributes",
    "now_ns",
    "record_build",
]

#: The root logger of the library (a NullHandler keeps it silent until configured).
LOGGER = logging.getLogger("contextfold")
LOGGER.addHandler(logging.NullHandler())
BUILD_LOGGER = logging.getLogger("contextfold.build")
COMPACTION_LOGGER = logging.getLogger("contextfold.compaction")
FALLBACK_LOGGER = logging.getLogger("contextfold.fallback")

#: The instrumentation scope of contextfold's spans.
TRACER_NAME = "contextfold"

Origin = Literal["memory", "run"]


def now_ns() -> int:
    """The wall-clock time in nanoseconds, as OpenTelemetry wants a span's start."""
    return time.time_ns()


def build_attributes(
    result: StrategyResult, *, origin: Origin, stats: MemoryStats | None = None
) -> dict[str, Any]:
    """The figures of one build, under the names its span and log records use.

    ``contextfold.tokens.before`` is what the strategy was given (for a memory, the history
    from its last checkpoint on); ``contextfold.conversation.tokens`` is the whole stored
    conversation, when the memory knows it without reading the log. With ``stats`` the
    dropped and summarized counts are the memory's (they include the stored messages it
    did not read: those a checkpoint covers, or a window left out), as its stats report.
    """
    fallback = stats.fallback_reason if stats is not None else result.fallback
    dropped = stats.dropped_count if stats is not None else result.dropped_count
    summarized = stats.summarized_count if stats is not None else result.summarized_count
    attrs: dict[str, Any] = {
        "contextfold.origin": origin,
        "contextfold.strategy": result.strategy,
        "contextfold.tokens.before": result.tokens_before,
        "contextfold.tokens.after": result.tokens,
        "contextfold.messages.before": len(result.history),
        "contextfold.messages.after": len(result.messages),
        "contextfold.messages.dropped": dropped,
        "contextfold.messages.summarized": summarized,
        "contextfold.summary_calls": result.summary_calls,
        "contextfold.compacted": result.checkpoint is not None,
        "contextfold.fallback": fallback is not None,
    }
    if fallback is not None:
        attrs["contextfold.fallback.reason"] = fallback
    if result.failure_code is not None:
        attrs["contextfold.failure_code"] = result.failure_code
    used = result.checkpoint or result.reused_checkpoint
    if used is not None:
        attrs["contextfold.checkpoint.id"] = used.id
    if stats is not None:
        attrs.update(_cache_attributes(stats))
    if result.summary_calls:
        usage = result.usage
        attrs["gen_ai.usage.input_tokens"] = usage.input_tokens
        attrs["gen_ai.usage.output_tokens"] = usage.output_tokens
        attrs["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
        attrs["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    model = result.checkpoint.model if result.checkpoint is not None else None
    if model:
        attrs["gen_ai.request.model"] = model
    return attrs


def _cache_attributes(stats: MemoryStats) -> dict[str, Any]:
    """The memory's figures of the conversation and its prompt cache, where known."""
    figures = {
        "contextfold.conversation.tokens": stats.total_tokens,
        "contextfold.cache.stable_prefix_tokens": stats.stable_prefix_tokens,
        "contextfold.cost.estimated_usd": stats.estimated_cost_usd,
        "contextfold.cost.full_history_usd": stats.full_history_cost_usd,
    }
    return {k: v for k, v in figures.items() if v is not None}


def record_build(
    result: StrategyResult,
    *,
    started_ns: int,
    origin: Origin,
    stats: MemoryStats | None = None,
) -> None:
    """Log and trace one finished build (see the module docstring).

    Costs nearly nothing when no one listens: the figures are computed only when a logger
    is enabled for the record's level or a span is recording.
    """
    compacted = result.checkpoint is not None
    fallback = stats.fallback_reason if stats is not None else result.fallback
    wanted = (
        BUILD_LOGGER.isEnabledFor(logging.DEBUG)
        or (compacted and COMPACTION_LOGGER.isEnabledFor(logging.INFO))
        or (fallback is not None and FALLBACK_LOGGER.isEnabledFor(logging.WARNING))
    )
    tracer = _tracer()
    if not wanted and tracer is None:
        return
    attrs = build_attributes(result, origin=origin, stats=stats)
    if wanted:
        _log(attrs, compacted=compacted, fallback=fallback)
    if tracer is not None:
        _trace(tracer, attrs, started_ns=started_ns, compacted=compacted)


def _log(attrs: Mapping[str, Any], *, compacted: bool, fallback: str | None) -> None:
    extra = {"contextfold": dict(attrs)}
    before, after = attrs["contextfold.tokens.before"], attrs["contextfold.tokens.after"]
    strategy = attrs["contextfold.strategy"]
    BUILD_LOGGER.debug(
        "built a %s context: %d -> %d tokens, %d of %d messages",
        strategy,
        before,
        after,
        attrs["contextfold.messages.after"],
        attrs["contextfold.messages.before"],
        extra=extra,
    )
    if compacted:
        COMPACTION_LOGGER.info(
            "compacted with %s: %d messages summarized in %d call(s), %d -> %d tokens",
            strategy,
            attrs["contextfold.messages.summarized"],
            attrs["contextfold.summary_calls"],
            before,
            after,
            extra=extra,
        )
    if fallback is not None:
        FALLBACK_LOGGER.warning(
            "%s fell back without a new summary: %s", strategy, fallback, extra=extra
        )


def _tracer() -> Any:
    """contextfold's tracer when OpenTelemetry is installed and its spans would be kept.

    Until the application sets a tracer provider, the API hands out no-op spans: then there
    is no tracer, and no attributes are computed for nothing.
    """
    trace = _trace_api()
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return provider.get_tracer(TRACER_NAME)


@functools.lru_cache(maxsize=1)
def _trace_api() -> Any:
    """``opentelemetry.trace``, or None without the ``otel`` extra (looked for once, not per
    build: a failed import searches the whole path every time)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace


def _trace(tracer: Any, attrs: Mapping[str, Any], *, started_ns: int, compacted: bool) -> None:
    from opentelemetry import trace

    ended = now_ns()
    span = tracer.start_span("contextfold.build", start_time=started_ns, attributes=attrs)
    if attrs["contextfold.fallback"]:
        span.add_event(
            "contextfold.fallback",
            {"contextfold.fallback.reason": attrs.get("contextfold.fallback.reason", "")},
        )
    if compacted:
        inner = {k: v for k, v in attrs.items() if k.startswith("gen_ai.")}
        inner["contextfold.strategy"] = attrs["contextfold.strategy"]
        inner["contextfold.messages.summarized"] = attrs["contextfold.messages.summarized"]
        inner["contextfold.summary_calls"] = attrs["contextfold.summary_calls"]
        if "contextfold.checkpoint.id" in attrs:
            inner["contextfold.checkpoint.id"] = attrs["contextfold.checkpoint.id"]
        child = tracer.start_span(
            "contextfold.compaction",
            context=trace.set_span_in_context(span),
            start_time=started_ns,
            attributes=inner,
        )
        child.end(end_time=ended)
    span.end(end_time=ended)
