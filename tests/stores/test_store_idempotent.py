"""Idempotent appends: a message whose id the conversation holds is acknowledged, not stored.

A network store can lose the reply to a write it applied; the application's retry must then
store nothing twice (a doubled tool result would break every later build). Each test runs on
every store, sync and async, batches included.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from contextfold.errors import StoreError
from contextfold.messages import Message
from contextfold.stores import SQLiteStore, open_store


def cid() -> str:
    return "idem-" + uuid.uuid4().hex[:10]


def test_appending_a_stored_message_again_is_acknowledged_not_stored_twice(store: Any) -> None:
    c = cid()
    a, b, d = Message.user("a"), Message.tool_result("call_1", "result"), Message.user("d")
    assert store.append(c, [a, b]) == [1, 2]
    assert store.append(c, [b]) == [2]  # the retry of a lost reply
    assert store.append(c, [a, b, d]) == [1, 2, 3]  # a batch mixing stored and new
    assert [s.message for s in store.read(c)] == [a, b, d]
    assert store.last_seq(c) == 3


def test_async_appends_are_idempotent_too(backend: Any) -> None:
    c = cid()
    a, b = Message.user("a"), Message.assistant("b")

    async def scenario() -> list[list[int]]:
        store = open_store(backend.url, **backend.options) if backend.shared is None else None
        s = store or backend.shared
        try:
            return [
                await s.aappend(c, [a]),
                await s.aappend(c, [a, b]),
                await s.aappend(c, [b, b]),
            ]
        finally:
            if store is not None:
                await store.aclose()

    assert asyncio.run(scenario()) == [[1], [1, 2], [2, 2]]
    assert [s.message for s in backend.open().read(c)] == [a, b]


def test_an_id_stored_with_other_content_refuses_the_whole_batch(store: Any) -> None:
    c = cid()
    store.append(c, [Message.user("first", id="same")])
    with pytest.raises(StoreError, match=r"'same' is already stored at seq 1 with other content"):
        store.append(c, [Message.user("new"), Message.user("second", id="same")])
    with pytest.raises(StoreError, match="other content"):
        store.append(c, [Message.user("x", id="twin"), Message.user("y", id="twin")])
    assert store.last_seq(c) == 1
    assert [s.message.text for s in store.read(c)] == ["first"]


def test_ids_are_per_conversation_and_forgotten_on_delete(store: Any) -> None:
    c, other = cid(), cid()
    m = Message.user("shared")
    assert store.append(c, [m]) == [1]
    assert store.append(other, [Message.user("o"), m]) == [1, 2]
    store.delete(c)
    assert store.append(c, [m]) == [1]
    assert [s.message for s in store.read(c)] == [m]


def test_sqlite_rows_written_before_the_id_index_are_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = [Message.user("from before"), Message.assistant("reply")]
    SQLiteStore(path).append("c", old)
    with sqlite3.connect(path) as conn:  # the file as an earlier version left it
        conn.execute("DROP TABLE contextfold_message_ids")
        conn.execute("DELETE FROM contextfold_schema WHERE version = 5")
    store = SQLiteStore(path)
    assert store.append("c", [old[1], Message.user("new")]) == [2, 3]
    assert [s.message.text for s in store.read("c")] == ["from before", "reply", "new"]
    store.close()


def test_postgres_rows_written_before_the_id_column_are_acknowledged(
    postgres_backend: Any,
) -> None:
    import psycopg

    old = [Message.user("from before"), Message.assistant("reply")]
    postgres_backend.open().append("c", old)
    schema = postgres_backend.options["schema"]
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{schema}".contextfold_messages DROP COLUMN message_id')
        conn.execute(f'DELETE FROM "{schema}".contextfold_schema WHERE version = 4')
    store = postgres_backend.open()
    assert store.append("c", [old[1], Message.user("new")]) == [2, 3]
    assert [s.message.text for s in store.read("c")] == ["from before", "reply", "new"]
