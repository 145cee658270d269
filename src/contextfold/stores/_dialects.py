"""The SQL text of SQLite and PostgreSQL: the only place the two databases differ.

The rules (sequence numbering, the checkpoint commit check, migrations) are written once in
:mod:`contextfold.stores._sql` as operations over a :class:`~contextfold.stores._sql.Dialect`;
this module fills one in for each database.
"""

from __future__ import annotations

import re
from typing import Any

from contextfold.stores._dialects_search import (
    postgres_pending_list,
    postgres_search_migration,
    postgres_search_sql,
    postgres_search_text_migration,
    sqlite_search_migration,
    sqlite_search_sql,
    sqlite_search_text_migration,
)
from contextfold.stores._sql import Dialect, Migration
from contextfold.stores._tally import tally_sql
from contextfold.stores.base import StoreConfigError

__all__ = ["check_identifier", "postgres_dialect", "sqlite_dialect"]


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
        # No table changes, but from here on the next seq follows the largest key
        # (``last_seq`` is no longer kept) and rows could be compact (see ``_codec``, which
        # still reads them). An older contextfold could do neither, so it must refuse the file.
        Migration(2, "0002_compact_text_rows", ()),
        Migration(3, "0003_message_search", sqlite_search_migration()),
        Migration(
            4,
            "0004_conversation_state",
            (
                "CREATE TABLE IF NOT EXISTS contextfold_state ("
                " conversation_id TEXT PRIMARY KEY, data TEXT NOT NULL)",
            ),
        ),
        # Message ids per conversation, so an append can acknowledge a message it already
        # holds instead of storing it twice. Rows of earlier versions are indexed by the id
        # in their JSON (the first row of a repeated id wins); compact rows stay unindexed.
        Migration(
            5,
            "0005_message_ids",
            (
                "CREATE TABLE IF NOT EXISTS contextfold_message_ids ("
                " conv INTEGER NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL,"
                " PRIMARY KEY (conv, id)) WITHOUT ROWID",
                "INSERT OR IGNORE INTO contextfold_message_ids (conv, id, seq)"
                " SELECT key >> 32, json_extract(data, '$.id'), key & 4294967295"
                " FROM contextfold_messages"
                " WHERE json_valid(data) AND json_type(data, '$.id') = 'text' ORDER BY key",
            ),
        ),
        # Running token totals per conversation and token counter (see stores._tally).
        Migration(
            6,
            "0006_token_tallies",
            (
                "CREATE TABLE IF NOT EXISTS contextfold_tallies ("
                " conversation_id TEXT NOT NULL, counter TEXT NOT NULL,"
                " upto_seq INTEGER NOT NULL, tokens INTEGER NOT NULL,"
                " PRIMARY KEY (conversation_id, counter)) WITHOUT ROWID",
            ),
        ),
        # Search the same text as every other store: no field of a message's ``extra``.
        Migration(7, "0007_search_text", sqlite_search_text_migration()),
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
_SQLITE_CONVERSATION_BASE = (
    "WITH c AS (SELECT num << 32 AS base FROM contextfold_conversations WHERE id = ?)"
)


