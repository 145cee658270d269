"""SQLite store: the embedded default, standard library only.

The database runs in WAL mode. Every write is one ``BEGIN IMMEDIATE`` transaction, which takes
SQLite's write lock up front, so concurrent writers (threads or processes on the same machine)
queue on the busy timeout instead of failing half-way, and each append gets a contiguous block
of sequence numbers right after the conversation's newest one.

Messages live in one table keyed ``num << 32 | seq`` (``num`` numbers the conversation), so a
conversation is one contiguous key range: appends go to its end, the newest sequence number is
one B-tree seek, and a window is a range scan. Rows are the JSON every backend stores (see
:mod:`contextfold.stores._codec`); files from earlier versions may also hold compact text
rows, which are still read.

Durability: with the default ``synchronous="NORMAL"`` a committed append survives the writing
process being killed at any moment (the WAL is in the operating system's hands once the commit
returns), but the last commits may be lost if the machine loses power or the kernel crashes.
Pass ``synchronous="FULL"`` to sync the WAL on every commit and survive power loss too, at the
cost of one disk flush per append.

SQLite's locking needs a local file system; do not share the database over NFS. For many
machines, use the PostgreSQL or Redis store.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Sequence
from typing import Literal, TypeVar

from contextfold.errors import StoreError
from contextfold.messages import Message
from contextfold.stores._backend import Flow, LockingOpStore
from contextfold.stores._checks import check_conversation_id, check_positive
from contextfold.stores._codec import encode_messages
from contextfold.stores._dialects import sqlite_dialect
from contextfold.stores._sql import (
    SQLOpStore,
    op_append,
    op_release_lock,
    op_try_lock,
    run_sync,
)
from contextfold.stores._sql_schema import op_migrate, op_schema_current
from contextfold.stores.base import StoreConfigError

__all__ = ["SQLiteStore", "parse_sqlite_url"]

T = TypeVar("T")

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

#: The most messages an async append writes inline on the event loop.
_INLINE_MAX_MESSAGES = 32
#: One async append in this many takes the thread path, whose connection checkpoints the WAL.
_INLINE_CHECKPOINT_EVERY = 128


def parse_sqlite_url(url: str) -> str:
    """The database path of a ``sqlite://`` URL.

    ``sqlite:///chats.db`` is relative to the working directory, ``sqlite:////var/db/chats.db``
    is absolute, and ``sqlite:///:memory:`` is a private in-memory database.
    """
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise StoreConfigError(
            f"not a SQLite URL: {url!r} (expected sqlite:///relative.db, sqlite:////abs.db "
            "or sqlite:///:memory:)",
            argument="target",
        )
    return url[len(prefix) :]


def _file_identity(conn: sqlite3.Connection) -> tuple[str | None, tuple[int, int] | None]:
    """The main database's file path and its ``(device, inode)``; ``None`` without a file."""
    for _, name, file in conn.execute("PRAGMA database_list").fetchall():
        if name == "main" and file:
            try:
                st = os.stat(file)
            except OSError:
                return None, None
            return str(file), (st.st_dev, st.st_ino)
    return None, None


def _cannot_write(exc: sqlite3.Error) -> bool:
    """Whether opening failed only because the file or its folder cannot be written."""
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text


