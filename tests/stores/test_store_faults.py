"""Store faults from the reliability issue: each test names the behaviour it pins down."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConfigError, StoreError
from contextfold.messages import Message
from contextfold.stores import SQLiteStore, open_store
from contextfold.stores._checks import redact_url

SECRET = "S3kr1t"


# -- URL redaction ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://app:{SECRET}/x@host/db",
        f"postgres://app:{SECRET}/x/y@host:5432/db?sslmode=require",
        f"redis://:{SECRET}/x@host:6379/0",
        f"rediss://user:{SECRET}@x/y@host/0",
        f"unix://:{SECRET}/x@/tmp/redis.sock",
        f"ftp://user:{SECRET}:x/y@host/",
    ],
)
def test_redact_url_hides_passwords_containing_slashes_for_every_scheme(url: str) -> None:
    redacted = redact_url(url)
    assert SECRET not in redacted
    assert "***@" in redacted


def test_redact_url_leaves_urls_without_password_alone() -> None:
    assert redact_url("redis://host:6379/0") == "redis://host:6379/0"
    assert redact_url("postgresql://app@host/db") == "postgresql://app@host/db"


def test_unknown_scheme_error_hides_a_password_with_a_slash() -> None:
    with pytest.raises(ConfigError) as info:
        open_store(f"ftp://user:{SECRET}/x@host/")
    assert SECRET not in str(info.value)


def test_redis_url_with_unencoded_slash_in_password_is_refused_without_leaking_it() -> None:
    pytest.importorskip("redis")
    with pytest.raises(ConfigError) as info:
        open_store(f"redis://:{SECRET}/x@127.0.0.1:1/0")
    assert info.value.argument == "target"
    assert SECRET not in str(info.value)


def test_postgres_connect_error_hides_a_password_with_a_slash() -> None:
    pytest.importorskip("psycopg")
    store = open_store(f"postgresql://app:{SECRET}/x@127.0.0.1:1/db", connect_timeout=1)
    try:
        with pytest.raises(StoreError) as info:
            store.append("c", [Message.user("hi")])
        assert SECRET not in str(info.value)
    finally:
        store.close()


# -- use after close ---------------------------------------------------------------------


def _checkpoint() -> CheckpointRecord:
    return CheckpointRecord(
        summary="s", last_covered_id="m1", last_covered_seq=1, previous_id=None, strategy="x"
    )


SYNC_CALLS: dict[str, Callable[[Any], object]] = {
    "append": lambda s: s.append("c", [Message.user("late")]),
    "read": lambda s: s.read("c"),
    "last_seq": lambda s: s.last_seq("c"),
    "list_conversations": lambda s: s.list_conversations(),
    "delete": lambda s: s.delete("c"),
    "append_checkpoint": lambda s: s.append_checkpoint("c", _checkpoint(), expected_previous=None),
    "latest_checkpoint": lambda s: s.latest_checkpoint("c"),
    "checkpoints": lambda s: s.checkpoints("c"),
    "compaction_lock": lambda s: s.compaction_lock("c").__enter__(),
}


@pytest.mark.parametrize("call", sorted(SYNC_CALLS))
def test_every_store_refuses_use_after_close(backend: Any, call: str) -> None:
    store = backend.open()
    store.append("c", [Message.user("first")])
    store.close()
    with pytest.raises(StoreError, match="closed"):
        SYNC_CALLS[call](store)


async def test_every_store_refuses_async_use_after_aclose(backend: Any) -> None:
    store = backend.open()
    await store.aappend("c", [Message.user("first")])
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.aappend("c", [Message.user("late")])
    with pytest.raises(StoreError, match="closed"):
        await store.aread("c")
    with pytest.raises(StoreError, match="closed"):
        await store.alast_seq("c")
    with pytest.raises(StoreError, match="closed"):
        async with store.acompaction_lock("c"):
            pass


def test_memory_url_store_refuses_appends_after_close() -> None:
    store = open_store("memory://")
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.append("c", [Message.user("late")])


# -- SQLite file deleted or replaced under an open store ---------------------------------


def _remove_database(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def test_sqlite_append_after_the_file_was_deleted_raises(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    store = SQLiteStore(path)
    store.append("c", [Message.user("kept")])
    _remove_database(path)
    try:
        for _ in range(3):
            with pytest.raises(StoreError, match="deleted"):
                store.append("c", [Message.user("lost")])
    finally:
        store.close()


def test_sqlite_append_after_the_file_was_replaced_raises(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    store = SQLiteStore(path)
    store.append("c", [Message.user("kept")])
    other = SQLiteStore(tmp_path / "other.db")
    other.close()
    os.replace(tmp_path / "other.db", path)
    try:
        with pytest.raises(StoreError, match="replaced"):
            store.append("c", [Message.user("lost")])
        with pytest.raises(StoreError, match="replaced"):
            store.append_checkpoint("c", _checkpoint(), expected_previous=None)
    finally:
        store.close()


async def test_sqlite_async_append_after_the_file_was_deleted_raises(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    store = SQLiteStore(path)
    await store.aappend("c", [Message.user("kept")])
    _remove_database(path)
    try:
        for _ in range(3):  # the inline path and the thread path alike
            with pytest.raises(StoreError, match="deleted"):
                await store.aappend("c", [Message.user("lost")])
    finally:
        await store.aclose()


def test_sqlite_store_on_a_given_connection_checks_its_file(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    store = SQLiteStore(conn)
    store.append("c", [Message.user("kept")])
    _remove_database(path)
    with pytest.raises(StoreError, match="deleted"):
        store.append("c", [Message.user("lost")])
    store.close()
    conn.close()


# -- existing tables with our names and another layout -----------------------------------


def test_sqlite_refuses_a_foreign_table_with_our_name_on_open(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE contextfold_messages (id INTEGER PRIMARY KEY, body TEXT)")
    conn.close()
    with pytest.raises(StoreError, match=r"contextfold_messages .*lacks the column\(s\) key, data"):
        SQLiteStore(path)
    # Nothing was recorded as migrated: the refusal is the same the next time.
    with sqlite3.connect(path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert "contextfold_schema" not in tables


@pytest.mark.parametrize(
    ("table", "match"),
    [
        (
            "contextfold_conversations (num INTEGER, id TEXT, last_seq INTEGER)",
            r"contextfold_conversations .*primary key is \(none\), not \(num\)",
        ),
        (
            "contextfold_messages (key TEXT PRIMARY KEY, data TEXT NOT NULL)",
            r"contextfold_messages .*key must be declared INTEGER PRIMARY KEY",
        ),
        (
            "contextfold_checkpoints (conversation_id TEXT, n INTEGER, id TEXT PRIMARY KEY,"
            " data TEXT)",
            r"contextfold_checkpoints .*primary key is \(id\), not \(conversation_id, n\)",
        ),
        (
            "contextfold_messages (key INTEGER PRIMARY KEY, data TEXT NOT NULL,"
            " owner TEXT NOT NULL)",
            r"contextfold_messages .*NOT NULL column\(s\) owner",
        ),
    ],
)
def test_sqlite_refuses_a_table_of_ours_with_other_keys_or_required_columns_on_open(
    tmp_path: Path, table: str, match: str
) -> None:
    # The columns are all there, but an append would fail on them (or number nothing).
    path = tmp_path / "chats.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE {table}")
    conn.close()
    with pytest.raises(StoreError, match=match):
        SQLiteStore(path)


def test_sqlite_opens_a_table_of_ours_with_an_extra_column_it_can_leave_out(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chats.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE contextfold_messages (key INTEGER PRIMARY KEY, data TEXT NOT NULL,"
            " note TEXT, owner TEXT NOT NULL DEFAULT 'app')"
        )
    conn.close()
    store = SQLiteStore(path)
    assert store.append("c", [Message.user("hi")]) == [1]
    assert [s.message.text for s in store.read("c")] == ["hi"]
    store.close()


def test_sqlite_refuses_a_migrated_file_whose_table_was_changed(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE contextfold_checkpoints")
        conn.execute("CREATE TABLE contextfold_checkpoints (conversation_id TEXT, blob TEXT)")
    conn.close()
    with pytest.raises(StoreError, match=r"contextfold_checkpoints .*lacks .*n, id, data"):
        SQLiteStore(path)


def test_postgres_refuses_a_foreign_table_with_our_name_on_first_use(
    postgres_backend: Any,
) -> None:
    psycopg = pytest.importorskip("psycopg")
    schema = postgres_backend.options["schema"]
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".contextfold_messages (id TEXT, body TEXT)')
    store = postgres_backend.open()
    with pytest.raises(StoreError, match=r"contextfold_messages .*lacks .*conversation_id, seq"):
        store.last_seq("c")
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (f'"{schema}".contextfold_schema',)
        ).fetchone()
    assert row == (False,)


# -- an async store used from a second event loop ----------------------------------------


@pytest.mark.parametrize("name", ["redis", "postgres"])
def test_async_store_used_from_another_event_loop_raises_store_error(
    name: str, request: pytest.FixtureRequest
) -> None:
    backend = request.getfixturevalue(f"{name}_backend")
    store = backend.open()
    first = asyncio.new_event_loop()
    second = asyncio.new_event_loop()
    try:
        assert first.run_until_complete(store.aappend("c", [Message.user("a")])) == [1]
        with pytest.raises(StoreError, match="belongs to the event loop that first used it"):
            second.run_until_complete(store.aappend("c", [Message.user("b")]))
        with pytest.raises(StoreError, match="event loop"):
            second.run_until_complete(store.aread("c"))
        # The loop that first used the store keeps working.
        assert first.run_until_complete(store.alast_seq("c")) == 1
    finally:
        second.close()
        first.run_until_complete(store.aclose())
        first.close()
