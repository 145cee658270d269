"""PruneToolOutputs and Pipeline on hand-made agent conversations."""

from __future__ import annotations

import pytest
from strategy_checks import check_invariants, ids, snapshot

from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart
from contextfold.strategies import (
    Hybrid,
    Pipeline,
    PruneToolOutputs,
    SlidingWindow,
    Summarization,
)
from contextfold.strategies.run import run
from contextfold.testing import FakeSummarizer, FixedCounter

CHARS = FixedCounter(1, per_char=1)  # one token per character plus one per message


def agent(n: int, *, out: int = 200, tool: str = "read") -> list[Message]:
    """A system prompt, one request, then ``n`` tool calls with ``out``-character outputs."""
    history = [Message.system("sys", id="s"), Message.user("go", id="u")]
    for i in range(n):
        call = ToolCallPart(f"c{i}", tool if i % 2 == 0 else "grep", "{}")
        history.append(Message.assistant(None, tool_calls=[call], id=f"a{i}"))
        history.append(Message.tool_result(f"c{i}", "x" * out, id=f"t{i}"))
    history.append(Message.assistant("done", id="z"))
    return history


def result_text(m: Message) -> str:
    (part,) = m.tool_results
    return part.text


# -- PruneToolOutputs -----------------------------------------------------------------------


def test_old_outputs_are_cleared_with_a_marker_keeping_call_id_and_name() -> None:
    history = agent(6)
    before = snapshot(history)
    result = run(PruneToolOutputs(keep_recent=2, min_savings=10), history, counter=CHARS)
    assert result.pruned == ("t0", "t1", "t2", "t3")
    by_id = {m.id: m for m in result.messages}
    assert result_text(by_id["t0"]) == "[tool output cleared: read, 200 tokens]"
    assert result_text(by_id["t1"]) == "[tool output cleared: grep, 200 tokens]"
    assert by_id["t0"].tool_results[0].call_id == "c0"
    assert by_id["t4"] is history[11]
    assert by_id["t5"] is history[13]
    assert ids(result) == [m.id for m in history]  # positions are kept
    saved = CHARS.count_messages(history) - result.tokens
    assert saved == 4 * (200 - len("[tool output cleared: read, 200 tokens]"))
    assert result.dropped_ranges == ()
    check_invariants(history, before, result, counter=CHARS)
    # the originals are untouched
    assert result_text(history[3]) == "x" * 200


def test_protected_tools_and_min_savings() -> None:
    history = agent(6)
    result = run(
        PruneToolOutputs(keep_recent=2, protect=["read"], min_savings=10), history, counter=CHARS
    )
    assert result.pruned == ("t1", "t3")
    nothing = run(PruneToolOutputs(keep_recent=2, min_savings=10_000), history, counter=CHARS)
    assert list(nothing.messages) == history
    assert nothing.pruned == ()
    assert "min_savings" in nothing.notes[0]


def test_budget_prunes_oldest_first_only_as_needed() -> None:
    history = agent(6)
    total = CHARS.count_messages(history)
    budget = total - 250
    result = run(
        PruneToolOutputs(keep_recent=1, min_savings=10, max_tokens=budget, compact_to=1.0),
        history,
        counter=CHARS,
    )
    assert result.pruned == ("t0", "t1")  # one clearing saves ~160: two are needed
    assert result.tokens <= budget
    fits = run(
        PruneToolOutputs(keep_recent=1, min_savings=10, max_tokens=total), history, counter=CHARS
    )
    assert fits.pruned == ()


def test_budget_beyond_pruning_is_trimmed_pair_safely() -> None:
    history = agent(6)
    result = run(
        PruneToolOutputs(keep_recent=1, min_savings=10, max_tokens=300), history, counter=CHARS
    )
    assert result.tokens <= 300
    assert result.dropped_ranges
    check_invariants(history, snapshot(history), result, counter=CHARS, max_tokens=300)


