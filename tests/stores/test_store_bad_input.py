"""Bad input at the store boundary: URLs, unreachable servers, damaged data, schema versions.

Every failure is a StoreError that says what and where, and nothing already stored is lost.
"""

from __future__ import annotations

import sqlite3
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConfigError, MissingExtraError, StoreError
from contextfold.messages import Message
from contextfold.stores import InMemoryStore, SQLiteStore, open_store


def cid() -> str:
    return "bad-" + uuid.uuid4().hex[:8]


# -- URLs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["ftp://host/x", "mysql://u@h/db", "chats.db", "", "sqlite:/x.db", "sqlite:///"]
)
def test_unknown_or_malformed_url(url: str) -> None:
    with pytest.raises(ConfigError, match="URL") as info:
        open_store(url)
    assert isinstance(info.value, StoreError)  # what these raised before, still caught
    assert info.value.argument == "target"


def test_password_is_not_echoed_in_errors() -> None:
    with pytest.raises(StoreError) as info:
        open_store("mongodb://admin:hunter2@db.example/x")
    assert "hunter2" not in str(info.value)
    assert "***" in str(info.value)


def test_open_store_returns_a_store_as_is_and_rejects_other_objects() -> None:
    store = InMemoryStore()
    assert open_store(store) is store
    with pytest.raises(ConfigError):
        open_store(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="options"):
        open_store(store, schema="x")  # type: ignore[arg-type]


def test_open_store_picks_by_scheme(tmp_path: Path) -> None:
    assert isinstance(open_store("memory://"), InMemoryStore)
    s = open_store(f"sqlite:///{tmp_path / 'a.db'}", synchronous="FULL")
    assert isinstance(s, SQLiteStore)
    s.close()


# -- unreachable servers ---------------------------------------------------------------


def test_unreachable_redis_fails_fast_with_the_address() -> None:
    store = open_store("redis://:secret@127.0.0.1:1/0", connect_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:1") as info:
        store.append(cid(), [Message.user("x")])
    assert time.monotonic() - started < 10
    assert "secret" not in str(info.value)
    store.close()


def test_unreachable_postgres_fails_fast_with_the_address() -> None:
    store = open_store("postgresql://u:secret@127.0.0.1:1/db", connect_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:1") as info:
        store.last_seq(cid())
    assert time.monotonic() - started < 10
    assert "secret" not in str(info.value)
    store.close()


async def test_unreachable_servers_async() -> None:
    for url in ("redis://127.0.0.1:1/0", "postgresql://u@127.0.0.1:1/db"):
        store = open_store(url, connect_timeout=1.0)
        with pytest.raises(StoreError, match="connect"):
            await store.alast_seq(cid())
        await store.aclose()


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextfold.stores.postgres import PostgresStore
    from contextfold.stores.redis import RedisStore

    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingExtraError, match=r"contextfold\[redis\]"):
        RedisStore("redis://localhost/0")
    with pytest.raises(MissingExtraError, match=r"contextfold\[postgres\]"):
        PostgresStore("postgresql://localhost/db")


def test_not_a_database_file(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database, just text " * 200)
    with pytest.raises(StoreError, match=r"junk\.db"):
        SQLiteStore(path)
    assert path.read_bytes().startswith(b"this is not a database")


# -- damaged rows ----------------------------------------------------------------------


def corrupt(backend: Any, conversation: str, seq: int, raw: str) -> None:
    """Overwrite one stored message behind the store's back."""
    if backend.name == "sqlite":
        path = backend.url[len("sqlite:///") :]
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE contextfold_messages SET data = ? WHERE key = ? +"
                " (SELECT num << 32 FROM contextfold_conversations WHERE id = ?)",
                (raw, seq, conversation),
            )
    elif backend.name.startswith("redis"):
        client = backend.raw_redis()
        client.lset(f"{backend.options['key_prefix']}:{{{conversation}}}:m", seq - 1, raw)
        client.close()
    else:
        import psycopg

        with psycopg.connect(backend.url, autocommit=True) as conn:
            conn.execute(
                f'UPDATE "{backend.options["schema"]}".contextfold_messages SET data = %s'
                " WHERE conversation_id = %s AND seq = %s",
                (raw, conversation, seq),
            )


def corrupt_checkpoint(backend: Any, conversation: str, raw: str) -> None:
    if backend.name == "sqlite":
        path = backend.url[len("sqlite:///") :]
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE contextfold_checkpoints SET data = ? WHERE conversation_id = ?",
                (raw, conversation),
            )
    elif backend.name.startswith("redis"):
        client = backend.raw_redis()
        client.lset(f"{backend.options['key_prefix']}:{{{conversation}}}:k", 0, raw)
        client.close()
    else:
        import psycopg

        with psycopg.connect(backend.url, autocommit=True) as conn:
            conn.execute(
                f'UPDATE "{backend.options["schema"]}".contextfold_checkpoints SET data = %s'
                " WHERE conversation_id = %s",
                (raw, conversation),
            )


