from __future__ import annotations

from collections.abc import Sequence

import pytest

from contextfold.errors import BudgetError, ConfigError, PairingError
from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.testing import FixedCounter
from contextfold.tokens.approx import ApproxCounter
from contextfold.transforms import (
    DEFAULT_SUMMARY_LABEL,
    keep_last_messages,
    keep_last_with_summary,
    trim_to_token_budget,
)
from contextfold.turns import validate

TEN = FixedCounter(10, per_char=0)


def ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


def call(*call_ids: str, mid: str) -> Message:
    return Message.assistant(tool_calls=[ToolCallPart(i, "f", "{}") for i in call_ids], id=mid)


def chat(n: int) -> list[Message]:
    out = [Message.system("rules", id="s")]
    for t in range(n):
        out += [Message.user(f"q{t}", id=f"u{t}"), Message.assistant(f"a{t}", id=f"a{t}")]
    return out


class Calls:
    def __init__(self, text: str | None) -> None:
        self.text = text
        self.n = 0

    def __call__(self) -> str | None:
        self.n += 1
        return self.text


# -- keep_last_messages ---------------------------------------------------------------------


def test_keep_last_messages_same_object_when_nothing_dropped() -> None:
    history = chat(2)
    assert keep_last_messages(history, 4) is history
    assert keep_last_messages(history, 100) is history


def test_keep_last_messages_counts_non_system_messages() -> None:
    history = chat(3)
    out = keep_last_messages(history, 3)
    assert ids(out) == ["s", "a1", "u2", "a2"]  # the window may start on an assistant
    assert ids(keep_last_messages(history, 0)) == ["s"]


def test_keep_last_messages_copies_non_list_input() -> None:
    history = tuple(chat(1))
    out = keep_last_messages(history, 5)
    assert isinstance(out, list)
    assert out == list(history)


def test_negative_count_is_rejected() -> None:
    with pytest.raises(ConfigError, match="-1") as err:
        keep_last_messages(chat(1), -1)
    assert err.value.argument == "count"
    with pytest.raises(ConfigError):
        keep_last_with_summary(chat(1), "s", -1)
    with pytest.raises(ConfigError):
        keep_last_messages(chat(1), 1.5)  # type: ignore[arg-type]


def test_window_moves_past_the_rest_of_a_unit() -> None:
    history = [
        Message.system("s", id="s"),
        Message.user("go", id="u"),
        call("c1", "c2", mid="a"),
        Message.tool_result("c1", "1", id="t1"),
        Message.tool_result("c2", "2", id="t2"),
        Message.assistant("done", id="d"),
    ]
    # The last 3 would start on t1; the last 2 on t2: both move forward to "d", and the
    # user's request is kept in front of it (it counts as one of the kept messages).
    assert ids(keep_last_messages(history, 3)) == ["s", "u", "d"]
    assert ids(keep_last_messages(history, 2)) == ["s", "u", "d"]
    # The last 4 hold no request: it takes the place of one of them.
    assert ids(keep_last_messages(history, 4)) == ["s", "u", "d"]
    assert keep_last_messages(history, 5) is history


def test_anthropic_and_responses_shapes_are_pair_safe() -> None:
    anthropic = [
        Message.user("q", id="u"),
        call("x", "y", mid="a"),
        Message.user([ToolResultPart("x", "1"), ToolResultPart("y", "2")], id="r"),
        Message.assistant("ok", id="d"),
    ]
    assert ids(keep_last_messages(anthropic, 2)) == ["u", "d"]
    responses = [
        Message.user("q", id="u"),
        call("c1", mid="f1"),
        call("c2", mid="f2"),
        Message.tool_result("c1", "1", id="o1"),
        Message.tool_result("c2", "2", id="o2"),
        Message.assistant("ok", id="d"),
    ]
    # Starting at f2 would orphan o1.
    assert ids(keep_last_messages(responses, 4)) == ["u", "d"]
    assert ids(keep_last_messages(responses, 5)) == ["u", "d"]
    assert keep_last_messages(responses, 6) is responses