def test_results_inside_a_user_message_are_pruned_part_by_part() -> None:
    calls = [ToolCallPart("x1", "read"), ToolCallPart("x2", "skill")]
    results = Message.user(
        [ToolResultPart("x1", "a" * 300), ToolResultPart("x2", "b" * 300)], id="r"
    )
    history = [
        Message.user("go", id="u"),
        Message.assistant(None, tool_calls=calls, id="a"),
        results,
        *agent(2)[2:],
    ]
    result = run(
        PruneToolOutputs(keep_recent=2, protect=["skill"], min_savings=10),
        history,
        counter=CHARS,
    )
    assert result.pruned == ("r",)
    parts = result.messages[2].parts
    assert isinstance(parts[0], ToolResultPart)
    assert parts[0].text == "[tool output cleared: read, 300 tokens]"
    assert parts[1] == results.parts[1]


def test_custom_marker_and_bad_marker() -> None:
    history = agent(3)
    result = run(
        PruneToolOutputs(keep_recent=1, min_savings=1, marker="<cleared {call_id} {chars}>"),
        history,
        counter=CHARS,
    )
    assert result_text(result.messages[3]) == "<cleared c0 200>"
    with pytest.raises(ValueError, match="marker"):
        PruneToolOutputs(marker="{nope}")


# -- Pipeline -------------------------------------------------------------------------------


def test_pipeline_skips_the_summarizer_when_pruning_is_enough() -> None:
    history = agent(6)
    fake = FakeSummarizer("S")
    budget = CHARS.count_messages(history) - 300
    pipe = Pipeline(
        [
            PruneToolOutputs(keep_recent=2, min_savings=10),
            Summarization(budget, keep_recent=3, summarizer=fake),
        ],
        max_tokens=budget,
    )
    result = run(pipe, history, counter=CHARS)
    assert fake.calls == 0
    assert result.pruned == ("t0", "t1", "t2", "t3")
    assert result.tokens <= budget
    assert any("remaining stages skipped" in n for n in result.notes)
    assert result.strategy == "pipeline"
    check_invariants(history, snapshot(history), result, counter=CHARS, max_tokens=budget)


def test_pipeline_summarizes_when_pruning_is_not_enough() -> None:
    history = agent(8)
    fake = FakeSummarizer("S")
    budget = 400
    pipe = Pipeline(
        [
            PruneToolOutputs(keep_recent=2, min_savings=10),
            Summarization(budget, keep_recent=3, summarizer=fake),
        ],
        max_tokens=budget,
    )
    result = run(pipe, history, counter=CHARS)
    assert fake.calls == 1
    assert result.tokens <= budget
    # ranges point into the original history (pruning kept positions)
    summarized = fake.requests[0].messages
    assert result.summarized == tuple(m.id for m in summarized)
    assert summarized[2].tool_results[0].text.startswith("[tool output cleared")
    # pruned ids are only those still sent in shortened form
    assert set(result.pruned) <= {m.id for m in result.messages}
    assert result.checkpoint is not None
    assert result.checkpoint.strategy == "summary"
    assert result.summary_calls == 1
    check_invariants(history, snapshot(history), result, counter=CHARS, max_tokens=budget)


def test_pipeline_reports_the_limit_that_stopped_a_stage() -> None:
    history = [Message.system("sys", id="s")]
    for i in range(30):
        history.append(Message.user(f"question {i}", id=f"u{i}"))
        history.append(Message.assistant(f"answer {i}", id=f"a{i}"))
    ten = FixedCounter(10, per_char=0)
    hybrid = Hybrid(100, keep_recent=2, chunk_size=2, summarizer=FakeSummarizer("S"), max_chunks=2)
    result = run(Pipeline([PruneToolOutputs(), hybrid], max_tokens=100), history, counter=ten)
    assert result.limit_reached is not None
    assert result.limit_reached.startswith("hybrid: max_chunks=2: ")
    assert result.dropped_count > 0
    unbounded = Hybrid(100, keep_recent=2, chunk_size=2, summarizer=FakeSummarizer("S"))
    whole = run(Pipeline([PruneToolOutputs(), unbounded], max_tokens=100), history, counter=ten)
    assert (whole.limit_reached, whole.dropped_count) == (None, 0)


