"""The SQL stores' logic, written once for SQLite and PostgreSQL, sync and async.

Each operation is a sans-I/O generator: it yields :class:`Query` objects and receives the
rows each one returned, then returns its result. A driver owns the connection and the
transaction; :func:`run_sync` works with any DB-API cursor (``sqlite3``, psycopg) and
:func:`run_async` with a psycopg ``AsyncCursor``. A :class:`Dialect` holds the SQL text of one
database, so the rules (sequence numbering, the checkpoint commit check, migrations) live in
one place and the backends only differ in how they talk to their server.

Schema changes are named migrations recorded in a ``contextfold_schema`` table. They are
applied inside one write transaction, so they are all-or-nothing, and running them again does
nothing. A database that records a migration this version does not know (written by a newer
contextfold) is refused with :class:`StoreError` rather than read wrongly.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Any, TypeVar

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import StoreError
from contextfold.stores._codec import (
    check_checkpoint_commit,
    decode_checkpoint,
    decode_rows,
)
from contextfold.stores.base import StoredMessage

T = TypeVar("T")

Rows = list[Sequence[Any]]


@dataclass(frozen=True, slots=True)
class Query:
    """One statement: ``many`` runs it once per parameter tuple in ``params``."""

    sql: str
    params: Sequence[Any] = ()
    many: bool = False


Op = Generator[Query, Rows, T]

#: The largest sequence number a conversation can reach (SQLite packs it in 32 bits).
MAX_SEQ = 2**32 - 1


@dataclass(frozen=True, slots=True)
class Migration:
    """A named schema step; ``statements`` run in order inside the migration transaction."""

    version: int
    name: str
    statements: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Dialect:
    """The SQL text of one database; see :func:`sqlite_dialect` and :func:`postgres_dialect`."""

    name: str
    migrations: tuple[Migration, ...]
    schema_table_exists: str
    create_schema_table: tuple[str, ...]
    select_schema: str
    insert_schema: str
    migration_lock: str | None
    bump: str
    bump_returns: bool
    select_key_and_last: str
    select_last_seq: str
    lock_conversation: str
    insert_messages: str
    insert_uses_arrays: bool
    select_messages: str
    no_limit: int | None
    select_latest_checkpoint_id: str
    select_latest_checkpoint: str
    select_checkpoints: str
    insert_checkpoint: str
    select_conversations: str
    delete_statements: tuple[str, ...]
    append_one_shot: str = ""
    packed_keys: bool = False
    insert_conversation: str = ""
    select_lock: str = ""
    upsert_lock: str = ""
    release_lock: str = ""


def _sqlite_migrations() -> tuple[Migration, ...]:
    return (
        Migration(
            1,
            "0001_initial_log",
            (
                # A message's rowid is ``num << 32 | seq`` (``num`` numbers conversations):
                # one B-tree, rows appended at the end of their conversation's key range,
                # and a tail window is a rowid range scan.
                "CREATE TABLE IF NOT EXISTS contextfold_conversations ("
                " num INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, last_seq INTEGER NOT NULL)",
                "CREATE TABLE IF NOT EXISTS contextfold_messages ("
                " key INTEGER PRIMARY KEY, data TEXT NOT NULL)",
                "CREATE TABLE IF NOT EXISTS contextfold_checkpoints ("
                " conversation_id TEXT NOT NULL, n INTEGER NOT NULL, id TEXT NOT NULL,"
                " data TEXT NOT NULL, PRIMARY KEY (conversation_id, n))",
                "CREATE TABLE IF NOT EXISTS contextfold_locks ("
                " conversation_id TEXT PRIMARY KEY, token TEXT NOT NULL,"
                " expires_at REAL NOT NULL)",
            ),
        ),
        # No table changes, but from here on rows may be compact (see ``_codec``) and the
        # next seq follows the largest key (``last_seq`` is no longer kept). An older
        # contextfold could neither read nor number such a log, so it must refuse the file.
        Migration(2, "0002_compact_text_rows", ()),
    )


_SQLITE_MAX_KEY = (
    "(SELECT max(m.key) FROM contextfold_messages AS m"
    " WHERE m.key > (c.num << 32) AND m.key < ((c.num + 1) << 32))"
)
_SQLITE_LAST_KEY = (
    f"SELECT c.num, {_SQLITE_MAX_KEY} FROM contextfold_conversations AS c WHERE c.id = ?"
)
_SQLITE_LAST_SEQ = (
    f"SELECT coalesce({_SQLITE_MAX_KEY} - (c.num << 32), 0)"
    " FROM contextfold_conversations AS c WHERE c.id = ?"
)


def sqlite_dialect() -> Dialect:
    """SQLite (3.24+)."""
    return Dialect(
        name="sqlite",
        migrations=_sqlite_migrations(),
        schema_table_exists=(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'contextfold_schema'"
        ),
        create_schema_table=(
            "CREATE TABLE IF NOT EXISTS contextfold_schema ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)",
        ),
        select_schema="SELECT version, name FROM contextfold_schema ORDER BY version",
        insert_schema=(
            "INSERT INTO contextfold_schema (version, name, applied_at)"
            " VALUES (?, ?, strftime('%s', 'now'))"
        ),
        migration_lock=None,
        # The sequence counter is the conversation's largest key (a B-tree seek): an append
        # then dirties only the message pages, not a counter row as well. The last_seq column
        # of 0001 is no longer kept up to date from 0002 on.
        bump="",
        bump_returns=False,
        select_key_and_last=_SQLITE_LAST_KEY,
        select_last_seq=_SQLITE_LAST_SEQ,
        lock_conversation=_SQLITE_LAST_SEQ,
        insert_conversation="INSERT INTO contextfold_conversations (id, last_seq) VALUES (?, 0)",
        # Rows go in as multi-row VALUES lists (see op_append); this is the statement head.
        insert_messages="INSERT INTO contextfold_messages (key, data) VALUES ",
        insert_uses_arrays=False,
        packed_keys=True,
        select_messages=(
            "WITH c AS (SELECT num << 32 AS base FROM contextfold_conversations WHERE id = ?)"
            " SELECT m.key - c.base, m.data FROM c, contextfold_messages AS m"
            " WHERE m.key > c.base + ? AND m.key < c.base + 4294967296 ORDER BY m.key LIMIT ?"
        ),
        no_limit=-1,
        select_latest_checkpoint_id=(
            "SELECT n, id FROM contextfold_checkpoints WHERE conversation_id = ?"
            " ORDER BY n DESC LIMIT 1"
        ),
        select_latest_checkpoint=(
            "SELECT n, data FROM contextfold_checkpoints WHERE conversation_id = ?"
            " ORDER BY n DESC LIMIT 1"
        ),
        select_checkpoints=(
            "SELECT n, data FROM contextfold_checkpoints WHERE conversation_id = ? ORDER BY n"
        ),
        insert_checkpoint=(
            "INSERT INTO contextfold_checkpoints (conversation_id, n, id, data) VALUES (?, ?, ?, ?)"
        ),
        select_conversations="SELECT id FROM contextfold_conversations ORDER BY id",
        delete_statements=(
            "WITH c AS (SELECT num << 32 AS base FROM contextfold_conversations WHERE id = ?)"
            " DELETE FROM contextfold_messages"
            " WHERE key >= (SELECT base FROM c) AND key < (SELECT base FROM c) + 4294967296",
            "DELETE FROM contextfold_checkpoints WHERE conversation_id = ?",
            "DELETE FROM contextfold_locks WHERE conversation_id = ?",
            "DELETE FROM contextfold_conversations WHERE id = ?",
        ),
        select_lock="SELECT token, expires_at FROM contextfold_locks WHERE conversation_id = ?",
        upsert_lock=(
            "INSERT INTO contextfold_locks (conversation_id, token, expires_at) VALUES (?, ?, ?)"
            " ON CONFLICT (conversation_id) DO UPDATE"
            " SET token = excluded.token, expires_at = excluded.expires_at"
        ),
        release_lock="DELETE FROM contextfold_locks WHERE conversation_id = ? AND token = ?",
    )


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def check_identifier(name: str, what: str) -> str:
    """A safe, unquoted SQL identifier (letters, digits, underscore)."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise StoreError(f"{what} must be a plain SQL identifier, got {name!r}")
    return name


