"""Tool schemas and the reserve count against every strategy's budget."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from strategy_checks import chat, check_invariants, dump, ids, snapshot

from contextfold.errors import BudgetError, ConfigError
from contextfold.memory import ConversationMemory
from contextfold.strategies import (
    Checkpoint,
    Hybrid,
    Pipeline,
    PruneToolOutputs,
    SlidingWindow,
    Summarization,
)
from contextfold.strategies.run import arun, run
from contextfold.summarizers import ExtractiveSummarizer
from contextfold.testing import FakeSummarizer, FixedCounter
from contextfold.tokens.approx import ApproxCounter


class SchemaCounter(FixedCounter):
    """Every message costs 10 tokens and every tool schema 25."""

    def __init__(self) -> None:
        super().__init__(10, per_char=0)

    def count_tools(self, tools: Sequence[Mapping[str, Any]], /) -> int:
        return 25 * len(tools)


COUNTER = SchemaCounter()
TOOLS = [{"name": "read_file", "parameters": {"type": "object"}}] * 2  # 50 tokens
TOOL_TOKENS = 50


def strategies(
    budget: int, summarizer: Any, tools: Any = TOOLS, reserve: int = 0
) -> dict[str, Any]:
    return {
        "summary": Summarization(
            budget,
            keep_recent=12,
            summarizer=summarizer,
            tools=tools,
            reserve_tokens=reserve,
            compact_to=1.0,
        ),
        "hybrid": Hybrid(
            budget,
            keep_recent=12,
            chunk_size=4,
            summarizer=summarizer,
            tools=tools,
            reserve_tokens=reserve,
            compact_to=1.0,
        ),
        "checkpoint": Checkpoint(
            summarizer,
            max_tokens=budget,
            keep_recent_tokens=120,
            tools=tools,
            reserve_tokens=reserve,
            compact_to=1.0,
        ),
        "prune": PruneToolOutputs(
            max_tokens=budget, min_savings=0, tools=tools, reserve_tokens=reserve
        ),
        "pipeline": Pipeline(
            [
                PruneToolOutputs(min_savings=0),
                Summarization(budget, keep_recent=12, summarizer=summarizer, compact_to=1.0),
            ],
            max_tokens=budget,
            tools=tools,
            reserve_tokens=reserve,
        ),
    }


NAMES = ["summary", "hybrid", "checkpoint", "prune", "pipeline"]


@pytest.mark.parametrize("name", NAMES)
def test_messages_and_tools_fit_the_budget_together(name: str) -> None:
    history = chat(20)  # s + 40 messages = 410 tokens
    before = snapshot(history)
    strategy = strategies(150, FakeSummarizer("S"))[name]
    result = run(strategy, history, counter=COUNTER)
    check_invariants(
        history, before, result, counter=COUNTER, max_tokens=150, tool_tokens=TOOL_TOKENS
    )
    # Without the tools the same strategy sends more than the tools leave room for.
    bare = strategies(150, FakeSummarizer("S"), tools=None)[name]
    plain = run(bare, history, counter=COUNTER)
    assert plain.tokens > 150 - TOOL_TOKENS
    assert not any("tool schemas" in note for note in plain.notes)


@pytest.mark.parametrize("name", NAMES)
def test_fallback_window_leaves_room_for_the_tools(name: str) -> None:
    history = chat(10, tools=True)
    strategy = strategies(150, FakeSummarizer(fail="error"), reserve=20)[name]
    result = run(strategy, history, counter=COUNTER)
    check_invariants(
        history,
        snapshot(history),
        result,
        counter=COUNTER,
        max_tokens=150,
        tool_tokens=TOOL_TOKENS,
        reserve_tokens=20,
    )
    if name not in ("prune",):
        assert result.failure_code == "error"


@pytest.mark.parametrize("name", NAMES)
def test_tools_alone_over_budget_raise_before_any_call(name: str) -> None:
    history = chat(3)
    fake = FakeSummarizer("S")
    strategy = strategies(40, fake)[name]
    with pytest.raises(BudgetError) as info:
        run(strategy, history, counter=COUNTER)
    assert info.value.budget == 40
    assert info.value.required == TOOL_TOKENS
    assert fake.calls == 0


@pytest.mark.parametrize("name", NAMES)
def test_tools_and_newest_message_over_budget_raise(name: str) -> None:
    # The system prompt (10), the user's request (10) and the newest message (10) fit 60
    # alone, not with 50 of tools.
    history = chat(3)
    with pytest.raises(BudgetError) as info:
        run(strategies(60, FakeSummarizer("S"))[name], history, counter=COUNTER)
    assert info.value.budget == 60
    assert info.value.required == 10 + 10 + 10 + TOOL_TOKENS
    # With exactly that much it works.
    result = run(strategies(80, FakeSummarizer("S"))[name], history, counter=COUNTER)
    assert result.tokens + TOOL_TOKENS <= 80


@pytest.mark.parametrize("name", NAMES)
async def test_sync_and_async_agree_with_tools(name: str) -> None:
    history = chat(12, tools=True)
    sync = run(strategies(200, FakeSummarizer("S"))[name], history, counter=COUNTER)
    asyn = await arun(strategies(200, FakeSummarizer("S"))[name], history, counter=COUNTER)
    assert dump(sync) == dump(asyn)
    assert sync.notes == asyn.notes


def test_pipeline_hands_its_tools_to_stages_without_their_own() -> None:
    mine = [{"name": "grep"}]
    bare = Summarization(150, keep_recent=4, summarizer=FakeSummarizer("S"))
    own = Summarization(150, keep_recent=4, summarizer=FakeSummarizer("S"), tools=mine)
    pipeline = Pipeline([PruneToolOutputs(), bare, own], max_tokens=150, tools=TOOLS)
    prune_stage, bare_stage, own_stage = pipeline.stages
    assert prune_stage.tools == tuple(TOOLS)  # type: ignore[attr-defined]
    assert bare_stage is not bare
    assert bare_stage.tools == tuple(TOOLS)  # type: ignore[attr-defined]
    assert bare_stage.summarizer is bare.summarizer  # type: ignore[attr-defined]
    assert bare.tools == ()  # the caller's stage is not changed
    assert own_stage is own
    assert own.tools == tuple(mine)


def test_pipeline_stage_budget_includes_the_handed_tools() -> None:
    # The summarizing stage alone builds within 150 - 50, so the pipeline needs no final trim.
    history = chat(10, tools=True)
    stage = Summarization(150, keep_recent=4, summarizer=FakeSummarizer("S"))
    pipeline = Pipeline([stage], max_tokens=150, tools=TOOLS)
    result = run(pipeline, history, counter=COUNTER)
    assert result.tokens + TOOL_TOKENS <= 150
    assert not any("still over budget after the last stage" in n for n in result.notes)
    assert "summary: tool schemas cost 50 tokens of the budget" in result.notes


def test_checkpoint_cache_aligned_replays_and_counts_the_tools() -> None:
    history = chat(10, tools=True)
    fake = FakeSummarizer("S")
    strategy = Checkpoint(fake, max_tokens=150, tools=TOOLS, mode="cache_aligned")
    result = run(strategy, history, counter=COUNTER)
    assert fake.requests[0].tools == tuple(TOOLS)
    assert result.tokens + TOOL_TOKENS <= 150
    assert result.checkpoint is not None


def test_extractive_checkpoint_with_tools_on_real_sized_text() -> None:
    # The extractive summarizer sizes its output by the room the strategy leaves.
    history = chat(30, tools=True, size=800)
    counter = ApproxCounter()
    tools = [{"name": f"t{i}", "description": "d" * 300} for i in range(3)]
    cost = counter.count_tools(tools)
    strategy = Checkpoint(ExtractiveSummarizer(), max_tokens=4000, tools=tools)
    result = run(strategy, history, counter=counter)
    check_invariants(
        history, snapshot(history), result, counter=counter, max_tokens=4000, tool_tokens=cost
    )
    assert result.is_summarized


def test_bad_tools_and_reserve_are_rejected() -> None:
    fake = FakeSummarizer("S")
    with pytest.raises(ConfigError, match="reserve_tokens"):
        Summarization(100, keep_recent=1, summarizer=fake, reserve_tokens=-1)
    with pytest.raises(ConfigError, match="tool schema 0"):
        Hybrid(100, keep_recent=1, chunk_size=1, summarizer=fake, tools=["read"])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="tools"):
        Checkpoint(fake, max_tokens=100, tools={"name": "read"})  # type: ignore[arg-type]


def test_tool_tokens_are_counted_once_per_counter() -> None:
    strategy = Summarization(100, keep_recent=1, summarizer=FakeSummarizer(), tools=TOOLS)
    assert strategy.tool_tokens(COUNTER) == TOOL_TOKENS
    other = FixedCounter(1, per_char=1)
    assert strategy.tool_tokens(other) == other.count_tools(TOOLS) != TOOL_TOKENS
    assert Summarization(100, keep_recent=1, summarizer=FakeSummarizer()).tool_tokens(COUNTER) == 0


def test_memory_hands_its_tools_to_a_strategy_without_any() -> None:
    strategy = Summarization(150, keep_recent=4, summarizer=FakeSummarizer("S"))
    memory = ConversationMemory(strategy=strategy, counter=COUNTER, tools=TOOLS)
    memory.extend(chat(10, tools=True))
    ctx = memory.build_context()
    assert ctx.stats.tools_tokens == TOOL_TOKENS
    assert ctx.stats.current_tokens + ctx.stats.tools_tokens <= 150
    assert ctx.tools == tuple(TOOLS)
    assert memory.strategy.tools == tuple(TOOLS)  # type: ignore[attr-defined]
    assert strategy.tools == ()


def test_memory_reports_what_a_strategy_with_its_own_tools_counted() -> None:
    own = [{"name": "grep"}]
    strategy = Summarization(150, keep_recent=4, summarizer=FakeSummarizer("S"), tools=own)
    memory = ConversationMemory(strategy=strategy, counter=COUNTER)
    memory.extend(chat(10, tools=True))
    ctx = memory.build_context()
    assert memory.strategy is strategy
    assert ctx.stats.tools_tokens == 25
    assert ctx.tools == tuple(own)
    assert ctx.stats.current_tokens + 25 <= 150


def test_sliding_window_and_summarization_agree_on_the_tool_budget() -> None:
    # Under budget after tools, both send the same window; the tools cost the same.
    history = chat(10, tools=True)
    window = run(SlidingWindow(150, tools=TOOLS, compact_to=1.0), history, counter=COUNTER)
    failed = run(
        Summarization(150, keep_recent=4, summarizer=FakeSummarizer(fail="error"), tools=TOOLS),
        history,
        counter=COUNTER,
    )
    assert ids(failed) == ids(window)
    assert "tool schemas cost 50 tokens of the budget" in window.notes
    assert "tool schemas cost 50 tokens of the budget" in failed.notes


def test_memory_hands_its_tools_through_a_pipeline_to_its_stages() -> None:
    stage = Summarization(150, keep_recent=12, summarizer=FakeSummarizer("S"))
    pipeline = Pipeline([PruneToolOutputs(min_savings=0), stage], max_tokens=150)
    memory = ConversationMemory(strategy=pipeline, counter=COUNTER, tools=TOOLS)
    running = memory.strategy
    assert isinstance(running, Pipeline)
    assert running.tools == tuple(TOOLS)
    assert all(s.tools == tuple(TOOLS) for s in running.stages)  # type: ignore[attr-defined]
    assert pipeline.tools == ()
    assert stage.tools == ()
    memory.extend(chat(20))
    ctx = memory.build_context()
    assert ctx.stats.tools_tokens == TOOL_TOKENS
    assert ctx.stats.current_tokens + TOOL_TOKENS <= 150
    assert any(note.startswith("summary: tool schemas cost 50") for note in ctx.stats.notes)