@pytest.mark.parametrize(
    "raw",
    [
        '{"v":1,"id":"m","role":"user","parts":[{"kind":"te',
        '{"v":1,"role":"alien"}',
        "[]",
        "\x1eu5:m\x1fhell",
        "\x1ex2:m\x1fm1",
        "\x1eu2:m",
    ],
    ids=[
        "truncated-json",
        "bad-role",
        "not-an-object",
        "compact-truncated",
        "compact-bad-role",
        "compact-no-text",
    ],
)
def test_damaged_message_raises_with_location_and_loses_nothing(
    persistent_backend: Any, raw: str
) -> None:
    store = persistent_backend.open()
    c = cid()
    store.append(c, [Message.user(f"m{i}") for i in range(4)])
    corrupt(persistent_backend, c, 2, raw)
    with pytest.raises(StoreError, match=rf"{c}.*seq 2"):
        store.read(c)
    with pytest.raises(StoreError, match="seq 2"):
        store.read(c, after_seq=1, limit=1)
    # Everything else is intact and readable around the damage.
    assert [s.message.text for s in store.read(c, limit=1)] == ["m0"]
    assert [s.message.text for s in store.read(c, after_seq=2)] == ["m2", "m3"]
    assert store.last_seq(c) == 4
    assert store.append(c, [Message.user("m4")]) == [5]


def test_damaged_checkpoint_raises_with_location(persistent_backend: Any) -> None:
    store = persistent_backend.open()
    c = cid()
    store.append(c, [Message.user("a"), Message.user("b")])
    store.append_checkpoint(
        c,
        CheckpointRecord(summary="s", last_covered_id="x", last_covered_seq=1),
        expected_previous=None,
    )
    corrupt_checkpoint(persistent_backend, c, '{"v": 99}')
    with pytest.raises(StoreError, match=rf"checkpoint #1 in conversation '{c}'"):
        store.checkpoints(c)
    with pytest.raises(StoreError, match="checkpoint"):
        store.latest_checkpoint(c)
    assert [s.message.text for s in store.read(c)] == ["a", "b"]


# -- schema versions -------------------------------------------------------------------