def postgres_dialect(schema: str) -> Dialect:
    """PostgreSQL 11+ tables inside ``schema`` (created when missing)."""
    s = check_identifier(schema, "schema")
    conv = f'"{s}".contextfold_conversations'
    msgs = f'"{s}".contextfold_messages'
    ckpts = f'"{s}".contextfold_checkpoints'
    table = f'"{s}".contextfold_schema'
    migrations = (
        Migration(
            1,
            "0001_initial_log",
            (
                f"CREATE TABLE IF NOT EXISTS {conv} ("
                " id TEXT PRIMARY KEY, last_seq BIGINT NOT NULL)",
                f"CREATE TABLE IF NOT EXISTS {msgs} ("
                " conversation_id TEXT NOT NULL, seq BIGINT NOT NULL, data TEXT NOT NULL,"
                " PRIMARY KEY (conversation_id, seq))",
                f"CREATE TABLE IF NOT EXISTS {ckpts} ("
                " conversation_id TEXT NOT NULL, n BIGINT NOT NULL, id TEXT NOT NULL,"
                " data TEXT NOT NULL, PRIMARY KEY (conversation_id, n))",
            ),
        ),
    )
    return Dialect(
        name="postgres",
        migrations=migrations,
        schema_table_exists=f"SELECT to_regclass('\"{s}\".contextfold_schema') IS NOT NULL",
        create_schema_table=(
            f'CREATE SCHEMA IF NOT EXISTS "{s}"',
            f"CREATE TABLE IF NOT EXISTS {table} (version INTEGER PRIMARY KEY,"
            " name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
        ),
        select_schema=f"SELECT version, name FROM {table} ORDER BY version",
        insert_schema=f"INSERT INTO {table} (version, name) VALUES (%s, %s)",
        # Two processes creating the same tables at once would collide in the catalog.
        migration_lock=f"SELECT pg_advisory_xact_lock(hashtextextended('contextfold:{s}', 0))",
        bump=(
            f"INSERT INTO {conv} AS c (id, last_seq) VALUES (%s, %s)"
            " ON CONFLICT (id) DO UPDATE SET last_seq = c.last_seq + EXCLUDED.last_seq"
            " RETURNING id, last_seq"
        ),
        bump_returns=True,
        select_key_and_last=f"SELECT id, last_seq FROM {conv} WHERE id = %s",
        select_last_seq=f"SELECT last_seq FROM {conv} WHERE id = %s",
        lock_conversation=f"SELECT last_seq FROM {conv} WHERE id = %s FOR UPDATE",
        insert_messages=(
            f"INSERT INTO {msgs} (conversation_id, seq, data)"
            " SELECT %s, u.s, u.d FROM unnest(%b::bigint[], %b::text[]) AS u(s, d)"
        ),
        insert_uses_arrays=True,
        select_messages=(
            f"SELECT seq, data FROM {msgs}"
            " WHERE conversation_id = %s AND seq > %s ORDER BY seq LIMIT %s"
        ),
        no_limit=None,
        select_latest_checkpoint_id=(
            f"SELECT n, id FROM {ckpts} WHERE conversation_id = %s ORDER BY n DESC LIMIT 1"
        ),
        select_latest_checkpoint=(
            f"SELECT n, data FROM {ckpts} WHERE conversation_id = %s ORDER BY n DESC LIMIT 1"
        ),
        select_checkpoints=f"SELECT n, data FROM {ckpts} WHERE conversation_id = %s ORDER BY n",
        insert_checkpoint=(
            f"INSERT INTO {ckpts} (conversation_id, n, id, data) VALUES (%s, %s, %s, %s)"
        ),
        # Counter bump and inserts in one statement: one round trip, and atomic on its own
        # even on an autocommit connection. The batch travels as one binary text[] (%b):
        # the text array format would escape every quote in the JSON, several times slower.
        append_one_shot=(
            f"WITH bump AS (INSERT INTO {conv} AS c (id, last_seq) VALUES (%s, %s)"
            " ON CONFLICT (id) DO UPDATE SET last_seq = c.last_seq + EXCLUDED.last_seq"
            " RETURNING last_seq),"
            f" ins AS (INSERT INTO {msgs} (conversation_id, seq, data)"
            " SELECT %s, bump.last_seq - %s + u.ord, u.d"
            " FROM bump, unnest(%b::text[]) WITH ORDINALITY AS u(d, ord))"
            " SELECT last_seq FROM bump"
        ),
        select_conversations=f'SELECT id FROM {conv} ORDER BY id COLLATE "C"',
        delete_statements=(
            f"DELETE FROM {msgs} WHERE conversation_id = %s",
            f"DELETE FROM {ckpts} WHERE conversation_id = %s",
            f"DELETE FROM {conv} WHERE id = %s",
        ),
    )


