"""The public API of the SQLite, PostgreSQL and Redis stores, written once for all three.

Each of those backends describes every operation as a sans-I/O generator (SQL queries or Redis
commands) and runs it with one sync and one async runner. What is left above that, checking
the arguments, encoding, naming the operation for errors and choosing a transaction, is the
same for every backend and for both APIs, so it lives here: a backend defines the ``_op_*``
builders and the two runners, and :class:`OpStore` turns them into the sync and async methods of
:class:`~contextfold.stores.base.Store` and :class:`~contextfold.stores.base.AsyncStore`.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any, TypeVar

from contextfold.checkpoints import CheckpointRecord
from contextfold.messages import Message
from contextfold.stores._checks import check_conversation_id, check_read_args, check_ttl
from contextfold.stores._codec import (
    decode_state,
    encode_checkpoint,
    encode_messages,
    encode_state,
)
from contextfold.stores._search import LogIndexes, check_search_args, check_spans, op_index_search
from contextfold.stores._tally import Counted, check_counted, check_counter, check_tally
from contextfold.stores.base import Spans, StoredMessage, Tally

__all__ = ["LockingOpStore", "OpStore"]

T = TypeVar("T")
Flow = Generator[Any, Any, T]


class OpStore(ABC):
    """Base of the stores whose operations are generators run by ``_run`` / ``_arun``.

    A subclass provides:

    * ``_run(op, what, cid, *, write)`` and ``async _arun(...)``: carry out one operation
      (``write`` asks for a write transaction) and translate driver errors into
      :class:`~contextfold.errors.StoreError` naming ``what`` and the conversation;
    * the ``_op_*`` builders below, each returning a fresh operation.

    Attributes:
        _append_write: whether an append needs a write transaction around it (not when the
            backend appends in one atomic statement).
    """

    _append_write = True

    @abstractmethod
    def _run(self, op: Flow[T], what: str, cid: str = "", *, write: bool = False) -> T:
        """Carry out ``op``; driver errors become a StoreError naming ``what``."""

    @abstractmethod
    async def _arun(self, op: Flow[T], what: str, cid: str = "", *, write: bool = False) -> T:
        """Async :meth:`_run`."""

    @abstractmethod
    def _op_append(
        self, cid: str, payloads: list[str], ids: list[str], counted: Counted | None
    ) -> Flow[list[int]]:
        """Store the encoded ``payloads`` whose ``ids`` are new; every message's seq.

        A message whose id the conversation already holds is acknowledged with its stored
        seq (see :mod:`contextfold.stores._idempotent`). With ``counted``, the counter's
        tally moves forward in the same transaction (see :mod:`contextfold.stores._tally`).
        """

    @abstractmethod
    def _op_load_tally(self, cid: str, counter: str) -> Flow[Tally | None]:
        """The counter's running total, None when none is kept."""

    @abstractmethod
    def _op_save_tally(self, cid: str, counter: str, tally: Tally) -> Flow[None]:
        """Keep ``tally`` unless the stored one reaches as far or it passes the log's end."""

    @abstractmethod
    def _op_read(self, cid: str, after_seq: int, limit: int | None) -> Flow[list[StoredMessage]]:
        """The decoded messages after ``after_seq``, at most ``limit``."""

    @abstractmethod
    def _op_last_seq(self, cid: str) -> Flow[int]:
        """The newest sequence number, 0 when there is none."""

    @abstractmethod
    def _op_append_checkpoint(
        self, cid: str, checkpoint: CheckpointRecord, data: str, expected_previous: str | None
    ) -> Flow[CheckpointRecord]:
        """Apply the commit rule and store ``data`` (the encoded checkpoint)."""

    @abstractmethod
    def _op_latest_checkpoint(self, cid: str) -> Flow[CheckpointRecord | None]:
        """The newest checkpoint, decoded."""

    @abstractmethod
    def _op_checkpoints(self, cid: str) -> Flow[list[CheckpointRecord]]:
        """Every checkpoint, oldest first."""

    @abstractmethod
    def _op_save_state(self, cid: str, data: str) -> Flow[None]:
        """Replace the conversation's encoded strategy state."""

    @abstractmethod
    def _op_load_state(self, cid: str) -> Flow[str | None]:
        """The encoded strategy state, None when none was saved."""

    @abstractmethod
    def _op_list(self) -> Flow[list[str]]:
        """The conversation ids, sorted."""

    @abstractmethod
    def _op_delete(self, cid: str) -> Flow[None]:
        """Remove everything kept for the conversation."""

    def _op_search(
        self, cid: str, query: str, limit: int, before_seq: int | None
    ) -> Flow[list[StoredMessage]]:
        """A search; by default a BM25 index kept in this object, filled from the log.

        A backend with a search engine of its own (the SQL stores) overrides this.
        """
        indexes: LogIndexes | None = self.__dict__.get("_log_indexes")
        if indexes is None:
            indexes = self.__dict__.setdefault("_log_indexes", LogIndexes())
        assert indexes is not None

        def read(after: int, limit: int | None) -> Flow[list[StoredMessage]]:
            return self._op_read(cid, after, limit)

        return op_index_search(indexes, read, cid, query, limit, before_seq)

    def _op_read_spans(self, cid: str, spans: Spans) -> Flow[list[StoredMessage]]:
        """The messages of each span, one read each in one run (the SQL stores: one query)."""
        out: list[StoredMessage] = []
        for lo, hi in spans:
            out.extend((yield from self._op_read(cid, lo - 1, hi - lo)))
        return out

    def read_spans(self, conversation_id: str, spans: Spans, /) -> list[StoredMessage]:
        """The messages of every ``(lo, hi)`` run, oldest first (see SpanReadableLog)."""
        cid = check_conversation_id(conversation_id)
        runs = check_spans(spans)
        return self._run(self._op_read_spans(cid, runs), "read", cid) if runs else []

    async def aread_spans(self, conversation_id: str, spans: Spans, /) -> list[StoredMessage]:
        """Async :meth:`read_spans`."""
        cid = check_conversation_id(conversation_id)
        runs = check_spans(spans)
        return await self._arun(self._op_read_spans(cid, runs), "read", cid) if runs else []

    def search(
        self,
        conversation_id: str,
        query: str,
        /,
        *,
        limit: int = 10,
        before_seq: int | None = None,
    ) -> list[StoredMessage]:
        """Messages matching ``query``, best first (see :class:`SearchableLog`)."""
        cid = check_conversation_id(conversation_id)
        check_search_args(query, limit, before_seq)
        return self._run(self._op_search(cid, query, limit, before_seq), "search", cid)

    async def asearch(
        self,
        conversation_id: str,
        query: str,
        /,
        *,
        limit: int = 10,
        before_seq: int | None = None,
    ) -> list[StoredMessage]:
        """Async :meth:`search`."""
        cid = check_conversation_id(conversation_id)
        check_search_args(query, limit, before_seq)
        return await self._arun(self._op_search(cid, query, limit, before_seq), "search", cid)

    # -- sync API ------------------------------------------------------------------------

    def append(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        """Append atomically; return the sequence numbers given, in order.

        A message whose id is already stored in the conversation is not stored again: its
        stored seq is returned, so retrying an append whose reply was lost is safe. An empty
        batch returns ``[]`` without touching the database.
        """
        return self._append(conversation_id, messages, None)

    def append_counted(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        /,
        *,
        counter: str,
        tokens: Sequence[int],
    ) -> list[int]:
        """:meth:`append`, moving ``counter``'s running total (see :class:`TallyLog`)."""
        counted = check_counted(counter, tokens, messages)
        return self._append(conversation_id, messages, counted)

    def load_tally(self, conversation_id: str, counter: str, /) -> Tally | None:
        """``counter``'s running total of the conversation, or None."""
        cid = check_conversation_id(conversation_id)
        return self._run(self._op_load_tally(cid, check_counter(counter)), "load_tally", cid)

    def save_tally(self, conversation_id: str, counter: str, tally: Tally, /) -> None:
        """Keep ``tally`` unless the stored one reaches as far or it passes the log's end."""
        cid = check_conversation_id(conversation_id)
        op = self._op_save_tally(cid, check_counter(counter), check_tally(tally))
        self._run(op, "save_tally", cid, write=True)

    async def aappend_counted(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        /,
        *,
        counter: str,
        tokens: Sequence[int],
    ) -> list[int]:
        """Async :meth:`append_counted`."""
        counted = check_counted(counter, tokens, messages)
        return await self._aappend(conversation_id, messages, counted)

    async def aload_tally(self, conversation_id: str, counter: str, /) -> Tally | None:
        """Async :meth:`load_tally`."""
        cid = check_conversation_id(conversation_id)
        op = self._op_load_tally(cid, check_counter(counter))
        return await self._arun(op, "load_tally", cid)

    async def asave_tally(self, conversation_id: str, counter: str, tally: Tally, /) -> None:
        """Async :meth:`save_tally`."""
        cid = check_conversation_id(conversation_id)
        op = self._op_save_tally(cid, check_counter(counter), check_tally(tally))
        await self._arun(op, "save_tally", cid, write=True)

    def _append(
        self, conversation_id: str, messages: Sequence[Message], counted: Counted | None
    ) -> list[int]:
        cid = check_conversation_id(conversation_id)
        payloads = encode_messages(cid, messages)
        if not payloads:
            return []
        op = self._op_append(cid, payloads, [m.id for m in messages], counted)
        return self._run(op, "append", cid, write=self._append_write)

    async def _aappend(
        self, conversation_id: str, messages: Sequence[Message], counted: Counted | None
    ) -> list[int]:
        cid = check_conversation_id(conversation_id)
        payloads = encode_messages(cid, messages)
        if not payloads:
            return []
        op = self._op_append(cid, payloads, [m.id for m in messages], counted)
        return await self._arun(op, "append", cid, write=self._append_write)

    def read(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after_seq``, oldest first (an unknown id reads as empty)."""
        cid = check_conversation_id(conversation_id)
        check_read_args(after_seq, limit)
        return self._run(self._op_read(cid, after_seq, limit), "read", cid)

    def last_seq(self, conversation_id: str, /) -> int:
        """The newest sequence number, 0 for an empty or unknown conversation."""
        cid = check_conversation_id(conversation_id)
        return self._run(self._op_last_seq(cid), "last_seq", cid)

    def append_checkpoint(
        self,
        conversation_id: str,
        checkpoint: CheckpointRecord,
        /,
        *,
        expected_previous: str | None,
    ) -> CheckpointRecord:
        """Commit a checkpoint; :class:`ConflictError` if the log moved underneath it."""
        cid = check_conversation_id(conversation_id)
        op = self._op_append_checkpoint(
            cid, checkpoint, encode_checkpoint(checkpoint), expected_previous
        )
        return self._run(op, "append_checkpoint", cid, write=True)

    def latest_checkpoint(self, conversation_id: str, /) -> CheckpointRecord | None:
        """The newest committed checkpoint, if any."""
        cid = check_conversation_id(conversation_id)
        return self._run(self._op_latest_checkpoint(cid), "latest_checkpoint", cid)

    def checkpoints(self, conversation_id: str, /) -> list[CheckpointRecord]:
        """Every committed checkpoint, oldest first."""
        cid = check_conversation_id(conversation_id)
        return self._run(self._op_checkpoints(cid), "checkpoints", cid)

    def save_state(self, conversation_id: str, state: Mapping[str, Any], /) -> None:
        """Replace the conversation's saved strategy state (see :class:`StateLog`)."""
        cid = check_conversation_id(conversation_id)
        self._run(self._op_save_state(cid, encode_state(state)), "save_state", cid, write=True)

    def load_state(self, conversation_id: str, /) -> dict[str, Any] | None:
        """The saved strategy state, or None (also for an unreadable one)."""
        cid = check_conversation_id(conversation_id)
        data = self._run(self._op_load_state(cid), "load_state", cid)
        return decode_state(data) if data is not None else None

    async def asave_state(self, conversation_id: str, state: Mapping[str, Any], /) -> None:
        """Async :meth:`save_state`."""
        cid = check_conversation_id(conversation_id)
        op = self._op_save_state(cid, encode_state(state))
        await self._arun(op, "save_state", cid, write=True)

    async def aload_state(self, conversation_id: str, /) -> dict[str, Any] | None:
        """Async :meth:`load_state`."""
        cid = check_conversation_id(conversation_id)
        data = await self._arun(self._op_load_state(cid), "load_state", cid)
        return decode_state(data) if data is not None else None

    def list_conversations(self) -> list[str]:
        """Ids of the stored conversations, sorted."""
        return self._run(self._op_list(), "list_conversations")

    def delete(self, conversation_id: str, /) -> None:
        """Remove a conversation with its checkpoints (and lock, where there is one)."""
        cid = check_conversation_id(conversation_id)
        self._run(self._op_delete(cid), "delete", cid, write=True)
        self._forget_index(cid)

    def _forget_index(self, cid: str) -> None:
        """Drop this object's search index of a conversation just deleted."""
        indexes: LogIndexes | None = self.__dict__.get("_log_indexes")
        if indexes is not None:
            indexes.forget(cid)

    # -- async API: the same operations through ``_arun`` ---------------------------------

    async def aappend(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        """Async :meth:`append`."""
        return await self._aappend(conversation_id, messages, None)

    async def aread(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """Async :meth:`read`."""
        cid = check_conversation_id(conversation_id)
        check_read_args(after_seq, limit)
        return await self._arun(self._op_read(cid, after_seq, limit), "read", cid)

    async def alast_seq(self, conversation_id: str, /) -> int:
        """Async :meth:`last_seq`."""
        cid = check_conversation_id(conversation_id)
        return await self._arun(self._op_last_seq(cid), "last_seq", cid)

    async def aappend_checkpoint(
        self,
        conversation_id: str,
        checkpoint: CheckpointRecord,
        /,
        *,
        expected_previous: str | None,
    ) -> CheckpointRecord:
        """Async :meth:`append_checkpoint`."""
        cid = check_conversation_id(conversation_id)
        op = self._op_append_checkpoint(
            cid, checkpoint, encode_checkpoint(checkpoint), expected_previous
        )
        return await self._arun(op, "append_checkpoint", cid, write=True)

    async def alatest_checkpoint(self, conversation_id: str, /) -> CheckpointRecord | None:
        """Async :meth:`latest_checkpoint`."""
        cid = check_conversation_id(conversation_id)
        return await self._arun(self._op_latest_checkpoint(cid), "latest_checkpoint", cid)

    async def acheckpoints(self, conversation_id: str, /) -> list[CheckpointRecord]:
        """Async :meth:`checkpoints`."""
        cid = check_conversation_id(conversation_id)
        return await self._arun(self._op_checkpoints(cid), "checkpoints", cid)

    async def alist_conversations(self) -> list[str]:
        """Async :meth:`list_conversations`."""
        return await self._arun(self._op_list(), "list_conversations")

    async def adelete(self, conversation_id: str, /) -> None:
        """Async :meth:`delete`."""
        cid = check_conversation_id(conversation_id)
        await self._arun(self._op_delete(cid), "delete", cid, write=True)
        self._forget_index(cid)


class LockingOpStore(OpStore):
    """The compaction lock as two operations: claim a token with a ttl, release it.

    An :class:`OpStore` whose backend can claim a lock in one atomic step (a SQLite write
    transaction, Redis ``SET NX PX``): the token is random, so a holder whose lock expired and
    was taken by another can never release the new holder's lock.
    """

    @abstractmethod
    def _op_try_lock(self, cid: str, token: str, ttl: float) -> Flow[bool]:
        """Claim the lock for ``ttl`` seconds under ``token`` unless a live one is held."""

    @abstractmethod
    def _op_release_lock(self, cid: str, token: str) -> Flow[None]:
        """Release the lock if ``token`` still holds it."""

    @contextmanager
    def compaction_lock(self, conversation_id: str, /, *, ttl: float = 120.0) -> Iterator[bool]:
        """Try to take the conversation's lock for ``ttl`` seconds; yields whether it was."""
        cid = check_conversation_id(conversation_id)
        seconds = check_ttl(ttl)
        token = uuid.uuid4().hex
        taken = self._run(
            self._op_try_lock(cid, token, seconds), "compaction_lock", cid, write=True
        )
        try:
            yield taken
        finally:
            if taken:
                release = self._op_release_lock(cid, token)
                self._run(release, "compaction_lock release", cid, write=True)

    def acompaction_lock(
        self, conversation_id: str, /, *, ttl: float = 120.0
    ) -> AbstractAsyncContextManager[bool]:
        """Async :meth:`compaction_lock`."""
        return self._alock(conversation_id, ttl)

    @asynccontextmanager
    async def _alock(self, conversation_id: str, ttl: float) -> AsyncIterator[bool]:
        cid = check_conversation_id(conversation_id)
        seconds = check_ttl(ttl)
        token = uuid.uuid4().hex
        op = self._op_try_lock(cid, token, seconds)
        taken = await self._arun(op, "compaction_lock", cid, write=True)
        try:
            yield taken
        finally:
            if taken:
                release = self._op_release_lock(cid, token)
                await self._arun(release, "compaction_lock release", cid, write=True)
