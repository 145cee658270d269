"""A checkpoint that ends on a tool result: later builds read from that result onwards."""

from __future__ import annotations

from contextfold import ConversationMemory, Message, Summarization, ToolCallPart, ToolResultPart
from contextfold.testing import FakeSummarizer, FixedCounter
from contextfold.turns import validate


def _lookup(i: int, size: int) -> list[Message]:
    return [
        Message.user(f"q{i} please check order {i}"),
        Message("assistant", (ToolCallPart(f"call{i}", "lookup", '{"x":1}'),)),
        Message("tool", (ToolResultPart(f"call{i}", "R" * size),)),
        Message.assistant(f"answer {i}"),
    ]


def test_builds_after_a_checkpoint_ending_on_a_tool_result_keep_working() -> None:
    counter = FixedCounter(2, per_char=1)
    strategy = Summarization(
        max_tokens=300, keep_recent=4, summarizer=FakeSummarizer(text="S" * 20)
    )
    memory = ConversationMemory(strategy=strategy, counter=counter)
    chat = [Message.system("sys prompt")]
    for i, (q, a) in enumerate([(40, 35), (23, 17), (35, 14), (13, 16), (6, 18)]):
        chat += [Message.user(f"q{i} " + "w" * q), Message.assistant(f"a{i} " + "v" * a)]
    memory.extend([*chat, *_lookup(5, 57), *_lookup(6, 73)])
    assert memory.build_context().stats.compacted
    covered = memory.store.latest_checkpoint(memory.conversation_id).last_covered_seq
    assert memory.read_messages()[covered - 1].role == "tool"  # the case under test
    memory.extend([Message.user("q7 " + "w" * 15), Message.assistant("a7 " + "v" * 25)])
    for _ in range(2):
        ctx = memory.build_context()  # raised PairingError: the result's call was never read
        validate(list(ctx.messages))
        assert ctx.stats.current_tokens <= 300


def test_a_pipeline_builds_after_a_checkpoint_ending_on_a_tool_result() -> None:
    from contextfold import Hybrid, Pipeline, PruneToolOutputs

    counter = FixedCounter(10, per_char=0)
    hybrid = Hybrid(
        80,
        keep_recent=2,
        chunk_size=3,
        max_chunks=1,
        compact_to=1.0,
        summarizer=FakeSummarizer(),
    )
    memory = ConversationMemory(
        strategy=Pipeline([PruneToolOutputs(), hybrid], max_tokens=80), counter=counter
    )
    history = [
        Message.system("s", id="s"),
        Message.user("u0", id="u0"),
        Message("assistant", (ToolCallPart("c0", "lookup", "{}"),), id="a0"),
        Message("tool", (ToolResultPart("c0", "out"),), id="t0"),
        Message.assistant("b0", id="b0"),
    ]
    for i in range(1, 5):
        history += [Message.user(f"u{i}", id=f"u{i}"), Message.assistant(f"a{i}", id=f"a{i}")]
    memory.extend(history)
    first = memory.build_context()
    assert first.checkpoint is not None
    assert first.checkpoint.last_covered_id == "t0"  # the case under test
    memory.extend([Message.user("next", id="u9"), Message.assistant("ok", id="a9")])
    second = memory.build_context()  # the prune stage raised PairingError on the view
    validate(list(second.messages))
    assert [m.id for m in second.messages][-2:] == ["u9", "a9"]
