"""A caller's own psycopg connection behind the interface of a psycopg_pool pool.

:class:`~contextfold.stores.postgres.PostgresStore` runs every operation through
``pool.connection()``; a caller who passes one connection rather than a pool gets these
wrappers, which serve it to one operation at a time and commit each like a pool would.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

__all__ = ["OneAsyncConnection", "OneConnection", "conninfo_of"]


def conninfo_of(conn: Any) -> str:
    """Connection string of an open connection, password included (for the lock's own)."""
    from psycopg.conninfo import make_conninfo

    password = conn.info.password
    return make_conninfo(conn.info.dsn, password=password) if password else str(conn.info.dsn)


class OneConnection:
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


class OneAsyncConnection:
    """The async twin of :class:`OneConnection`."""

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
