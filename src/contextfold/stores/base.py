"""The store contract: an append-only log of messages and checkpoints per conversation.

Every conversation has a monotonically increasing message sequence (1, 2, 3 ... with no gaps
or duplicates, even with many writers). Messages are never updated or deleted one by one;
compaction appends a :class:`~contextfold.checkpoints.CheckpointRecord`. A checkpoint commit
names the checkpoint it builds on (``expected_previous``) and the newest sequence it covers;
the store rejects it with :class:`~contextfold.errors.ConflictError` when either changed
underneath it. ``compaction_lock`` makes compaction of one conversation single-flight across
processes.

The contract is three small protocols, each with an async twin:

* :class:`MessageLog` / :class:`AsyncMessageLog`: the log itself (the one a store must have);
* :class:`CheckpointLog` / :class:`AsyncCheckpointLog`: committed checkpoints;
* :class:`CompactionLock` / :class:`AsyncCompactionLock`: the single-flight lock;
* :class:`SearchableLog` / :class:`AsyncSearchableLog`: full-text search over the log (what
  :class:`~contextfold.Recall` finds earlier messages with), checked with :func:`has_search`
  and :func:`has_async_search`;
* :class:`TallyLog` / :class:`AsyncTallyLog`: running token totals of the log per token
  counter, kept in the append transaction, so a stored conversation's total is known without
  reading it (checked with :func:`has_tally_log` and :func:`has_async_tally_log`).

:class:`Store` / :class:`AsyncStore` are all three together, which is what
:class:`~contextfold.memory.ConversationMemory` and :func:`~contextfold.stores.open_store`
take; every shipped backend is both. The optional abilities are checked with
:func:`has_checkpoints`, :func:`has_compaction_lock` and their async forms, never by probing
attributes. A backend that only implements a :class:`MessageLog` becomes a :class:`Store` with
:func:`contextfold.stores.partial.as_store` (see there for what then works).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, runtime_checkable

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConfigError, StoreError
from contextfold.messages import Message

__all__ = [
    "AsyncCheckpointLog",
    "AsyncCompactionLock",
    "AsyncMessageLog",
    "AsyncSearchableLog",
    "AsyncSpanReadableLog",
    "AsyncStateLog",
    "AsyncStore",
    "AsyncTallyLog",
    "CheckpointLog",
    "CompactionLock",
    "MessageLog",
    "SearchableLog",
    "SpanReadableLog",
    "Spans",
    "StateLog",
    "Store",
    "StoreConfigError",
    "StoredMessage",
    "Tally",
    "TallyLog",
    "has_async_checkpoints",
    "has_async_compaction_lock",
    "has_async_search",
    "has_async_span_reads",
    "has_async_state_log",
    "has_async_tally_log",
    "has_checkpoints",
    "has_compaction_lock",
    "has_search",
    "has_span_reads",
    "has_state_log",
    "has_tally_log",
]


class StoreConfigError(ConfigError, StoreError):
    """A store URL, target or option the caller got wrong (a bad ttl, a negative pool size).

    A :class:`~contextfold.errors.ConfigError` like every misuse, and also a
    :class:`~contextfold.errors.StoreError`, which is what these mistakes raised before, so
    ``except StoreError`` written against earlier versions keeps catching them.
    """


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message with its position in the conversation's log."""

    seq: int
    message: Message


@runtime_checkable
class MessageLog(Protocol):
    """The append-only message log: the part of the contract every store must have."""

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

    def list_conversations(self) -> list[str]:
        """Ids of the stored conversations, sorted."""
        ...

    def delete(self, conversation_id: str, /) -> None:
        """Remove a conversation with everything kept for it (the one non-append operation)."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


@runtime_checkable
class CheckpointLog(Protocol):
    """Committed checkpoints: what lets a memory reuse a summary instead of redoing it."""

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


@runtime_checkable
class CompactionLock(Protocol):
    """The lock that makes compaction of one conversation single-flight."""

    def compaction_lock(
        self, conversation_id: str, /, *, ttl: float = 120.0
    ) -> AbstractContextManager[bool]:
        """Try to take the single-flight compaction lock; yields whether it was taken.

        The lock expires after ``ttl`` seconds so a crashed holder cannot block forever.
        """
        ...


@runtime_checkable
class StateLog(Protocol):
    """A conversation's strategy state, kept so a restarted process builds the same context.

    The state is small (where a cache-stable window begins, failure streaks) and is
    replaced whole; it is JSON-ready data (see :meth:`StrategyState.to_dict
    <contextfold.strategies.StrategyState.to_dict>`).
    """

    def save_state(self, conversation_id: str, state: Mapping[str, Any], /) -> None:
        """Replace the conversation's saved state."""
        ...

    def load_state(self, conversation_id: str, /) -> dict[str, Any] | None:
        """The saved state, or None when none was saved."""
        ...