def test_sqlite_refuses_a_newer_schema_and_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    store.append("c", [Message.user("kept")])
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO contextfold_schema VALUES (99, '0099_from_the_future', 0)")
    with pytest.raises(StoreError, match=r"migration 99 \(0099_from_the_future\).*newer"):
        SQLiteStore(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM contextfold_schema WHERE version = 99")
    reopened = SQLiteStore(path)
    assert [s.message.text for s in reopened.read("c")] == ["kept"]
    reopened.close()


def test_sqlite_refuses_an_unknown_migration_name(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE contextfold_schema SET name = 'someone_else' WHERE version = 1")
    with pytest.raises(StoreError, match="unknown schema"):
        SQLiteStore(path)


def test_sqlite_migrations_are_recorded_once(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    for _ in range(3):
        SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT version, name FROM contextfold_schema").fetchall()
    assert rows == [
        (1, "0001_initial_log"),
        (2, "0002_compact_text_rows"),
        (3, "0003_message_search"),
        (4, "0004_conversation_state"),
        (5, "0005_message_ids"),
        (6, "0006_token_tallies"),
        (7, "0007_search_text"),
    ]


def test_redis_refuses_a_newer_or_foreign_layout(redis_backend: Any) -> None:
    import redis

    persistent_backend = redis_backend

    store = persistent_backend.open()
    store.append("c", [Message.user("kept")])
    client = redis.Redis.from_url(persistent_backend.url)
    key = persistent_backend.options["key_prefix"] + ":schema_version"
    try:
        client.set(key, "99")
        with pytest.raises(StoreError, match=r"schema version 99.*newer"):
            persistent_backend.open().last_seq("c")
        client.set(key, "garbage")
        with pytest.raises(StoreError, match="not a schema version"):
            persistent_backend.open().last_seq("c")
        client.set(key, "1")
        assert [s.message.text for s in persistent_backend.open().read("c")] == ["kept"]
    finally:
        client.close()


def test_postgres_refuses_a_newer_schema(postgres_backend: Any) -> None:
    import psycopg

    persistent_backend = postgres_backend

    store = persistent_backend.open()
    store.append("c", [Message.user("kept")])
    schema = persistent_backend.options["schema"]
    with psycopg.connect(persistent_backend.url, autocommit=True) as conn:
        conn.execute(f"INSERT INTO \"{schema}\".contextfold_schema VALUES (42, '0042_x', now())")
    with pytest.raises(StoreError, match=r"migration 42.*newer"):
        persistent_backend.open().last_seq("c")
    with psycopg.connect(persistent_backend.url, autocommit=True) as conn:
        conn.execute(f'DELETE FROM "{schema}".contextfold_schema WHERE version = 42')
        rows = conn.execute(f'SELECT version, name FROM "{schema}".contextfold_schema').fetchall()
    assert sorted(rows) == [
        (1, "0001_initial_log"),
        (2, "0002_message_search"),
        (3, "0003_conversation_state"),
        (4, "0004_message_ids"),
        (5, "0005_token_tallies"),
        (6, "0006_search_pending_list"),
        (7, "0007_search_text"),
    ]
    assert [s.message.text for s in persistent_backend.open().read("c")] == ["kept"]


@pytest.mark.parametrize(
    ("target", "secret"),
    [
        ("postgresql://127.0.0.1:1/db?password=hunter2", "hunter2"),
        ("host=127.0.0.1 port=1 password='s3 cret' dbname=x", "s3 cret"),
    ],
)
def test_postgres_password_is_not_echoed(target: str, secret: str) -> None:
    from contextfold.stores import PostgresStore

    store = PostgresStore(target, connect_timeout=1.0)
    with pytest.raises(StoreError) as info:
        store.last_seq("c")
    store.close()
    assert secret not in str(info.value)
    assert secret not in repr(store)
    assert "***" in str(info.value)


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"synchronous": "SOMETIMES"}, "synchronous"),
        ({"timeout": -1}, "timeout"),
        ({"timeout": "30"}, "timeout"),
    ],
)
def test_bad_sqlite_options_are_config_errors(
    tmp_path: Path, options: dict[str, Any], argument: str
) -> None:
    with pytest.raises(ConfigError, match=argument) as info:
        SQLiteStore(tmp_path / "s.db", **options)
    assert info.value.argument == argument


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"min_size": -1}, "min_size"),
        ({"max_size": 0}, "max_size"),
        ({"min_size": 4, "max_size": 2}, "max_size"),
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"schema": "drop table"}, "schema"),
    ],
)
def test_bad_postgres_options_are_config_errors(options: dict[str, Any], argument: str) -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(ConfigError) as info:
        open_store("postgresql://u@127.0.0.1:1/db", **options)
    assert info.value.argument == argument


@pytest.mark.parametrize(
    ("options", "argument"),
    [({"key_prefix": ""}, "key_prefix"), ({"connect_timeout": -2.0}, "connect_timeout")],
)
def test_bad_redis_options_are_config_errors(options: dict[str, Any], argument: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_store("redis://127.0.0.1:1/0", **options)
    assert info.value.argument == argument


@pytest.mark.parametrize("ttl", [0, -1.0, float("nan"), "60", True])
def test_a_bad_ttl_is_a_config_error(ttl: Any) -> None:
    store = InMemoryStore()
    with pytest.raises(ConfigError, match="ttl") as info, store.compaction_lock("c", ttl=ttl):
        pass
    assert info.value.argument == "ttl"
