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
from collections.abc import AsyncIterator, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
)
from types import ModuleType
from typing import Any, TypeVar
from urllib.parse import unquote

from contextfold.errors import MissingExtraError, StoreError
from contextfold.stores._backend import Flow
from contextfold.stores._checks import (
    LoopRef,
    check_conversation_id,
    check_positive,
    check_ttl,
    redact_url,
    same_event_loop,
    url_password,
)
from contextfold.stores._dialects import postgres_dialect
from contextfold.stores._pg_connections import (
    OneAsyncConnection,
    OneConnection,
    conninfo_of,
    read_deadline,
)
from contextfold.stores._sql import (
    SQLOpStore,
    run_async,
    run_sync,
)
from contextfold.stores._sql_schema import op_migrate, op_schema_current
from contextfold.stores.base import StoreConfigError

__all__ = ["PostgresStore"]

T = TypeVar("T")

_LOCK_SQL = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
_UNLOCK_SQL = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"
_IDLE_SQL = "SELECT set_config('idle_session_timeout', %s, false)"
_NO_STATEMENT_TIMEOUT = "SET LOCAL statement_timeout = 0"


def _modules() -> tuple[ModuleType, ModuleType]:
    try:
        import psycopg
        import psycopg.conninfo
        import psycopg_pool
    except ImportError as exc:
        raise MissingExtraError("PostgresStore", "postgres") from exc
    return psycopg, psycopg_pool