# -- operations --------------------------------------------------------------------------


def op_schema_current(d: Dialect) -> Op[bool]:
    """True when every known migration is applied (read-only; raises on a newer schema)."""
    rows = yield Query(d.schema_table_exists)
    if not rows or not rows[0][0]:
        return False
    applied = yield Query(d.select_schema)
    return not _missing(d, applied)


def op_migrate(d: Dialect) -> Op[list[str]]:
    """Apply the missing migrations; returns their names. Run inside a write transaction."""
    if d.migration_lock is not None:
        yield Query(d.migration_lock)
    for statement in d.create_schema_table:
        yield Query(statement)
    applied = yield Query(d.select_schema)
    names = []
    for migration in _missing(d, applied):
        for statement in migration.statements:
            yield Query(statement)
        yield Query(d.insert_schema, (migration.version, migration.name))
        names.append(migration.name)
    return names


def _missing(d: Dialect, applied: Rows) -> list[Migration]:
    known = {m.version: m for m in d.migrations}
    newest = max(known)
    for version, name in applied:
        migration = known.get(int(version))
        if migration is None:
            raise StoreError(
                f"the {d.name} store's schema has migration {version} ({name}), newer than "
                f"this contextfold knows (up to {newest}); upgrade contextfold to open it"
            )
        if migration.name != name:
            raise StoreError(
                f"the {d.name} store's schema migration {version} is {name!r}, but this "
                f"contextfold expects {migration.name!r}: unknown schema, refusing to use it"
            )
    done = {int(row[0]) for row in applied}
    return [m for m in d.migrations if m.version not in done]


