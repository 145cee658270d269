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
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, runtime_checkable

from contextfold._drive import adrive, drive
from contextfold.checkpoints import CheckpointRecord
from contextfold.messages import Message
from contextfold.summarizers.base import (
    AsyncSummarizer,
    SummarizationResult,
    Summarizer,
    SummaryRequest,
    precheck,
)
from contextfold.tokens.base import TokenCounter
from contextfold.usage import Usage

__all__ = [
    "PlanGenerator",
    "Strategy",
    "StrategyResult",
    "SummaryCall",
    "acall_summarizer",
    "arun",
    "call_summarizer",
    "dry_run",
    "placeholder_summary",
    "run",
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


def call_summarizer(call: SummaryCall) -> SummarizationResult:
    """Answer ``call`` synchronously; a summarizer that raises gives a failure result."""
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


async def acall_summarizer(call: SummaryCall) -> SummarizationResult:
    """Answer ``call`` asynchronously, bounded by the request's deadline."""
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
    return drive(gen, call_summarizer)


async def arun(
    strategy: Strategy,
    messages: Sequence[Message],
    *,
    counter: TokenCounter | None = None,
    checkpoint: CheckpointRecord | None = None,
) -> StrategyResult:
    """Run ``strategy`` asynchronously; gives the same result as :func:`run`."""
    gen = strategy.plan(messages, counter=_default_counter(counter), checkpoint=checkpoint)
    return await adrive(gen, acall_summarizer)


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
    return drive(gen, placeholder_summary)


def placeholder_summary(call: SummaryCall) -> SummarizationResult:
    """What :func:`dry_run` answers a summary call with: a short placeholder text."""
    text = DRY_RUN_SUMMARY.format(n=len(call.request.messages))
    return SummarizationResult.success(text, details={"dry_run": True})
