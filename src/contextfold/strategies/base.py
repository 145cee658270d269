"""The strategy contract and the two drivers that run every strategy.

Strategies are sans-I/O planners. ``plan()`` is a generator: when it needs a summary it
yields a :class:`SummaryCall` and receives the :class:`SummarizationResult`; when done it
returns a :class:`StrategyResult`. :func:`run` drives it synchronously, :func:`arun`
asynchronously and :func:`dry_run` without calling any summarizer, so the logic is written
once (httpx ``Auth.auth_flow`` is the model).

Drivers enforce the summarizer contract at the boundary: a summarizer that raises, or that
overruns its deadline, yields a failure result instead of an exception.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from contextfold.checkpoints import CheckpointRecord
from contextfold.messages import Message, TextPart
from contextfold.summarizers.base import (
    AsyncSummarizer,
    SummarizationResult,
    Summarizer,
    SummaryRequest,
    Usage,
    precheck,
)
from contextfold.tokens.base import TokenCounter

__all__ = [
    "PlanGenerator",
    "Strategy",
    "StrategyResult",
    "SummaryCall",
    "SummaryPlacement",
    "arun",
    "dry_run",
    "escape_framing",
    "place_summary",
    "run",
    "summary_id",
]


@dataclass(frozen=True, slots=True)
class SummaryCall:
    """A request for the driver: run ``summarizer`` on ``request``."""

    summarizer: Summarizer | AsyncSummarizer
    request: SummaryRequest


@dataclass(frozen=True)
class StrategyResult:
    """The context a strategy built, and an account of how.

    What was dropped or summarized is recorded as index ranges into ``history`` (the input
    list), so building a result costs nothing per message that was left out: a sliding
    window over a million messages stays as cheap as over a thousand. The id views and
    ``tokens_before`` are computed on first access.

    Attributes:
        messages: the context to send.
        strategy: the strategy's name.
        tokens: tokens of ``messages`` under the counter used.
        history: the input messages (not copied).
        counter: the counter used, for ``tokens_before``.
        kept: ids of input messages kept verbatim.
        dropped_ranges: ``(start, end)`` index ranges of ``history`` left out without a
            summary.
        summarized_ranges: index ranges of ``history`` covered by a summary (new or reused).
        pruned: ids of input messages sent in a shortened form (tool outputs cleared).
        checkpoint: a new checkpoint the caller should persist, if one was made.
        reused_checkpoint: the prior checkpoint the context was built on, if any.
        fallback: why the strategy fell back to the sliding window, when it did.
        failure_code: the summarizer failure code behind ``fallback``.
        usage: what the summarizer calls of this run cost.
        summary_calls: how many summarizer calls were made.
        notes: human-readable reasons, for plans and logs.
    """

    messages: tuple[Message, ...]
    strategy: str
    tokens: int
    history: Sequence[Message] = field(default=(), repr=False, compare=False)
    counter: TokenCounter | None = field(default=None, repr=False, compare=False)
    kept: tuple[str, ...] = ()
    dropped_ranges: tuple[tuple[int, int], ...] = ()
    summarized_ranges: tuple[tuple[int, int], ...] = ()
    pruned: tuple[str, ...] = ()
    checkpoint: CheckpointRecord | None = None
    reused_checkpoint: CheckpointRecord | None = None
    fallback: str | None = None
    failure_code: str | None = None
    usage: Usage = field(default_factory=Usage)
    summary_calls: int = 0
    notes: tuple[str, ...] = ()
    known_tokens_before: int | None = field(default=None, repr=False, compare=False)
    _cache: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def tokens_before(self) -> int:
        """Tokens of the full input history (computed once, on first access)."""
        if self.known_tokens_before is not None:
            return self.known_tokens_before
        cached = self._cache.get("tokens_before")
        if cached is None:
            if self.counter is None:
                from contextfold.tokens.approx import ApproxCounter

                cached = ApproxCounter().count_messages(self.history)
            else:
                cached = self.counter.count_messages(self.history)
            self._cache["tokens_before"] = cached
        return cached

    @property
    def dropped(self) -> tuple[str, ...]:
        """Ids of input messages left out without a summary."""
        return tuple(self.history[i].id for a, b in self.dropped_ranges for i in range(a, b))

    @property
    def summarized(self) -> tuple[str, ...]:
        """Ids of input messages covered by a summary."""
        return tuple(self.history[i].id for a, b in self.summarized_ranges for i in range(a, b))

    @property
    def dropped_count(self) -> int:
        """How many input messages were left out without a summary."""
        return sum(b - a for a, b in self.dropped_ranges)

    @property
    def summarized_count(self) -> int:
        """How many input messages a summary covers."""
        return sum(b - a for a, b in self.summarized_ranges)

    @property
    def is_summarized(self) -> bool:
        """True when the context carries a summary."""
        return bool(self.summarized_ranges)

    @property
    def tokens_saved(self) -> int:
        """Tokens not sent compared with the full history."""
        return max(0, self.tokens_before - self.tokens)


PlanGenerator: TypeAlias = Generator[SummaryCall, SummarizationResult, StrategyResult]


@runtime_checkable
class Strategy(Protocol):
    """Builds a context from a history; see the module docstring for the protocol."""

    @property
    def name(self) -> str:
        """A short stable name (``"sliding"``, ``"hybrid"`` ...), used in stats and records."""
        ...

    def plan(
        self,
        messages: Sequence[Message],
        /,
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None = None,
    ) -> PlanGenerator:
        """Yield summary calls as needed and return the result. Must not mutate input."""
        ...


# -- drivers ------------------------------------------------------------------------------


def _default_counter(counter: TokenCounter | None) -> TokenCounter:
    if counter is not None:
        return counter
    from contextfold.tokens.approx import ApproxCounter

    return ApproxCounter()


def _call_sync(call: SummaryCall) -> SummarizationResult:
    early = precheck(call.request)
    if early is not None:
        return early
    summarizer = call.summarizer
    try:
        if isinstance(summarizer, Summarizer):
            return summarizer.summarize(call.request)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(summarizer.asummarize(call.request))
        return SummarizationResult.failure(
            "an async-only summarizer cannot run inside a running event loop; "
            "use abuild_context()/arun()",
            "error",
        )
    except Exception as exc:  # the contract says never raise; enforce it here
        return SummarizationResult.failure(f"summarizer raised {type(exc).__name__}: {exc}")


async def _call_async(call: SummaryCall) -> SummarizationResult:
    early = precheck(call.request)
    if early is not None:
        return early
    summarizer = call.summarizer
    remaining = call.request.remaining()
    try:
        if isinstance(summarizer, AsyncSummarizer):
            coro = summarizer.asummarize(call.request)
        else:
            coro = asyncio.to_thread(summarizer.summarize, call.request)
        if remaining is None:
            return await coro
        return await asyncio.wait_for(coro, timeout=remaining)
    except asyncio.TimeoutError:
        return SummarizationResult.failure("summarizer ran past its deadline", "timeout")
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return SummarizationResult.failure(f"summarizer raised {type(exc).__name__}: {exc}")


def run(
    strategy: Strategy,
    messages: Sequence[Message],
    *,
    counter: TokenCounter | None = None,
    checkpoint: CheckpointRecord | None = None,
) -> StrategyResult:
    """Run ``strategy`` synchronously, calling its summarizers as it asks."""
    gen = strategy.plan(messages, counter=_default_counter(counter), checkpoint=checkpoint)
    try:
        call = next(gen)
        while True:
            call = gen.send(_call_sync(call))
    except StopIteration as stop:
        result: StrategyResult = stop.value
        return result


async def arun(
    strategy: Strategy,
    messages: Sequence[Message],
    *,
    counter: TokenCounter | None = None,
    checkpoint: CheckpointRecord | None = None,
) -> StrategyResult:
    """Run ``strategy`` asynchronously; gives the same result as :func:`run`."""
    gen = strategy.plan(messages, counter=_default_counter(counter), checkpoint=checkpoint)
    try:
        call = next(gen)
        while True:
            call = gen.send(await _call_async(call))
    except StopIteration as stop:
        result: StrategyResult = stop.value
        return result


DRY_RUN_SUMMARY = "[dry run: a summary of {n} messages would go here]"


def dry_run(
    strategy: Strategy,
    messages: Sequence[Message],
    *,
    counter: TokenCounter | None = None,
    checkpoint: CheckpointRecord | None = None,
) -> StrategyResult:
    """Plan without calling any summarizer: each summary is a short placeholder.

    The result shows what would be kept, dropped and summarized; its token figures are
    projections (the real summary's length is unknown until it is written).
    """
    gen = strategy.plan(messages, counter=_default_counter(counter), checkpoint=checkpoint)
    try:
        call = next(gen)
        while True:
            text = DRY_RUN_SUMMARY.format(n=len(call.request.messages))
            call = gen.send(SummarizationResult.success(text, details={"dry_run": True}))
    except StopIteration as stop:
        result: StrategyResult = stop.value
        return result


# -- summary placement --------------------------------------------------------------------

SummaryRole: TypeAlias = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class SummaryPlacement:
    """How an injected summary is shaped and placed.

    Attributes:
        role: role of the summary message. ``user`` is accepted by every provider;
            ``system`` matches the ``keep_last_with_summary`` seed.
        style: ``tags`` wraps the text in ``<tag>...</tag>`` after ``preamble``; ``label``
            puts ``label`` on its own line before the text.
        tag: the tag name for the ``tags`` style.
        label: the first line for the ``label`` style.
        preamble: text before the tags, framing the summary as established background.
        provider_safe: merge the summary into a following message of the same role, and
            make sure the first message after the prefix is a user message, as Anthropic
            and Gemini require.
    """

    role: SummaryRole = "user"
    style: Literal["tags", "label"] = "tags"
    tag: str = "conversation-summary"
    label: str = "Summary of earlier conversation:"
    preamble: str = (
        "Earlier turns of this conversation were condensed into the summary below. "
        "Treat it as established background and continue from the messages that follow."
    )
    provider_safe: bool = True

    def frame(self, summary: str) -> str:
        """The summary text as it appears in the context, framing escaped inside it."""
        if self.style == "label":
            body = summary.strip()
            if self.label and body.startswith(self.label):
                body = "\u200b" + body  # cannot pose as a second label line
            return f"{self.label}\n{body}" if self.label else body
        body = escape_framing(summary.strip(), (self.tag,))
        head = f"{self.preamble}\n\n" if self.preamble else ""
        return f"{head}<{self.tag}>\n{body}\n</{self.tag}>"


def escape_framing(text: str, tags: Sequence[str]) -> str:
    """Neutralize ``<tag`` and ``</tag`` (any case) so text cannot open or close a frame."""
    if "<" not in text:
        return text
    lowered = text.lower()
    out = text
    for tag in tags:
        for opener in (f"</{tag.lower()}", f"<{tag.lower()}"):
            start = lowered.find(opener)
            while start != -1:
                out = out[:start] + "&lt;" + out[start + 1 :]
                lowered = lowered[:start] + "&lt;" + lowered[start + 1 :]
                start = lowered.find(opener, start + 4)
    return out


def summary_id(covered: Sequence[Message], salt: str = "") -> str:
    """A deterministic id for a summary message, derived from what it covers."""
    h = hashlib.sha256(salt.encode())
    for m in covered:
        h.update(m.id.encode())
        h.update(b"\0")
    return "summary_" + h.hexdigest()[:24]


def place_summary(
    prefix: Sequence[Message],
    summary: str,
    kept: Sequence[Message],
    *,
    placement: SummaryPlacement,
    message_id: str,
) -> list[Message]:
    """``prefix + [summary message] + kept``, shaped per ``placement``.

    With ``provider_safe`` a user-role summary followed by a user message is merged into
    that message (as its first text part) so no two user messages stand in a row.
    """
    text = placement.frame(summary)
    if placement.role == "user" and placement.provider_safe and kept and kept[0].role == "user":
        first = kept[0]
        merged = first.replace(parts=(TextPart(text), *first.parts))
        return [*prefix, merged, *kept[1:]]
    msg = Message(
        placement.role, (TextPart(text),), id=message_id, extra={"contextfold": "summary"}
    )
    return [*prefix, msg, *kept]