def _sqlite_log_sql() -> dict[str, Any]:
    """Schema bookkeeping and the message log."""
    return {
        "schema_table_exists": (
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'contextfold_schema'"
        ),
        "create_schema_table": (
            "CREATE TABLE IF NOT EXISTS contextfold_schema ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)",
        ),
        "select_schema": "SELECT version, name FROM contextfold_schema ORDER BY version",
        "insert_schema": (
            "INSERT INTO contextfold_schema (version, name, applied_at)"
            " VALUES (?, ?, strftime('%s', 'now'))"
        ),
        "migration_lock": None,
        # The sequence counter is the conversation's largest key (a B-tree seek): an append
        # then dirties only the message pages, not a counter row as well. The last_seq column
        # of 0001 is no longer kept up to date from 0002 on.
        "bump": "",
        "select_key_and_last": _SQLITE_LAST_KEY,
        "select_last_seq": _SQLITE_LAST_SEQ,
        "lock_conversation": _SQLITE_LAST_SEQ,
        "insert_conversation": "INSERT INTO contextfold_conversations (id, last_seq) VALUES (?, 0)",
        # Rows go in as multi-row VALUES lists (see op_append); this is the statement head.
        "insert_messages": "INSERT INTO contextfold_messages (key, data) VALUES ",
        "insert_ids": "INSERT INTO contextfold_message_ids (conv, id, seq) VALUES ",
        # The ids travel as one JSON array: no statement per batch size, no parameter limit.
        "select_stored_ids": (
            "SELECT i.id, i.seq, m.data FROM contextfold_message_ids AS i"
            " JOIN contextfold_messages AS m ON m.key = (i.conv << 32) + i.seq"
            " WHERE i.conv = ? AND i.id IN (SELECT value FROM json_each(?))"
        ),
        "packed_keys": True,
        "select_messages": (
            f"{_SQLITE_CONVERSATION_BASE} SELECT m.key - c.base, m.data"
            " FROM c, contextfold_messages AS m"
            " WHERE m.key > c.base + ? AND m.key < c.base + 4294967296 ORDER BY m.key LIMIT ?"
        ),
        "no_limit": -1,
        "select_conversations": "SELECT id FROM contextfold_conversations ORDER BY id",
    }


def _sqlite_checkpoint_and_lock_sql() -> dict[str, Any]:
    """Checkpoints, the lock table, and deleting a conversation from all of them."""
    latest = "FROM contextfold_checkpoints WHERE conversation_id = ? ORDER BY n DESC LIMIT 1"
    return {
        "select_latest_checkpoint_id": f"SELECT n, id {latest}",
        "select_latest_checkpoint": f"SELECT n, data {latest}",
        "select_checkpoints": (
            "SELECT n, data FROM contextfold_checkpoints WHERE conversation_id = ? ORDER BY n"
        ),
        "insert_checkpoint": (
            "INSERT INTO contextfold_checkpoints (conversation_id, n, id, data) VALUES (?, ?, ?, ?)"
        ),
        "delete_statements": (
            f"{_SQLITE_CONVERSATION_BASE} DELETE FROM contextfold_messages"
            " WHERE key >= (SELECT base FROM c) AND key < (SELECT base FROM c) + 4294967296",
            "DELETE FROM contextfold_checkpoints WHERE conversation_id = ?",
            "DELETE FROM contextfold_locks WHERE conversation_id = ?",
            "DELETE FROM contextfold_state WHERE conversation_id = ?",
            "DELETE FROM contextfold_tallies WHERE conversation_id = ?",
            "DELETE FROM contextfold_message_ids"
            " WHERE conv = (SELECT num FROM contextfold_conversations WHERE id = ?)",
            "DELETE FROM contextfold_conversations WHERE id = ?",
        ),
        "select_state": "SELECT data FROM contextfold_state WHERE conversation_id = ?",
        "upsert_state": (
            "INSERT INTO contextfold_state (conversation_id, data) VALUES (?, ?)"
            " ON CONFLICT (conversation_id) DO UPDATE SET data = excluded.data"
        ),
        "select_lock": "SELECT token, expires_at FROM contextfold_locks WHERE conversation_id = ?",
        "upsert_lock": (
            "INSERT INTO contextfold_locks (conversation_id, token, expires_at) VALUES (?, ?, ?)"
            " ON CONFLICT (conversation_id) DO UPDATE"
            " SET token = excluded.token, expires_at = excluded.expires_at"
        ),
        "release_lock": "DELETE FROM contextfold_locks WHERE conversation_id = ? AND token = ?",
        **tally_sql("contextfold_tallies", "?"),
    }


_SQLITE_LAYOUT = (
    ("contextfold_conversations", ("num", "id", "last_seq")),
    ("contextfold_messages", ("key", "data")),
    ("contextfold_checkpoints", ("conversation_id", "n", "id", "data")),
    ("contextfold_locks", ("conversation_id", "token", "expires_at")),
    ("contextfold_state", ("conversation_id", "data")),
    ("contextfold_message_ids", ("conv", "id", "seq")),
    ("contextfold_tallies", ("conversation_id", "counter", "upto_seq", "tokens")),
)


