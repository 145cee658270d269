"""The three small store protocols, their TypeGuards, and a store made of a bare MessageLog."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from contextfold import ConversationMemory
from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConfigError
from contextfold.messages import Message
from contextfold.stores import (
    AsyncCheckpointLog,
    AsyncCompactionLock,
    AsyncMessageLog,
    AsyncPartialStore,
    AsyncStore,
    CheckpointLog,
    CompactionLock,
    InMemoryStore,
    MessageLog,
    PartialStore,
    Store,
    StoredMessage,
    as_async_store,
    as_store,
    has_async_checkpoints,
    has_async_compaction_lock,
    has_checkpoints,
    has_compaction_lock,
)


class ListLog:
    """A MessageLog and nothing more: what a user might write over their own database."""

    def __init__(self) -> None:
        self.logs: dict[str, list[Message]] = {}
        self.closed = False

    def append(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        log = self.logs.setdefault(conversation_id, [])
        first = len(log) + 1
        log.extend(messages)
        return list(range(first, len(log) + 1))

    def read(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        log = self.logs.get(conversation_id, [])
        end = None if limit is None else after_seq + limit
        return [StoredMessage(after_seq + 1 + i, m) for i, m in enumerate(log[after_seq:end])]

    def last_seq(self, conversation_id: str, /) -> int:
        return len(self.logs.get(conversation_id, []))

    def list_conversations(self) -> list[str]:
        return sorted(self.logs)

    def delete(self, conversation_id: str, /) -> None:
        self.logs.pop(conversation_id, None)

    def close(self) -> None:
        self.closed = True


class AsyncListLog:
    """The async twin of :class:`ListLog`."""

    def __init__(self) -> None:
        self.sync = ListLog()

    async def aappend(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        return self.sync.append(conversation_id, messages)

    async def aread(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        return self.sync.read(conversation_id, after_seq=after_seq, limit=limit)

    async def alast_seq(self, conversation_id: str, /) -> int:
        return self.sync.last_seq(conversation_id)

    async def alist_conversations(self) -> list[str]:
        return self.sync.list_conversations()

    async def adelete(self, conversation_id: str, /) -> None:
        self.sync.delete(conversation_id)

    async def aclose(self) -> None:
        self.sync.close()


def test_every_backend_is_all_three_protocols_in_both_flavours(store: Any) -> None:
    for protocol in (MessageLog, CheckpointLog, CompactionLock, Store):
        assert isinstance(store, protocol)
    for protocol in (AsyncMessageLog, AsyncCheckpointLog, AsyncCompactionLock, AsyncStore):
        assert isinstance(store, protocol)
    assert has_checkpoints(store)
    assert has_compaction_lock(store)
    assert has_async_checkpoints(store)
    assert has_async_compaction_lock(store)


def test_a_bare_message_log_is_not_a_store_until_completed() -> None:
    log = ListLog()
    assert isinstance(log, MessageLog)
    assert not isinstance(log, Store)
    assert not has_checkpoints(log)
    assert not has_compaction_lock(log)
    store = as_store(log)
    assert isinstance(store, PartialStore)
    assert isinstance(store, Store)
    assert not isinstance(store, AsyncStore)  # a sync log gives a sync store
    full = InMemoryStore()
    assert as_store(full) is full
    with pytest.raises(ConfigError):
        PartialStore(object())  # type: ignore[arg-type]


def test_a_partial_store_keeps_no_checkpoints_and_always_grants_the_lock() -> None:
    store = as_store(ListLog())
    assert store.append("c", [Message.user("a"), Message.user("b")]) == [1, 2]
    record = CheckpointRecord(summary="s", last_covered_id="x", last_covered_seq=1)
    assert store.append_checkpoint("c", record, expected_previous=None) is record
    assert store.latest_checkpoint("c") is None
    assert store.checkpoints("c") == []
    with store.compaction_lock("c") as first, store.compaction_lock("c") as second:
        assert first
        assert second
    with pytest.raises(ConfigError), store.compaction_lock("c", ttl=0):
        pass
    store.close()


def test_a_partial_store_uses_the_abilities_the_log_has() -> None:
    class LogWithCheckpoints(ListLog):
        def __init__(self) -> None:
            super().__init__()
            self.inner = InMemoryStore()

        def append_checkpoint(
            self, conversation_id: str, checkpoint: CheckpointRecord, /, *, expected_previous: Any
        ) -> CheckpointRecord:
            self.inner.append(conversation_id, [Message.user("x")])
            return self.inner.append_checkpoint(
                conversation_id, checkpoint, expected_previous=expected_previous
            )

        def latest_checkpoint(self, conversation_id: str, /) -> CheckpointRecord | None:
            return self.inner.latest_checkpoint(conversation_id)

        def checkpoints(self, conversation_id: str, /) -> list[CheckpointRecord]:
            return self.inner.checkpoints(conversation_id)

    log = LogWithCheckpoints()
    assert has_checkpoints(log)
    assert not has_compaction_lock(log)
    store = as_store(log)
    record = CheckpointRecord(summary="s", last_covered_id="x", last_covered_seq=1)
    store.append_checkpoint("c", record, expected_previous=None)
    assert store.latest_checkpoint("c") == record
    assert [k.id for k in store.checkpoints("c")] == [record.id]


def test_a_memory_runs_on_a_bare_message_log() -> None:
    log = ListLog()
    memory = ConversationMemory(store=as_store(log), conversation_id="c")
    memory.extend([Message.system("be brief"), Message.user("hi"), Message.assistant("hello")])
    assert [m.text for m in memory.build_context()] == ["be brief", "hi", "hello"]
    assert log.last_seq("c") == 3


async def test_an_async_message_log_completes_to_an_async_store() -> None:
    log = AsyncListLog()
    assert isinstance(log, AsyncMessageLog)
    assert not isinstance(log, AsyncStore)
    store = as_async_store(log)
    assert isinstance(store, AsyncPartialStore)
    assert isinstance(store, AsyncStore)
    assert await store.aappend("c", [Message.user("a")]) == [1]
    assert [s.seq for s in await store.aread("c")] == [1]
    record = CheckpointRecord(summary="s", last_covered_id="x", last_covered_seq=1)
    assert await store.aappend_checkpoint("c", record, expected_previous=None) is record
    assert await store.alatest_checkpoint("c") is None
    assert await store.acheckpoints("c") == []
    async with store.acompaction_lock("c") as taken:
        assert taken
    memory = await ConversationMemory.aopen(store, conversation_id="c")
    assert [m.text for m in await memory.abuild_context()] == ["a"]
    await store.aclose()
    assert log.sync.closed
