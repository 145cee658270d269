"""Opening a compacted conversation reads what the budget needs, not the whole history."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from contextfold.memory import ConversationMemory
from contextfold.messages import Message
from contextfold.stores.base import StoredMessage
from contextfold.stores.memory import InMemoryStore
from contextfold.strategies.base import Strategy
from contextfold.strategies.checkpoint import Checkpoint
from contextfold.strategies.compactor import SummaryCompactor
from contextfold.strategies.hybrid import Hybrid
from contextfold.strategies.pipeline import Pipeline
from contextfold.strategies.prune import PruneToolOutputs
from contextfold.strategies.sliding import SlidingWindow
from contextfold.strategies.summarization import Summarization
from contextfold.testing import FakeSummarizer

BUDGET = 1500
SUMMARY = "The user asked many questions about orders; every one was answered."


class CountingStore(InMemoryStore):
    """An in-memory store that counts the message rows it hands out."""

    rows_read = 0

    def read(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        rows = super().read(conversation_id, after_seq=after_seq, limit=limit)
        self.rows_read += len(rows)
        return rows


def _fake() -> FakeSummarizer:
    return FakeSummarizer(SUMMARY)


MAKERS: dict[str, Callable[[], Strategy]] = {
    "sliding": lambda: SlidingWindow(BUDGET),
    "summarization": lambda: Summarization(BUDGET, keep_recent=6, summarizer=_fake()),
    "hybrid": lambda: Hybrid(
        BUDGET, keep_recent=6, chunk_size=200, summarizer=_fake(), max_chunks=64
    ),
    "checkpoint": lambda: Checkpoint(_fake(), max_tokens=BUDGET),
    "compactor": lambda: SummaryCompactor(_fake(), keep_recent_turns=3, budget_chars=4 * BUDGET),
    "pipeline": lambda: Pipeline(
        [PruneToolOutputs(), Summarization(BUDGET, keep_recent=6, summarizer=_fake())],
        max_tokens=BUDGET,
    ),
}


def _chat(n: int) -> list[Message]:
    out = [Message.system("You are a support agent.")]
    i = 0
    while len(out) < n:
        out.append(Message.user(f"question {i}: " + "about my order " * 6))
        out.append(Message.assistant(f"answer {i}: " + "here is the status " * 5))
        i += 1
    return out


def _rows_read_on_open(make: Callable[[], Strategy], messages: Sequence[Message]) -> int:
    store = CountingStore()
    store.append("c", list(messages))
    writer = ConversationMemory(strategy=make(), store=store, conversation_id="c")
    for _ in range(200):  # until the strategy stops compacting
        if not writer.build_context().stats.compacted:
            break
    store.rows_read = 0
    reopened = ConversationMemory.open(store, conversation_id="c", strategy=make())
    context = reopened.build_context()
    assert not context.stats.compacted
    return store.rows_read


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_opening_a_compacted_conversation_reads_a_bounded_number_of_rows(name: str) -> None:
    small = _rows_read_on_open(MAKERS[name], _chat(400))
    large = _rows_read_on_open(MAKERS[name], _chat(4000))
    assert large <= small + 40, f"{name}: {small} rows at 400 messages, {large} at 4,000"


def test_the_notes_account_for_every_message_a_windowed_read_leaves_out() -> None:
    import re

    from contextfold import ConversationMemory, Message, SlidingWindow
    from contextfold.stores import InMemoryStore

    store = InMemoryStore()
    turns = [Message.system("sys")]
    for i in range(150):
        turns += [Message.user(f"question {i} about things"), Message.assistant(f"answer {i}")]
    store.append("c", turns)
    memory = ConversationMemory.open(store, conversation_id="c", strategy=SlidingWindow(200))
    stats = memory.build_context().stats
    said = [int(n) for note in stats.notes for n in re.findall(r"(\d+) older", note)]
    assert sum(said) == stats.dropped_count > 250
