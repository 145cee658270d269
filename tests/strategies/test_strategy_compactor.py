"""SummaryCompactor: seed behaviour, the budget it ignored, cancellation and deadlines."""

from __future__ import annotations

import asyncio

import pytest
from strategy_checks import chat, check_invariants, ids, snapshot

from contextfold.errors import BudgetError, CancelledError, PairingError
from contextfold.messages import Message
from contextfold.strategies import SummaryCompactor
from contextfold.strategies._chars import char_size
from contextfold.strategies.run import arun, run
from contextfold.summarizers.base import (
    CancelToken,
    SummarizationResult,
    SummaryRequest,
)
from contextfold.testing import FakeSummarizer, FixedCounter

TEN = FixedCounter(10, per_char=0)
LABEL = "[Condensed summary of the earlier conversation]"


def test_older_turns_become_one_summary_turn() -> None:
    history = chat(8, tools=True)  # s + 8 turns of 4 messages
    before = snapshot(history)
    fake = FakeSummarizer("S")
    compactor = SummaryCompactor(fake, keep_recent_turns=2, system_prompt="Be brief.")
    result = run(compactor, history, counter=TEN)
    assert ids(result) == ["s", "u6", "a6", "t6", "b6", "u7", "a7", "t7", "b7"]
    # one user turn: the summary merged ahead of the first kept user message
    first = result.messages[1]
    assert first.role == "user"
    assert first.text.startswith(f"{LABEL}\nS\nquestion 6")
    assert fake.calls == 1
    request = fake.requests[0]
    assert [m.id for m in request.messages] == [m.id for m in history[1:25]]
    assert request.instructions == "Be brief."
    assert result.summarized_ranges == ((1, 25),)
    assert result.checkpoint is not None
    assert result.checkpoint.strategy == "compactor"
    assert result.checkpoint.details["turns"] == 6
    check_invariants(history, before, result, counter=TEN)


def test_no_call_when_turns_do_not_exceed_the_limit() -> None:
    fake = FakeSummarizer("S")
    history = chat(4)
    result = run(SummaryCompactor(fake, keep_recent_turns=4), history, counter=TEN)
    assert list(result.messages) == history
    assert fake.calls == 0
    empty = run(SummaryCompactor(fake), [], counter=TEN)
    assert empty.messages == ()
    assert fake.calls == 0


def test_system_prompt_of_the_conversation_is_kept() -> None:
    history = [Message.system("rules", id="s0"), Message.developer("more", id="s1"), *chat(6)[1:]]
    result = run(SummaryCompactor(FakeSummarizer("S"), keep_recent_turns=1), history, counter=TEN)
    assert ids(result)[:2] == ["s0", "s1"]
    assert ids(result)[2:] == ["u5", "a5"]


def test_budget_chars_is_respected_by_keeping_fewer_turns() -> None:
    history = chat(8, tools=True, size=40)
    fake = FakeSummarizer("S")
    budget = 600
    assert char_size(history) > budget
    result = run(
        SummaryCompactor(fake, keep_recent_turns=4, budget_chars=budget), history, counter=TEN
    )
    assert char_size(result.messages) <= budget
    assert result.is_summarized
    # the turns that did not fit were summarized, not silently dropped
    assert result.dropped_ranges == ()
    assert [m.id for m in fake.requests[0].messages][-1] == result.summarized[-1]
    check_invariants(history, snapshot(history), result, counter=TEN)


def test_budget_chars_fits_without_compacting() -> None:
    fake = FakeSummarizer("S")
    history = chat(8)
    result = run(
        SummaryCompactor(fake, keep_recent_turns=2, budget_chars=char_size(history)),
        history,
        counter=TEN,
    )
    assert list(result.messages) == history
    assert fake.calls == 0


def test_a_summary_too_big_for_the_budget_is_left_out() -> None:
    history = chat(6, size=50)
    big = FakeSummarizer("y" * 150)
    budget = char_size(history[:1]) + char_size(history[-2:]) + 20
    result = run(
        SummaryCompactor(big, keep_recent_turns=1, budget_chars=budget), history, counter=TEN
    )
    assert char_size(result.messages) <= budget
    assert ids(result) == ["s", "u5", "a5"]
    assert result.fallback is not None
    assert not result.is_summarized
    assert result.checkpoint is None


