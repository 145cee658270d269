"""What is specific to one backend: URLs, files, pragmas, clients passed in, isolation."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from contextfold.errors import StoreError
from contextfold.messages import Message
from contextfold.stores import InMemoryStore, SQLiteStore, open_store
from contextfold.stores._dialects import sqlite_dialect
from contextfold.stores.sqlite import parse_sqlite_url

# -- SQLite ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///chats.db", "chats.db"),
        ("sqlite:///data/chats.db", "data/chats.db"),
        ("sqlite:////var/lib/app/chats.db", "/var/lib/app/chats.db"),
        ("sqlite:///:memory:", ":memory:"),
    ],
)
def test_sqlite_url_forms(url: str, path: str) -> None:
    assert parse_sqlite_url(url) == path


def test_relative_url_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///rel.db")
    store.append("c", [Message.user("x")])
    store.close()
    assert (tmp_path / "rel.db").is_file()


def test_memory_database_works_and_is_private() -> None:
    a = open_store("sqlite:///:memory:")
    b = open_store("sqlite:///:memory:")
    a.append("c", [Message.user("only in a")])
    assert b.last_seq("c") == 0
    a.close()
    b.close()


def test_file_database_is_in_wal_mode_with_the_chosen_sync_level(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    store = SQLiteStore(path, synchronous="FULL")
    store.append("c", [Message.user("x")])
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._conn is not None
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.close()
    with pytest.raises(StoreError, match="synchronous"):
        SQLiteStore(path, synchronous="SOMETIMES")  # type: ignore[arg-type]


def test_tail_window_reads_through_the_primary_key(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "p.db")
    store.close()
    sql = sqlite_dialect().select_messages
    with sqlite3.connect(tmp_path / "p.db") as conn:
        plan = " ".join(str(row) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, ("c", 5, 5)))
    assert "SEARCH" in plan
    assert "PRIMARY KEY" in plan
    assert "TEMP B-TREE" not in plan  # already in seq order: no sort


def test_existing_connection_is_used_and_left_open(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "own.db", check_same_thread=False)
    store = SQLiteStore(conn)
    assert store.append("c", [Message.user("a"), Message.user("b")]) == [1, 2]
    store.close()
    # Still usable by its owner, and the rows are committed.
    assert conn.execute("SELECT count(*) FROM contextfold_messages").fetchone()[0] == 2
    conn.close()


def test_threads_share_one_sqlite_store(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    run_threads(store)
    store.close()


def test_threads_share_one_memory_store() -> None:
    run_threads(InMemoryStore())


def run_threads(store: Any) -> None:
    def work(w: int) -> None:
        for i in range(100):
            store.append("c", [Message.user(f"{w}:{i}")])

    threads = [threading.Thread(target=work, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log = store.read("c")
    assert [s.seq for s in log] == list(range(1, 601))
    for w in range(6):
        mine = [
            int(s.message.text.split(":")[1]) for s in log if s.message.text.startswith(f"{w}:")
        ]
        assert mine == list(range(100))


async def test_sqlite_async_calls_run_concurrently_without_losing_appends(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    results = await asyncio.gather(
        *(store.aappend("c", [Message.user(str(i)), Message.user(str(i))]) for i in range(20))
    )
    flat = sorted(seq for r in results for seq in r)
    assert flat == list(range(1, 41))
    for r in results:
        assert r[1] == r[0] + 1  # each batch is contiguous
    await store.aclose()


async def test_sqlite_async_append_waits_for_another_writer(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    assert await store.aappend("c", [Message.user("first")]) == [1]
    other = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock
    task = asyncio.ensure_future(store.aappend("c", [Message.user("second")]))
    await asyncio.sleep(0.3)
    assert not task.done()  # waiting in a thread, not failing and not blocking this loop
    other.execute("COMMIT")
    assert await asyncio.wait_for(task, 10) == [2]
    other.close()
    assert [s.message.text for s in await store.aread("c")] == ["first", "second"]
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.aappend("c", [Message.user("late")])


async def test_sqlite_async_appends_let_other_tasks_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    before = ticks
    for i in range(100):
        await store.aappend("c", [Message.user(str(i))])
    assert ticks - before >= 50  # the loop of appends yielded to the ticker throughout
    stop.set()
    await task
    await store.aclose()


async def test_sqlite_async_single_appends_keep_the_wal_bounded(tmp_path: Path) -> None:
    # Inline async appends never checkpoint; some go through the main connection so the WAL
    # is checkpointed and reused instead of growing with every append. Its size then levels
    # off (near what the main connection's autocheckpoint lets accumulate), whatever the
    # number of appends; one 4 KiB frame per append kept would be over 18 MB here.
    store = SQLiteStore(tmp_path / "a.db")
    count = 4500
    sizes = []
    for i in range(count):
        assert await store.aappend("c", [Message.user(f"async {i}")]) == [i + 1]
        if i + 1 in (1500, count):
            sizes.append((tmp_path / "a.db-wal").stat().st_size)
    early, late = sizes
    assert late < 12 * 1024 * 1024, sizes
    assert late <= early * 1.5, sizes  # three times the appends, not three times the WAL
    log = store.read("c")
    assert [s.message.text for s in log] == [f"async {i}" for i in range(count)]
    await store.aclose()


# -- Redis -----------------------------------------------------------------------------


def test_redis_accepts_an_existing_client(redis_backend: Any) -> None:
    import redis

    from contextfold.stores import RedisStore

    client = redis.Redis.from_url(redis_backend.url)
    store = RedisStore(client, key_prefix=redis_backend.options["key_prefix"])
    assert store.append("c", [Message.user("x")]) == [1]
    store.close()
    assert client.ping()  # not closed: it belongs to the caller
    client.close()


async def test_redis_async_client_store_refuses_sync_calls(redis_backend: Any) -> None:
    import redis.asyncio

    from contextfold.stores import RedisStore

    client = redis.asyncio.Redis.from_url(redis_backend.url)
    store = RedisStore(client, key_prefix=redis_backend.options["key_prefix"])
    assert await store.aappend("c", [Message.user("x")]) == [1]
    with pytest.raises(StoreError, match="asyncio client"):
        store.last_seq("c")
    await store.aclose()
    await client.aclose()


def test_redis_key_prefixes_isolate_applications(redis_backend: Any) -> None:
    a = redis_backend.open()
    b = open_store(redis_backend.url, key_prefix=redis_backend.options["key_prefix"] + "-b")
    try:
        a.append("same-id", [Message.user("a")])
        assert b.last_seq("same-id") == 0
        assert "same-id" not in b.list_conversations()
    finally:
        b.close()
        import redis

        client = redis.Redis.from_url(redis_backend.url)
        keys = list(client.scan_iter(match=redis_backend.options["key_prefix"] + "-b:*"))
        if keys:
            client.delete(*keys)
        client.close()


# -- PostgreSQL ------------------------------------------------------------------------


def test_postgres_accepts_an_existing_pool(postgres_backend: Any) -> None:
    from psycopg_pool import ConnectionPool

    from contextfold.stores import PostgresStore

    pool = ConnectionPool(postgres_backend.url, min_size=1, max_size=2, open=False)
    pool.open(wait=True)
    store = PostgresStore(pool, schema=postgres_backend.options["schema"])
    assert store.append("c", [Message.user("x")]) == [1]
    assert store.read("c")[0].message.text == "x"
    store.close()
    with pool.connection() as conn:  # still open: it belongs to the caller
        assert conn.execute("SELECT 1").fetchone() == (1,)
    pool.close()


def test_postgres_schemas_isolate_applications(postgres_backend: Any) -> None:
    import psycopg

    a = postgres_backend.open()
    other = postgres_backend.options["schema"] + "_b"
    b = open_store(postgres_backend.url, schema=other)
    try:
        a.append("same-id", [Message.user("a")])
        assert b.last_seq("same-id") == 0
        assert b.list_conversations() == []
    finally:
        b.close()
        with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{other}" CASCADE')


@pytest.mark.parametrize("schema", ["", "bad-name", 'x"; DROP TABLE y; --', "1abc"])
def test_postgres_rejects_unsafe_schema_names(schema: str) -> None:
    from contextfold.stores import PostgresStore

    with pytest.raises(StoreError, match="schema"):
        PostgresStore("postgresql://localhost/db", schema=schema)


def test_sqlite_without_returning_support(tmp_path: Path) -> None:
    # SQLite before 3.35 has no RETURNING; the SQLite store never uses it.
    dialect = sqlite_dialect()
    texts = [getattr(dialect, f) for f in dialect.__slots__ if isinstance(getattr(dialect, f), str)]
    assert texts
    assert not [t for t in texts if "RETURNING" in t.upper()]
    store = SQLiteStore(tmp_path / "old.db")
    assert store.append("c", [Message.user("a"), Message.user("b")]) == [1, 2]
    assert store.append("d", [Message.user("x")]) == [1]
    assert store.append("c", [Message.user("c")]) == [3]
    assert [s.message.text for s in store.read("c")] == ["a", "b", "c"]
    store.close()


@pytest.mark.parametrize("autocommit", [False, True])
def test_postgres_accepts_an_existing_connection(postgres_backend: Any, autocommit: bool) -> None:
    import psycopg

    from contextfold.checkpoints import CheckpointRecord
    from contextfold.stores import PostgresStore

    conn = psycopg.connect(postgres_backend.url, autocommit=autocommit)
    store = PostgresStore(conn, schema=postgres_backend.options["schema"])
    assert store.append("c", [Message.user("x"), Message.user("y")]) == [1, 2]
    record = CheckpointRecord(summary="s", last_covered_id="m", last_covered_seq=2)
    store.append_checkpoint("c", record, expected_previous=None)
    with pytest.raises(StoreError):
        store.append_checkpoint("c", record, expected_previous=None)
    assert store.append("c", [Message.user("z")]) == [3]  # usable after a rejected commit
    with store.compaction_lock("c", ttl=10) as taken, store.compaction_lock("c") as again:
        assert (taken, again) == (True, False)
    store.close()
    assert not conn.closed
    other = postgres_backend.open()
    assert [s.message.text for s in other.read("c")] == ["x", "y", "z"]
    conn.close()


async def test_postgres_accepts_an_existing_async_connection(postgres_backend: Any) -> None:
    import psycopg

    from contextfold.stores import PostgresStore

    conn = await psycopg.AsyncConnection.connect(postgres_backend.url)
    store = PostgresStore(conn, schema=postgres_backend.options["schema"])
    assert await store.aappend("c", [Message.user("x")]) == [1]
    assert [s.seq for s in await store.aread("c")] == [1]
    await store.aclose()
    assert not conn.closed
    await conn.close()


def test_connection_with_an_open_transaction_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "busy.db", check_same_thread=False)
    store = SQLiteStore(conn)
    conn.execute("CREATE TABLE mine (x)")
    conn.execute("INSERT INTO mine VALUES (1)")  # opens an implicit transaction
    with pytest.raises(StoreError, match="open transaction"):
        store.append("c", [Message.user("x")])
    conn.commit()
    assert store.append("c", [Message.user("x")]) == [1]
    conn.close()


def test_a_failed_write_rolls_back_completely(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "r.db")
    store.append("c", [Message.user("a")])
    with sqlite3.connect(tmp_path / "r.db") as other:
        # Make the next message insert fail after the counter was bumped.
        other.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON contextfold_messages"
            " WHEN NEW.key & 4294967295 = 2 BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
        )
    with pytest.raises(StoreError, match="disk says no"):
        store.append("c", [Message.user("b")])
    with sqlite3.connect(tmp_path / "r.db") as other:
        other.execute("DROP TRIGGER boom")
    assert store.last_seq("c") == 1  # the counter bump was rolled back with the insert
    assert store.append("c", [Message.user("b")]) == [2]
    store.close()


def test_postgres_failed_append_leaves_no_gap(postgres_backend: Any) -> None:
    import psycopg

    store = postgres_backend.open()
    store.append("c", [Message.user("a")])
    schema = postgres_backend.options["schema"]
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        conn.execute(
            f'CREATE FUNCTION "{schema}".boom() RETURNS trigger LANGUAGE plpgsql AS'
            " $$ BEGIN IF NEW.seq = 3 THEN RAISE EXCEPTION 'disk says no'; END IF;"
            " RETURN NEW; END $$"
        )
        conn.execute(
            f'CREATE TRIGGER boom BEFORE INSERT ON "{schema}".contextfold_messages'
            f' FOR EACH ROW EXECUTE FUNCTION "{schema}".boom()'
        )
    with pytest.raises(StoreError, match="disk says no"):
        store.append("c", [Message.user("b"), Message.user("c")])
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        conn.execute(f'DROP TRIGGER boom ON "{schema}".contextfold_messages')
    assert store.last_seq("c") == 1
    assert store.append("c", [Message.user("b")]) == [2]
    assert [s.message.text for s in store.read("c")] == ["a", "b"]


def test_sqlite_conversation_cannot_overflow_its_key_range(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "full.db")
    store.append("c", [Message.user("a")])
    store.append("d", [Message.user("neighbour")])
    with sqlite3.connect(tmp_path / "full.db") as conn:
        # Move c's only message to seq 2**32 - 2: the next seq follows the largest key.
        conn.execute(
            "UPDATE contextfold_messages SET key = key + 4294967293 WHERE key ="
            " (SELECT (num << 32) + 1 FROM contextfold_conversations WHERE id = 'c')"
        )
    assert store.append("c", [Message.user("last")]) == [4294967295]
    with pytest.raises(StoreError, match="full"):
        store.append("c", [Message.user("one too many")])
    assert store.last_seq("c") == 4294967295
    assert [s.message.text for s in store.read("d")] == ["neighbour"]  # not overwritten
    store.close()


async def test_sqlite_async_append_errors_leave_no_lock_or_gap(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    assert await store.aappend("c", [Message.user("a")]) == [1]
    with sqlite3.connect(tmp_path / "a.db") as conn:
        conn.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON contextfold_messages"
            " BEGIN SELECT RAISE(ABORT, 'refused by trigger'); END"
        )
    with pytest.raises(StoreError, match="refused by trigger"):
        await store.aappend("c", [Message.user("b")])
    with sqlite3.connect(tmp_path / "a.db") as conn:
        conn.execute("DROP TRIGGER boom")
    # Nothing half-written, no transaction left open: both paths append right after seq 1.
    assert await store.aappend("c", [Message.user("c")]) == [2]
    assert store.append("c", [Message.user("d")]) == [3]
    # A conversation that is full raises from the inline path without holding the lock.
    with sqlite3.connect(tmp_path / "a.db") as conn:
        conn.execute(
            "UPDATE contextfold_messages SET key = key + 4294967292 WHERE key ="
            " (SELECT (num << 32) + 3 FROM contextfold_conversations WHERE id = 'c')"
        )
    with pytest.raises(StoreError, match="full"):
        await store.aappend("c", [Message.user("x")])
    assert await store.aappend("other", [Message.user("fine")]) == [1]
    assert [s.message.text for s in store.read("c")] == ["a", "c", "d"]
    await store.aclose()
