"""Property tests: the DESIGN.md invariants hold for any valid conversation and budget."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategy_checks import check_invariants, dump, least_window_tokens, snapshot

from contextfold.errors import BudgetError
from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.strategies import (
    Checkpoint,
    Hybrid,
    Pipeline,
    PruneToolOutputs,
    Summarization,
    SummaryCompactor,
)
from contextfold.strategies._chars import char_size
from contextfold.strategies.run import run
from contextfold.testing import FakeSummarizer, FixedCounter
from contextfold.turns import prefix_length

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

words = st.text(alphabet="abcdefgh ", min_size=0, max_size=40)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = []
    for i in range(draw(st.integers(0, 2))):
        out.append(Message.system(draw(words) or "sys", id=f"s{i}"))
    n = 0
    for t in range(draw(st.integers(1, 7))):
        out.append(Message.user(draw(words) or "q", id=f"u{t}"))
        for _ in range(draw(st.integers(0, 3))):
            n += 1
            k = draw(st.integers(0, 3))
            if k == 0:
                out.append(Message.assistant(draw(words) or "a", id=f"a{n}"))
                continue
            calls = [
                ToolCallPart(f"c{n}_{j}", draw(st.sampled_from(["read", "grep"]))) for j in range(k)
            ]
            out.append(Message.assistant(None, tool_calls=calls, id=f"a{n}"))
            bodies = [draw(words) * draw(st.integers(1, 6)) for _ in range(k)]
            if draw(st.booleans()):  # Anthropic style: all results in one user message
                parts = [ToolResultPart(c.id, b) for c, b in zip(calls, bodies, strict=True)]
                out.append(Message.user(parts, id=f"r{n}"))
            else:
                for j, (c, b) in enumerate(zip(calls, bodies, strict=True)):
                    out.append(Message.tool_result(c.id, b, id=f"r{n}_{j}"))
        if draw(st.booleans()):
            out.append(Message.assistant(draw(words) or "done", id=f"b{t}"))
    return out


summarizers = st.one_of(
    st.just(FakeSummarizer("s")),
    st.builds(FakeSummarizer),
    st.sampled_from(["error", "timeout", "truncated", "empty", "aborted"]).map(
        lambda code: FakeSummarizer(fail=code)
    ),
    st.just(FakeSummarizer("   ")),
    st.just(FakeSummarizer("z" * 400)),
)


def floor_tokens(history: list[Message], counter: FixedCounter) -> int:
    p = prefix_length(history)
    return counter.count_messages(history[:p]) + least_window_tokens(history, counter)


def tool_schemas(count: int) -> list[dict[str, Any]]:
    """``count`` small function schemas (each costs a few dozen tokens)."""
    return [
        {"name": f"tool{i}", "description": "looks things up", "parameters": {"type": "object"}}
        for i in range(count)
    ]


def make(
    kind: str,
    budget: int,
    summarizer: Any,
    knobs: tuple[int, int, int],
    tools: list[dict[str, Any]] | None = None,
) -> Any:
    keep, chunk, bound = knobs
    if kind == "summary":
        return Summarization(budget, keep_recent=keep, summarizer=summarizer, tools=tools)
    if kind == "hybrid":
        return Hybrid(
            budget,
            keep_recent=keep,
            chunk_size=chunk,
            summarizer=summarizer,
            max_chunks=bound,
            tools=tools,
        )
    if kind == "checkpoint":
        return Checkpoint(summarizer, max_tokens=budget, tools=tools)
    # The pipeline hands its tools to its stages, which have none of their own.
    return Pipeline(
        [
            PruneToolOutputs(keep_recent=bound, min_savings=chunk, max_tokens=budget),
            Hybrid(budget, keep_recent=keep, chunk_size=chunk, summarizer=summarizer),
        ],
        max_tokens=budget,
        tools=tools,
    )


@SETTINGS
@given(
    history=conversations(),
    kind=st.sampled_from(["summary", "hybrid", "pipeline"]),
    share=st.floats(0.05, 1.3),
    per_message=st.integers(1, 6),
    summarizer=summarizers,
    knobs=st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 4)),
)
def test_token_budget_strategies_keep_the_invariants(
    history: list[Message],
    kind: str,
    share: float,
    per_message: int,
    summarizer: FakeSummarizer,
    knobs: tuple[int, int, int],
) -> None:
    counter = FixedCounter(per_message, per_char=1)
    budget = max(1, int(counter.count_messages(history) * share))
    before = snapshot(history)
    try:
        result = run(make(kind, budget, summarizer, knobs), history, counter=counter)
    except BudgetError:
        assert floor_tokens(history, counter) > budget
        assert snapshot(history) == before
        return
    check_invariants(history, before, result, counter=counter, max_tokens=budget)
    if result.failure_code is not None:
        assert result.fallback
        assert result.checkpoint is None or kind != "summary"
    again = run(
        make(kind, budget, FakeSummarizer(summarizer.text, fail=summarizer.fail), knobs),
        history,
        counter=counter,
    )
    assert dump(again) == dump(result)
    # a checkpoint handed back is reused: no new call while nothing was added
    if result.checkpoint is not None and kind != "pipeline":
        fresh = FakeSummarizer(summarizer.text, fail=summarizer.fail)
        reused = run(
            make(kind, budget, fresh, knobs), history, counter=counter, checkpoint=result.checkpoint
        )
        check_invariants(history, before, reused, counter=counter, max_tokens=budget)
        if result.tokens_before > budget and not result.dropped_ranges:
            assert fresh.calls == 0
    # a memory passes only the prefix and what follows the checkpoint
    if result.checkpoint is not None:
        p = prefix_length(history)
        covered = [m.id for m in history].index(result.checkpoint.last_covered_id)
        after = [*history[:p], *history[covered + 1 :]]
        fresh = FakeSummarizer(summarizer.text, fail=summarizer.fail)
        try:
            later = run(
                make(kind, budget, fresh, knobs),
                after,
                counter=counter,
                checkpoint=result.checkpoint,
            )
        except BudgetError:
            assert floor_tokens(after, counter) > budget
        else:
            check_invariants(after, snapshot(after), later, counter=counter, max_tokens=budget)
            if later.is_summarized:
                assert later.summarized_ranges[0][0] == p


@SETTINGS
@given(
    history=conversations(),
    keep=st.integers(1, 4),
    share=st.one_of(st.none(), st.floats(0.1, 1.2)),
    summarizer=summarizers,
)
def test_compactor_keeps_the_invariants(
    history: list[Message], keep: int, share: float | None, summarizer: FakeSummarizer
) -> None:
    counter = FixedCounter(3, per_char=1)
    budget = None if share is None else max(1, int(char_size(history) * share))
    before = snapshot(history)
    compactor = SummaryCompactor(summarizer, keep_recent_turns=keep, budget_chars=budget)
    try:
        result = run(compactor, history, counter=counter)
    except BudgetError:
        assert budget is not None
        return
    check_invariants(history, before, result, counter=counter)
    if budget is not None:
        assert char_size(result.messages) <= budget
    if prefix_length(history) < len(history):
        assert len(result.messages) > prefix_length(history)  # never empty


@SETTINGS
@given(
    history=conversations(),
    kind=st.sampled_from(["summary", "hybrid", "checkpoint", "pipeline"]),
    share=st.floats(0.05, 1.5),
    n_tools=st.integers(1, 3),
    summarizer=summarizers,
    knobs=st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 4)),
)
def test_tool_schemas_count_against_every_budget(
    history: list[Message],
    kind: str,
    share: float,
    n_tools: int,
    summarizer: FakeSummarizer,
    knobs: tuple[int, int, int],
) -> None:
    counter = FixedCounter(2, per_char=1)
    tools = tool_schemas(n_tools)
    tool_tokens = counter.count_tools(tools)
    budget = max(1, int((counter.count_messages(history) + tool_tokens) * share))
    before = snapshot(history)
    if floor_tokens(history, counter) + tool_tokens > budget:
        # The tools, the prefix and the newest unit cannot fit together: refused up front.
        with pytest.raises(BudgetError) as info:
            run(make(kind, budget, summarizer, knobs, tools), history, counter=counter)
        assert info.value.budget == budget
        assert snapshot(history) == before
        return
    result = run(make(kind, budget, summarizer, knobs, tools), history, counter=counter)
    check_invariants(
        history, before, result, counter=counter, max_tokens=budget, tool_tokens=tool_tokens
    )