class SQLiteStore(SQLOpStore, LockingOpStore):
    """The append-only log in one SQLite database file (sync and async).

    Args:
        target: a ``sqlite:///`` URL, a file path, or an open ``sqlite3.Connection`` (used as
            is and not closed by :meth:`close`).
        synchronous: the ``PRAGMA synchronous`` level; ``"NORMAL"`` survives a killed process,
            ``"FULL"`` also survives power loss (see the module docs).
        timeout: seconds a writer waits for another writer before giving up with
            :class:`StoreError`.

    The async methods run the same code in a worker thread: SQLite calls are short and local,
    and one connection guarded by a lock serves both. The exception is :meth:`aappend` of a
    few messages on a file database in WAL mode with ``synchronous`` ``NORMAL`` or ``OFF``: a
    commit there writes to the operating system's cache and never waits for the disk, so it
    runs right in the event loop, on a second connection that never waits for a lock; when
    another writer holds the lock, the append goes to the worker thread like the others. That
    connection never runs a WAL checkpoint (which syncs to disk); every so often an append
    takes the thread path so the main connection can.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | sqlite3.Connection = "sqlite:///contextfold.db",
        *,
        synchronous: Synchronous = "NORMAL",
        timeout: float = 30.0,
    ) -> None:
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StoreConfigError(
                f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}",
                argument="synchronous",
            )
        check_positive(timeout, "timeout", zero=True)
        self._dialect = sqlite_dialect()
        self._lock = threading.RLock()
        self._owned = not isinstance(target, sqlite3.Connection)
        conn, path = self._connect(target, timeout)
        in_memory = path == ":memory:" or path.startswith("file::memory:")
        self._conn: sqlite3.Connection | None = conn
        self._file: str | None = None
        self._identity: tuple[int, int] | None = None
        self._inline: sqlite3.Connection | None = None
        self._inline_lock = threading.Lock()
        self._inline_calls = 0
        #: Opened read-only because the file (or its folder) cannot be written: every
        #: read works, every write raises StoreError.
        self.read_only = False
        try:
            try:
                self._prepare(conn, path, synchronous, timeout, wal=self._owned and not in_memory)
            except sqlite3.Error as exc:
                if not (self._owned and not in_memory and _cannot_write(exc)):
                    raise
                self._discard()
                self._conn = conn = self._connect_read_only(path, timeout)
                self.read_only = True
                self._prepare(conn, path, synchronous, timeout, wal=False)
        except BaseException as exc:
            self._discard()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot open {self._where}: {exc}") from exc
            raise

    def _prepare(
        self, conn: sqlite3.Connection, path: str, synchronous: str, timeout: float, *, wal: bool
    ) -> None:
        """Set the connection up, bring the schema up to date, open the inline connection."""
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        in_wal = False
        if wal:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            in_wal = bool(mode) and str(mode[0]).lower() == "wal"
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        self._file, self._identity = _file_identity(conn)
        if not self._run(op_schema_current(self._dialect), "open"):
            if self.read_only:
                raise StoreError(
                    f"{self._where} is read-only and its schema needs migrating: open it "
                    "once with write access (with this contextfold version) first"
                )
            self._run(op_migrate(self._dialect), "migrate", write=True)
        if in_wal and synchronous in ("NORMAL", "OFF"):
            try:
                self._inline = self._open_inline(path, synchronous)
            except sqlite3.Error:
                self._inline = None  # optional: async appends then all use the thread

    def _discard(self) -> None:
        """Close what a failed open left behind (not a connection the caller passed)."""
        if self._conn is not None and self._owned:
            self._conn.close()
        if self._inline is not None:
            self._inline.close()
            self._inline = None
        self._conn = None

    def _connect_read_only(self, path: str, timeout: float) -> sqlite3.Connection:
        """A read-only connection to ``path``.

        ``mode=ro`` still needs the WAL index of a WAL database, which SQLite cannot create
        in a folder it may not write; such a file is opened ``immutable`` (nothing else can
        write it either, or the index would exist).
        """
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)
        conn.isolation_level = None
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error:
            conn.close()
            conn = sqlite3.connect(
                uri + "&immutable=1", uri=True, timeout=timeout, check_same_thread=False
            )
            conn.isolation_level = None
        return conn

    # -- plumbing ------------------------------------------------------------------------

    def _connect(
        self, target: str | os.PathLike[str] | sqlite3.Connection, timeout: float
    ) -> tuple[sqlite3.Connection, str]:
        """The connection and the path it was opened on (``""`` for a given connection)."""
        if isinstance(target, sqlite3.Connection):
            self._where = "the given sqlite3 connection"
            return target, ""
        raw = os.fspath(target)
        path = parse_sqlite_url(raw) if raw.startswith("sqlite:") else raw
        self._where = f"SQLite database {path!r}"
        try:
            conn = sqlite3.connect(
                path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self._where}: {exc}") from exc
        return conn, path

    @staticmethod
    def _open_inline(path: str, synchronous: str) -> sqlite3.Connection:
        """The event loop's connection: never waits for a lock, never checkpoints."""
        inline = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
        try:
            inline.execute("PRAGMA busy_timeout = 0")
            inline.execute(f"PRAGMA synchronous = {synchronous}")
            inline.execute("PRAGMA wal_autocheckpoint = 0")
        except BaseException:
            inline.close()
            raise
        return inline

    def _abandon_inline_transaction(self, inline: sqlite3.Connection) -> None:
        """Roll back; if even that fails, close the connection (which rolls back) for good."""
        if not inline.in_transaction:
            return
        try:
            inline.execute("ROLLBACK")
        except sqlite3.Error:
            self._inline = None
            inline.close()

    def _append_inline(self, conversation_id: str, messages: Sequence[Message]) -> list[int] | None:
        """Append on the inline connection if that cannot block; ``None`` when it could."""
        inline = self._inline
        if (
            inline is None
            or not isinstance(messages, Sequence)
            or len(messages) > _INLINE_MAX_MESSAGES
        ):
            return None
        self._inline_calls += 1
        if self._inline_calls % _INLINE_CHECKPOINT_EVERY == 0:
            return None  # the main connection commits this one and may checkpoint the WAL
        if not self._inline_lock.acquire(blocking=False):
            return None
        try:
            if self._inline is None:  # closed meanwhile
                return None
            cid = check_conversation_id(conversation_id)
            payloads = encode_messages(cid, messages)
            if not payloads:
                return []
            cur = inline.cursor()
            try:
                try:
                    cur.execute("BEGIN IMMEDIATE")
                except sqlite3.Error:
                    return None  # another writer holds the lock: wait for it in a thread
                try:
                    self._check_file()
                    op = op_append(self._dialect, cid, payloads, [m.id for m in messages])
                    result = run_sync(cur, op)
                    cur.execute("COMMIT")
                except BaseException as exc:
                    self._abandon_inline_transaction(inline)
                    if isinstance(exc, sqlite3.Error):
                        return None  # nothing was stored; the thread path retries and reports
                    raise
                return result
            finally:
                cur.close()
        finally:
            self._inline_lock.release()

    def _check_file(self) -> None:
        """Raise if the database file was deleted or replaced since the store opened it.

        An open connection keeps writing to the file it opened, even once that file is
        unlinked or renamed over, so every later append would be lost without an error.
        Called inside each write transaction: one ``stat`` call, far cheaper than the commit.
        """
        if self._file is None:
            return
        try:
            st = os.stat(self._file)
        except OSError:
            found = None
        else:
            found = (st.st_dev, st.st_ino)
        if found != self._identity:
            gone = "deleted" if found is None else "replaced by another file"
            raise StoreError(
                f"{self._where} was {gone} since the store opened it; writes would be lost, "
                "so nothing was stored: open the store again"
            )

    def _run(self, op: Flow[T], what: str, cid: str = "", *, write: bool = False) -> T:
        with self._lock:
            conn = self._conn
            if conn is None:
                op.close()
                raise StoreError(f"{self._where} is closed")
            cur = conn.cursor()
            cur.row_factory = None
            try:
                if write:
                    if conn.in_transaction:
                        op.close()
                        raise StoreError(
                            f"{what} on {self._where}: the connection already has an open "
                            "transaction; pass a connection in autocommit or legacy mode"
                        )
                    # Explicit statements rather than commit()/rollback(), which do nothing
                    # on a connection in autocommit mode (Python 3.12+).
                    cur.execute("BEGIN IMMEDIATE")
                    try:
                        self._check_file()
                        result = run_sync(cur, op)
                    except BaseException:
                        if conn.in_transaction:
                            cur.execute("ROLLBACK")
                        raise
                    cur.execute("COMMIT")
                    return result
                return run_sync(cur, op)
            except sqlite3.Error as exc:
                where = f" for conversation {cid!r}" if cid else ""
                raise StoreError(f"{what} failed on {self._where}{where}: {exc}") from exc
            finally:
                cur.close()

    async def _arun(self, op: Flow[T], what: str, cid: str = "", *, write: bool = False) -> T:
        # SQLite calls are short and local: a worker thread, with the same lock as sync calls.
        return await asyncio.to_thread(self._run, op, what, cid, write=write)

    # -- operations ----------------------------------------------------------------------

    def _op_try_lock(self, cid: str, token: str, ttl: float) -> Flow[bool]:
        # A lock row with an expiry in wall-clock time: the claim is a write transaction, so
        # exactly one process on the machine wins, and a dead holder's row expires.
        return op_try_lock(self._dialect, cid, token, time.time(), ttl)

    def _op_release_lock(self, cid: str, token: str) -> Flow[None]:
        return op_release_lock(self._dialect, cid, token)

    # -- lifecycle and the inline async append -------------------------------------------

    def close(self) -> None:
        """Close the connection (a connection passed in by the caller is left open)."""
        with self._inline_lock:
            inline, self._inline = self._inline, None
            if inline is not None:
                inline.close()
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._owned:
                conn.close()

    async def aappend(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        """Async :meth:`append`.

        A few messages are written inline when that cannot block (see the class docs),
        otherwise in a worker thread.
        """
        seqs = self._append_inline(conversation_id, messages)
        if seqs is not None:
            await asyncio.sleep(0)  # a loop of appends still lets other tasks run
            return seqs
        return await super().aappend(conversation_id, messages)

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self._where})"