@runtime_checkable
class SearchableLog(Protocol):
    """Full-text search over a conversation's log, best match first.

    SQLite answers with FTS5 (kept in the transaction of each append), PostgreSQL with
    full-text search over a ``tsvector`` column, the in-memory and Redis stores with the
    incremental BM25 index of :mod:`contextfold.search`. Scores differ between backends;
    the order is what counts.
    """

    def search(
        self,
        conversation_id: str,
        query: str,
        /,
        *,
        limit: int = 10,
        before_seq: int | None = None,
    ) -> list[StoredMessage]:
        """At most ``limit`` messages matching ``query`` (with ``seq < before_seq`` if given).

        Any word of the query may match; an unknown conversation, or a query with no
        searchable word, gives an empty list.
        """
        ...


@dataclass(frozen=True, slots=True)
class Tally:
    """The tokens of a conversation's messages ``1..upto_seq`` under one token counter."""

    upto_seq: int
    tokens: int


@runtime_checkable
class TallyLog(Protocol):
    """Running token totals of each conversation, one per token counter.

    A counter is named by a string (see :func:`contextfold.tokens.tally_name`). An append
    through :meth:`append_counted` carries each message's count and moves the counter's
    tally forward in the same transaction, when the tally was current (it covered every
    message before the batch); a tally that fell behind stays where it is until someone who
    counted the messages in between saves a newer one with :meth:`save_tally`. A tally is
    only ever a cache of the (immutable) log: it is dropped with the conversation.
    """

    def append_counted(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        /,
        *,
        counter: str,
        tokens: Sequence[int],
    ) -> list[int]:
        """:meth:`MessageLog.append`, moving ``counter``'s tally by the stored messages' tokens.

        ``tokens`` holds one count per message of ``messages``; a message acknowledged as
        already stored adds nothing.
        """
        ...

    def load_tally(self, conversation_id: str, counter: str, /) -> Tally | None:
        """``counter``'s tally, or None when none is kept."""
        ...

    def save_tally(self, conversation_id: str, counter: str, tally: Tally, /) -> None:
        """Keep ``tally`` unless the stored one reaches as far, or it names unstored seqs."""
        ...


@runtime_checkable
class AsyncTallyLog(Protocol):
    """Async :class:`TallyLog`."""

    async def aappend_counted(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        /,
        *,
        counter: str,
        tokens: Sequence[int],
    ) -> list[int]: ...

    async def aload_tally(self, conversation_id: str, counter: str, /) -> Tally | None: ...

    async def asave_tally(self, conversation_id: str, counter: str, tally: Tally, /) -> None: ...


@runtime_checkable
class AsyncStateLog(Protocol):
    """Async :class:`StateLog`."""

    async def asave_state(self, conversation_id: str, state: Mapping[str, Any], /) -> None: ...

    async def aload_state(self, conversation_id: str, /) -> dict[str, Any] | None: ...


@runtime_checkable
class Store(MessageLog, CheckpointLog, CompactionLock, Protocol):
    """Synchronous store: the message log, its checkpoints and the compaction lock."""


@runtime_checkable
class AsyncMessageLog(Protocol):
    """Async :class:`MessageLog`: the same operations with an ``a`` prefix."""

    async def aappend(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]: ...

    async def aread(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]: ...

    async def alast_seq(self, conversation_id: str, /) -> int: ...

    async def alist_conversations(self) -> list[str]: ...

    async def adelete(self, conversation_id: str, /) -> None: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class AsyncCheckpointLog(Protocol):
    """Async :class:`CheckpointLog`."""

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


