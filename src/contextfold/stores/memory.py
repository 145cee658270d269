"""In-memory store: the contract with no I/O, for tests and short-lived processes.

Messages are kept as the frozen :class:`Message` objects themselves (no serialization), so it
is the fastest store, but nothing survives the process and nothing is shared between
processes. It is thread-safe: one lock guards every operation.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import StoreError
from contextfold.messages import Message
from contextfold.stores._checks import (
    check_checkpoint_commit,
    check_conversation_id,
    check_read_args,
    check_ttl,
)
from contextfold.stores._codec import decode_state, encode_checkpoint, encode_state
from contextfold.stores._idempotent import plan_append
from contextfold.stores._search import LogIndexes, check_search_args, check_spans
from contextfold.stores._tally import (
    Counted,
    added_tokens,
    check_counted,
    check_counter,
    check_tally,
)
from contextfold.stores.base import Spans, StoredMessage, Tally

__all__ = ["InMemoryStore"]

_serials = itertools.count(1)  # numbers every conversation log this process creates


@dataclass
class _Conversation:
    messages: list[Message] = field(default_factory=list)
    checkpoints: list[CheckpointRecord] = field(default_factory=list)
    state: str | None = None  # the strategy state, as JSON (a copy no caller can mutate)
    #: Message id -> seq, so a message appended again is acknowledged, not stored twice.
    ids: dict[str, int] = field(default_factory=dict)
    #: Counter name -> running token total (see :mod:`contextfold.stores._tally`).
    tallies: dict[str, Tally] = field(default_factory=dict)
    #: Tells this log from one written under the same id after a delete (search indexes).
    serial: int = field(default_factory=_serials.__next__)


class InMemoryStore:
    """A process-local store implementing both :class:`Store` and :class:`AsyncStore`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conversations: dict[str, _Conversation] = {}
        self._locks: dict[str, tuple[str, float]] = {}
        self._closed = False

    def _check_open(self) -> None:
        """Refuse use after :meth:`close`, as the persistent stores do (call under the lock)."""
        if self._closed:
            raise StoreError("InMemoryStore is closed")

    def append(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        """Append atomically; return the sequence numbers given, in order.

        A message whose id is already stored in the conversation is acknowledged with its
        stored seq and not stored again, as in every store.
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
        return self._append(conversation_id, messages, check_counted(counter, tokens, messages))

    def load_tally(self, conversation_id: str, counter: str, /) -> Tally | None:
        """``counter``'s running total of the conversation, or None."""
        cid = check_conversation_id(conversation_id)
        name = check_counter(counter)
        with self._lock:
            self._check_open()
            conv = self._conversations.get(cid)
            return None if conv is None else conv.tallies.get(name)

    def save_tally(self, conversation_id: str, counter: str, tally: Tally, /) -> None:
        """Keep ``tally`` unless the stored one reaches as far or it passes the log's end."""
        cid = check_conversation_id(conversation_id)
        name = check_counter(counter)
        check_tally(tally)
        with self._lock:
            self._check_open()
            conv = self._conversations.get(cid)
            if conv is None or tally.upto_seq > len(conv.messages):
                return
            held = conv.tallies.get(name)
            if held is None or held.upto_seq < tally.upto_seq:
                conv.tallies[name] = tally

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
        return self.append_counted(conversation_id, messages, counter=counter, tokens=tokens)

    async def aload_tally(self, conversation_id: str, counter: str, /) -> Tally | None:
        """Async :meth:`load_tally`."""
        return self.load_tally(conversation_id, counter)

    async def asave_tally(self, conversation_id: str, counter: str, tally: Tally, /) -> None:
        """Async :meth:`save_tally`."""
        self.save_tally(conversation_id, counter, tally)

    def _append(
        self, conversation_id: str, messages: Sequence[Message], counted: Counted | None
    ) -> list[int]:
        cid = check_conversation_id(conversation_id)
        if isinstance(messages, (str, bytes, Message)) or not isinstance(messages, Sequence):
            raise StoreError(
                f"append to {cid!r} expects a sequence of Message, got {type(messages).__name__}"
            )
        batch = list(messages)
        for index, message in enumerate(batch):
            if not isinstance(message, Message):
                raise StoreError(
                    f"append to {cid!r}: item {index} is a {type(message).__name__}, "
                    "not a Message; nothing was stored"
                )
        if not batch:
            return []
        with self._lock:
            self._check_open()
            conv = self._conversations.setdefault(cid, _Conversation())
            log = conv.messages
            stored = {
                m.id: (conv.ids[m.id], log[conv.ids[m.id] - 1]) for m in batch if m.id in conv.ids
            }
            last = len(log)
            plan = plan_append(cid, [m.id for m in batch], batch, stored, last)
            for seq, msg_id in enumerate(plan.fresh_ids, last + 1):
                conv.ids[msg_id] = seq
            log.extend(plan.fresh)
            if counted is not None and plan.fresh:
                held = conv.tallies.get(counted.counter)
                if last == 0 or (held is not None and held.upto_seq == last):
                    base = held.tokens if held is not None and last else 0
                    added = added_tokens(counted, plan)
                    conv.tallies[counted.counter] = Tally(len(log), base + added)
        return plan.seqs

    def read(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after_seq``, oldest first."""
        cid = check_conversation_id(conversation_id)
        check_read_args(after_seq, limit)
        with self._lock:
            self._check_open()
            conv = self._conversations.get(cid)
            if conv is None:
                return []
            end = None if limit is None else after_seq + limit
            window = conv.messages[after_seq:end]
        return [StoredMessage(after_seq + 1 + i, m) for i, m in enumerate(window)]

    def read_spans(self, conversation_id: str, spans: Spans, /) -> list[StoredMessage]:
        """The messages of every ``(lo, hi)`` run, oldest first (see SpanReadableLog)."""
        cid = check_conversation_id(conversation_id)
        runs = check_spans(spans)
        with self._lock:
            self._check_open()
            conv = self._conversations.get(cid)
            log = conv.messages if conv is not None else []
            return [
                StoredMessage(seq, log[seq - 1])
                for lo, hi in runs
                for seq in range(lo, min(hi, len(log) + 1))
            ]

    async def aread_spans(self, conversation_id: str, spans: Spans, /) -> list[StoredMessage]:
        """Async :meth:`read_spans`."""
        return self.read_spans(conversation_id, spans)

    def last_seq(self, conversation_id: str, /) -> int:
        """The newest sequence number, 0 for an empty or unknown conversation."""
        cid = check_conversation_id(conversation_id)
        with self._lock:
            self._check_open()
            conv = self._conversations.get(cid)
            return 0 if conv is None else len(conv.messages)

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
        # Encoding proves the record is storable in every backend, so tests that pass here
        # pass on the persistent stores too.
        encode_checkpoint(checkpoint)
        with self._lock:
            self._check_open()
            conv = self._conversations.get(cid)
            check_checkpoint_commit(
                cid,
                checkpoint,
                expected_previous=expected_previous,
                latest_id=conv.checkpoints[-1].id if conv and conv.checkpoints else None,
                last_seq=len(conv.messages) if conv else 0,
            )
            assert conv is not None  # the check above guarantees a non-empty log
            conv.checkpoints.append(checkpoint)
        return checkpoint

    def latest_checkpoint(self, conversation_id: str, /) -> CheckpointRecord | None:
        """The newest committed checkpoint, if any."""
        cid = check_conversation_id(conversation_id)
        with self._lock:
            self._check_open()
            conv = self._conversations.get(cid)
            return conv.checkpoints[-1] if conv and conv.checkpoints else None

    def checkpoints(self, conversation_id: str, /) -> list[CheckpointRecord]:
        """Every committed checkpoint, oldest first."""
        cid = check_conversation_id(conversation_id)
        with self._lock:
            self._check_open()
            conv = self._conversations.get(cid)
            return list(conv.checkpoints) if conv else []

    @contextmanager
    def compaction_lock(self, conversation_id: str, /, *, ttl: float = 120.0) -> Iterator[bool]:
        """Single-flight within this process; yields whether the lock was taken."""
        cid = check_conversation_id(conversation_id)
        seconds = check_ttl(ttl)
        token = uuid.uuid4().hex
        now = time.monotonic()
        with self._lock:
            self._check_open()
            held = self._locks.get(cid)
            taken = held is None or held[1] <= now
            if taken:
                self._locks[cid] = (token, now + seconds)
        try:
            yield taken
        finally:
            if taken:
                with self._lock:
                    if self._locks.get(cid, ("", 0.0))[0] == token:
                        del self._locks[cid]

    def save_state(self, conversation_id: str, state: Mapping[str, Any], /) -> None:
        """Replace the conversation's saved strategy state (see :class:`StateLog`)."""
        cid = check_conversation_id(conversation_id)
        data = encode_state(state)
        with self._lock:
            self._check_open()
            self._conversations.setdefault(cid, _Conversation()).state = data

    def load_state(self, conversation_id: str, /) -> dict[str, Any] | None:
        """The saved strategy state, or None."""
        cid = check_conversation_id(conversation_id)
        with self._lock:
            self._check_open()
            conv = self._conversations.get(cid)
            data = conv.state if conv is not None else None
        return decode_state(data) if data is not None else None

    async def asave_state(self, conversation_id: str, state: Mapping[str, Any], /) -> None:
        """Async :meth:`save_state`."""
        self.save_state(conversation_id, state)

    async def aload_state(self, conversation_id: str, /) -> dict[str, Any] | None:
        """Async :meth:`load_state`."""
        return self.load_state(conversation_id)

    def list_conversations(self) -> list[str]:
        """Ids of the stored conversations, sorted."""
        with self._lock:
            self._check_open()
            return sorted(cid for cid, conv in self._conversations.items() if conv.messages)

    def delete(self, conversation_id: str, /) -> None:
        """Remove a conversation with its checkpoints."""
        cid = check_conversation_id(conversation_id)
        with self._lock:
            self._check_open()
            self._conversations.pop(cid, None)
            self._locks.pop(cid, None)
        indexes: LogIndexes | None = getattr(self, "_log_indexes", None)
        if indexes is not None:
            indexes.forget(cid)

    def close(self) -> None:
        """Refuse every later call (nothing to release); closing twice is harmless."""
        with self._lock:
            self._closed = True

    # -- async twins: nothing here blocks, so they call the sync methods directly -------

    async def aappend(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        """Async :meth:`append`."""
        return self.append(conversation_id, messages)

    async def aread(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """Async :meth:`read`."""
        return self.read(conversation_id, after_seq=after_seq, limit=limit)

    async def alast_seq(self, conversation_id: str, /) -> int:
        """Async :meth:`last_seq`."""
        return self.last_seq(conversation_id)

    async def aappend_checkpoint(
        self,
        conversation_id: str,
        checkpoint: CheckpointRecord,
        /,
        *,
        expected_previous: str | None,
    ) -> CheckpointRecord:
        """Async :meth:`append_checkpoint`."""
        return self.append_checkpoint(
            conversation_id, checkpoint, expected_previous=expected_previous
        )

    async def alatest_checkpoint(self, conversation_id: str, /) -> CheckpointRecord | None:
        """Async :meth:`latest_checkpoint`."""
        return self.latest_checkpoint(conversation_id)

    async def acheckpoints(self, conversation_id: str, /) -> list[CheckpointRecord]:
        """Async :meth:`checkpoints`."""
        return self.checkpoints(conversation_id)

    def acompaction_lock(
        self, conversation_id: str, /, *, ttl: float = 120.0
    ) -> AbstractAsyncContextManager[bool]:
        """Async :meth:`compaction_lock`."""
        return self._alock(conversation_id, ttl)

    @asynccontextmanager
    async def _alock(self, conversation_id: str, ttl: float) -> AsyncIterator[bool]:
        with self.compaction_lock(conversation_id, ttl=ttl) as taken:
            yield taken

    async def alist_conversations(self) -> list[str]:
        """Async :meth:`list_conversations`."""
        return self.list_conversations()

    async def adelete(self, conversation_id: str, /) -> None:
        """Async :meth:`delete`."""
        self.delete(conversation_id)

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        self.close()

    # -- search: a BM25 index per conversation, filled from the log on each search ------
    #
    # A search reads the log and extends its index under the store's lock, as every other
    # operation runs: no delete or rewriting append comes between what the index holds and
    # what is added, so it covers exactly one log, 1..n. (Read unlocked, a search learnt how
    # far the index went, then found it replaced, by a delete or by a search of the log
    # written again, and began a new one from there: it held the log's tail only, and later
    # searches took it for whole.) Only what came since the last search is indexed.

    def _search_indexes(self) -> LogIndexes:
        indexes: LogIndexes | None = getattr(self, "_log_indexes", None)
        if indexes is None:
            with self._lock:
                indexes = self.__dict__.setdefault("_log_indexes", LogIndexes())
        assert indexes is not None
        return indexes

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
        indexes = self._search_indexes()
        with self._lock:
            self._check_open()
            conv = self._conversations.get(cid)
            if conv is None or not conv.messages:
                return []
            log = conv.messages
            # The serial tells a conversation written again after a delete from the old one.
            serial = str(conv.serial)
            done, _ = indexes.indexed_upto(cid, serial)
            new = ((seq, log[seq - 1]) for seq in range(done + 1, len(log) + 1))
            hits = indexes.search(cid, serial, new, query, limit=limit, before_seq=before_seq)
            return [StoredMessage(seq, log[seq - 1]) for seq, _ in hits]

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
        return self.search(conversation_id, query, limit=limit, before_seq=before_seq)

    def __repr__(self) -> str:
        return f"InMemoryStore({len(self._conversations)} conversations)"
