from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import formats
from contextfold.errors import PairingError
from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart
from contextfold.turns import (
    group_turns,
    is_turn_start,
    prefix_length,
    repair,
    safe_cut_points,
    split_prefix,
    units,
    validate,
)


def call(*ids: str, mid: str | None = None, text: str | None = None) -> Message:
    kw = {"id": mid} if mid else {}
    return Message.assistant(text, tool_calls=[ToolCallPart(i, "f", "{}") for i in ids], **kw)


def res(cid: str, mid: str | None = None) -> Message:
    kw = {"id": mid} if mid else {}
    return Message.tool_result(cid, f"out {cid}", **kw)


def user_results(*ids: str, text: str | None = None) -> Message:
    parts: list[TextPart | ToolResultPart] = [ToolResultPart(i, f"out {i}") for i in ids]
    if text:
        parts.append(TextPart(text))
    return Message.user(parts)


# -- prefix and turns -----------------------------------------------------------------------


def test_prefix_covers_leading_system_and_developer_only() -> None:
    msgs = [Message.system("a"), Message.developer("b"), Message.user("u"), Message.system("c")]
    assert prefix_length(msgs) == 2
    head, rest = split_prefix(msgs)
    assert head == msgs[:2]
    assert rest == msgs[2:]
    assert prefix_length([]) == 0
    assert prefix_length([Message.user("x")]) == 0


def test_turn_starts() -> None:
    assert is_turn_start(Message.user("hi"))
    assert not is_turn_start(user_results("x"))
    assert is_turn_start(user_results("x", text="and also this"))
    assert not is_turn_start(Message.assistant("a"))
    assert not is_turn_start(res("x"))


def test_group_turns_with_tools_and_anthropic_results() -> None:
    msgs = [
        Message.system("s"),
        Message.assistant("greeting before any user"),
        Message.user("q1"),
        call("a", "b"),
        user_results("a", "b"),  # not a new turn
        Message.assistant("done"),
        Message.user("q2"),
        call("c"),
        res("c"),
    ]
    turns = group_turns(msgs)
    assert [(t.start, t.end) for t in turns] == [(1, 2), (2, 6), (6, 9)]
    assert turns[1].messages == tuple(msgs[2:6])
    assert group_turns([Message.system("only")]) == []


# -- validate -------------------------------------------------------------------------------


def test_validate_accepts_good_shapes() -> None:
    validate(
        [
            Message.system("s"),
            Message.user("q"),
            call("p1", "p2"),  # parallel
            res("p1"),
            res("p2"),
            call("r1"),  # Responses style: consecutive call messages
            call("r2"),
            res("r1"),
            res("r2"),
            call("x", "y"),
            user_results("x", "y"),  # Anthropic style
            Message.assistant("fin"),
        ]
    )


def test_validate_orphan_result() -> None:
    with pytest.raises(PairingError, match="no matching call") as err:
        validate([Message.user("q"), res("ghost")])
    assert err.value.index == 1
    assert err.value.call_id == "ghost"


def test_validate_orphan_result_in_user_message() -> None:
    with pytest.raises(PairingError) as err:
        validate([Message.user("q"), call("a"), user_results("a", "zzz")])
    assert err.value.call_id == "zzz"
    assert err.value.index == 2


def test_validate_call_without_result() -> None:
    with pytest.raises(PairingError, match="no result before message 2") as err:
        validate([Message.user("q"), call("a", "b"), Message.user("next")])
    assert err.value.index == 1
    with pytest.raises(PairingError) as err2:
        validate([Message.user("q"), call("a", "b"), res("a"), Message.user("next")])
    assert err2.value.call_id == "b"
    with pytest.raises(PairingError, match="has no result"):
        validate([Message.user("q"), call("a")])
    validate([Message.user("q"), call("a")], allow_pending_tail=True)


def test_validate_system_message_inside_a_unit() -> None:
    with pytest.raises(PairingError):
        validate([Message.user("q"), call("a"), Message.system("note"), res("a")])


def test_validate_duplicates() -> None:
    with pytest.raises(PairingError, match="duplicate") as err:
        validate([Message.user("q"), call("a"), call("a"), res("a"), res("a")])
    assert err.value.index == 2
    with pytest.raises(PairingError, match="duplicate"):
        validate([Message.user("q"), call("a", "a"), res("a"), res("a")])
    with pytest.raises(PairingError, match="answered twice"):
        validate([Message.user("q"), call("a"), res("a"), res("a")])


def test_validate_accepts_id_reused_after_its_answer() -> None:
    # OpenAI models reuse call ids in long runs (tau-bench does); pairing is positional.
    validate([Message.user("q"), call("a"), res("a"), Message.user("again"), call("a"), res("a")])


# -- safe cuts and units --------------------------------------------------------------------


def test_safe_cut_points_and_units() -> None:
    msgs = [
        Message.user("q"),  # 0
        call("p1", "p2"),  # 1
        res("p1"),  # 2
        res("p2"),  # 3
        call("r1"),  # 4
        call("r2"),  # 5
        res("r1"),  # 6
        res("r2"),  # 7
        call("x"),  # 8
        user_results("x"),  # 9
        Message.assistant("fin"),  # 10
    ]
    assert safe_cut_points(msgs) == [0, 1, 4, 8, 10, 11]
    assert units(msgs) == [(0, 1), (1, 4), (4, 8), (8, 10), (10, 11)]
    assert units(msgs, start=4) == [(4, 8), (8, 10), (10, 11)]


