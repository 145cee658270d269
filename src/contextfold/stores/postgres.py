"""PostgreSQL store (psycopg 3): many processes on many machines share one log.

Appends bump a per-conversation counter row with ``INSERT ... ON CONFLICT DO UPDATE ...
RETURNING`` and insert the messages in the same statement (one round trip): the row lock serializes
concurrent appends to one conversation (others proceed in parallel), so sequence numbers have
no gaps or duplicates and a failed transaction leaves nothing behind. A checkpoint commit locks
the same row (``SELECT ... FOR UPDATE``) before it checks the latest checkpoint and the log.

:meth:`PostgresStore.compaction_lock` takes a session-level advisory lock
(``pg_try_advisory_lock`` on a hash of the schema and conversation id) on a dedicated
connection held for the duration. That connection sets ``idle_session_timeout`` to the ttl, so
the server itself ends the session, and releases the lock, when a holder hangs past it or dies.

Durability is PostgreSQL's: a returned append is committed (and survives power loss under the
server's default ``synchronous_commit=on``).

The sync methods use a ``psycopg_pool.ConnectionPool`` and the async methods an
``AsyncConnectionPool``; each is created on first use, so a store used only from async code
never blocks the event loop to connect. Both run the same operations from
:mod:`contextfold.stores._sql`.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
)
from types import ModuleType
from typing import Any, TypeVar

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import MissingExtraError, StoreError
from contextfold.messages import Message
from contextfold.stores._codec import (
    check_conversation_id,
    check_read_args,
    check_ttl,
    encode_checkpoint,
    encode_messages,
    redact_url,
)
from contextfold.stores._sql import (
    Op,
    op_append,
    op_append_checkpoint,
    op_checkpoints,
    op_delete,
    op_last_seq,
    op_latest_checkpoint,
    op_list,
    op_migrate,
    op_read,
    op_schema_current,
    postgres_dialect,
    run_async,
    run_sync,
)
from contextfold.stores.base import StoredMessage

__all__ = ["PostgresStore"]

T = TypeVar("T")

_LOCK_SQL = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
_UNLOCK_SQL = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"
_IDLE_SQL = "SELECT set_config('idle_session_timeout', %s, false)"


def _modules() -> tuple[ModuleType, ModuleType]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise MissingExtraError("PostgresStore", "postgres") from exc
    return psycopg, psycopg_pool


def _empty() -> Op[list[int]]:
    return []
    yield  # pragma: no cover  (makes this a generator)


def _conninfo_of(conn: Any) -> str:
    """Connection string of an open connection, password included (for the lock's own)."""
    from psycopg.conninfo import make_conninfo

    password = conn.info.password
    return make_conninfo(conn.info.dsn, password=password) if password else str(conn.info.dsn)


class _OneConnection:
    """A caller's single connection behind the pool interface: one operation at a time.

    Like a pool's connection, each operation is committed at the end (or rolled back on
    error) unless the connection is in autocommit mode.
    """

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[Any]:
        with self._lock:
            try:
                yield self._conn
            except BaseException:
                if not self._conn.autocommit and not self._conn.closed:
                    self._conn.rollback()
                raise
            if not self._conn.autocommit:
                self._conn.commit()


class _OneAsyncConnection:
    """The async twin of :class:`_OneConnection`."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._lock: asyncio.Lock | None = None

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            try:
                yield self._conn
            except BaseException:
                if not self._conn.autocommit and not self._conn.closed:
                    await self._conn.rollback()
                raise
            if not self._conn.autocommit:
                await self._conn.commit()


class PostgresStore:
    """The append-only log in PostgreSQL tables (sync and async).

    Args:
        target: a ``postgresql://`` URL (or libpq conninfo string), an open
            ``psycopg.Connection`` / ``AsyncConnection`` (used for one operation at a time,
            each committed), or a ``psycopg_pool.ConnectionPool`` / ``AsyncConnectionPool``.
            A connection or pool passed in is not closed by the store; the other flavour, if
            the store needs it, is built from its connection string.
        schema: the PostgreSQL schema holding the tables (created when missing), so several
            applications or test runs can share a database.
        min_size: connections each pool keeps open.
        max_size: the most connections each pool opens.
        connect_timeout: seconds to wait for the server before raising :class:`StoreError`.

    The async pool belongs to the event loop that first used it: use one store per loop.
    """

    def __init__(
        self,
        target: Any,
        *,
        schema: str = "public",
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 5.0,
    ) -> None:
        psycopg, psycopg_pool = _modules()
        self._psycopg = psycopg
        self._pool_mod = psycopg_pool
        self._dialect = postgres_dialect(schema)
        # A one-statement append is atomic by itself; otherwise it needs a transaction.
        self._append_txn = not self._dialect.append_one_shot
        self._schema = schema
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._pool: Any = None
        self._apool: Any = None
        self._owns_pool = True
        self._owns_apool = True
        self._kwargs: dict[str, Any] = {}
        if isinstance(target, str):
            if "://" in target and not target.startswith(("postgresql://", "postgres://")):
                raise StoreError(f"not a PostgreSQL URL: {redact_url(target)!r}")
            self._conninfo = target
        elif isinstance(target, psycopg_pool.ConnectionPool):
            self._pool, self._owns_pool = target, False
            self._conninfo, self._kwargs = target.conninfo, dict(target.kwargs or {})
        elif isinstance(target, psycopg_pool.AsyncConnectionPool):
            self._apool, self._owns_apool = target, False
            self._conninfo, self._kwargs = target.conninfo, dict(target.kwargs or {})
        elif isinstance(target, psycopg.Connection):
            self._pool, self._owns_pool = _OneConnection(target), False
            self._conninfo = _conninfo_of(target)
        elif isinstance(target, psycopg.AsyncConnection):
            self._apool, self._owns_apool = _OneAsyncConnection(target), False
            self._conninfo = _conninfo_of(target)
        else:
            raise StoreError(
                "PostgresStore expects a postgresql:// URL, a psycopg connection or a "
                f"psycopg_pool pool, got {type(target).__name__}"
            )
        self._where = f"PostgreSQL {redact_url(self._conninfo)!r} (schema {schema!r})"
        self._init_lock = threading.Lock()
        self._sync_ready = False
        self._async_ready = False
        self._async_init: asyncio.Lock | None = None
        self._closed = False

    # -- connections ---------------------------------------------------------------------

    def _connect_kwargs(self) -> dict[str, Any]:
        kwargs = dict(self._kwargs)
        kwargs.setdefault("connect_timeout", max(2, math.ceil(self._connect_timeout)))
        return kwargs

    def _error(self, what: str, exc: BaseException, conversation_id: str = "") -> StoreError:
        where = f" for conversation {conversation_id!r}" if conversation_id else ""
        return StoreError(f"{what} failed on {self._where}{where}: {exc}")

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self._where} store is closed")

    def _ensure_sync(self) -> Any:
        self._check_open()
        if self._sync_ready:
            return self._pool
        with self._init_lock:
            if not self._sync_ready:
                try:
                    # One plain connection first: it reports an unreachable server precisely,
                    # and it brings the schema up to date before the pool serves anything.
                    with self._psycopg.connect(self._conninfo, **self._connect_kwargs()) as conn:
                        with conn.cursor() as cur:
                            current = run_sync(cur, op_schema_current(self._dialect))
                        if not current:
                            with conn.transaction(), conn.cursor() as cur:
                                run_sync(cur, op_migrate(self._dialect))
                    if self._pool is None:
                        pool = self._pool_mod.ConnectionPool(
                            self._conninfo,
                            min_size=self._min_size,
                            max_size=self._max_size,
                            kwargs=dict(self._connect_kwargs(), autocommit=True),
                            timeout=max(self._connect_timeout, 30.0),
                            open=False,
                            name="contextfold",
                        )
                        pool.open(wait=True, timeout=self._connect_timeout)
                        self._pool = pool
                except self._psycopg.Error as exc:
                    raise self._error("connect", exc) from exc
                except self._pool_mod.PoolTimeout as exc:
                    raise self._error("connect", exc) from exc
                self._sync_ready = True
        return self._pool

    async def _ensure_async(self) -> Any:
        self._check_open()
        if self._async_ready:
            return self._apool
        if self._async_init is None:
            self._async_init = asyncio.Lock()
        async with self._async_init:
            if not self._async_ready:
                try:
                    aconnect = self._psycopg.AsyncConnection.connect
                    async with await aconnect(self._conninfo, **self._connect_kwargs()) as conn:
                        async with conn.cursor() as cur:
                            current = await run_async(cur, op_schema_current(self._dialect))
                        if not current:
                            async with conn.transaction(), conn.cursor() as cur:
                                await run_async(cur, op_migrate(self._dialect))
                    if self._apool is None:
                        pool = self._pool_mod.AsyncConnectionPool(
                            self._conninfo,
                            min_size=self._min_size,
                            max_size=self._max_size,
                            kwargs=dict(self._connect_kwargs(), autocommit=True),
                            timeout=max(self._connect_timeout, 30.0),
                            open=False,
                            name="contextfold-async",
                        )
                        await pool.open(wait=True, timeout=self._connect_timeout)
                        self._apool = pool
                except self._psycopg.Error as exc:
                    raise self._error("connect", exc) from exc
                except self._pool_mod.PoolTimeout as exc:
                    raise self._error("connect", exc) from exc
                self._async_ready = True
        return self._apool

    def _run(self, op: Op[T], what: str, conversation_id: str = "", *, txn: bool = False) -> T:
        try:
            pool = self._ensure_sync()
        except BaseException:
            op.close()
            raise
        try:
            with (
                pool.connection() as conn,
                conn.transaction() if txn else nullcontext(),
                conn.cursor() as cur,
            ):
                return run_sync(cur, op)
        except self._psycopg.Error as exc:
            raise self._error(what, exc, conversation_id) from exc
        except self._pool_mod.PoolTimeout as exc:
            raise self._error(what, exc, conversation_id) from exc

    async def _arun(
        self, op: Op[T], what: str, conversation_id: str = "", *, txn: bool = False
    ) -> T:
        try:
            pool = await self._ensure_async()
        except BaseException:
            op.close()
            raise
        try:
            async with pool.connection() as conn:
                if not txn:
                    async with conn.cursor() as cur:
                        return await run_async(cur, op)
                async with conn.transaction(), conn.cursor() as cur:
                    return await run_async(cur, op)
        except self._psycopg.Error as exc:
            raise self._error(what, exc, conversation_id) from exc
        except self._pool_mod.PoolTimeout as exc:
            raise self._error(what, exc, conversation_id) from exc

    # -- operations, built once for both APIs --------------------------------------------

    def _append_op(self, conversation_id: str, messages: Sequence[Message]) -> Op[list[int]]:
        payloads = encode_messages(conversation_id, messages)
        return op_append(self._dialect, conversation_id, payloads) if payloads else _empty()

    def _lock_key(self, conversation_id: str) -> str:
        return f"contextfold:lock:{self._schema}:{conversation_id}"

    # -- sync API ------------------------------------------------------------------------

    def append(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        """Append atomically; return the sequence numbers given, in order."""
        cid = check_conversation_id(conversation_id)
        return self._run(self._append_op(cid, messages), "append", cid, txn=self._append_txn)

    def read(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after_seq``, oldest first; a primary-key range scan."""
        cid = check_conversation_id(conversation_id)
        check_read_args(after_seq, limit)
        return self._run(op_read(self._dialect, cid, after_seq, limit), "read", cid)

    def last_seq(self, conversation_id: str, /) -> int:
        """The newest sequence number, 0 for an empty or unknown conversation."""
        cid = check_conversation_id(conversation_id)
        return self._run(op_last_seq(self._dialect, cid), "last_seq", cid)

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
        data = encode_checkpoint(checkpoint)
        return self._run(
            op_append_checkpoint(self._dialect, cid, checkpoint, data, expected_previous),
            "append_checkpoint",
            cid,
            txn=True,
        )

    def latest_checkpoint(self, conversation_id: str, /) -> CheckpointRecord | None:
        """The newest committed checkpoint, if any."""
        cid = check_conversation_id(conversation_id)
        return self._run(op_latest_checkpoint(self._dialect, cid), "latest_checkpoint", cid)

    def checkpoints(self, conversation_id: str, /) -> list[CheckpointRecord]:
        """Every committed checkpoint, oldest first."""
        cid = check_conversation_id(conversation_id)
        return self._run(op_checkpoints(self._dialect, cid), "checkpoints", cid)

    @contextmanager
    def compaction_lock(self, conversation_id: str, /, *, ttl: float = 120.0) -> Iterator[bool]:
        """Try the conversation's advisory lock on a dedicated connection; yields if taken."""
        cid = check_conversation_id(conversation_id)
        seconds = check_ttl(ttl)
        self._ensure_sync()
        psycopg = self._psycopg
        key = self._lock_key(cid)
        try:
            kwargs = dict(self._connect_kwargs(), autocommit=True)
            conn = psycopg.connect(self._conninfo, **kwargs)
        except psycopg.Error as exc:
            raise self._error("compaction_lock", exc, cid) from exc
        try:
            conn.execute(_IDLE_SQL, (f"{max(1, round(seconds * 1000))}ms",))
            row = conn.execute(_LOCK_SQL, (key,)).fetchone()
            taken = bool(row and row[0])
        except psycopg.Error as exc:
            conn.close()
            raise self._error("compaction_lock", exc, cid) from exc
        if not taken:
            conn.close()
        try:
            yield taken
        finally:
            if taken:
                try:
                    conn.execute(_UNLOCK_SQL, (key,))
                except psycopg.Error:
                    pass  # the server already ended the session, which released the lock
                finally:
                    conn.close()

    def list_conversations(self) -> list[str]:
        """Ids of the stored conversations, sorted."""
        return self._run(op_list(self._dialect), "list_conversations")

    def delete(self, conversation_id: str, /) -> None:
        """Remove a conversation with its checkpoints."""
        cid = check_conversation_id(conversation_id)
        self._run(op_delete(self._dialect, cid), "delete", cid, txn=True)

    def close(self) -> None:
        """Close the sync pool this store created (use :meth:`aclose` for the async one)."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None and self._owns_pool:
            pool.close()

    # -- async API -----------------------------------------------------------------------

    async def aappend(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        """Async :meth:`append`."""
        cid = check_conversation_id(conversation_id)
        return await self._arun(self._append_op(cid, messages), "append", cid, txn=self._append_txn)

    async def aread(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """Async :meth:`read`."""
        cid = check_conversation_id(conversation_id)
        check_read_args(after_seq, limit)
        return await self._arun(op_read(self._dialect, cid, after_seq, limit), "read", cid)

    async def alast_seq(self, conversation_id: str, /) -> int:
        """Async :meth:`last_seq`."""
        cid = check_conversation_id(conversation_id)
        return await self._arun(op_last_seq(self._dialect, cid), "last_seq", cid)

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
        data = encode_checkpoint(checkpoint)
        return await self._arun(
            op_append_checkpoint(self._dialect, cid, checkpoint, data, expected_previous),
            "append_checkpoint",
            cid,
            txn=True,
        )

    async def alatest_checkpoint(self, conversation_id: str, /) -> CheckpointRecord | None:
        """Async :meth:`latest_checkpoint`."""
        cid = check_conversation_id(conversation_id)
        return await self._arun(op_latest_checkpoint(self._dialect, cid), "latest_checkpoint", cid)

    async def acheckpoints(self, conversation_id: str, /) -> list[CheckpointRecord]:
        """Async :meth:`checkpoints`."""
        cid = check_conversation_id(conversation_id)
        return await self._arun(op_checkpoints(self._dialect, cid), "checkpoints", cid)

    def acompaction_lock(
        self, conversation_id: str, /, *, ttl: float = 120.0
    ) -> AbstractAsyncContextManager[bool]:
        """Async :meth:`compaction_lock`."""
        return self._alock(conversation_id, ttl)

    @asynccontextmanager
    async def _alock(self, conversation_id: str, ttl: float) -> AsyncIterator[bool]:
        cid = check_conversation_id(conversation_id)
        seconds = check_ttl(ttl)
        await self._ensure_async()
        psycopg = self._psycopg
        key = self._lock_key(cid)
        try:
            kwargs = dict(self._connect_kwargs(), autocommit=True)
            conn = await psycopg.AsyncConnection.connect(self._conninfo, **kwargs)
        except psycopg.Error as exc:
            raise self._error("compaction_lock", exc, cid) from exc
        try:
            await conn.execute(_IDLE_SQL, (f"{max(1, round(seconds * 1000))}ms",))
            cur = await conn.execute(_LOCK_SQL, (key,))
            row = await cur.fetchone()
            taken = bool(row and row[0])
        except psycopg.Error as exc:
            await conn.close()
            raise self._error("compaction_lock", exc, cid) from exc
        if not taken:
            await conn.close()
        try:
            yield taken
        finally:
            if taken:
                try:
                    await conn.execute(_UNLOCK_SQL, (key,))
                except psycopg.Error:
                    pass  # the server already ended the session, which released the lock
                finally:
                    await conn.close()

    async def alist_conversations(self) -> list[str]:
        """Async :meth:`list_conversations`."""
        return await self._arun(op_list(self._dialect), "list_conversations")

    async def adelete(self, conversation_id: str, /) -> None:
        """Async :meth:`delete`."""
        cid = check_conversation_id(conversation_id)
        await self._arun(op_delete(self._dialect, cid), "delete", cid, txn=True)

    async def aclose(self) -> None:
        """Close both pools this store created."""
        apool, self._apool = self._apool, None
        if apool is not None and self._owns_apool:
            await apool.close()
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._where})"
