"""Cache-stable compaction: between two compactions a context only appends to the previous one.

Every budgeted strategy, given the conversation's state, sends a context that starts with
exactly the previous context until the next request would exceed ``max_tokens``; then it
compacts once, down to ``compact_to``, so the following requests can append again.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategy_checks import chat, least_window_tokens, snapshot

from contextfold.errors import BudgetError, ConfigError
from contextfold.messages import Message, ToolCallPart
from contextfold.strategies import Checkpoint, Hybrid, SlidingWindow, Summarization
from contextfold.strategies.base import Strategy, StrategyState, WindowAnchor
from contextfold.strategies.run import run
from contextfold.summarizers.extractive import ExtractiveSummarizer
from contextfold.testing import FakeSummarizer, FixedCounter
from contextfold.tokens.approx import ApproxCounter
from contextfold.turns import prefix_length, safe_cut_points, validate

TEN = FixedCounter(10, per_char=0)
APPROX = ApproxCounter()


def grow(
    strategy: Strategy, history: Sequence[Message], requests: Sequence[int], counter: object
) -> list[tuple[int, tuple[Message, ...], int]]:
    """Build at each request index with the state carried; (end, context, tokens) each time."""
    state = StrategyState()
    out = []
    for end in requests:
        result = run(strategy, history[:end], counter=counter, state=state)  # type: ignore[arg-type]
        state = result.state
        out.append((end, result.messages, result.tokens))
    return out


def sent(m: Message) -> dict[str, object]:
    """What a provider receives of a message (ids are ours: they are never sent)."""
    data = m.to_dict()
    data.pop("id", None)
    return data


def appends(previous: Sequence[Message], current: Sequence[Message]) -> bool:
    """Whether ``current`` starts with every message of ``previous``, as sent."""
    if len(current) < len(previous):
        return False
    return all(sent(a) == sent(b) for a, b in zip(previous, current, strict=False))


def user_turns(history: Sequence[Message]) -> list[int]:
    return [i + 1 for i, m in enumerate(history) if m.role == "user"]


# -- SlidingWindow ---------------------------------------------------------------------------


def test_window_appends_until_full_then_moves_once_to_the_lower_mark() -> None:
    history = chat(40)  # s + 80 messages of 10 tokens
    window = SlidingWindow(200, compact_to=0.5)
    builds = grow(window, history, range(2, len(history) + 1), TEN)
    moves = 0
    for (_, before, _), (_, after, tokens) in itertools.pairwise(builds):
        assert tokens <= 200
        if not appends(before, after):
            moves += 1
            assert tokens <= 100  # moved down to the lower mark, not to the budget
    # 81 messages of 10 tokens, 10 freed per move (100 tokens of room): about 8 moves.
    assert 6 <= moves <= 9


def test_a_lower_mark_of_one_is_the_per_turn_window() -> None:
    history = chat(25)
    builds = grow(SlidingWindow(120, compact_to=1.0), history, user_turns(history), TEN)
    for end, context, _ in builds:
        plain = run(SlidingWindow(120, compact_to=1.0), history[:end], counter=TEN)
        assert context == plain.messages


def test_prefix_breaks_stay_within_the_growth_over_the_freed_room() -> None:
    history = chat(120, size=40)
    budget, mark = 1_500, 0.6
    builds = grow(SlidingWindow(budget, compact_to=mark), history, user_turns(history), APPROX)
    breaks = sum(not appends(a, b) for (_, a, _), (_, b, _) in itertools.pairwise(builds))
    grown = APPROX.count_messages(history)
    assert breaks <= grown // (budget - int(budget * mark)) + 1


def test_the_window_is_refitted_when_its_anchor_is_gone() -> None:
    history = chat(20)
    state = StrategyState(window=WindowAnchor("no-such-message"))
    result = run(SlidingWindow(100), history, counter=TEN, state=state)
    assert result.tokens <= 60  # compacted to the lower mark (0.6 by default)
    assert result.state.window is not None
    assert result.state.window.start_id != "no-such-message"


def test_the_state_round_trips_through_json() -> None:
    state = StrategyState(failed_compactions=2, window=WindowAnchor("a", "u"))
    assert StrategyState.from_dict(state.to_dict()) == state
    assert StrategyState.from_dict({"window": {"start_id": 3}}).window is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, 0.0, "0.5", True, 10_001])
def test_a_bad_lower_mark_is_a_config_error(bad: object) -> None:
    with pytest.raises(ConfigError) as err:
        SlidingWindow(10_000, compact_to=bad)  # type: ignore[arg-type]
    assert err.value.argument == "compact_to"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.integers(2, 30),
    tools=st.booleans(),
    budget=st.integers(60, 400),
    mark=st.sampled_from([1.0, 0.9, 0.6, 0.3, 50]),
    step=st.integers(1, 5),
)
def test_window_invariants_hold_while_it_appends(
    turns: int, tools: bool, budget: int, mark: float, step: int
) -> None:
    """Within budget, pair-safe, never mutated, deterministic; appends or moves once."""
    history = chat(turns, tools=tools)
    before = snapshot(history)
    window = SlidingWindow(budget, compact_to=mark)
    low = int(budget * mark) if isinstance(mark, float) else mark
    state = StrategyState()
    previous: tuple[Message, ...] = ()
    for end in safe_cut_points(history)[1::step]:
        try:
            result = run(window, history[:end], counter=TEN, state=state)
        except BudgetError:  # the newest turn's request and unit alone are over budget
            state, previous = StrategyState(), ()
            continue
        again = run(window, history[:end], counter=TEN, state=state)
        assert again.messages == result.messages  # deterministic given the state
        assert result.tokens <= budget
        validate(result.messages, allow_pending_tail=True)
        if previous and not appends(previous, result.messages) and result.dropped_ranges:
            # A move lands on the lower mark, unless the prefix, the request and the newest
            # unit alone are over it: then the window is fitted to the budget.
            p = prefix_length(history)
            least = TEN.count_messages(history[:p]) + least_window_tokens(history[:end], TEN, p)
            assert result.tokens <= low or least > low
        state, previous = result.state, result.messages
    assert snapshot(history) == before


# -- the summarizing strategies ---------------------------------------------------------------


SUMMARIZING: dict[str, Callable[[float], Strategy]] = {
    "summarization": lambda mark: Summarization(
        300, keep_recent=4, summarizer=FakeSummarizer("S"), compact_to=mark
    ),
    "hybrid": lambda mark: Hybrid(
        300, keep_recent=4, chunk_size=4, summarizer=FakeSummarizer("S"), compact_to=mark
    ),
    "checkpoint": lambda mark: Checkpoint(
        ExtractiveSummarizer(), max_tokens=300, keep_recent_tokens=80, compact_to=mark
    ),
}


@pytest.mark.parametrize("name", sorted(SUMMARIZING))
def test_summarizing_strategies_append_between_compactions(name: str) -> None:
    """Reusing their checkpoint, they only append; a compaction lands under the mark."""
    history = chat(40)
    strategy = SUMMARIZING[name](0.6)
    state, checkpoint = StrategyState(), None
    previous: tuple[Message, ...] = ()
    compactions = appended = 0
    for end in user_turns(history):
        result = run(strategy, history[:end], counter=TEN, checkpoint=checkpoint, state=state)
        assert result.tokens <= 300
        if result.checkpoint is not None:
            compactions += 1
            checkpoint = result.checkpoint
            assert result.tokens <= 180 + 10  # the lower mark, give or take the newest message
        elif previous:
            assert appends(previous, result.messages)
            appended += 1
        state, previous = result.state, result.messages
    assert compactions >= 2
    assert appended > 3 * compactions  # several appended requests per compaction


def test_a_lower_mark_means_fewer_compactions() -> None:
    """Hybrid folds until the context is under the mark, not just under the budget."""
    history = chat(40)

    def compactions(mark: float) -> int:
        strategy = SUMMARIZING["hybrid"](mark)
        state, checkpoint, made = StrategyState(), None, 0
        for end in user_turns(history):
            result = run(strategy, history[:end], counter=TEN, checkpoint=checkpoint, state=state)
            if result.checkpoint is not None:
                made, checkpoint = made + 1, result.checkpoint
            state = result.state
        return made

    assert compactions(0.5) < compactions(1.0)


# -- PruneToolOutputs ------------------------------------------------------------------------


def agent_run(steps: int, out: int = 400) -> list[Message]:
    from contextfold.messages import ToolCallPart

    history = [Message.system("sys", id="s"), Message.user("fix the bug", id="u")]
    for i in range(steps):
        call = ToolCallPart(f"c{i}", "read_file", "{}")
        history.append(Message.assistant(None, tool_calls=[call], id=f"a{i}"))
        history.append(Message.tool_result(f"c{i}", f"line {i} " * (out // 7), id=f"t{i}"))
    return history


def after_each_result(history: Sequence[Message]) -> list[int]:
    return [i + 1 for i, m in enumerate(history) if m.tool_results]


@pytest.mark.parametrize("budget", [None, 4_000])
def test_tool_outputs_are_cleared_in_batches_not_one_per_request(budget: int | None) -> None:
    from contextfold.strategies import PruneToolOutputs

    history = agent_run(40)
    prune = PruneToolOutputs(keep_recent=2, min_savings=800, max_tokens=budget)
    builds = grow(prune, history, after_each_result(history), APPROX)
    edits = 0
    for (_, before, _), (_, after, tokens) in itertools.pairwise(builds):
        if budget is not None:
            assert tokens <= budget
        if not appends(before, after):
            edits += 1
    cleared = sum(
        1
        for m in builds[-1][1]
        for r in m.tool_results
        if r.text.startswith("[tool output cleared")
    )
    assert cleared >= 15  # most old outputs end up cleared ...
    assert edits <= cleared // 3  # ... several at a time, not one per request


def test_cleared_outputs_stay_cleared_while_the_context_fits() -> None:
    from contextfold.strategies import PruneToolOutputs

    history = agent_run(30)
    prune = PruneToolOutputs(keep_recent=2, min_savings=500, max_tokens=3_000, compact_to=0.5)
    state = StrategyState()
    first = None
    for end in after_each_result(history):
        result = run(prune, history[:end], counter=APPROX, state=state)
        if result.pruned and first is None:
            first = set(result.pruned)
            assert result.tokens <= 1_500 + APPROX.count_messages(history[end - 4 : end])
        if first is not None:
            assert first <= set(result.pruned)  # never restored once cleared
        state = result.state
    assert first is not None
    assert StrategyState.from_dict(state.to_dict()).pruned_through == state.pruned_through


def test_a_cold_cache_moves_the_window_early_to_the_lower_mark() -> None:
    """Nothing cached is lost once the cache has expired, so the move need not wait."""
    history = chat(30)
    window = SlidingWindow(200, compact_to=0.5)
    state = StrategyState()
    for end in range(2, 29, 2):
        state = run(window, history[:end], counter=TEN, state=state).state
    warm = run(window, history[:30], counter=TEN, state=state)
    assert warm.tokens > 100  # warm: it keeps appending while it fits
    cold = run(window, history[:30], counter=TEN, state=dataclasses.replace(state, cache_cold=True))
    assert cold.tokens <= 100  # cold: down to the mark now
    assert any("prompt cache had expired" in n for n in cold.notes)
    assert not cold.state.cache_cold  # set per build, never carried


def test_a_repeated_id_never_moves_the_window_onto_a_tool_result() -> None:
    from contextfold.testing import FixedCounter
    from contextfold.turns import validate

    ten = FixedCounter(10, per_char=0)
    window = SlidingWindow(50, compact_to=1.0)
    # The turn's request and a tool result share an id: the anchor's request is ambiguous.
    history = [
        Message.system("s", id="s"),
        Message.user("do it", id="dup"),
        Message.assistant(None, tool_calls=[ToolCallPart("c1", "ls")], id="a1"),
        Message.tool_result("c1", "out", id="dup"),
        Message.assistant("step 2", id="a2"),
        Message.assistant("step 3", id="a3"),
    ]
    first = run(window, history, counter=ten)
    later = [*history, Message.user("next", id="u2")]
    second = run(window, later, counter=ten, state=first.state)
    validate(list(second.messages))  # sent an orphan tool result before
    assert second.messages[-1].id == "u2"
    # The window's first message and a later tool result share an id.
    history = [
        Message.system("s", id="s"),
        *(m for i in range(3) for m in (Message.user(f"q{i}"), Message.assistant(f"a{i}"))),
    ]
    first = run(window, history, counter=ten)
    assert first.state.window is not None
    start_id = first.state.window.start_id
    later = [
        *history,
        Message.user("run it"),
        Message.assistant(None, tool_calls=[ToolCallPart("c9", "ls")]),
        Message.tool_result("c9", "done", id=start_id),
        Message.user("and now?"),
    ]
    validate(later)
    second = run(window, later, counter=ten, state=first.state)  # raised PairingError before
    validate(list(second.messages))
    assert second.messages[-1].text == "and now?"
