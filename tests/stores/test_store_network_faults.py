"""Network stores behind a loopback proxy: lost replies, a frozen server, an outage.

The proxy (``tcp_proxy.py``) sits between the store and the real Redis / PostgreSQL server.
A lost reply is the server applying a write whose answer never arrives: the retried append
must store the message once. A frozen server must give :class:`StoreError` within the
store's timeouts, and the store must work again as soon as the server is back.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from tcp_proxy import Proxy

from contextfold.errors import StoreError
from contextfold.messages import Message
from contextfold.stores import open_store

#: What the server's reply to the write holds: Redis answers the append script with an
#: array, PostgreSQL the COMMIT of the append's transaction with a COMMIT command tag.
REPLY_MARKERS = {"redis": b"*", "postgres": b"COMMIT\x00"}
FAST = {"connect_timeout": 1.0, "read_timeout": 1.0}


@pytest.fixture
def proxy(network_backend: Any) -> Iterator[Proxy]:
    p = Proxy(urlsplit(network_backend.url).port or 0)
    try:
        yield p
    finally:
        p.close()


def _through(proxy: Proxy, backend: Any) -> Any:
    return open_store(proxy.url_for(backend.url), **backend.options, **FAST)


def _append_retrying(append: Any, cid: str, message: Message) -> list[int]:
    """What an application does: retry an append that raised StoreError."""
    for _ in range(3):
        try:
            return append(cid, [message])  # type: ignore[no-any-return]
        except StoreError:
            continue
    raise AssertionError("the append never succeeded")


def test_a_retried_append_whose_reply_was_lost_stores_the_message_once(
    network_backend: Any, proxy: Proxy
) -> None:
    cid = "lost-" + uuid.uuid4().hex[:8]
    store = _through(proxy, network_backend)
    store.append(cid, [Message.user("before")])  # connected (and migrated) through the proxy
    result = Message.tool_result("call_1", "the tool's answer")
    proxy.drop_reply_containing(REPLY_MARKERS[network_backend.name])
    assert _append_retrying(store.append, cid, result) == [2]
    assert proxy.dropped.is_set()  # the reply really was lost once
    log = network_backend.open().read(cid)
    assert [s.seq for s in log] == [1, 2]
    assert log[1].message == result
    store.close()


def test_an_async_retried_append_whose_reply_was_lost_stores_the_message_once(
    network_backend: Any, proxy: Proxy
) -> None:
    cid = "alost-" + uuid.uuid4().hex[:8]
    result = Message.tool_result("call_1", "the tool's answer")

    async def scenario() -> list[int]:
        store = _through(proxy, network_backend)
        try:
            await store.aappend(cid, [Message.user("before")])
            proxy.drop_reply_containing(REPLY_MARKERS[network_backend.name])
            for _ in range(3):
                try:
                    return await store.aappend(cid, [result])  # type: ignore[no-any-return]
                except StoreError:
                    continue
            raise AssertionError("the append never succeeded")
        finally:
            await store.aclose()

    assert asyncio.run(scenario()) == [2]
    assert proxy.dropped.is_set()
    log = network_backend.open().read(cid)
    assert [s.seq for s in log] == [1, 2]
    assert log[1].message == result


def test_a_frozen_server_gives_store_error_within_the_timeouts(
    network_backend: Any, proxy: Proxy
) -> None:
    cid = "frozen-" + uuid.uuid4().hex[:8]
    store = _through(proxy, network_backend)
    store.append(cid, [Message.user("before")])
    proxy.freeze()
    started = time.monotonic()
    with pytest.raises(StoreError):
        store.append(cid, [Message.user("while frozen")])
    # read_timeout, and for Redis its one retry on a new connection (which connects to the
    # proxy but is frozen too), with some slack for a loaded machine.
    assert time.monotonic() - started < 4.5
    proxy.restore()
    # The frozen append may still reach the server once the proxy forwards again: then it is
    # stored once, before or after "after" (its bytes left on the old connection, which
    # races the new one; a real network does the same). Nothing is stored twice either way.
    after = _append_retrying(store.append, cid, Message.user("after"))
    time.sleep(0.5)  # let a late frozen write land before the log is read
    texts = [s.message.text for s in store.read(cid)]
    assert after in ([2], [3])
    assert texts in (
        ["before", "after"],
        ["before", "while frozen", "after"],
        ["before", "after", "while frozen"],
    )
    assert texts.index("after") + 1 == after[0]
    store.close()


def test_the_store_recovers_at_once_after_an_outage(network_backend: Any, proxy: Proxy) -> None:
    cid = "outage-" + uuid.uuid4().hex[:8]
    store = _through(proxy, network_backend)
    store.append(cid, [Message.user("before")])
    proxy.refuse()
    outage_end = time.monotonic() + 4
    while time.monotonic() < outage_end:  # an application retrying through the outage
        started = time.monotonic()
        with pytest.raises(StoreError):
            store.append(cid, [Message.user("during")])
        assert time.monotonic() - started < 4.5
    proxy.restore()
    back = time.monotonic()
    assert store.append(cid, [Message.user("after")]) == [2]
    assert time.monotonic() - back < 2.0  # no reconnect back-off
    store.close()


# -- PostgreSQL: deadlines outside the operations themselves -----------------------------

#: The server's ReadyForQuery while idle: the handshake of a new connection is complete.
PG_READY = b"Z\x00\x00\x00\x05I"


def _blocking(call: Any, give_up: float = 10.0) -> BaseException | None:
    """What ``call()`` raised (None if it returned), run in a thread so a hang fails the test."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the test
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(give_up)
    assert outcome, f"still blocked after {give_up} s"
    return outcome[0]


