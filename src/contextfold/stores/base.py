"""The store contract: an append-only log of messages and checkpoints per conversation.

Every conversation has a monotonically increasing message sequence (1, 2, 3 ... with no gaps
or duplicates, even with many writers). Messages are never updated or deleted one by one;
compaction appends a :class:`~contextfold.checkpoints.CheckpointRecord`. A checkpoint commit
names the checkpoint it builds on (``expected_previous``) and the newest sequence it covers;
the store rejects it with :class:`~contextfold.errors.ConflictError` when either changed
underneath it. :meth:`Store.compaction_lock` makes compaction of one conversation
single-flight across processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from contextfold.checkpoints import CheckpointRecord
from contextfold.messages import Message

__all__ = ["AsyncStore", "Store", "StoredMessage"]


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message with its position in the conversation's log."""

    seq: int
    message: Message


@runtime_checkable
class Store(Protocol):
    """Synchronous store."""

    def append(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        """Append atomically; return the sequence numbers given, in order."""
        ...

    def read(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after_seq``, oldest first (an unknown id reads as empty)."""
        ...

    def last_seq(self, conversation_id: str, /) -> int:
        """The newest sequence number, 0 for an empty or unknown conversation."""
        ...

    def append_checkpoint(
        self,
        conversation_id: str,
        checkpoint: CheckpointRecord,
        /,
        *,
        expected_previous: str | None,
    ) -> CheckpointRecord:
        """Commit a checkpoint.

        Raises:
            ConflictError: the latest checkpoint is not ``expected_previous``, or
                ``checkpoint.last_covered_seq`` is missing or beyond the log.
        """
        ...

    def latest_checkpoint(self, conversation_id: str, /) -> CheckpointRecord | None:
        """The newest committed checkpoint, if any."""
        ...

    def checkpoints(self, conversation_id: str, /) -> list[CheckpointRecord]:
        """Every committed checkpoint, oldest first."""
        ...

    def compaction_lock(
        self, conversation_id: str, /, *, ttl: float = 120.0
    ) -> AbstractContextManager[bool]:
        """Try to take the single-flight compaction lock; yields whether it was taken.

        The lock expires after ``ttl`` seconds so a crashed holder cannot block forever.
        """
        ...

    def list_conversations(self) -> list[str]:
        """Ids of the stored conversations, sorted."""
        ...

    def delete(self, conversation_id: str, /) -> None:
        """Remove a conversation with its checkpoints (the one non-append operation)."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


@runtime_checkable
class AsyncStore(Protocol):
    """Asynchronous store: the same operations with an ``a`` prefix."""

    async def aappend(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]: ...

    async def aread(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]: ...

    async def alast_seq(self, conversation_id: str, /) -> int: ...

    async def aappend_checkpoint(
        self,
        conversation_id: str,
        checkpoint: CheckpointRecord,
        /,
        *,
        expected_previous: str | None,
    ) -> CheckpointRecord: ...

    async def alatest_checkpoint(self, conversation_id: str, /) -> CheckpointRecord | None: ...

    async def acheckpoints(self, conversation_id: str, /) -> list[CheckpointRecord]: ...

    def acompaction_lock(
        self, conversation_id: str, /, *, ttl: float = 120.0
    ) -> AbstractAsyncContextManager[bool]: ...

    async def alist_conversations(self) -> list[str]: ...

    async def adelete(self, conversation_id: str, /) -> None: ...

    async def aclose(self) -> None: ...
