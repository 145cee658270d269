"""The drivers that run every strategy: :func:`run`, :func:`arun` and :func:`dry_run`.

They enforce the summarizer contract at the boundary: a summarizer that raises, or that
overruns its deadline, yields a failure result instead of an exception. The memory core
answers summary calls with :func:`call_summarizer` / :func:`acall_summarizer` too.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from contextfold._drive import adrive, drive
from contextfold.checkpoints import CheckpointRecord
from contextfold.messages import Message
from contextfold.observability import now_ns, record_build
from contextfold.strategies.base import (
    PlanOp,
    SearchCall,
    Strategy,
    StrategyResult,
    StrategyState,
    SummaryCall,
)
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
    "answer_plan",
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
    """Answer ``call`` synchronously, bounded by the request's deadline like the async path.

    A summarizer that raises gives a failure result. With a deadline, a sync summarizer runs
    in a worker thread and the build stops waiting when the deadline passes (a ``timeout``
    failure); the thread cannot be interrupted, so it finishes on its own and its answer is
    discarded. An async-only summarizer runs under :func:`acall_summarizer` in a fresh loop.
    """
    early = precheck(call.request)
    if early is not None:
        return early
    summarizer = call.summarizer
    try:
        if isinstance(summarizer, Summarizer):
            remaining = call.request.remaining()
            if remaining is None:
                return _checked(summarizer.summarize(call.request))
            return _summarize_in_thread(summarizer, call, remaining)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(acall_summarizer(call))
        return SummarizationResult.failure(
            "an async-only summarizer cannot run inside a running event loop; "
            "use abuild_context()/arun()",
            "error",
        )
    except Exception as exc:  # the contract says never raise; enforce it here
        return _raised(exc)


def _checked(result: object) -> SummarizationResult:
    """``result`` when it is a :class:`SummarizationResult`; a failure to fall back on
    otherwise (a summarizer returning a bare string, say)."""
    if isinstance(result, SummarizationResult):
        return result
    return SummarizationResult.failure(
        f"summarizer returned {type(result).__name__}, not a SummarizationResult"
    )


def _raised(exc: Exception) -> SummarizationResult:
    return SummarizationResult.failure(f"summarizer raised {type(exc).__name__}: {exc}")


def _timed_out() -> SummarizationResult:
    return SummarizationResult.failure("summarizer ran past its deadline", "timeout")


def _summarize_in_thread(
    summarizer: Summarizer, call: SummaryCall, timeout: float
) -> SummarizationResult:
    """Run a sync summarizer in a daemon thread and wait at most ``timeout`` seconds.

    A daemon thread, so a summarizer that never returns cannot keep the process from
    exiting; the caller's context variables go with it (tracing, request ids).
    """
    answer: list[SummarizationResult] = []
    context = contextvars.copy_context()

    def work() -> None:
        try:
            answer.append(_checked(context.run(summarizer.summarize, call.request)))
        except Exception as exc:
            answer.append(_raised(exc))

    worker = threading.Thread(target=work, name="contextfold-summarizer", daemon=True)
    worker.start()
    worker.join(timeout)
    return answer[0] if answer else _timed_out()


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
            return _checked(await coro)
        return _checked(await asyncio.wait_for(coro, timeout=remaining))
    except asyncio.TimeoutError:
        return _timed_out()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return _raised(exc)


def answer_plan(
    messages: Sequence[Message], summarize: Callable[[SummaryCall], Any] = call_summarizer
) -> Callable[[PlanOp], Any]:
    """The answer function for a plan over ``messages``: summaries, and searches over them.

    A :class:`SearchCall` (from :class:`~contextfold.Recall`) is answered with a BM25 search
    over ``messages`` (:func:`contextfold.search.search_messages`); a summary call goes to
    ``summarize``.
    """
    from contextfold.search import search_messages

    def answer(op: PlanOp) -> Any:
        if isinstance(op, SearchCall):
            return search_messages(messages, op)
        return summarize(op)

    return answer


def _aanswer_plan(messages: Sequence[Message]) -> Callable[[PlanOp], Awaitable[Any]]:
    """:func:`answer_plan` for :func:`arun`: summaries awaited; a search that embeds runs in
    a worker thread (an embedding model computes for a while), one by keywords inline."""
    from contextfold.search import search_messages

    async def answer(op: PlanOp) -> Any:
        if isinstance(op, SearchCall):
            if op.embedder is not None:
                return await asyncio.to_thread(search_messages, messages, op)
            return search_messages(messages, op)
        return await acall_summarizer(op)

    return answer


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
    result = drive(gen, answer_plan(messages))
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
    result = await adrive(gen, _aanswer_plan(messages))
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
    result = drive(gen, answer_plan(messages, answer))
    if result.summary_calls < calls:
        result = dataclasses.replace(result, summary_calls=calls)
    return result


def placeholder_summary(call: SummaryCall) -> SummarizationResult:
    """What :func:`dry_run` answers a summary call with: a short placeholder text."""
    text = DRY_RUN_SUMMARY.format(n=len(call.request.messages))
    return SummarizationResult.success(text, details={"dry_run": True})
