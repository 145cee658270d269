from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import BudgetError, ConfigError, PairingError
from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.strategies.base import Strategy
from contextfold.strategies.run import arun, dry_run, run
from contextfold.strategies.sliding import SlidingWindow, fit_window, window_result
from contextfold.testing import FixedCounter
from contextfold.tokens.approx import ApproxCounter
from contextfold.turns import validate

TEN = FixedCounter(10, per_char=0)  # every message costs exactly 10 tokens


def PerTurn(max_tokens: int, **options: Any) -> SlidingWindow:
    """The classic per-turn window (no lower mark): the rules this file pins down."""
    return SlidingWindow(max_tokens, compact_to=1.0, **options)


def call(*ids: str, text: str | None = None, **kw: Any) -> Message:
    return Message.assistant(text, tool_calls=[ToolCallPart(i, "f", "{}") for i in ids], **kw)


def anthropic_results(*ids: str) -> Message:
    return Message.user([ToolResultPart(i, f"out {i}") for i in ids])


def ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


def simple_history(turns: int) -> list[Message]:
    out = [Message.system("be brief", id="s")]
    for t in range(turns):
        out.append(Message.user(f"q{t}", id=f"u{t}"))
        out.append(Message.assistant(f"a{t}", id=f"a{t}"))
    return out


class RecordingSeq(Sequence[Message]):
    """A history that records which indices were read."""

    def __init__(self, items: list[Message]) -> None:
        self.items = items
        self.touched: set[int] = set()

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, i: int) -> Message: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Message]: ...
    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            rng = range(*i.indices(len(self.items)))
            self.touched.update(rng)
            return [self.items[k] for k in rng]
        self.touched.add(i if i >= 0 else len(self.items) + i)
        return self.items[i]


def test_is_a_strategy_named_sliding() -> None:
    window = PerTurn(100)
    assert isinstance(window, Strategy)
    assert window.name == "sliding"


def test_everything_fits_nothing_dropped() -> None:
    history = simple_history(3)
    result = run(PerTurn(70), history, counter=TEN)
    assert list(result.messages) == history
    assert result.dropped_ranges == ()
    assert result.tokens == 70
    assert result.tokens_saved == 0


def test_keeps_newest_whole_turns() -> None:
    history = simple_history(4)  # s, then 4 turns of 2 messages
    result = run(PerTurn(10 + 45), history, counter=TEN)
    assert ids(result.messages) == ["s", "u2", "a2", "u3", "a3"]
    assert result.dropped_ranges == ((1, 5),)
    assert result.dropped == ("u0", "a0", "u1", "a1")
    assert result.tokens == 50
    assert result.tokens_before == 90
    assert result.tokens_saved == 40


def test_plan_never_yields_and_ignores_checkpoint() -> None:
    history = simple_history(4)
    window = PerTurn(50)
    gen = window.plan(history, counter=TEN)
    with pytest.raises(StopIteration) as stop:
        next(gen)
    plain = stop.value.value
    ckpt = CheckpointRecord(summary="old", last_covered_id="a1", strategy="sliding")
    with_ckpt = run(window, history, counter=TEN, checkpoint=ckpt)
    assert with_ckpt.messages == plain.messages
    assert with_ckpt.reused_checkpoint is None


async def test_drivers_agree() -> None:
    history = simple_history(6)
    window = PerTurn(60)
    a = run(window, history, counter=TEN)
    b = await arun(window, history, counter=TEN)
    c = dry_run(window, history, counter=TEN)
    assert a.messages == b.messages == c.messages
    assert a.dropped_ranges == b.dropped_ranges == c.dropped_ranges


def agent_turn() -> list[Message]:
    return [
        Message.system("sys", id="s"),
        Message.user("fix the bug", id="u"),
        call("c1", text="reading", id="a1"),
        Message.tool_result("c1", "file body", id="t1"),
        call("c2", "c3", id="a2"),  # parallel calls
        Message.tool_result("c2", "x", id="t2"),
        Message.tool_result("c3", "y", id="t3"),
        Message.assistant("done", id="a3"),
    ]


def test_oversized_turn_keeps_whole_units_suffix() -> None:
    history = agent_turn()
    # The turn (70 tokens) is over budget: its request stays, then the newest whole units.
    result = run(PerTurn(10 + 50), history, counter=TEN)
    assert ids(result.messages) == ["s", "u", "a2", "t2", "t3", "a3"]
    assert result.dropped_ranges == ((2, 4),)
    assert any("newest turn" in n and "opening user message" in n for n in result.notes)
    validate(result.messages)
    # One message less and the parallel batch cannot be split: only the final answer stays.
    result = run(PerTurn(10 + 49), history, counter=TEN)
    assert ids(result.messages) == ["s", "u", "a3"]
    assert result.dropped_ranges == ((2, 7),)


def test_never_starts_on_a_tool_result() -> None:
    history = agent_turn()
    for budget in range(10, 90, 5):
        try:
            result = run(PerTurn(budget), history, counter=TEN)
        except BudgetError:
            continue
        tail = result.messages[1:]
        if tail:
            assert tail[0].role != "tool"
        validate(result.messages)
        assert result.tokens <= budget


