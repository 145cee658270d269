"""Store operations the memory's core yields, and the two drivers that carry them out.

The core never touches a store: it yields one of the small operation objects below (or a
strategy's :class:`~contextfold.strategies.SummaryCall`, passed through, or an
:class:`Embed` for a semantic search) and receives the answer. :func:`drive` answers with
a sync store, :func:`adrive` with an async one (or a sync one, inline). A store failure that
is not already a :class:`~contextfold.errors.ContextfoldError` becomes a
:class:`~contextfold.errors.StoreError` naming the operation and the conversation, and is
thrown back into the core.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from typing import Any, TypeVar, Union

from contextfold import _drive
from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ContextfoldError, StoreError
from contextfold.messages import Message
from contextfold.search import Embedder, embed_checked
from contextfold.stores.base import (
    AsyncStore,
    Store,
    Tally,
    has_async_search,
    has_async_span_reads,
    has_async_state_log,
    has_async_tally_log,
    has_search,
    has_span_reads,
    has_state_log,
    has_tally_log,
)
from contextfold.strategies.base import SummaryCall
from contextfold.strategies.run import acall_summarizer, call_summarizer

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class LastSeq:
    what = "read the last sequence number"


@dataclass(frozen=True, slots=True)
class Read:
    after_seq: int
    limit: int | None
    what = "read messages"


@dataclass(frozen=True, slots=True)
class Latest:
    what = "read the latest checkpoint"


@dataclass(frozen=True, slots=True)
class Commit:
    record: CheckpointRecord
    expected_previous: str | None
    what = "commit a checkpoint"


@dataclass(frozen=True, slots=True)
class Lock:
    ttl: float
    what = "take the compaction lock"


@dataclass(frozen=True, slots=True)
class Append:
    """Append; with ``counter``, ``tokens`` (one per message) move that counter's tally."""

    messages: tuple[Message, ...]
    counter: str | None = None
    tokens: tuple[int, ...] = ()
    what = "append messages"


@dataclass(frozen=True, slots=True)
class LoadTally:
    """Read a counter's running total (None from a store that keeps none)."""

    counter: str
    what = "read the running token total"


@dataclass(frozen=True, slots=True)
class SaveTally:
    """Save a counter's running total (nothing happens on a store that keeps none)."""

    counter: str
    tally: Tally
    what = "save the running token total"


@dataclass(frozen=True, slots=True)
class Delete:
    what = "delete the conversation"


@dataclass(frozen=True, slots=True)
class LoadState:
    """Read the saved strategy state (None from a store that keeps none)."""

    what = "read the strategy state"


@dataclass(frozen=True, slots=True)
class SaveState:
    """Save the strategy state (nothing happens on a store that keeps none)."""

    state: dict[str, Any]
    what = "save the strategy state"


@dataclass(frozen=True, slots=True)
class Search:
    """Answered with the store's search, or None when the store cannot search."""

    query: str
    before_seq: int | None
    limit: int
    what = "search messages"


@dataclass(frozen=True, slots=True)
class ReadSpans:
    """Answered with the messages of each ``(lo, hi)`` seq run, oldest first.

    One call where the store reads several runs at once (the neighbours of search hits),
    one read per run otherwise.
    """

    spans: tuple[tuple[int, int], ...]
    what = "read messages"


@dataclass(frozen=True, slots=True)
class Embed:
    """Answered with the unit vectors of ``texts`` (:func:`~contextfold.search.embed_checked`).

    Not a store operation: an :class:`~contextfold.search.EmbedderError` reaches the core as
    it is, and the async driver embeds in a worker thread, off the event loop.
    """

    embedder: Embedder
    texts: tuple[str, ...]


_StoreOp = Union[  # noqa: UP007
    LastSeq,
    Read,
    ReadSpans,
    Latest,
    Commit,
    Lock,
    Append,
    Delete,
    LoadState,
    SaveState,
    Search,
    LoadTally,
    SaveTally,
]

#: What the core yields: a store operation, a strategy's summary call passed through, or
#: the vectors a semantic search needs.
Op = Union[_StoreOp, SummaryCall, Embed]  # noqa: UP007
CoreGen = Generator[Op, Any, _T]


def drive(store: Any, cid: str, core: CoreGen[_T]) -> _T:
    """Run a core generator against the sync store."""
    if not isinstance(store, Store):
        raise StoreError(f"{type(store).__name__} is async-only; use the a-prefixed methods")
    with ExitStack() as stack:

        def answer(op: Op) -> Any:
            if isinstance(op, SummaryCall):
                return call_summarizer(op)
            if isinstance(op, Embed):
                return embed_checked(op.embedder, op.texts)
            try:
                if isinstance(op, Lock):
                    return stack.enter_context(store.compaction_lock(cid, ttl=op.ttl))
                return _sync_op(store, cid, op)
            except ContextfoldError:
                raise
            except Exception as exc:
                raise _store_error(store, cid, op, exc) from exc

        return _drive.drive(core, answer)


