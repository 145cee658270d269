"""Running token totals kept by the stores, and the memory that opens in O(window) with them.

Each test runs on every store (in-memory, SQLite, single-node Redis, Redis Cluster,
PostgreSQL when configured). A memory opened on a long stored conversation must know its
total at the first build without reading the log, the total must be exactly the count of the
stored messages, and a tally must never claim messages it did not count.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from contextfold import ConversationMemory, SlidingWindow
from contextfold.errors import ConfigError
from contextfold.messages import Message
from contextfold.stores import SQLiteStore, open_store
from contextfold.stores.base import Tally, has_async_tally_log, has_tally_log
from contextfold.tokens import ApproxCounter, tally_name


def cid() -> str:
    return "tally-" + uuid.uuid4().hex[:10]


def chat(n: int) -> list[Message]:
    return [
        Message.user(f"question {i} about order {i}")
        if i % 2 == 0
        else Message.assistant(
            f"answer {i}: the order ships tomorrow with tracking number {1000 + i}"
        )
        for i in range(n)
    ]


def test_every_store_keeps_running_totals(store: Any) -> None:
    assert has_tally_log(store)
    assert has_async_tally_log(store)


def test_a_counted_append_moves_the_tally_by_what_it_stored(store: Any) -> None:
    c = cid()
    a, b, d = Message.user("a"), Message.user("b"), Message.user("d")
    assert store.load_tally(c, "k") is None
    assert store.append_counted(c, [a, b], counter="k", tokens=[3, 4]) == [1, 2]
    assert store.load_tally(c, "k") == Tally(2, 7)
    # A retried message is acknowledged and adds nothing; the new one adds its count.
    assert store.append_counted(c, [b, d], counter="k", tokens=[4, 5]) == [2, 3]
    assert store.load_tally(c, "k") == Tally(3, 12)
    assert store.load_tally(c, "other") is None


def test_a_tally_that_fell_behind_is_not_moved_by_a_partial_sum(store: Any) -> None:
    c = cid()
    store.append_counted(c, [Message.user("a")], counter="k", tokens=[2])
    store.append(c, [Message.user("uncounted")])
    store.append_counted(c, [Message.user("b")], counter="k", tokens=[9])
    assert store.load_tally(c, "k") == Tally(1, 2)  # still exact, for seqs 1..1


def test_save_tally_never_moves_back_nor_past_the_log(store: Any) -> None:
    c = cid()
    store.save_tally(c, "k", Tally(1, 5))  # no such message yet
    assert store.load_tally(c, "k") is None
    store.append(c, chat(4))
    store.save_tally(c, "k", Tally(5, 50))
    assert store.load_tally(c, "k") is None
    store.save_tally(c, "k", Tally(3, 30))
    store.save_tally(c, "k", Tally(2, 20))  # behind what is kept: ignored
    assert store.load_tally(c, "k") == Tally(3, 30)
    store.save_tally(c, "k", Tally(4, 41))
    assert store.load_tally(c, "k") == Tally(4, 41)


def test_delete_drops_the_tallies(store: Any) -> None:
    c = cid()
    store.append_counted(c, chat(3), counter="k", tokens=[1, 1, 1])
    store.delete(c)
    assert store.load_tally(c, "k") is None
    store.append_counted(c, chat(2), counter="k", tokens=[2, 2])
    assert store.load_tally(c, "k") == Tally(2, 4)


def test_bad_counts_are_refused_and_store_nothing(store: Any) -> None:
    c = cid()
    with pytest.raises(ConfigError, match="2 counts for 1 messages"):
        store.append_counted(c, [Message.user("a")], counter="k", tokens=[1, 2])
    with pytest.raises(ConfigError, match="non-negative"):
        store.append_counted(c, [Message.user("a")], counter="k", tokens=[-1])
    with pytest.raises(ConfigError, match="counter"):
        store.append_counted(c, [Message.user("a")], counter="", tokens=[1])
    with pytest.raises(ConfigError, match="Tally"):
        store.save_tally(c, "k", (1, 2))
    assert store.last_seq(c) == 0


def test_async_counted_appends_keep_the_same_tally(backend: Any) -> None:
    c = cid()

    async def scenario() -> Tally | None:
        store = open_store(backend.url, **backend.options) if backend.shared is None else None
        s = store or backend.shared
        try:
            await s.aappend_counted(c, chat(2), counter="k", tokens=[5, 6])
            await s.asave_tally(c, "k", Tally(1, 99))  # behind: ignored
            return await s.aload_tally(c, "k")
        finally:
            if store is not None:
                await store.aclose()

    assert asyncio.run(scenario()) == Tally(2, 11)


class Counting:
    """Wraps a store and counts the message rows its reads return."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.rows = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def read(self, conversation_id: str, /, **kwargs: Any) -> Any:
        rows = self.inner.read(conversation_id, **kwargs)
        self.rows += len(rows)
        return rows


