"""Recall under ConversationMemory: the store's search reaches what the bounded read skips."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from pathlib import Path
from typing import Any

import pytest

from contextfold import (
    Checkpoint,
    ConfigError,
    ConversationMemory,
    ExtractiveSummarizer,
    Message,
    Recall,
    SlidingWindow,
    StoreError,
)
from contextfold.memory._ops import Read
from contextfold.stores import InMemoryStore, open_store
from contextfold.stores.base import MessageLog, StoredMessage
from contextfold.stores.partial import as_store
from contextfold.stores.sqlite import SQLiteStore
from semantic_helpers import BrokenEmbedder, ConceptEmbedder

QUESTION = "What is the locker code for room 12?"


def fill(memory: ConversationMemory, n: int = 80) -> None:
    memory.add(Message.system("You are helpful."))
    for i in range(n):
        memory.add(Message.user(f"Fact {i}: my locker code for room {i} is K{i * 7}."))
        memory.add(Message.assistant(f"Noted room {i}."))


def recalled_text(ctx: Any) -> str:
    return "\n".join(p.text for p in ctx.messages[-1].parts if p.kind == "text")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        yield InMemoryStore()
    else:
        s = open_store(f"sqlite:///{tmp_path / 'recall.db'}")
        yield s
        s.close()


def test_a_bounded_window_recalls_from_the_unread_log(store: Any) -> None:
    memory = ConversationMemory(strategy=Recall(SlidingWindow(300)), store=store)
    fill(memory)
    memory.add(Message.user(QUESTION))
    ctx = memory.build_context()
    text = recalled_text(ctx)
    assert "K84" in text
    assert "#26]" in text  # the store's sequence number
    assert 26 in ctx.stats.recalled
    assert ctx.stats.as_dict()["recalled"] == list(ctx.stats.recalled)
    assert ctx.stats.current_tokens <= 300
    assert any(n.startswith("recall: ") for n in ctx.stats.notes)


def test_only_a_bounded_tail_is_read(store: Any) -> None:
    seen: list[Read] = []
    memory = ConversationMemory(strategy=Recall(SlidingWindow(300)), store=store)
    fill(memory, 400)
    memory.add(Message.user(QUESTION))
    fresh = ConversationMemory(
        strategy=Recall(SlidingWindow(300)), store=store, conversation_id=memory.conversation_id
    )
    core = fresh._core
    original = core._read

    def spy(after_seq: int, limit: int) -> Any:
        seen.append(Read(after_seq, limit))
        return original(after_seq, limit)

    core._read = spy  # type: ignore[method-assign]
    ctx = fresh.build_context()
    assert "K84" in recalled_text(ctx)
    assert sum(r.limit or 0 for r in seen) < 300  # of 802 stored messages


class CountingStore(SQLiteStore):
    """A SQLite store that counts its span reads and may leave a message out of them."""

    def __init__(self, path: Path, *, drop_one: bool = False) -> None:
        super().__init__(path)
        self.span_reads: list[list[tuple[int, int]]] = []
        self.drop_one = drop_one

    def read_spans(self, conversation_id: str, spans: Any, /) -> list[StoredMessage]:
        self.span_reads.append(list(spans))
        rows = super().read_spans(conversation_id, spans)
        return rows[1:] if self.drop_one else rows


def test_the_neighbours_of_every_hit_are_read_in_one_call(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "spans.db")
    memory = ConversationMemory(strategy=Recall(SlidingWindow(300)), store=store)
    fill(memory, 400)
    memory.add(Message.user("Which locker codes were for rooms 12 and 40?"))
    ctx = memory.build_context()
    assert {26, 82} <= set(ctx.stats.recalled)
    assert len(store.span_reads) == 1  # every hit's neighbours at once
    runs = store.span_reads[0]
    assert len(runs) >= 2  # runs apart, yet one call
    assert all(b <= c for (_, b), (c, _) in itertools.pairwise(runs))  # in order and apart
    store.close()


def test_a_span_read_missing_a_message_is_a_store_error(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "damaged.db", drop_one=True)
    memory = ConversationMemory(strategy=Recall(SlidingWindow(300)), store=store)
    fill(memory, 200)
    memory.add(Message.user(QUESTION))
    with pytest.raises(StoreError, match="neighbours of search hits"):
        memory.build_context()
    store.close()


def test_checkpoint_reuse_and_recall_together(store: Any) -> None:
    strategy = Recall(Checkpoint(ExtractiveSummarizer(), max_tokens=600))
    memory = ConversationMemory(strategy=strategy, store=store)
    fill(memory)
    memory.add(Message.user("Thanks, next question coming."))
    first = memory.build_context()
    assert first.stats.compacted
    memory.add(Message.assistant("Sure."))
    memory.add(Message.user(QUESTION))
    second = memory.build_context()
    assert second.stats.checkpoint_id == first.stats.checkpoint_id
    assert not second.stats.compacted
    assert "K84" in recalled_text(second)


def test_plan_and_async_build_recall_the_same(store: Any) -> None:
    memory = ConversationMemory(strategy=Recall(SlidingWindow(300)), store=store)
    fill(memory)
    memory.add(Message.user(QUESTION))
    plan = memory.plan()
    assert 26 in plan.stats.recalled
    ctx = asyncio.run(memory.abuild_context())
    assert ctx.stats.recalled == plan.stats.recalled


def test_memory_search_returns_stored_messages_with_seqs(store: Any) -> None:
    memory = ConversationMemory(strategy=SlidingWindow(300), store=store)
    fill(memory, 20)
    hits = memory.search("locker code room 12", limit=3)
    assert isinstance(hits[0], StoredMessage)
    assert 26 in [h.seq for h in hits]  # engines rank "Noted room 12." (27) close to it
    assert hits[0].seq in (26, 27)
    assert 26 in [h.seq for h in asyncio.run(memory.asearch("room 12 locker", limit=3))]
    with pytest.raises(ConfigError) as err:
        memory.search("x", limit=0)
    assert err.value.argument == "limit"
    with pytest.raises(ConfigError):
        memory.search(None)  # type: ignore[arg-type]


class BareLog:
    """A message log with no search ability: the memory reads it whole to search."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()

    def append(self, cid: str, messages: Any, /) -> list[int]:
        return self.inner.append(cid, messages)

    def read(self, cid: str, /, *, after_seq: int = 0, limit: int | None = None) -> Any:
        return self.inner.read(cid, after_seq=after_seq, limit=limit)

    def last_seq(self, cid: str, /) -> int:
        return self.inner.last_seq(cid)

    def list_conversations(self) -> list[str]:
        return self.inner.list_conversations()

    def delete(self, cid: str, /) -> None:
        self.inner.delete(cid)

    def close(self) -> None:
        self.inner.close()