def test_leading_orphan_results_are_skipped() -> None:
    history = [
        Message.system("s", id="s"),
        Message.tool_result("old", "stale", id="t"),
        Message.user("q", id="u"),
        Message.assistant("a", id="a"),
    ]
    assert ids(keep_last_messages(history, 10)) == ["s", "u", "a"]


def test_orphan_inside_the_kept_part_raises() -> None:
    history = [
        Message.user("q", id="u0"),
        Message.assistant("a", id="a0"),
        Message.tool_result("ghost", "boo", id="t"),
        Message.user("q", id="u1"),
    ]
    with pytest.raises(PairingError, match="ghost") as err:
        keep_last_messages(history, 3)
    assert err.value.index == 2


def test_unanswered_call_in_kept_part_raises() -> None:
    history = [*chat(2), Message.user("run it", id="u9"), call("c9", mid="dangling")]
    with pytest.raises(PairingError, match="c9") as err:
        keep_last_messages(history, 3)
    assert err.value.index == len(history) - 1


def test_later_system_messages_are_not_hoisted() -> None:
    history = [
        Message.system("s", id="s"),
        Message.user("q0", id="u0"),
        Message.system("mid-conversation note", id="s2"),
        Message.user("q1", id="u1"),
        Message.assistant("a1", id="a1"),
    ]
    assert ids(keep_last_messages(history, 3)) == ["s", "s2", "u1", "a1"]
    assert ids(keep_last_messages(history, 2)) == ["s", "u1", "a1"]  # s2 counted, dropped


# -- keep_last_with_summary -----------------------------------------------------------------


def test_summary_injected_after_leading_system_messages() -> None:
    history = [Message.developer("dev", id="d"), *chat(3)]
    out = keep_last_with_summary(history, "  they talked about q0 and q1  ", 2)
    assert ids(out)[:2] == ["d", "s"]
    summary = out[2]
    assert summary.role == "system"
    assert summary.text == f"{DEFAULT_SUMMARY_LABEL}\nthey talked about q0 and q1"
    assert ids(out)[3:] == ["u2", "a2"]
    again = keep_last_with_summary(history, "  they talked about q0 and q1  ", 2)
    assert again[2].id == summary.id  # deterministic
    other = keep_last_with_summary(history, "x", 4)
    assert other[2].id != summary.id  # derived from the span covered


def test_no_summary_when_nothing_dropped() -> None:
    history = chat(2)
    source = Calls("never used")
    assert keep_last_with_summary(history, source, 4) is history
    assert source.n == 0


def test_no_summary_when_only_a_leading_orphan_was_skipped() -> None:
    history = [
        Message.system("s", id="s"),
        Message.tool_result("old", "stale", id="t"),
        Message.user("q", id="u"),
        Message.assistant("a", id="a"),
    ]
    source = Calls("should not appear")
    out = keep_last_with_summary(history, source, 2)
    assert ids(out) == ["s", "u", "a"]
    assert source.n == 0
    out = keep_last_with_summary(history, source, 10)
    assert ids(out) == ["s", "u", "a"]
    assert source.n == 0
    out = keep_last_with_summary(history, source, 1)
    assert ids(out)[0] == "s"
    assert ids(out)[-1] == "u"  # one message: the user's request, not the answer
    assert out[1].text.endswith("should not appear")
    assert source.n == 1


def test_empty_or_blank_summary_injects_nothing() -> None:
    history = chat(3)
    for text in ("", "   \n ", None):
        out = keep_last_with_summary(history, Calls(text), 2)
        assert ids(out) == ["s", "u2", "a2"]


def test_summary_callable_called_once_when_dropping() -> None:
    source = Calls("sum")
    keep_last_with_summary(chat(3), source, 2)
    assert source.n == 1


def test_summary_not_hoisting_later_system_messages() -> None:
    history = [
        Message.system("s", id="s"),
        Message.user("q0", id="u0"),
        Message.assistant("a0", id="a0"),
        Message.system("note", id="s2"),
        Message.user("q1", id="u1"),
        Message.assistant("a1", id="a1"),
    ]
    out = keep_last_with_summary(history, "earlier", 3)
    assert ids(out)[0] == "s"
    assert out[1].text.endswith("earlier")
    assert ids(out)[2:] == ["s2", "u1", "a1"]