async def adrive(store: Any, cid: str, core: CoreGen[_T]) -> _T:
    """Run a core generator against the async store (or a sync one, inline)."""
    is_async = isinstance(store, AsyncStore)
    async with AsyncExitStack() as stack:

        async def answer(op: Op) -> Any:
            if isinstance(op, SummaryCall):
                return await acall_summarizer(op)
            if isinstance(op, Embed):
                return await asyncio.to_thread(embed_checked, op.embedder, op.texts)
            try:
                if isinstance(op, Lock):
                    if is_async:
                        cm = store.acompaction_lock(cid, ttl=op.ttl)
                        return await stack.enter_async_context(cm)
                    return stack.enter_context(store.compaction_lock(cid, ttl=op.ttl))
                if is_async:
                    return await _async_op(store, cid, op)
                return _sync_op(store, cid, op)
            except ContextfoldError:
                raise
            except Exception as exc:
                raise _store_error(store, cid, op, exc) from exc

        return await _drive.adrive(core, answer)


def _store_error(store: Any, cid: str, op: _StoreOp, exc: Exception) -> StoreError:
    return StoreError(
        f"{type(store).__name__} failed to {op.what} for conversation {cid!r}: "
        f"{type(exc).__name__}: {exc}"
    )


def _sync_op(store: Store, cid: str, op: _StoreOp) -> Any:
    if isinstance(op, LastSeq):
        return store.last_seq(cid)
    if isinstance(op, Read):
        return store.read(cid, after_seq=op.after_seq, limit=op.limit)
    if isinstance(op, ReadSpans):
        if has_span_reads(store):
            return store.read_spans(cid, op.spans)
        return [
            row for lo, hi in op.spans for row in store.read(cid, after_seq=lo - 1, limit=hi - lo)
        ]
    if isinstance(op, Latest):
        return store.latest_checkpoint(cid)
    if isinstance(op, Commit):
        return store.append_checkpoint(cid, op.record, expected_previous=op.expected_previous)
    if isinstance(op, Append):
        if op.counter is not None and has_tally_log(store):
            return store.append_counted(cid, op.messages, counter=op.counter, tokens=op.tokens)
        return store.append(cid, op.messages)
    if isinstance(op, Delete):
        return store.delete(cid)
    if isinstance(op, LoadTally):
        return store.load_tally(cid, op.counter) if has_tally_log(store) else None
    if isinstance(op, SaveTally):
        return store.save_tally(cid, op.counter, op.tally) if has_tally_log(store) else None
    if isinstance(op, LoadState):
        return store.load_state(cid) if has_state_log(store) else None
    if isinstance(op, SaveState):
        return store.save_state(cid, op.state) if has_state_log(store) else None
    if isinstance(op, Search):
        if not has_search(store):
            return None
        return store.search(cid, op.query, limit=op.limit, before_seq=op.before_seq)
    raise AssertionError(f"unhandled store operation {op!r}")  # pragma: no cover


async def _async_op(store: AsyncStore, cid: str, op: _StoreOp) -> Any:
    if isinstance(op, LastSeq):
        return await store.alast_seq(cid)
    if isinstance(op, Read):
        return await store.aread(cid, after_seq=op.after_seq, limit=op.limit)
    if isinstance(op, ReadSpans):
        if has_async_span_reads(store):
            return await store.aread_spans(cid, op.spans)
        rows = []
        for lo, hi in op.spans:
            rows.extend(await store.aread(cid, after_seq=lo - 1, limit=hi - lo))
        return rows
    if isinstance(op, Latest):
        return await store.alatest_checkpoint(cid)
    if isinstance(op, Commit):
        return await store.aappend_checkpoint(
            cid, op.record, expected_previous=op.expected_previous
        )
    if isinstance(op, Append):
        if op.counter is not None and has_async_tally_log(store):
            return await store.aappend_counted(
                cid, op.messages, counter=op.counter, tokens=op.tokens
            )
        return await store.aappend(cid, op.messages)
    if isinstance(op, Delete):
        return await store.adelete(cid)
    if isinstance(op, LoadTally):
        return await store.aload_tally(cid, op.counter) if has_async_tally_log(store) else None
    if isinstance(op, SaveTally):
        if has_async_tally_log(store):
            await store.asave_tally(cid, op.counter, op.tally)
        return None
    if isinstance(op, LoadState):
        return await store.aload_state(cid) if has_async_state_log(store) else None
    if isinstance(op, SaveState):
        if has_async_state_log(store):
            await store.asave_state(cid, op.state)
        return None
    if isinstance(op, Search):
        if has_async_search(store):
            return await store.asearch(cid, op.query, limit=op.limit, before_seq=op.before_seq)
        if has_search(store):
            return store.search(cid, op.query, limit=op.limit, before_seq=op.before_seq)
        return None
    raise AssertionError(f"unhandled store operation {op!r}")  # pragma: no cover
