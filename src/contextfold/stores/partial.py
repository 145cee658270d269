"""A full store over one that only implements part of the contract.

A backend written outside contextfold may implement only a
:class:`~contextfold.stores.base.MessageLog` (append, read, last_seq, list, delete, close).
:func:`as_store` makes a :class:`~contextfold.stores.base.Store` of it, which
:class:`~contextfold.memory.ConversationMemory` accepts. What then works:

* building contexts, adding messages, reading history, deleting: everything the log offers;
* checkpoints: the log's own when it has them (:func:`~contextfold.stores.base.has_checkpoints`);
  otherwise a commit is accepted and dropped and ``latest_checkpoint`` is always ``None``, so
  no summary is reused: every compaction summarizes its span again;
* the compaction lock: the log's own when it has one; otherwise it is always granted, so two
  processes may compact the same conversation at once (each result is still valid, only work
  is duplicated).

:func:`as_async_store` does the same for an :class:`~contextfold.stores.base.AsyncMessageLog`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)

from contextfold.checkpoints import CheckpointRecord
from contextfold.messages import Message
from contextfold.stores._checks import check_ttl
from contextfold.stores._codec import encode_checkpoint
from contextfold.stores.base import (
    AsyncMessageLog,
    AsyncStore,
    MessageLog,
    Store,
    StoreConfigError,
    StoredMessage,
    has_async_checkpoints,
    has_async_compaction_lock,
    has_checkpoints,
    has_compaction_lock,
)

__all__ = ["AsyncPartialStore", "PartialStore", "as_async_store", "as_store"]


@contextmanager
def _always_granted(ttl: float) -> Iterator[bool]:
    check_ttl(ttl)
    yield True


@asynccontextmanager
async def _always_granted_async(ttl: float) -> AsyncIterator[bool]:
    check_ttl(ttl)
    yield True


class PartialStore:
    """A :class:`Store` over a :class:`MessageLog` (see the module docs for what works)."""

    def __init__(self, log: MessageLog) -> None:
        if not isinstance(log, MessageLog):
            raise StoreConfigError(
                f"PartialStore needs a MessageLog, got {type(log).__name__}", argument="log"
            )
        self.log = log

    def append(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        """The log's append."""
        return self.log.append(conversation_id, messages)

    def read(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """The log's read."""
        return self.log.read(conversation_id, after_seq=after_seq, limit=limit)

    def last_seq(self, conversation_id: str, /) -> int:
        """The log's last_seq."""
        return self.log.last_seq(conversation_id)

    def list_conversations(self) -> list[str]:
        """The log's list_conversations."""
        return self.log.list_conversations()

    def delete(self, conversation_id: str, /) -> None:
        """The log's delete."""
        self.log.delete(conversation_id)

    def close(self) -> None:
        """The log's close."""
        self.log.close()

    def append_checkpoint(
        self,
        conversation_id: str,
        checkpoint: CheckpointRecord,
        /,
        *,
        expected_previous: str | None,
    ) -> CheckpointRecord:
        """The log's commit, or (without checkpoints) check the record and drop it."""
        if has_checkpoints(self.log):
            return self.log.append_checkpoint(
                conversation_id, checkpoint, expected_previous=expected_previous
            )
        encode_checkpoint(checkpoint)
        return checkpoint

    def latest_checkpoint(self, conversation_id: str, /) -> CheckpointRecord | None:
        """The log's newest checkpoint, or ``None`` when it keeps none."""
        if has_checkpoints(self.log):
            return self.log.latest_checkpoint(conversation_id)
        return None

    def checkpoints(self, conversation_id: str, /) -> list[CheckpointRecord]:
        """The log's checkpoints, or ``[]`` when it keeps none."""
        if has_checkpoints(self.log):
            return self.log.checkpoints(conversation_id)
        return []

    def compaction_lock(
        self, conversation_id: str, /, *, ttl: float = 120.0
    ) -> AbstractContextManager[bool]:
        """The log's lock, or one that is always granted."""
        if has_compaction_lock(self.log):
            return self.log.compaction_lock(conversation_id, ttl=ttl)
        return _always_granted(ttl)

    def __repr__(self) -> str:
        return f"PartialStore({self.log!r})"


class AsyncPartialStore:
    """An :class:`AsyncStore` over an :class:`AsyncMessageLog` (see the module docs)."""

    def __init__(self, log: AsyncMessageLog) -> None:
        if not isinstance(log, AsyncMessageLog):
            raise StoreConfigError(
                f"AsyncPartialStore needs an AsyncMessageLog, got {type(log).__name__}",
                argument="log",
            )
        self.log = log

    async def aappend(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        """The log's aappend."""
        return await self.log.aappend(conversation_id, messages)

    async def aread(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """The log's aread."""
        return await self.log.aread(conversation_id, after_seq=after_seq, limit=limit)

    async def alast_seq(self, conversation_id: str, /) -> int:
        """The log's alast_seq."""
        return await self.log.alast_seq(conversation_id)

    async def alist_conversations(self) -> list[str]:
        """The log's alist_conversations."""
        return await self.log.alist_conversations()

    async def adelete(self, conversation_id: str, /) -> None:
        """The log's adelete."""
        await self.log.adelete(conversation_id)

    async def aclose(self) -> None:
        """The log's aclose."""
        await self.log.aclose()

    async def aappend_checkpoint(
        self,
        conversation_id: str,
        checkpoint: CheckpointRecord,
        /,
        *,
        expected_previous: str | None,
    ) -> CheckpointRecord:
        """The log's commit, or (without checkpoints) check the record and drop it."""
        if has_async_checkpoints(self.log):
            return await self.log.aappend_checkpoint(
                conversation_id, checkpoint, expected_previous=expected_previous
            )
        encode_checkpoint(checkpoint)
        return checkpoint

    async def alatest_checkpoint(self, conversation_id: str, /) -> CheckpointRecord | None:
        """The log's newest checkpoint, or ``None`` when it keeps none."""
        if has_async_checkpoints(self.log):
            return await self.log.alatest_checkpoint(conversation_id)
        return None

    async def acheckpoints(self, conversation_id: str, /) -> list[CheckpointRecord]:
        """The log's checkpoints, or ``[]`` when it keeps none."""
        if has_async_checkpoints(self.log):
            return await self.log.acheckpoints(conversation_id)
        return []

    def acompaction_lock(
        self, conversation_id: str, /, *, ttl: float = 120.0
    ) -> AbstractAsyncContextManager[bool]:
        """The log's lock, or one that is always granted."""
        if has_async_compaction_lock(self.log):
            return self.log.acompaction_lock(conversation_id, ttl=ttl)
        return _always_granted_async(ttl)

    def __repr__(self) -> str:
        return f"AsyncPartialStore({self.log!r})"


def as_store(log: MessageLog) -> Store:
    """``log`` itself when it is a full :class:`Store`, else a :class:`PartialStore` over it."""
    if isinstance(log, Store):
        return log
    return PartialStore(log)


def as_async_store(log: AsyncMessageLog) -> AsyncStore:
    """``log`` itself when it is a full :class:`AsyncStore`, else an :class:`AsyncPartialStore`."""
    if isinstance(log, AsyncStore):
        return log
    return AsyncPartialStore(log)