def test_summary_role_label_and_forged_label() -> None:
    history = chat(3)
    out = keep_last_with_summary(history, "facts", 2, role="assistant", label="Earlier:")
    assert out[1].role == "assistant"
    assert out[1].text == "Earlier:\nfacts"
    forged = keep_last_with_summary(history, "Earlier: trust me", 2, label="Earlier:")
    assert forged[1].text != "Earlier:\nEarlier: trust me"
    assert forged[1].text.startswith("Earlier:\n")
    merged = keep_last_with_summary(history, "facts", 2, role="user")
    assert merged[1].role == "user"
    assert merged[1].id == "u2"  # merged into the first kept user message
    assert merged[1].text.startswith(DEFAULT_SUMMARY_LABEL)
    assert history[5].text == "q2"  # the input message itself is untouched


# -- trim_to_token_budget -------------------------------------------------------------------


def test_trim_same_object_when_it_fits() -> None:
    history = chat(2)
    assert trim_to_token_budget(history, 50, counter=TEN) is history
    assert trim_to_token_budget(history, 10_000) is history


def test_trim_keeps_newest_messages_that_fit() -> None:
    history = chat(3)
    out = trim_to_token_budget(history, 40, counter=TEN)
    assert ids(out) == ["s", "a1", "u2", "a2"]
    assert TEN.count_messages(out) <= 40


def test_trim_is_pair_safe() -> None:
    history = [
        Message.system("s", id="s"),
        Message.user("go", id="u"),
        call("c1", "c2", mid="a"),
        Message.tool_result("c1", "1", id="t1"),
        Message.tool_result("c2", "2", id="t2"),
        Message.assistant("done", id="d"),
    ]
    with pytest.raises(BudgetError) as err:
        trim_to_token_budget(history, 20, counter=TEN)
    assert err.value.required == 30  # the system prompt, the request and the answer
    for budget in range(30, 70, 10):
        out = trim_to_token_budget(history, budget, counter=TEN)
        validate(out)
        assert TEN.count_messages(out) <= budget
        assert ids(out)[:2] == ["s", "u"]  # the user's request is never dropped
    assert ids(trim_to_token_budget(history, 40, counter=TEN)) == ["s", "u", "d"]


def test_trim_skips_leading_orphans_and_keeps_later_system() -> None:
    history = [
        Message.system("s", id="s"),
        Message.tool_result("old", "x", id="t"),
        Message.user("q", id="u"),
        Message.system("note", id="s2"),
        Message.assistant("a", id="a"),
    ]
    assert ids(trim_to_token_budget(history, 1000, counter=TEN)) == ["s", "u", "s2", "a"]
    # The request outranks the later system note when both cannot stay.
    assert ids(trim_to_token_budget(history, 30, counter=TEN)) == ["s", "u", "a"]


def test_trim_budget_errors() -> None:
    with pytest.raises(BudgetError, match="system") as err:
        trim_to_token_budget([Message.system("x" * 100), Message.user("q")], 10)
    approx = ApproxCounter()
    assert err.value.required == approx.count_messages(
        [Message.system("x" * 100), Message.user("q")]
    )
    with pytest.raises(BudgetError, match="newest") as err2:
        trim_to_token_budget(chat(1), 15, counter=TEN)
    assert err2.value.required == 30  # the system prompt, the request and the answer
    assert trim_to_token_budget(chat(1), 30, counter=TEN) == chat(1)


def test_transforms_never_mutate_input() -> None:
    history = chat(4)
    snapshot = [m.to_dict() for m in history]
    copy = list(history)
    keep_last_messages(history, 2)
    keep_last_with_summary(history, "s", 2, role="user")
    trim_to_token_budget(history, 30, counter=TEN)
    assert history == copy
    assert [m.to_dict() for m in history] == snapshot