def op_append(d: Dialect, conversation_id: str, payloads: Sequence[str]) -> Op[list[int]]:
    """Reserve ``len(payloads)`` sequence numbers and insert the rows (one transaction)."""
    count = len(payloads)
    if d.append_one_shot:
        rows = yield Query(
            d.append_one_shot, (conversation_id, count, conversation_id, count, payloads)
        )
        last = int(rows[0][0])
        return list(range(last - count + 1, last + 1))
    if d.packed_keys:
        return (yield from _append_packed(d, conversation_id, payloads))
    rows = yield Query(d.bump, (conversation_id, count))
    if not d.bump_returns:
        rows = yield Query(d.select_key_and_last, (conversation_id,))
    key, last = rows[0][0], int(rows[0][1])
    if last > MAX_SEQ:
        raise StoreError(f"conversation {conversation_id!r} is full: seq {last} > {MAX_SEQ}")
    first = last - count + 1
    if d.insert_uses_arrays:
        yield Query(d.insert_messages, (key, list(range(first, last + 1)), payloads))
    else:
        yield Query(
            d.insert_messages,
            [(key, first + i, p) for i, p in enumerate(payloads)],
            many=True,
        )
    return list(range(first, last + 1))


def _append_packed(d: Dialect, conversation_id: str, payloads: Sequence[str]) -> Op[list[int]]:
    """SQLite: keys are ``num << 32 | seq`` and the next seq follows the largest key.

    Runs inside a write transaction, which SQLite holds exclusively, so reading the largest
    key and inserting after it cannot interleave with another writer.
    """
    count = len(payloads)
    rows = yield Query(d.select_key_and_last, (conversation_id,))
    if not rows:
        yield Query(d.insert_conversation, (conversation_id,))
        rows = yield Query(d.select_key_and_last, (conversation_id,))
    num, last_key = int(rows[0][0]), rows[0][1]
    base = num << 32
    first = 1 if last_key is None else int(last_key) - base + 1
    last = first + count - 1
    if last > MAX_SEQ:
        raise StoreError(f"conversation {conversation_id!r} is full: seq {last} > {MAX_SEQ}")
    # Multi-row VALUES lists insert about a third faster than executemany; their sizes are
    # powers of two, so only a handful of distinct statements exist and all stay in the
    # driver's statement cache.
    first_key = base + first
    done = 0
    while done < count:
        n = min(_ROWS_PER_INSERT, 1 << ((count - done).bit_length() - 1))
        keys = range(first_key + done, first_key + done + n)
        params = list(chain.from_iterable(zip(keys, payloads[done : done + n], strict=True)))
        yield Query(_values_insert(d.insert_messages, n), params)
        done += n
    return list(range(first, last + 1))