def test_pipeline_that_fits_runs_no_stage() -> None:
    history = agent(2)
    fake = FakeSummarizer("S")
    pipe = Pipeline(
        [PruneToolOutputs(min_savings=0), Summarization(10_000, keep_recent=1, summarizer=fake)],
        max_tokens=10_000,
    )
    result = run(pipe, history, counter=CHARS)
    assert list(result.messages) == history
    assert result.pruned == ()
    assert fake.calls == 0


def test_pipeline_keeps_a_checkpoint_summary_when_it_stops_early() -> None:
    history = agent(8)
    fake = FakeSummarizer("S")
    summarize = Summarization(400, keep_recent=3, summarizer=fake)
    first = run(summarize, history, counter=CHARS)
    record = first.checkpoint
    assert record is not None
    covered = [m.id for m in history].index(record.last_covered_id)
    # the memory passes only the prefix and what follows the checkpoint
    after = [history[0], *history[covered + 1 :]]
    pipe = Pipeline(
        [
            PruneToolOutputs(keep_recent=1, min_savings=0),
            Summarization(400, keep_recent=3, summarizer=fake),
        ],
        max_tokens=400,
    )
    result = run(pipe, after, counter=CHARS, checkpoint=record)
    assert fake.calls == 1
    assert result.is_summarized
    assert result.reused_checkpoint is record
    assert any(
        isinstance(p, TextPart) and "<conversation-summary-" in p.text
        for m in result.messages
        for p in m.parts
    )


def test_pipeline_trims_when_stages_leave_it_over_budget() -> None:
    history = agent(6)
    pipe = Pipeline([PruneToolOutputs(keep_recent=1, min_savings=0)], max_tokens=200)
    result = run(pipe, history, counter=CHARS)
    assert result.tokens <= 200
    assert result.dropped_ranges
    assert any("sliding window" in n for n in result.notes)
    check_invariants(history, snapshot(history), result, counter=CHARS, max_tokens=200)


def test_pipeline_merges_usage_calls_and_fallbacks() -> None:
    history = agent(8)
    pipe = Pipeline(
        [
            PruneToolOutputs(keep_recent=2, min_savings=10),
            Hybrid(400, keep_recent=3, chunk_size=2, summarizer=FakeSummarizer(fail="truncated")),
        ],
        max_tokens=400,
    )
    result = run(pipe, history, counter=CHARS)
    assert result.failure_code == "truncated"
    assert result.fallback is not None
    assert result.fallback.startswith("hybrid:")
    assert result.summary_calls == 1
    assert result.tokens <= 400
    assert (
        result.messages
        == SlidingWindow(400)
        .fit(
            run(PruneToolOutputs(keep_recent=2, min_savings=10), history, counter=CHARS).messages,
            counter=CHARS,
        )
        .messages
    )


def test_pipeline_options() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Pipeline([], max_tokens=10)
    with pytest.raises(ValueError, match="not a strategy"):
        Pipeline([object()], max_tokens=10)  # type: ignore[list-item]


def test_a_pipeline_reports_the_message_its_summary_was_merged_into_as_kept() -> None:
    counter = FixedCounter(10, per_char=0)
    history = [Message.system("sys", id="s")]
    for i in range(10):
        history += [Message.user(f"u{i}", id=f"u{i}"), Message.assistant(f"a{i}", id=f"a{i}")]
    hybrid = Hybrid(100, keep_recent=3, chunk_size=4, summarizer=FakeSummarizer(), compact_to=1.0)
    alone = run(hybrid, history, counter=counter)
    piped = run(Pipeline([PruneToolOutputs(), hybrid], max_tokens=100), history, counter=counter)
    assert [m.id for m in piped.messages] == [m.id for m in alone.messages]
    assert piped.kept == alone.kept
    # Every message of the history is kept, dropped, summarized or pruned: none is missing.
    ids = [m.id for m in history]
    accounted = set(piped.kept) | set(piped.pruned)
    for a, b in (*piped.dropped_ranges, *piped.summarized_ranges):
        accounted |= set(ids[a:b])
    assert accounted == set(ids)