def test_units_with_unanswered_tail() -> None:
    msgs = [Message.user("q"), call("a"), Message.assistant("thinking out loud")]
    assert units(msgs) == [(0, 1), (1, 3)]


# -- repair ---------------------------------------------------------------------------------


def test_repair_drop_mode() -> None:
    msgs = [
        Message.user("q", id="u"),
        res("ghost", mid="orphan"),
        call("a", "b", mid="c", text="calling"),
        res("a", mid="ra"),
        Message.user("next", id="u2"),
    ]
    fixed = repair(msgs)
    assert [m.id for m in fixed] == ["u", "c", "ra", "u2"]
    assert fixed[1].tool_calls == (ToolCallPart("a", "f", "{}"),)  # b dropped, text kept
    assert fixed[1].text == "calling"
    validate(fixed)
    assert msgs[2].tool_calls[1].id == "b"  # input untouched


def test_repair_text_mode_keeps_content() -> None:
    msgs = [Message.user("q"), res("ghost"), call("a"), Message.user("next")]
    fixed = repair(msgs, mode="text")
    validate(fixed)
    assert fixed[1].role == "user"
    assert "ghost" in fixed[1].text
    assert "tool call f" in fixed[2].text
    assert len(fixed) == 4


def test_repair_text_mode_while_calls_wait() -> None:
    # The orphan sits between a call and its result: as text it must not cut them apart,
    # and no message may speak there, so it moves to just after the result.
    msgs = [Message.user("q"), call("b"), res("a"), user_results("b")]
    fixed = repair(msgs, mode="text")
    validate(fixed)
    assert [m.role for m in fixed] == ["user", "assistant", "user", "user"]
    assert fixed[2].tool_results == msgs[3].tool_results
    assert fixed[3].text == "[tool result for a]: out a"


def test_validate_rejects_an_assistant_speaking_between_a_call_and_its_result() -> None:
    msgs = [Message.user("q"), call("a"), Message.assistant("checking..."), res("a")]
    with pytest.raises(PairingError) as info:
        validate(msgs)
    assert info.value.call_id == "a"
    assert info.value.index == 1
    with pytest.raises(PairingError):
        validate(msgs[:3], allow_pending_tail=True)
    # Parallel calls sent one per message, and results, may still come in between.
    validate([Message.user("q"), call("a"), call("b"), res("a"), res("b")])


def test_repair_moves_an_assistant_speaking_between_a_call_and_its_result() -> None:
    msgs = [Message.user("q"), call("a"), Message.assistant("checking..."), res("a")]
    for mode in ("drop", "text"):
        fixed = repair(msgs, mode=mode)  # type: ignore[arg-type]
        validate(fixed)
        assert [m.id for m in fixed] == [msgs[0].id, msgs[1].id, msgs[3].id, msgs[2].id]
        chat = formats.dump(fixed, "openai_chat")
        assert [m["role"] for m in chat] == ["user", "assistant", "tool", "assistant"]


def test_repair_duplicates_and_valid_input_unchanged() -> None:
    good = [Message.user("q"), call("a"), res("a")]
    fixed = repair(good)
    assert fixed == good
    assert all(x is y for x, y in zip(fixed, good, strict=True))
    dup = [Message.user("q"), call("a"), call("a"), res("a"), res("a"), res("a")]
    fixed_dup = repair(dup)
    validate(fixed_dup)
    assert len(fixed_dup) == 3
    reused = [Message.user("q"), call("a"), res("a"), call("a"), res("a")]
    assert repair(reused) == reused


# -- properties -----------------------------------------------------------------------------

ids_ = st.sampled_from(["a", "b", "c", "d"])
junk_message = st.one_of(
    st.builds(lambda t: Message.user(t), st.sampled_from(["hi", "more"])),
    st.builds(lambda t: Message.assistant(t), st.sampled_from(["ok", "hm"])),
    st.builds(lambda t: Message.system(t), st.just("sys")),
    st.builds(lambda xs: call(*xs), st.lists(ids_, min_size=1, max_size=3)),
    st.builds(res, ids_),
    st.builds(lambda xs: user_results(*xs), st.lists(ids_, min_size=1, max_size=3)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(junk_message, max_size=14), st.sampled_from(["drop", "text"]))
def test_repair_always_validates(msgs: list[Message], mode: str) -> None:
    before = [m.to_dict() for m in msgs]
    fixed = repair(msgs, mode=mode)  # type: ignore[arg-type]
    validate(fixed)
    assert [m.to_dict() for m in msgs] == before
    assert repair(fixed, mode=mode) == fixed  # idempotent  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.lists(junk_message, max_size=14))
def test_validate_raises_only_pairing_error(msgs: list[Message]) -> None:
    error: PairingError | None = None
    try:
        validate(msgs)
    except PairingError as exc:
        error = exc
    if error is not None:
        assert error.index is not None
        assert 0 <= error.index < len(msgs)
        return
    # Valid: every safe cut splits no pair, and units tile the list.
    for cut in safe_cut_points(msgs):
        validate(msgs[cut:])
    spans = units(msgs)
    assert [a for a, _ in spans] == safe_cut_points(msgs)[:-1]
    assert all(a < b for a, b in spans)