class PostgresStore(SQLOpStore):
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
        connect_timeout: seconds to wait for a connection (from the server, or from a pool
            whose connections are all busy) before raising :class:`StoreError`; libpq
            rounds it up to whole seconds, 2 at least.
        read_timeout: seconds one operation may wait for the server before raising
            :class:`StoreError` (a frozen server, or a network that drops packets without a
            word); also the server's ``statement_timeout`` on the store's own connections.
            An append that timed out may have been applied: retry it, it stores nothing
            twice.
        migration_timeout: seconds the one-off schema migration of a first use may take
            (it may rewrite every row of a large table, so ``read_timeout`` does not bound
            it, nor does the server's ``statement_timeout``) before the client cuts the
            connection and raises :class:`StoreError`; the migration is then rolled back,
            and the next call starts it again. The schema check before it has
            ``read_timeout``.

    After a connection failure the store's own pools are replaced rather than left to
    reconnect with growing back-off, so the first call after an outage reconnects at once.

    The async pool belongs to the event loop that first used it: use one store per loop
    (an async call from another loop raises :class:`StoreError`).
    """

    def __init__(
        self,
        target: Any,
        *,
        schema: str = "public",
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 5.0,
        read_timeout: float = 10.0,
        migration_timeout: float = 3600.0,
    ) -> None:
        check_positive(min_size, "min_size", integer=True, zero=True)
        check_positive(max_size, "max_size", integer=True)
        if max_size < min_size:
            raise StoreConfigError(
                f"max_size ({max_size}) must be at least min_size ({min_size})",
                argument="max_size",
            )
        check_positive(connect_timeout, "connect_timeout")
        check_positive(read_timeout, "read_timeout")
        check_positive(migration_timeout, "migration_timeout")
        psycopg, psycopg_pool = _modules()
        self._psycopg = psycopg
        self._pool_mod = psycopg_pool
        self._dialect = postgres_dialect(schema)
        self._schema = schema
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._migration_timeout = migration_timeout
        self._pool: Any = None
        self._apool: Any = None
        self._owns_pool = True
        self._owns_apool = True
        self._kwargs: dict[str, Any] = {}
        self._conninfo = self._adopt(target)
        self._where = f"PostgreSQL {redact_url(self._conninfo)!r} (schema {schema!r})"
        #: Passwords an error message must not show, and whether libpq's own text may be
        #: shown at all (see _check_conninfo).
        self._secrets: tuple[str, ...] = ()
        self._libpq_text_safe = True
        self._check_conninfo()
        self._init_lock = threading.Lock()
        self._sync_ready = False
        self._async_ready = False
        self._async_init: asyncio.Lock | None = None
        self._aloop: LoopRef | None = None
        self._closed = False
        #: An async pool dropped by :meth:`_failed` from sync code, closed on the next call.
        self._stale_apool: Any = None

    # -- connections ---------------------------------------------------------------------

    def _adopt(self, target: Any) -> str:
        """Take over a caller's pool or connection (not owned); the connection string."""
        psycopg, psycopg_pool = self._psycopg, self._pool_mod
        if isinstance(target, str):
            if "://" in target and not target.startswith(("postgresql://", "postgres://")):
                raise StoreConfigError(
                    f"not a PostgreSQL URL: {redact_url(target)!r}", argument="target"
                )
            return target
        if isinstance(target, psycopg_pool.ConnectionPool):
            self._pool, self._owns_pool = target, False
            self._kwargs = dict(target.kwargs or {})
            return str(target.conninfo)
        if isinstance(target, psycopg_pool.AsyncConnectionPool):
            self._apool, self._owns_apool = target, False
            self._kwargs = dict(target.kwargs or {})
            return str(target.conninfo)
        if isinstance(target, psycopg.Connection):
            self._pool, self._owns_pool = OneConnection(target), False
            return conninfo_of(target)
        if isinstance(target, psycopg.AsyncConnection):
            self._apool, self._owns_apool = OneAsyncConnection(target), False
            return conninfo_of(target)
        raise StoreConfigError(
            "PostgresStore expects a postgresql:// URL, a psycopg connection or a "
            f"psycopg_pool pool, got {type(target).__name__}",
            argument="target",
        )

    def _check_conninfo(self) -> None:
        """Parse the connection string now, and note what its errors must not show.

        libpq's messages quote what they could not parse (``invalid percent-encoded token:
        "50%offSecret"``) or what they read: libpq ends a URL's password at its first ``@``
        and the host at the first ``/``, so from a password with those unencoded it reads a
        host, port or database holding the rest of the password, and names them when the
        connection fails.

        Raises:
            StoreConfigError: the string cannot be parsed (libpq's message is left out).
        """
        try:
            params = self._psycopg.conninfo.conninfo_to_dict(self._conninfo)
        except (self._psycopg.Error, ValueError):
            raise StoreConfigError(
                f"cannot parse the PostgreSQL connection string {redact_url(self._conninfo)!r}"
                " (percent-encode any '%', '/', '@', ':' or blank in a URL's password)",
                argument="target",
            ) from None
        password = params.get("password")
        self._secrets = tuple(
            str(p) for p in (password, self._kwargs.get("password")) if p and isinstance(p, str)
        )
        raw = url_password(self._conninfo)
        # redact_url hides everything up to the last '@'; libpq read another password than
        # that when the password held an unencoded '/' or '@'.
        self._libpq_text_safe = raw is None or unquote(raw) == password

    def _connect_kwargs(self) -> dict[str, Any]:
        kwargs = dict(self._kwargs)
        kwargs.setdefault("connect_timeout", max(2, math.ceil(self._connect_timeout)))
        ms = max(1, round(self._read_timeout * 1000))
        kwargs.setdefault("options", f"-c statement_timeout={ms}")
        return kwargs

    def _pool_settings(self, name: str) -> dict[str, Any]:
        """What both of the store's own pools are built with."""
        return {
            "min_size": self._min_size,
            "max_size": self._max_size,
            "kwargs": dict(self._connect_kwargs(), autocommit=True),
            "timeout": self._connect_timeout,
            "open": False,
            "name": name,
        }

    def _failed(self, exc: BaseException, conn: Any = None) -> None:
        """Drop a pool of ours whose connection broke, so the next call starts afresh.

        psycopg_pool reconnects in the background with growing back-off; after an outage the
        first call could wait tens of seconds for it. A new pool connects at once.
        """
        if not isinstance(exc, self._pool_mod.PoolTimeout) and not (
            conn is not None and conn.broken
        ):
            return
        if self._owns_pool and self._pool is not None:
            pool, self._pool = self._pool, None
            pool.close(timeout=0)
        if self._owns_apool and self._apool is not None:
            self._stale_apool, self._apool = self._apool, None

    def _error(self, what: str, exc: BaseException, conversation_id: str = "") -> StoreError:
        where = f" for conversation {conversation_id!r}" if conversation_id else ""
        if self._libpq_text_safe:
            text = str(exc)
            for secret in self._secrets:
                text = text.replace(secret, "***")
        else:
            text = (
                f"{type(exc).__name__} (its message is left out: libpq read part of the "
                "password as the host, port or database, and may quote it; percent-encode "
                "any '/', '@' or ':' in the password)"
            )
        return StoreError(f"{what} failed on {self._where}{where}: {text}")

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self._where} store is closed")

    def _ensure_sync(self) -> Any:
        self._check_open()
        if self._sync_ready and self._pool is not None:
            return self._pool
        with self._init_lock:
            if not self._sync_ready or self._pool is None:
                try:
                    # One plain connection first: it reports an unreachable server precisely,
                    # and it brings the schema up to date before the pool serves anything.
                    if not self._sync_ready:
                        self._migrate_sync()
                    if self._pool is None:
                        pool = self._pool_mod.ConnectionPool(
                            self._conninfo, **self._pool_settings("contextfold")
                        )
                        pool.open(wait=True, timeout=self._connect_timeout)
                        self._pool = pool
                except self._psycopg.Error as exc:
                    raise self._error("connect", exc) from exc
                except (self._pool_mod.PoolTimeout, UnicodeError) as exc:
                    # UnicodeError: psycopg resolves host names itself, and one that IDNA
                    # cannot encode (a label over 63 characters, say) raises it.
                    raise self._error("connect", exc) from exc
                self._sync_ready = True
        return self._pool

    def _migrate_sync(self) -> None:
        """One plain connection first: it reports an unreachable server precisely, and it
        brings the schema up to date before the pool serves anything.

        Both steps run under the store's init lock, so each has a deadline: a server that
        froze after accepting the connection would otherwise block this call, and every
        other first call waiting on the lock, forever.
        """
        with self._psycopg.connect(self._conninfo, **self._connect_kwargs()) as conn:
            with read_deadline(conn, self._read_timeout), conn.cursor() as cur:
                current = run_sync(cur, op_schema_current(self._dialect))
            if not current:
                with (
                    read_deadline(conn, self._migration_timeout),
                    conn.transaction(),
                    conn.cursor() as cur,
                ):
                    # A migration may rewrite a large table: read_timeout bounds operations,
                    # not this one-off step, which has migration_timeout instead.
                    cur.execute(_NO_STATEMENT_TIMEOUT)
                    run_sync(cur, op_migrate(self._dialect))

    async def _migrate_async(self) -> None:
        """Async :meth:`_migrate_sync`."""
        aconnect = self._psycopg.AsyncConnection.connect
        async with await aconnect(self._conninfo, **self._connect_kwargs()) as conn:
            with read_deadline(conn, self._read_timeout):
                async with conn.cursor() as cur:
                    current = await run_async(cur, op_schema_current(self._dialect))
            if not current:
                with read_deadline(conn, self._migration_timeout):
                    async with conn.transaction(), conn.cursor() as cur:
                        await cur.execute(_NO_STATEMENT_TIMEOUT)
                        await run_async(cur, op_migrate(self._dialect))

    async def _ensure_async(self) -> Any:
        self._check_open()
        self._aloop = same_event_loop(self._aloop, self._where)
        if self._stale_apool is not None:
            stale, self._stale_apool = self._stale_apool, None
            await stale.close(timeout=0)
        if self._async_ready and self._apool is not None:
            return self._apool
        if self._async_init is None:
            self._async_init = asyncio.Lock()
        async with self._async_init:
            if not self._async_ready or self._apool is None:
                try:
                    if not self._async_ready:
                        await self._migrate_async()
                    if self._apool is None:
                        pool = self._pool_mod.AsyncConnectionPool(
                            self._conninfo, **self._pool_settings("contextfold-async")
                        )
                        await pool.open(wait=True, timeout=self._connect_timeout)
                        self._apool = pool
                except self._psycopg.Error as exc:
                    raise self._error("connect", exc) from exc
                except (self._pool_mod.PoolTimeout, UnicodeError) as exc:
                    raise self._error("connect", exc) from exc
                self._async_ready = True
        return self._apool

    def _run(self, op: Flow[T], what: str, cid: str = "", *, write: bool = False) -> T:
        try:
            pool = self._ensure_sync()
        except BaseException:
            op.close()
            raise
        conn = None
        try:
            with (
                pool.connection() as conn,
                read_deadline(conn, self._read_timeout),
                conn.transaction() if write else nullcontext(),
                conn.cursor() as cur,
            ):
                return run_sync(cur, op)
        except (self._psycopg.Error, self._pool_mod.PoolTimeout) as exc:
            self._failed(exc, conn)
            raise self._error(what, exc, cid) from exc

    async def _arun(self, op: Flow[T], what: str, cid: str = "", *, write: bool = False) -> T:
        try:
            pool = await self._ensure_async()
        except BaseException:
            op.close()
            raise
        conn = None
        try:
            async with pool.connection() as conn:
                with read_deadline(conn, self._read_timeout):
                    if not write:
                        async with conn.cursor() as cur:
                            return await run_async(cur, op)
                    async with conn.transaction(), conn.cursor() as cur:
                        return await run_async(cur, op)
        except (self._psycopg.Error, self._pool_mod.PoolTimeout) as exc:
            self._failed(exc, conn)
            raise self._error(what, exc, cid) from exc

    # -- operations ----------------------------------------------------------------------

    def _lock_key(self, conversation_id: str) -> str:
        return f"contextfold:lock:{self._schema}:{conversation_id}"

    # -- the compaction lock: an advisory lock on a connection of its own ---------------

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
        except (psycopg.Error, UnicodeError) as exc:
            raise self._error("compaction_lock", exc, cid) from exc
        try:
            with read_deadline(conn, self._read_timeout):
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
                    with read_deadline(conn, self._read_timeout):
                        conn.execute(_UNLOCK_SQL, (key,))
                except psycopg.Error:
                    # The session is gone, and the lock with it: the server ended it, or the
                    # deadline cut a frozen connection, whose session the server ends within
                    # the ttl (idle_session_timeout) if it does not notice sooner.
                    pass
                finally:
                    conn.close()

    def close(self) -> None:
        """Close the sync pool this store created (use :meth:`aclose` for the async one)."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None and self._owns_pool:
            pool.close()

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
        except (psycopg.Error, UnicodeError) as exc:
            raise self._error("compaction_lock", exc, cid) from exc
        try:
            with read_deadline(conn, self._read_timeout):
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
                    with read_deadline(conn, self._read_timeout):
                        await conn.execute(_UNLOCK_SQL, (key,))
                except psycopg.Error:
                    pass  # the session is gone, and the lock with it (as in compaction_lock)
                finally:
                    await conn.close()

    async def aclose(self) -> None:
        """Close both pools this store created."""
        apool, self._apool = self._apool, None
        if apool is not None and self._owns_apool:
            await apool.close()
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._where})"