@runtime_checkable
class AsyncCompactionLock(Protocol):
    """Async :class:`CompactionLock`."""

    def acompaction_lock(
        self, conversation_id: str, /, *, ttl: float = 120.0
    ) -> AbstractAsyncContextManager[bool]: ...


@runtime_checkable
class AsyncSearchableLog(Protocol):
    """Async :class:`SearchableLog`."""

    async def asearch(
        self,
        conversation_id: str,
        query: str,
        /,
        *,
        limit: int = 10,
        before_seq: int | None = None,
    ) -> list[StoredMessage]: ...


#: ``(lo, hi)`` runs of sequence numbers, ``lo <= seq < hi``, in order and apart.
Spans = Sequence[tuple[int, int]]


@runtime_checkable
class SpanReadableLog(Protocol):
    """Reads several runs of a log in one call: the neighbours of a search's hits.

    A search answers with messages scattered over the log, and
    :class:`~contextfold.Recall` wants a few messages around each; one call reads them all
    (one statement in the SQL stores) instead of one read per run.
    """

    def read_spans(self, conversation_id: str, spans: Spans, /) -> list[StoredMessage]:
        """The messages of every span, oldest first; a run past the log's end is cut short."""
        ...


@runtime_checkable
class AsyncSpanReadableLog(Protocol):
    """Async :class:`SpanReadableLog`."""

    async def aread_spans(self, conversation_id: str, spans: Spans, /) -> list[StoredMessage]: ...


@runtime_checkable
class AsyncStore(AsyncMessageLog, AsyncCheckpointLog, AsyncCompactionLock, Protocol):
    """Asynchronous store: the same operations as :class:`Store` with an ``a`` prefix."""


def has_checkpoints(store: object) -> TypeGuard[CheckpointLog]:
    """Whether ``store`` keeps checkpoints (sync API)."""
    return isinstance(store, CheckpointLog)


def has_compaction_lock(store: object) -> TypeGuard[CompactionLock]:
    """Whether ``store`` offers the compaction lock (sync API)."""
    return isinstance(store, CompactionLock)


def has_async_checkpoints(store: object) -> TypeGuard[AsyncCheckpointLog]:
    """Whether ``store`` keeps checkpoints (async API)."""
    return isinstance(store, AsyncCheckpointLog)


def has_state_log(store: object) -> TypeGuard[StateLog]:
    """Whether ``store`` keeps strategy states (sync API)."""
    return isinstance(store, StateLog)


def has_async_state_log(store: object) -> TypeGuard[AsyncStateLog]:
    """Whether ``store`` keeps strategy states (async API)."""
    return isinstance(store, AsyncStateLog)


def has_async_compaction_lock(store: object) -> TypeGuard[AsyncCompactionLock]:
    """Whether ``store`` offers the compaction lock (async API)."""
    return isinstance(store, AsyncCompactionLock)


def has_search(store: object) -> TypeGuard[SearchableLog]:
    """Whether ``store`` can search its log (sync API)."""
    return isinstance(store, SearchableLog)


def has_async_search(store: object) -> TypeGuard[AsyncSearchableLog]:
    """Whether ``store`` can search its log (async API)."""
    return isinstance(store, AsyncSearchableLog)


def has_tally_log(store: object) -> TypeGuard[TallyLog]:
    """Whether ``store`` keeps running token totals (sync API)."""
    return isinstance(store, TallyLog)


def has_async_tally_log(store: object) -> TypeGuard[AsyncTallyLog]:
    """Whether ``store`` keeps running token totals (async API)."""
    return isinstance(store, AsyncTallyLog)


def has_span_reads(store: object) -> TypeGuard[SpanReadableLog]:
    """Whether ``store`` reads several runs of its log in one call (sync API)."""
    return isinstance(store, SpanReadableLog)


def has_async_span_reads(store: object) -> TypeGuard[AsyncSpanReadableLog]:
    """Whether ``store`` reads several runs of its log in one call (async API)."""
    return isinstance(store, AsyncSpanReadableLog)
