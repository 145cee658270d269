"""Connection helpers of the PostgreSQL store: a caller's connection as a pool, read deadlines.

:class:`~contextfold.stores.postgres.PostgresStore` runs every operation through
``pool.connection()``; a caller who passes one connection rather than a pool gets these
wrappers, which serve it to one operation at a time and commit each like a pool would.
:func:`read_deadline` bounds how long one operation may wait for the server.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

__all__ = ["OneAsyncConnection", "OneConnection", "conninfo_of", "read_deadline"]


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


class _Watchdog:
    """One daemon thread that runs callbacks whose deadline passed, unless cancelled first.

    Cheaper per operation than a timer thread each: arming is a heap push under a lock, and
    a cancelled entry is dropped when its time comes.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._live: dict[int, Callable[[], None]] = {}
        self._count = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, callback: Callable[[], None]) -> int:
        with self._cond:
            token = next(self._count)
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            self._live[token] = callback
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="contextfold-pg-deadlines", daemon=True
                )
                self._thread.start()
            self._cond.notify()
            return token

    def cancel(self, token: int) -> None:
        with self._cond:
            self._live.pop(token, None)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                due, token = self._heap[0]
                now = time.monotonic()
                if due > now and token in self._live:
                    self._cond.wait(due - now)
                    continue
                heapq.heappop(self._heap)
                callback = self._live.pop(token, None)
            if callback is not None:
                callback()


_WATCHDOG = _Watchdog()


def _shut_down(conn: Any) -> None:
    """Shut the connection's socket down, waking a thread or event loop blocked on it."""
    try:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
    except (OSError, ValueError, AttributeError):
        return  # already closed
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


@contextmanager
def read_deadline(conn: Any, seconds: float) -> Iterator[None]:
    """Cut ``conn`` if the block takes longer than ``seconds`` (sync or async callers).

    psycopg has no read timeout of its own, so a frozen server (or a network that drops
    packets silently) would block an operation forever. Shutting the socket down makes the
    blocked read fail at once, which psycopg reports as a broken connection; the pool then
    discards it. A deadline that fires just as the block ends does nothing: the flag below
    is checked under a lock.
    """
    lock = threading.Lock()
    done = False

    def expire() -> None:
        with lock:
            if not done:
                _shut_down(conn)

    token = _WATCHDOG.arm(seconds, expire)
    try:
        yield
    finally:
        with lock:
            done = True
        _WATCHDOG.cancel(token)
