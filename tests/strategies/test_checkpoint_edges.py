"""Where a summarized span may end: never inside a tool exchange, whatever the ids say."""

from __future__ import annotations

import pytest

from contextfold.messages import Message, ToolCallPart
from contextfold.strategies import Checkpoint, Summarization
from contextfold.strategies.base import Strategy
from contextfold.strategies.run import run
from contextfold.testing import FakeSummarizer, FixedCounter
from contextfold.turns import validate

TEN = FixedCounter(10, per_char=0)  # every message costs 10 tokens


def _strategies() -> list[Strategy]:
    return [
        Summarization(60, keep_recent=2, summarizer=FakeSummarizer(text="s")),
        Checkpoint(FakeSummarizer(text="s"), max_tokens=60),
    ]


@pytest.mark.parametrize("strategy", _strategies(), ids=lambda s: type(s).__name__)
def test_a_checkpoint_never_splits_calls_still_waiting_for_results(strategy: Strategy) -> None:
    history = [Message.system("sys", id="s")]
    for i in range(6):
        history += [Message.user(f"q{i}", id=f"u{i}"), Message.assistant(f"a{i}", id=f"a{i}")]
    history += [
        Message.user("run both tools", id="u6"),
        Message.assistant(None, tool_calls=[ToolCallPart("c1", "ls")], id="call1"),
        Message.assistant(None, tool_calls=[ToolCallPart("c2", "pwd")], id="call2"),
    ]
    first = run(strategy, history, counter=TEN)
    assert first.checkpoint is not None
    assert first.checkpoint.last_covered_id != "call1"  # the two calls stay together
    later = [
        *history,
        Message.tool_result("c1", "a.py", id="t1"),
        Message.tool_result("c2", "/w", id="t2"),
    ]
    second = run(strategy, later, counter=TEN, checkpoint=first.checkpoint)  # raised before
    validate(list(second.messages))
    assert second.tokens <= 60


@pytest.mark.parametrize(
    "strategy",
    [
        Summarization(60, keep_recent=2, summarizer=FakeSummarizer(), compact_to=1.0),
        Checkpoint(FakeSummarizer(), max_tokens=60, keep_recent_tokens=20, compact_to=1.0),
    ],
    ids=lambda s: type(s).__name__,
)
def test_an_id_repeated_inside_a_tool_exchange_is_not_taken_for_the_checkpoint_end(
    strategy: Strategy,
) -> None:
    history = [
        Message.system("s", id="s"),
        Message.user("u1", id="u1"),
        Message.assistant(None, tool_calls=[ToolCallPart("c1", "ls")], id="dup"),
        Message.tool_result("c1", "out", id="t1"),
        Message.assistant("done", id="a1"),
        Message.user("u2", id="u2"),
        Message.assistant("ok", id="dup"),  # the same id again, after the exchange
        Message.user("u3", id="u3"),
        Message.assistant("a3", id="a3"),
        Message.user("u4", id="u4"),
        Message.assistant("a4", id="a4"),
    ]
    validate(history)
    first = run(strategy, history[:9], counter=TEN)
    assert first.checkpoint is not None
    assert first.checkpoint.last_covered_id == "dup"  # the later copy: the case under test
    second = run(strategy, history, counter=TEN, checkpoint=first.checkpoint)  # raised before
    validate(list(second.messages))
    assert [m.id for m in second.messages][-2:] == ["u4", "a4"]
    assert second.tokens <= 60


def test_hybrids_limit_counts_the_messages_it_really_dropped() -> None:
    from contextfold.strategies import Hybrid

    history = [Message.system("You are terse.", id="s")]
    for i in range(6):
        history += [Message.user(f"question {i}", id=f"u{i}"), Message.assistant(f"a {i}")]
    history.append(Message.user("do big task", id="req"))  # a long newest turn
    for j in range(6):
        call = ToolCallPart(f"k{j}", "run", "{}")
        history += [Message.assistant(None, tool_calls=[call]), Message.tool_result(f"k{j}", "out")]
    history.append(Message.assistant("done", id="fin"))
    hybrid = Hybrid(
        90, keep_recent=4, chunk_size=2, summarizer=FakeSummarizer(), max_chunks=1, compact_to=1.0
    )
    result = run(hybrid, history, counter=TEN)
    assert "req" in result.kept  # the turn's request is kept apart from the tail
    assert result.limit_reached is not None
    counted = int(result.limit_reached.split(": ")[1].split()[0])
    assert counted == result.dropped_count == 18  # it said 19: the kept request too


def test_hybrids_limit_counts_only_older_messages_and_names_a_trimmed_recent_one() -> None:
    """The budget, not ``max_chunks``, drops newest messages that do not fit: the limit's
    count leaves them out (they will never be summarized later) and a note says so."""
    from contextfold.strategies import Hybrid
    from contextfold.summarizers import ExtractiveSummarizer
    from contextfold.tokens.approx import ApproxCounter

    history = [Message.system("You are a travel agent.", id="sys")]
    for d in range(100):
        history.append(Message.user(f"Day {d}: book tour MU-{d} for {d} people.", id=f"u{d}"))
        history.append(Message.assistant(f"Booked MU-{d}; confirmation CF-{1000 + d}.", id=f"a{d}"))
    counter = ApproxCounter()
    hybrid = Hybrid(
        150, keep_recent=4, chunk_size=20, summarizer=ExtractiveSummarizer(), max_chunks=1
    )
    result = run(hybrid, history, counter=counter)
    newest = {m.id for m in history[-4:]}
    trimmed_recent = newest & set(result.dropped)
    assert trimmed_recent  # the case under test: the budget cannot hold all four
    assert result.limit_reached is not None
    counted = int(result.limit_reached.split(": ")[1].split()[0])
    assert counted == result.dropped_count - len(trimmed_recent)
    assert any("newest messages as well" in note for note in result.notes)