# An append leaves the key of the first two to SQLite, and relies on the others' uniqueness
# (a conversation's number and checkpoint count, a message id's row): a table of our name
# without them would open and then fail, or number nothing, at the first write.
_SQLITE_KEYS = (
    ("contextfold_conversations", ("num",)),
    ("contextfold_messages", ("key",)),
    ("contextfold_checkpoints", ("conversation_id", "n")),
    ("contextfold_locks", ("conversation_id",)),
    ("contextfold_state", ("conversation_id",)),
    ("contextfold_message_ids", ("conv", "id")),
    ("contextfold_tallies", ("conversation_id", "counter")),
)


def sqlite_dialect() -> Dialect:
    """SQLite (3.24+)."""
    return Dialect(
        name="sqlite",
        migrations=_sqlite_migrations(),
        layout=_SQLITE_LAYOUT,
        select_columns=(
            'SELECT lower(name), "notnull" AND dflt_value IS NULL AND pk = 0, pk, upper(type)'
            " FROM pragma_table_info(?)"
        ),
        layout_keys=_SQLITE_KEYS,
        rowid_tables=frozenset({"contextfold_conversations", "contextfold_messages"}),
        **sqlite_search_sql(),
        **_sqlite_log_sql(),
        **_sqlite_checkpoint_and_lock_sql(),
    )


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def check_identifier(name: str, what: str) -> str:
    """A safe, unquoted SQL identifier (letters, digits, underscore); misuse error otherwise."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise StoreConfigError(
            f"{what} must be a plain SQL identifier, got {name!r}", argument=what
        )
    return name


def _postgres_migrations(
    conv: str, msgs: str, ckpts: str, state: str, tallies: str
) -> tuple[Migration, ...]:
    return (
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
        Migration(2, "0002_message_search", postgres_search_migration(msgs)),
        Migration(
            3,
            "0003_conversation_state",
            (
                f"CREATE TABLE IF NOT EXISTS {state} ("
                " conversation_id TEXT PRIMARY KEY, data TEXT NOT NULL)",
            ),
        ),
        # Message ids, so an append can acknowledge a message it already holds; rows of
        # earlier versions get the id of their JSON.
        Migration(
            4,
            "0004_message_ids",
            (
                f"ALTER TABLE {msgs} ADD COLUMN IF NOT EXISTS message_id TEXT",
                f"UPDATE {msgs} SET message_id = data::json ->> 'id'"
                " WHERE message_id IS NULL AND left(data, 1) = '{'",
                f"CREATE INDEX IF NOT EXISTS contextfold_messages_message_id"
                f" ON {msgs} (conversation_id, message_id)",
            ),
        ),
        # Running token totals per conversation and token counter (see stores._tally).
        Migration(
            5,
            "0005_token_tallies",
            (
                f"CREATE TABLE IF NOT EXISTS {tallies} ("
                " conversation_id TEXT NOT NULL, counter TEXT NOT NULL,"
                " upto_seq BIGINT NOT NULL, tokens BIGINT NOT NULL,"
                " PRIMARY KEY (conversation_id, counter))",
            ),
        ),
        Migration(6, "0006_search_pending_list", postgres_pending_list(msgs)),
        Migration(7, "0007_search_text", postgres_search_text_migration(msgs)),
    )


def _postgres_append_sql(conv: str, msgs: str) -> dict[str, Any]:
    """The counter row's lock, the id lookup and the insert of an append."""
    return {
        "bump": (
            f"INSERT INTO {conv} AS c (id, last_seq) VALUES (%s, %s)"
            " ON CONFLICT (id) DO UPDATE SET last_seq = c.last_seq + EXCLUDED.last_seq"
            " RETURNING id, last_seq"
        ),
        "select_stored_ids": (
            f"SELECT message_id, seq, data FROM {msgs}"
            " WHERE conversation_id = %s AND message_id = ANY(%s)"
        ),
        # The counter and the rows in one statement. The batch travels as binary text[]
        # (%b): the text array format would escape every quote in the JSON, several times
        # slower.
        "insert_messages": (
            f"WITH bump AS (UPDATE {conv} SET last_seq = %s WHERE id = %s)"
            f" INSERT INTO {msgs} (conversation_id, seq, data, message_id)"
            " SELECT %s, u.s, u.d, u.i"
            " FROM unnest(%b::bigint[], %b::text[], %b::text[]) AS u(s, d, i)"
        ),
    }