def test_a_store_without_search_is_read_whole_with_a_note() -> None:
    log = BareLog()
    assert isinstance(log, MessageLog)
    memory = ConversationMemory(
        strategy=Recall(SlidingWindow(300)), store=as_store(log), conversation_id=uuid.uuid4().hex
    )
    fill(memory)
    memory.add(Message.user(QUESTION))
    ctx = memory.build_context()
    assert "K84" in recalled_text(ctx)
    assert any("cannot search" in n for n in ctx.stats.notes)
    assert memory.search("room 12 locker K84", limit=1)[0].seq == 26


def test_the_reply_to_a_matching_question_is_recalled_from_the_store(store: Any) -> None:
    for spread, found in ((0.8, True), (0.0, False)):
        memory = ConversationMemory(strategy=Recall(SlidingWindow(300), spread=spread), store=store)
        fill(memory, 60)
        memory.add(Message.assistant("What have you been painting lately, Mel?"))
        memory.add(Message.user("A lake at sunrise, all orange and pink."))
        for i in range(60, 100):
            memory.add(Message.user(f"Fact {i}: my locker code for room {i} is K{i * 7}."))
            memory.add(Message.assistant(f"Noted room {i}."))
        memory.add(Message.user("What did Mel paint lately?"))
        text = recalled_text(memory.build_context())
        assert "painting lately" in text
        assert ("lake at sunrise" in text) is found


def fill_pets(memory: ConversationMemory, pet: str) -> None:
    memory.add(Message.system("You are helpful."))
    for i in range(40):
        memory.add(Message.user(f"Fact {i}: my locker code for room {i} is K{i * 7}."))
        memory.add(Message.assistant(f"Noted room {i}."))
        if i == 10:
            memory.add(Message.user(f"We brought home a puppy from the shelter, a {pet}."))
            memory.add(Message.assistant("Lovely!"))