def test_anthropic_results_in_user_message_stay_with_calls() -> None:
    history = [
        Message.system("sys", id="s"),
        Message.user("weather in two cities?", id="u0"),
        call("x", "y", id="a0"),
        anthropic_results("x", "y"),
        Message.assistant("sunny in both", id="a1"),
    ]
    history[3] = history[3].replace(id="r0")
    result = run(PerTurn(10 + 40), history, counter=TEN)
    assert ids(result.messages) == ["s", "u0", "a0", "r0", "a1"]
    result = run(PerTurn(10 + 35), history, counter=TEN)
    assert ids(result.messages) == ["s", "u0", "a1"]  # a0 and r0 go together or not at all


def test_responses_style_consecutive_call_messages() -> None:
    history = [
        Message.system("sys", id="s"),
        Message.user("go", id="u"),
        call("c1", id="f1"),
        call("c2", id="f2"),
        Message.tool_result("c1", "1", id="o1"),
        Message.tool_result("c2", "2", id="o2"),
        Message.assistant("ok", id="a"),
    ]
    result = run(PerTurn(10 + 50), history, counter=TEN)
    # f2..o2 alone would orphan o1: the unit is f1..o2 (4 messages, 40 tokens).
    assert ids(result.messages) == ["s", "u", "a"]
    result = run(PerTurn(10 + 60), history, counter=TEN)
    assert ids(result.messages) == ["s", "u", "f1", "f2", "o1", "o2", "a"]


def test_system_alone_over_budget() -> None:
    history = [Message.system("x" * 400), Message.user("hi")]
    with pytest.raises(BudgetError, match="system") as err:
        run(PerTurn(50), history, counter=ApproxCounter())
    assert err.value.budget == 50
    # A budget that works holds the system prompt and the user's request.
    assert err.value.required == ApproxCounter().count_messages(history)
    run(PerTurn(err.value.required), history, counter=ApproxCounter())


def test_prefix_plus_newest_unit_over_budget() -> None:
    history = [
        Message.system("sys", id="s"),
        Message.user("q", id="u"),
        call("c1", id="a"),
        Message.tool_result("c1", "r", id="t"),
    ]
    with pytest.raises(BudgetError, match="newest") as err:
        run(PerTurn(25), history, counter=TEN)
    assert err.value.required == 40  # system, the request, the call and its result
    assert [m.id for m in run(PerTurn(40), history, counter=TEN).messages] == ids(history)
    assert err.value.budget == 25


def test_tools_and_reserve_count_against_budget() -> None:
    history = simple_history(30)
    tools = [{"name": "lookup", "description": "x" * 40, "parameters": {}}]
    counter = ApproxCounter()
    window = PerTurn(60, tools=tools)
    tool_cost = window.tool_tokens(counter)
    assert tool_cost == counter.count_tools(tools) > 0
    full = counter.count_messages(history)
    plain = run(PerTurn(full), history, counter=counter)
    assert list(plain.messages) == history
    with_tools = run(PerTurn(full, tools=tools), history, counter=counter)
    assert len(with_tools.messages) < len(history)
    assert with_tools.tokens + tool_cost <= full
    reserved = run(PerTurn(full, reserve_tokens=tool_cost), history, counter=counter)
    assert reserved.messages == with_tools.messages
    with pytest.raises(BudgetError, match="reserved"):
        run(PerTurn(full, reserve_tokens=full), history, counter=counter)


def test_bad_configuration() -> None:
    with pytest.raises(ConfigError, match="max_tokens") as err:
        SlidingWindow(0)
    assert err.value.argument == "max_tokens"
    with pytest.raises(ConfigError, match="reserve_tokens"):
        SlidingWindow(10, reserve_tokens=-1)
    with pytest.raises(ValueError, match="max_tokens"):  # a ConfigError is a ValueError
        SlidingWindow("8000")  # type: ignore[arg-type]


def test_orphan_result_in_window_is_named() -> None:
    history = [
        Message.system("sys"),
        Message.tool_result("ghost", "boo", id="orphan"),
        Message.user("hi"),
        Message.assistant("hello"),
    ]
    with pytest.raises(PairingError, match="ghost") as err:
        run(PerTurn(1000), history, counter=TEN)
    assert err.value.index == 1
    assert err.value.call_id == "ghost"
    # When the budget leaves the orphan out, nothing malformed is sent and nothing is raised.
    result = run(PerTurn(30), history, counter=TEN)
    assert [m.role for m in result.messages] == ["system", "user", "assistant"]


def test_unanswered_call_in_window_is_named() -> None:
    history = [*simple_history(2), Message.user("go"), call("c9", id="dangling")]
    with pytest.raises(PairingError, match="c9") as err:
        run(PerTurn(1000), history, counter=TEN)
    assert err.value.index == len(history) - 1