def test_never_empty_budget_error_instead() -> None:
    history = chat(3, size=100)
    fake = FakeSummarizer("S")
    with pytest.raises(BudgetError) as err:
        run(SummaryCompactor(fake, keep_recent_turns=1, budget_chars=50), history, counter=TEN)
    assert err.value.budget == 50
    assert fake.calls == 0


def test_malformed_input_raises_before_any_call() -> None:
    fake = FakeSummarizer("S")
    broken = [*chat(6), Message.tool_result("ghost", "x", id="g")]
    with pytest.raises(PairingError) as err:
        run(SummaryCompactor(fake, keep_recent_turns=1), broken, counter=TEN)
    assert err.value.call_id == "ghost"
    assert fake.calls == 0


def test_cancelled_before_the_call() -> None:
    fake = FakeSummarizer("S")
    token = CancelToken()
    token.cancel("user pressed stop")
    with pytest.raises(CancelledError, match="user pressed stop"):
        SummaryCompactor(fake, keep_recent_turns=1).compact(chat(5), cancel=token, counter=TEN)
    assert fake.calls == 0


def test_cancelled_during_the_call() -> None:
    token = CancelToken()

    def cancel_midway(request: SummaryRequest) -> str:
        assert request.cancel is token
        token.cancel("stop now")
        return "S"

    with pytest.raises(CancelledError, match="stop now"):
        SummaryCompactor(FakeSummarizer(cancel_midway), keep_recent_turns=1).compact(
            chat(5), cancel=token, counter=TEN
        )


def test_deadline_passed_falls_back_with_timeout() -> None:
    history = chat(5)
    fake = FakeSummarizer("S")
    result = SummaryCompactor(fake, keep_recent_turns=1).compact(
        history, deadline_s=0.0, counter=TEN
    )
    assert result.failure_code == "timeout"
    assert ids(result) == ["s", "u4", "a4"]
    assert result.checkpoint is None


class SlowSummarizer:
    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        await asyncio.sleep(5)
        return SummarizationResult.success("late")


async def test_async_deadline_interrupts_a_slow_summarizer() -> None:
    history = chat(5)
    compactor = SummaryCompactor(SlowSummarizer(), keep_recent_turns=1, deadline_s=0.05)
    result = await compactor.acompact(history, counter=TEN)
    assert result.failure_code == "timeout"
    assert ids(result) == ["s", "u4", "a4"]
    async_plan = await arun(compactor, history, counter=TEN)
    assert async_plan.failure_code == "timeout"


def test_summarizer_failure_falls_back_to_recent_turns() -> None:
    history = chat(6, tools=True)
    result = run(
        SummaryCompactor(FakeSummarizer(fail="rate_limited"), keep_recent_turns=2),
        history,
        counter=TEN,
    )
    assert result.failure_code == "rate_limited"
    assert ids(result) == ["s", "u4", "a4", "t4", "b4", "u5", "a5", "t5", "b5"]
    assert result.dropped_ranges == ((1, 17),)
    check_invariants(history, snapshot(history), result, counter=TEN)


def test_checkpoint_is_updated_not_resummarized() -> None:
    fake = FakeSummarizer(lambda r: f"S{len(r.messages)}")
    compactor = SummaryCompactor(fake, keep_recent_turns=2)
    first = run(compactor, chat(6), counter=TEN)
    assert fake.calls == 1
    second = run(compactor, chat(7), counter=TEN, checkpoint=first.checkpoint)
    assert fake.calls == 2
    request = fake.requests[1]
    assert request.kind == "update"
    assert request.previous_summary == "S8"
    assert [m.id for m in request.messages] == ["u4", "a4"]
    assert ids(second)[1:] == ["u5", "a5", "u6", "a6"]
    assert second.checkpoint is not None
    assert second.checkpoint.previous_id == first.checkpoint.id  # type: ignore[union-attr]


def test_loop_guard() -> None:
    fake = FakeSummarizer(fail="empty")
    compactor = SummaryCompactor(fake, keep_recent_turns=1, max_failed_compactions=2)
    state = None
    for _ in range(4):
        result = run(compactor, chat(5), counter=TEN, state=state)
        state = result.state
    assert fake.calls == 2
    assert result.fallback is not None
    assert "loop guard" in result.fallback