def test_a_reopened_memory_knows_its_total_without_reading_the_log(store: Any) -> None:
    c = cid()
    writer = ConversationMemory(store=store, conversation_id=c, strategy=SlidingWindow(300))
    for i in range(0, 600, 50):
        writer.extend(chat(600)[i : i + 50])
    truth = ApproxCounter().count_messages([s.message for s in store.read(c)])
    counting = Counting(store)
    reader = ConversationMemory.open(counting, conversation_id=c, strategy=SlidingWindow(300))
    stats = reader.build_context().stats
    assert stats.total_tokens == truth
    assert stats.tokens_saved == truth - stats.current_tokens
    assert counting.rows < 100  # the window's pages, never the 600 messages


def test_a_log_written_without_counts_is_counted_once_then_kept(store: Any) -> None:
    c = cid()
    store.append(c, chat(300))
    first = ConversationMemory.open(store, conversation_id=c, strategy=SlidingWindow(300))
    stats = first.build_context().stats
    assert stats.total_tokens is None  # unknown, not guessed
    truth = first.count_totals(stats).total_tokens
    assert truth == first.counter.count_messages([s.message for s in store.read(c)])
    assert store.load_tally(c, tally_name(first.counter)) == Tally(300, truth)
    first.add(Message.user("one more"))
    counting = Counting(store)
    second = ConversationMemory.open(counting, conversation_id=c, strategy=SlidingWindow(300))
    assert second.build_context().stats.total_tokens == first.count_history()
    assert counting.rows < 100


def test_another_counter_never_reads_this_counters_total(store: Any) -> None:
    c = cid()
    writer = ConversationMemory(store=store, conversation_id=c)
    writer.extend(chat(40))
    other = ApproxCounter(chars_per_token=2.0)
    reader = ConversationMemory.open(
        store, conversation_id=c, strategy=SlidingWindow(100), counter=other
    )
    stats = reader.build_context().stats
    counted = reader.count_totals(stats).total_tokens
    assert counted == other.count_messages([s.message for s in store.read(c)])
    assert counted != writer.count_history()


def test_counters_without_a_plain_key_keep_no_total() -> None:
    class Opaque(ApproxCounter):
        @property
        def cache_key(self) -> Any:
            return object()

    assert tally_name(Opaque()) is None
    assert tally_name(ApproxCounter()) == tally_name(ApproxCounter())
    assert tally_name(ApproxCounter()) != tally_name(ApproxCounter(chars_per_token=3.0))


def test_an_older_sqlite_file_gets_the_tallies_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SQLiteStore(f"sqlite:///{path}")
    store.append("c", chat(3))
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE contextfold_tallies")
        conn.execute("DELETE FROM contextfold_schema WHERE version = 6")
    store = SQLiteStore(f"sqlite:///{path}")
    store.append_counted("c", chat(1), counter="k", tokens=[4])
    assert store.load_tally("c", "k") is None  # the three older messages were never counted
    store.save_tally("c", "k", Tally(4, 40))
    assert store.load_tally("c", "k") == Tally(4, 40)
    store.close()


def test_a_tally_far_behind_is_caught_up_on_request_not_in_a_build() -> None:
    from contextfold.stores import InMemoryStore

    store = InMemoryStore()
    c = cid()
    ConversationMemory(store=store, conversation_id=c).extend(chat(10))  # tally at 10
    store.append(c, chat(5000)[10:])  # 4,990 more without counts
    counting = Counting(store)
    reader = ConversationMemory.open(counting, conversation_id=c, strategy=SlidingWindow(300))
    for _ in range(2):
        assert reader.build_context().stats.total_tokens is None
        assert counting.rows < 200  # builds read the window only, never the gap
    truth = reader.counter.count_messages([s.message for s in store.read(c)])
    counting.rows = 0
    assert reader.count_history() == truth
    assert counting.rows <= 5000 - 10  # counted from the tally on, not from the start
    assert store.load_tally(c, tally_name(reader.counter)) == Tally(5000, truth)


def test_a_counter_that_recalibrates_stops_keeping_its_total() -> None:
    from contextfold.stores import InMemoryStore
    from contextfold.tokens import CalibratedCounter

    store = InMemoryStore()
    c = cid()
    counter = CalibratedCounter(ApproxCounter())
    memory = ConversationMemory(store=store, conversation_id=c, counter=counter)
    memory.extend(chat(4))
    first = tally_name(counter)
    assert first is not None
    assert store.load_tally(c, first) == Tally(4, counter.count_messages(chat_of(store, c)))
    kept = store.load_tally(c, first)
    sent = chat_of(store, c)
    assert counter.observe(sent, int(ApproxCounter().count_messages(sent) * 1.2)) is not None
    now = tally_name(counter)
    assert now is not None
    assert now != first  # the ratio moved: another configuration
    memory.extend(chat(6)[4:])
    assert store.load_tally(c, first) == kept  # not moved by counts of the new ratio
    assert store.load_tally(c, now) is None  # nor anything started under the new name


def chat_of(store: Any, c: str) -> list[Message]:
    return [s.message for s in store.read(c)]