def test_dropped_part_is_never_read_or_counted() -> None:
    good = simple_history(5)
    junk = [Message.tool_result(f"nope{i}", "orphan") for i in range(1000)]
    history = RecordingSeq([good[0], *junk, *good[1:]])
    result = PerTurn(50).fit(history, counter=TEN)
    assert ids(result.messages) == ["s", "u3", "a3", "u4", "a4"]
    # Only the prefix and the messages near the end were read.
    assert max(len(history) - k for k in history.touched if k > 1) <= 6
    assert result.dropped_count == 1000 + 6


def test_cost_does_not_depend_on_history_length() -> None:
    class Counting(FixedCounter):
        def __init__(self) -> None:
            super().__init__(10, per_char=0)
            self.seen: list[str] = []

        def count_text(self, text: str, /) -> int:
            self.seen.append(text)
            return 0

    big = [Message.system("s"), *[Message.user(f"m{i}") for i in range(5000)]]
    counter = Counting()
    run(PerTurn(100), big, counter=counter)
    first = len(counter.seen)
    assert first <= 20
    run(PerTurn(100), big, counter=counter)
    assert len(counter.seen) == first  # cached per message: nothing recounted


def test_fit_window_min_start_and_reserved() -> None:
    history = simple_history(5)
    fit = fit_window(history, 100, TEN, min_start=7, reserved=15)
    assert fit.prefix_end == 1
    assert fit.start == 7  # never before min_start, even with room to spare
    assert fit.tokens == 10 + 40
    assert [m.id for m in fit.messages(history)] == ["s", "u3", "a3", "u4", "a4"]
    fit = fit_window(history, 60, TEN, min_start=3, reserved=15)
    assert fit.start == 9  # 35 tokens of room: u4 a4 (a3 fits too, but only whole turns)
    assert not fit.split_turn


def test_empty_and_prefix_only_histories() -> None:
    assert run(PerTurn(10), [], counter=TEN).messages == ()
    only = [Message.system("a"), Message.developer("b")]
    assert list(run(PerTurn(20), only, counter=TEN).messages) == only


def test_window_result_for_fallbacks() -> None:
    history = simple_history(4)
    fit = fit_window(history, 50, TEN)
    result = window_result(
        history, fit, strategy="summary", fallback="summarizer failed", failure_code="timeout"
    )
    assert result.strategy == "summary"
    assert result.fallback == "summarizer failed"
    assert result.failure_code == "timeout"
    assert result.dropped_ranges == ((1, 5),)
    assert not result.is_summarized


def test_input_not_mutated_and_deterministic() -> None:
    history = agent_turn()
    before = [m.to_dict() for m in history]
    snapshot = list(history)
    a = run(PerTurn(50), history, counter=TEN)
    b = run(PerTurn(50), history, counter=TEN)
    assert history == snapshot
    assert [m.to_dict() for m in history] == before
    assert a.messages == b.messages


_EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.booleans()),
        st.tuples(st.just("text"), st.booleans()),
        st.tuples(st.just("call"), st.lists(st.sampled_from("abc"), min_size=1, max_size=2)),
        st.tuples(st.just("result"), st.sampled_from("abc")),
        st.tuples(
            st.just("user_results"), st.lists(st.sampled_from("abc"), min_size=1, max_size=2)
        ),
        st.tuples(st.just("system"), st.booleans()),
    ),
    max_size=14,
)


def _from_events(events: list[tuple[str, object]]) -> list[Message]:
    out = [Message.system("sys", id="s")]
    for k, (kind, arg) in enumerate(events):
        if kind == "user":
            out.append(Message.user(f"u{k}", id=f"m{k}"))
        elif kind == "text":
            out.append(Message.assistant(f"a{k}", id=f"m{k}"))
        elif kind == "call":
            calls = [ToolCallPart(str(c), "f", "{}") for c in arg]  # type: ignore[attr-defined]
            out.append(Message.assistant(tool_calls=calls, id=f"m{k}"))
        elif kind == "result":
            out.append(Message.tool_result(str(arg), "ok", id=f"m{k}"))
        elif kind == "user_results":
            parts = [ToolResultPart(str(c), "ok") for c in arg]  # type: ignore[attr-defined]
            out.append(Message("user", tuple(parts), id=f"m{k}"))
        else:
            out.append(Message.system(f"late {k}", id=f"m{k}"))
    return out


@settings(max_examples=400, deadline=None)
@given(events=_EVENTS, budget=st.integers(min_value=20, max_value=200))
def test_pairing_check_in_the_walk_agrees_with_validate(
    events: list[tuple[str, object]], budget: int
) -> None:
    """The window's pairing check, folded into the backward walk, raises exactly when
    :func:`contextfold.turns.validate` rejects the window that would be sent."""
    history = _from_events(events)
    try:
        loose = fit_window(history, budget, TEN, check_pairing=False)
    except (BudgetError, PairingError):
        return  # raised before any pairing check of the window
    window = history[loose.start :]
    try:
        validate(window)
        valid = True
    except PairingError:
        valid = False
    if valid:
        strict = fit_window(history, budget, TEN)
        assert strict == loose
    else:
        with pytest.raises(PairingError) as err:
            fit_window(history, budget, TEN)
        assert err.value.index is not None
        assert err.value.index >= loose.start