_POSTGRES_LAYOUT = (
    ("contextfold_conversations", ("id", "last_seq")),
    ("contextfold_messages", ("conversation_id", "seq", "data", "message_id")),
    ("contextfold_checkpoints", ("conversation_id", "n", "id", "data")),
    ("contextfold_state", ("conversation_id", "data")),
    ("contextfold_tallies", ("conversation_id", "counter", "upto_seq", "tokens")),
)


def postgres_dialect(schema: str) -> Dialect:
    """PostgreSQL 11+ tables inside ``schema`` (created when missing)."""
    s = check_identifier(schema, "schema")
    conv = f'"{s}".contextfold_conversations'
    msgs = f'"{s}".contextfold_messages'
    ckpts = f'"{s}".contextfold_checkpoints'
    state = f'"{s}".contextfold_state'
    tallies = f'"{s}".contextfold_tallies'
    table = f'"{s}".contextfold_schema'
    latest = f"FROM {ckpts} WHERE conversation_id = %s ORDER BY n DESC LIMIT 1"
    return Dialect(
        name="postgres",
        migrations=_postgres_migrations(conv, msgs, ckpts, state, tallies),
        layout=_POSTGRES_LAYOUT,
        select_columns=(
            "SELECT lower(column_name) FROM information_schema.columns"
            f" WHERE table_schema = '{s}' AND table_name = %s"
        ),
        layout_scope=f' in schema "{s}"',
        later_columns=frozenset({"message_id"}),
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
        select_key_and_last=f"SELECT id, last_seq FROM {conv} WHERE id = %s",
        select_last_seq=f"SELECT last_seq FROM {conv} WHERE id = %s",
        lock_conversation=f"SELECT last_seq FROM {conv} WHERE id = %s FOR UPDATE",
        select_messages=(
            f"SELECT seq, data FROM {msgs}"
            " WHERE conversation_id = %s AND seq > %s ORDER BY seq LIMIT %s"
        ),
        no_limit=None,
        select_latest_checkpoint_id=f"SELECT n, id {latest}",
        select_latest_checkpoint=f"SELECT n, data {latest}",
        select_checkpoints=f"SELECT n, data FROM {ckpts} WHERE conversation_id = %s ORDER BY n",
        **postgres_search_sql(msgs),
        insert_checkpoint=(
            f"INSERT INTO {ckpts} (conversation_id, n, id, data) VALUES (%s, %s, %s, %s)"
        ),
        select_conversations=f'SELECT id FROM {conv} ORDER BY id COLLATE "C"',
        # Lock the counter row first: an append waits on it, so none can slip in between
        # deleting the messages and deleting the counter (which would leave orphan rows,
        # gaps and duplicate sequence numbers). An upsert rather than SELECT ... FOR UPDATE,
        # which would not wait for a first append still inserting the row. Appends queued on
        # the lock start over at 1.
        delete_statements=(
            f"INSERT INTO {conv} AS c (id, last_seq) VALUES (%s, 0)"
            " ON CONFLICT (id) DO UPDATE SET last_seq = c.last_seq",
            f"DELETE FROM {msgs} WHERE conversation_id = %s",
            f"DELETE FROM {ckpts} WHERE conversation_id = %s",
            f"DELETE FROM {state} WHERE conversation_id = %s",
            f"DELETE FROM {tallies} WHERE conversation_id = %s",
            f"DELETE FROM {conv} WHERE id = %s",
        ),
        select_state=f"SELECT data FROM {state} WHERE conversation_id = %s",
        upsert_state=(
            f"INSERT INTO {state} (conversation_id, data) VALUES (%s, %s)"
            " ON CONFLICT (conversation_id) DO UPDATE SET data = EXCLUDED.data"
        ),
        **_postgres_append_sql(conv, msgs),
        **tally_sql(tallies, "%s"),
    )