#: The most rows in one multi-row INSERT: 512 parameters, under SQLite's oldest limit of 999.
_ROWS_PER_INSERT = 256


@lru_cache(maxsize=64)
def _values_insert(head: str, rows: int) -> str:
    """``head`` followed by ``rows`` two-parameter value lists."""
    return head + ",".join(["(?, ?)"] * rows)


def op_read(
    d: Dialect, conversation_id: str, after_seq: int, limit: int | None
) -> Op[list[StoredMessage]]:
    """Messages after ``after_seq`` in order; a damaged row raises with its seq."""
    rows = yield Query(
        d.select_messages, (conversation_id, after_seq, d.no_limit if limit is None else limit)
    )
    return decode_rows(rows, conversation_id)


def op_last_seq(d: Dialect, conversation_id: str) -> Op[int]:
    rows = yield Query(d.select_last_seq, (conversation_id,))
    return int(rows[0][0]) if rows else 0


def op_append_checkpoint(
    d: Dialect,
    conversation_id: str,
    checkpoint: CheckpointRecord,
    data: str,
    expected_previous: str | None,
) -> Op[CheckpointRecord]:
    """Check and commit a checkpoint; runs inside a write transaction."""
    rows = yield Query(d.lock_conversation, (conversation_id,))
    last_seq = int(rows[0][0]) if rows else 0
    latest = yield Query(d.select_latest_checkpoint_id, (conversation_id,))
    latest_n, latest_id = (int(latest[0][0]), str(latest[0][1])) if latest else (0, None)
    check_checkpoint_commit(
        conversation_id,
        checkpoint,
        expected_previous=expected_previous,
        latest_id=latest_id,
        last_seq=last_seq,
    )
    yield Query(d.insert_checkpoint, (conversation_id, latest_n + 1, checkpoint.id, data))
    return checkpoint


def op_latest_checkpoint(d: Dialect, conversation_id: str) -> Op[CheckpointRecord | None]:
    rows = yield Query(d.select_latest_checkpoint, (conversation_id,))
    if not rows:
        return None
    n, data = rows[0]
    return decode_checkpoint(data, conversation_id, int(n))


def op_checkpoints(d: Dialect, conversation_id: str) -> Op[list[CheckpointRecord]]:
    rows = yield Query(d.select_checkpoints, (conversation_id,))
    return [decode_checkpoint(data, conversation_id, int(n)) for n, data in rows]


def op_list(d: Dialect) -> Op[list[str]]:
    rows = yield Query(d.select_conversations)
    return sorted(str(row[0]) for row in rows)


def op_delete(d: Dialect, conversation_id: str) -> Op[None]:
    for statement in d.delete_statements:
        yield Query(statement, (conversation_id,))


def op_try_lock(d: Dialect, conversation_id: str, token: str, now: float, ttl: float) -> Op[bool]:
    """Claim the lock row unless a live one exists (inside a write transaction)."""
    rows = yield Query(d.select_lock, (conversation_id,))
    if rows and float(rows[0][1]) > now:
        return False
    yield Query(d.upsert_lock, (conversation_id, token, now + ttl))
    return True


def op_release_lock(d: Dialect, conversation_id: str, token: str) -> Op[None]:
    yield Query(d.release_lock, (conversation_id, token))


# -- drivers -----------------------------------------------------------------------------


def run_sync(cursor: Any, op: Op[T]) -> T:
    """Run an operation on a DB-API cursor (the caller owns the transaction)."""
    try:
        query = next(op)
        while True:
            if query.many:
                cursor.executemany(query.sql, query.params)
                rows: Rows = []
            else:
                cursor.execute(query.sql, query.params)
                rows = cursor.fetchall() if cursor.description is not None else []
            query = op.send(rows)
    except StopIteration as stop:
        result: T = stop.value
        return result


async def run_async(cursor: Any, op: Op[T]) -> T:
    """Run an operation on a psycopg ``AsyncCursor`` (the caller owns the transaction)."""
    try:
        query = next(op)
        while True:
            if query.many:
                await cursor.executemany(query.sql, query.params)
                rows: Rows = []
            else:
                await cursor.execute(query.sql, query.params)
                rows = await cursor.fetchall() if cursor.description is not None else []
            query = op.send(rows)
    except StopIteration as stop:
        result: T = stop.value
        return result