def _lock_freed(store: Any, cid: str) -> bool:
    """Whether ``store`` takes the lock within 3 s (the server ends a cut session soon after)."""
    give_up = time.monotonic() + 3
    while True:
        with store.compaction_lock(cid) as taken:
            if taken or time.monotonic() > give_up:
                return bool(taken)
        time.sleep(0.05)


@pytest.fixture
def pg_proxy(postgres_backend: Any) -> Iterator[Proxy]:
    p = Proxy(urlsplit(postgres_backend.url).port or 0)
    try:
        yield p
    finally:
        p.close()


def test_a_postgres_server_frozen_after_the_handshake_fails_the_first_use_within_read_timeout(
    postgres_backend: Any, pg_proxy: Proxy
) -> None:
    # The first operation checks (and migrates) the schema on a connection of its own, under
    # the store's init lock: the server freezes right after accepting that connection.
    store = _through(pg_proxy, postgres_backend)
    pg_proxy.freeze_after_reply_containing(PG_READY)
    cid = "first-" + uuid.uuid4().hex[:8]
    started = time.monotonic()
    error = _blocking(lambda: store.append(cid, [Message.user("hi")]))
    assert isinstance(error, StoreError)
    assert "connect failed" in str(error)
    assert time.monotonic() - started < 3.5  # read_timeout is 1 s
    pg_proxy.restore()
    # The init lock was let go: the next call checks the schema again and works.
    assert store.append(cid, [Message.user("hi")]) == [1]
    store.close()


def test_an_async_first_use_of_a_postgres_server_frozen_after_the_handshake_fails_in_time(
    postgres_backend: Any, pg_proxy: Proxy
) -> None:
    cid = "afirst-" + uuid.uuid4().hex[:8]

    async def scenario() -> float:
        store = _through(pg_proxy, postgres_backend)
        try:
            pg_proxy.freeze_after_reply_containing(PG_READY)
            started = time.monotonic()
            with pytest.raises(StoreError, match="connect failed"):
                await store.aappend(cid, [Message.user("hi")])
            waited = time.monotonic() - started
            pg_proxy.restore()
            assert await store.aappend(cid, [Message.user("hi")]) == [1]
            return waited
        finally:
            await store.aclose()

    assert asyncio.run(asyncio.wait_for(scenario(), 10)) < 3.5


def test_a_postgres_migration_that_cannot_finish_gives_up_after_migration_timeout(
    postgres_backend: Any,
) -> None:
    import psycopg

    # Another process holding the migration lock stands for a migration that never ends
    # (statement_timeout is off for migrations, so only the client's deadline can stop it).
    schema = postgres_backend.options["schema"]
    store = open_store(postgres_backend.url, schema=schema, read_timeout=1, migration_timeout=1)
    with psycopg.connect(postgres_backend.url, autocommit=True) as holder:
        holder.execute(
            "SELECT pg_advisory_lock(hashtextextended(%s, 0))", (f"contextfold:{schema}",)
        )
        started = time.monotonic()
        error = _blocking(lambda: store.last_seq("c"))
        assert isinstance(error, StoreError)
        assert "connect failed" in str(error)
        assert time.monotonic() - started < 3.5
    # The lock is free again: the migration, rolled back, runs again on the next call.
    assert store.last_seq("c") == 0
    store.close()


def test_leaving_a_postgres_compaction_lock_while_the_server_is_frozen_returns_in_time(
    postgres_backend: Any, pg_proxy: Proxy
) -> None:
    cid = "unlock-" + uuid.uuid4().hex[:8]
    store = _through(pg_proxy, postgres_backend)
    store.last_seq(cid)  # connected and migrated through the proxy

    def hold_while_frozen() -> None:
        with store.compaction_lock(cid) as taken:
            assert taken
            pg_proxy.freeze()  # the network freezes while the summarizer runs

    started = time.monotonic()
    assert _blocking(hold_while_frozen) is None  # the release's error means the session is gone
    assert time.monotonic() - started < 3.5  # read_timeout is 1 s
    pg_proxy.restore()
    # The cut connection ended the server's session, and with it the lock.
    assert _lock_freed(postgres_backend.open(), cid)
    store.close()


def test_leaving_an_async_postgres_compaction_lock_while_the_server_is_frozen_returns_in_time(
    postgres_backend: Any, pg_proxy: Proxy
) -> None:
    cid = "aunlock-" + uuid.uuid4().hex[:8]

    async def scenario() -> float:
        store = _through(pg_proxy, postgres_backend)
        try:
            await store.alast_seq(cid)
            async with store.acompaction_lock(cid) as taken:
                assert taken
                pg_proxy.freeze()
                started = time.monotonic()
            return time.monotonic() - started
        finally:
            pg_proxy.restore()
            await store.aclose()

    assert asyncio.run(asyncio.wait_for(scenario(), 10)) < 3.5
    assert _lock_freed(postgres_backend.open(), cid)