def test_semantic_recall_from_the_store_embeds_each_message_once(store: Any) -> None:
    embedder = ConceptEmbedder()
    memory = ConversationMemory(strategy=Recall(SlidingWindow(300), embedder=embedder), store=store)
    fill_pets(memory, "beagle")
    memory.add(Message.user("Which dog breed did we get?"))
    ctx = memory.build_context()
    assert "a beagle" in recalled_text(ctx)
    first = len(embedder.embedded)
    assert first > 60  # the query and the unsent log, read once
    memory.add(Message.assistant("A beagle."))
    memory.add(Message.user("And which hound was that again?"))
    assert "a beagle" in recalled_text(memory.build_context())
    # The second search embeds the query and what was stored since, not the log again.
    assert len(embedder.embedded) - first <= 4


def test_one_semantic_recall_serves_many_memories_without_mixing_them(store: Any) -> None:
    strategy = Recall(SlidingWindow(300), embedder=ConceptEmbedder())
    pets = {"ana": "beagle", "ben": "poodle"}
    memories = {
        cid: ConversationMemory(strategy=strategy, store=store, conversation_id=cid) for cid in pets
    }
    for cid, memory in memories.items():
        fill_pets(memory, pets[cid])
        memory.add(Message.user("Which dog breed did we get?"))
    for cid, memory in memories.items():
        text = recalled_text(memory.build_context())
        other = next(p for c, p in pets.items() if c != cid)
        assert f"a {pets[cid]}" in text
        assert other not in text


def test_async_memory_embeds_off_the_loop_and_recalls_the_same(store: Any) -> None:
    embedder = ConceptEmbedder()
    sync = ConversationMemory(strategy=Recall(SlidingWindow(300), embedder=embedder), store=store)
    fill_pets(sync, "beagle")
    sync.add(Message.user("Which dog breed did we get?"))
    again = ConversationMemory(
        strategy=Recall(SlidingWindow(300), embedder=ConceptEmbedder()),
        store=store,
        conversation_id=sync.conversation_id,
    )

    async def build() -> Any:
        return await again.abuild_context()

    assert asyncio.run(build()).messages == sync.build_context().messages


def test_a_failing_embedder_under_a_memory_falls_back_with_a_note(store: Any) -> None:
    memory = ConversationMemory(
        strategy=Recall(SlidingWindow(300), embedder=BrokenEmbedder("raises")), store=store
    )
    fill(memory)
    memory.add(Message.user(QUESTION))
    ctx = memory.build_context()
    assert "K84" in recalled_text(ctx)
    assert any("TimeoutError" in n and "keywords only" in n for n in ctx.stats.notes)
    assert len(memory.read_messages()) == 162  # nothing lost


def test_clearing_a_memory_forgets_its_vectors(store: Any) -> None:
    embedder = ConceptEmbedder()
    memory = ConversationMemory(strategy=Recall(SlidingWindow(300), embedder=embedder), store=store)
    fill_pets(memory, "beagle")
    memory.add(Message.user("Which dog breed did we get?"))
    memory.build_context()
    memory.clear()
    fill_pets(memory, "poodle")
    memory.add(Message.user("Which dog breed did we get?"))
    text = recalled_text(memory.build_context())
    assert "a poodle" in text
    assert "beagle" not in text


class ShrinkingEmbedder(ConceptEmbedder):
    """Gives shorter vectors after its first call, under the same name (a swapped model)."""

    def embed(self, texts: Any, /) -> list[list[float]]:
        full = super().embed(texts)
        return full if len(self.embedded) == len(texts) else [v[:32] for v in full]


def test_an_embedder_changing_its_vector_length_falls_back_and_starts_over(store: Any) -> None:
    memory = ConversationMemory(
        strategy=Recall(SlidingWindow(300), embedder=ShrinkingEmbedder()), store=store
    )
    fill_pets(memory, "beagle")
    memory.add(Message.user("Which dog breed did we get?"))
    assert "a beagle" in recalled_text(memory.build_context())
    memory.add(Message.user("What is the locker code for room 12?"))
    ctx = memory.build_context()
    assert any("length 32" in n and "keywords only" in n for n in ctx.stats.notes)
    assert "K84" in recalled_text(ctx)
    memory.add(Message.user("Which hound was it?"))
    ctx = memory.build_context()  # the index starts over with the new length
    assert not any("keywords only" in n for n in ctx.stats.notes)
