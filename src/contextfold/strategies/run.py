"""The drivers that run every strategy: :func:`run`, :func:`arun` and :func:`dry_run`.

They enforce the summarizer contract at the boundary: a summarizer that raises, or that
overruns its deadline, yields a failure result instead of an exception. The memory core
answers summary calls with :func:`call_summarizer` / :func:`acall_summarizer` too.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from contextfold._drive import adrive, drive
from contextfold.checkpoints import CheckpointRecord
from contextfold.messages import Message
from contextfold.observability import now_ns, record_build
from contextfold.strategies.base import Strategy, StrategyResult, StrategyState, SummaryCall
from contextfold.summarizers.base import (
    AsyncSummarizer,
    SummarizationResult,
    Summarizer,
    precheck,
)
from contextfold.tokens.base import TokenCounter

__all__ = [
    "DRY_RUN_SUMMARY",
    "acall_summarizer",
    "arun",
    "call_summarizer",
    "dry_run",
    "placeholder_summary",
    "run",
]


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
    state: StrategyState | None = None,
) -> StrategyResult:
    """Run ``strategy`` synchronously, calling its summarizers as it asks."""
    started = now_ns()
    gen = strategy.plan(
        messages, counter=_default_counter(counter), checkpoint=checkpoint, state=state
    )
    result = drive(gen, call_summarizer)
    record_build(result, started_ns=started, origin="run")
    return result


async def arun(
    strategy: Strategy,
    messages: Sequence[Message],
    *,
    counter: TokenCounter | None = None,
    checkpoint: CheckpointRecord | None = None,
    state: StrategyState | None = None,
) -> StrategyResult:
    """Run ``strategy`` asynchronously; gives the same result as :func:`run`."""
    started = now_ns()
    gen = strategy.plan(
        messages, counter=_default_counter(counter), checkpoint=checkpoint, state=state
    )
    result = await adrive(gen, acall_summarizer)
    record_build(result, started_ns=started, origin="run")
    return result


DRY_RUN_SUMMARY = "[dry run: a summary of {n} messages would go here]"


def dry_run(
    strategy: Strategy,
    messages: Sequence[Message],
    *,
    counter: TokenCounter | None = None,
    checkpoint: CheckpointRecord | None = None,
    state: StrategyState | None = None,
) -> StrategyResult:
    """Plan without calling any summarizer: each summary is a short placeholder.

    The result shows what would be kept, dropped and summarized; its token figures are
    projections (the real summary's length is unknown until it is written).
    ``summary_calls`` counts the calls the plan would make, even for a strategy that does
    not count them itself.
    """
    calls = 0

    def answer(call: SummaryCall) -> SummarizationResult:
        nonlocal calls
        calls += 1
        return placeholder_summary(call)

    gen = strategy.plan(
        messages, counter=_default_counter(counter), checkpoint=checkpoint, state=state
    )
    result = drive(gen, answer)
    if result.summary_calls < calls:
        result = dataclasses.replace(result, summary_calls=calls)
    return result


def placeholder_summary(call: SummaryCall) -> SummarizationResult:
    """What :func:`dry_run` answers a summary call with: a short placeholder text."""
    text = DRY_RUN_SUMMARY.format(n=len(call.request.messages))
    return SummarizationResult.success(text, details={"dry_run": True})
