"""The sync and async drivers give identical results for every strategy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from strategy_checks import chat, dump

from contextfold.messages import Message, ToolCallPart
from contextfold.strategies import (
    Checkpoint,
    Hybrid,
    Pipeline,
    PruneToolOutputs,
    SlidingWindow,
    Strategy,
    StrategyResult,
    Summarization,
    SummaryCompactor,
)
from contextfold.strategies.run import arun, run
from contextfold.summarizers import ExtractiveSummarizer
from contextfold.summarizers.base import SummarizationResult, SummaryRequest
from contextfold.testing import FakeSummarizer, FixedCounter

COUNTER = FixedCounter(2, per_char=1)


class SyncOnly:
    """A summarizer with only the sync method (arun runs it in a thread)."""

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        return SummarizationResult.success(f"sync summary of {len(request.messages)}")


class AsyncOnly:
    """A summarizer with only the async method (run drives it with asyncio.run)."""

    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        return SummarizationResult.success(f"async summary of {len(request.messages)}")


def agent(n: int) -> list[Message]:
    history = [Message.system("Work carefully.", id="s"), Message.user("fix the bug", id="u")]
    for i in range(n):
        call = ToolCallPart(f"c{i}", "read_file", f'{{"path": "src/m{i}.py"}}')
        history.append(Message.assistant(f"reading m{i}", tool_calls=[call], id=f"a{i}"))
        history.append(Message.tool_result(f"c{i}", f"def f{i}(): ...\n" * 20, id=f"t{i}"))
        if i % 3 == 2:
            history.append(Message.user(f"now look at m{i + 1}", id=f"q{i}"))
    history.append(Message.assistant("done", id="z"))
    return history


Factory = Callable[[Any], Strategy]

STRATEGIES: dict[str, Factory] = {
    "sliding": lambda s: SlidingWindow(2000),
    "summary": lambda s: Summarization(2000, keep_recent=4, summarizer=s),
    "hybrid": lambda s: Hybrid(2000, keep_recent=4, chunk_size=4, summarizer=s),
    "compactor": lambda s: SummaryCompactor(s, keep_recent_turns=2),
    "compactor_chars": lambda s: SummaryCompactor(s, keep_recent_turns=3, budget_chars=3000),
    "prune": lambda s: PruneToolOutputs(keep_recent=2, min_savings=10, max_tokens=2500),
    "pipeline": lambda s: Pipeline(
        [
            PruneToolOutputs(keep_recent=2, min_savings=10),
            Hybrid(2000, keep_recent=4, chunk_size=4, summarizer=s),
        ],
        max_tokens=2000,
    ),
    "checkpoint": lambda s: Checkpoint(s, max_tokens=2500),
}

SUMMARIZERS: dict[str, Callable[[], Any]] = {
    "fake": FakeSummarizer,
    "short": lambda: FakeSummarizer(lambda r: f"summary of {len(r.messages)} messages"),
    "failing": lambda: FakeSummarizer(fail="truncated"),
    "sync_only": SyncOnly,
    "async_only": AsyncOnly,
    "extractive": ExtractiveSummarizer,
}

HISTORIES: dict[str, Callable[[], list[Message]]] = {
    "chat": lambda: chat(20, size=200),
    "tools": lambda: chat(8, tools=True, size=150),
    "agent": lambda: agent(12),
}


def observable(result: StrategyResult) -> dict[str, Any]:
    return {
        "messages": dump(result),
        "tokens": result.tokens,
        "kept": result.kept,
        "dropped": result.dropped_ranges,
        "summarized": result.summarized_ranges,
        "pruned": result.pruned,
        "fallback": result.fallback,
        "failure_code": result.failure_code,
        "calls": result.summary_calls,
        "notes": result.notes,
        "usage": result.usage,
        "checkpoint": None if result.checkpoint is None else result.checkpoint.summary,
    }


@pytest.mark.parametrize("history_name", sorted(HISTORIES))
@pytest.mark.parametrize("summarizer_name", sorted(SUMMARIZERS))
@pytest.mark.parametrize("strategy_name", sorted(STRATEGIES))
async def test_run_and_arun_agree(
    strategy_name: str, summarizer_name: str, history_name: str
) -> None:
    history = HISTORIES[history_name]()
    make = STRATEGIES[strategy_name]
    # ``run`` cannot drive an async-only summarizer inside a running loop: do it in a thread.
    import asyncio

    sync_result = await asyncio.to_thread(
        run, make(SUMMARIZERS[summarizer_name]()), history, counter=COUNTER
    )
    async_result = await arun(make(SUMMARIZERS[summarizer_name]()), history, counter=COUNTER)
    assert observable(sync_result) == observable(async_result)


def test_the_matrix_exercises_summaries_and_fallbacks() -> None:
    """Guard against a parity test that only compares untouched histories."""
    short = FakeSummarizer(lambda r: f"summary of {len(r.messages)} messages")
    summarized = run(STRATEGIES["hybrid"](short), HISTORIES["chat"](), counter=COUNTER)
    assert summarized.summary_calls > 0
    assert summarized.is_summarized
    failed = run(
        STRATEGIES["summary"](FakeSummarizer(fail="truncated")),
        HISTORIES["agent"](),
        counter=COUNTER,
    )
    assert failed.failure_code == "truncated"
    pruned = run(STRATEGIES["pipeline"](FakeSummarizer()), HISTORIES["agent"](), counter=COUNTER)
    assert pruned.pruned
