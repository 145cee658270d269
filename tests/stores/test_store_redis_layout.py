"""The Redis key layout: unambiguous keys, hash tags for Redis Cluster, the layout-1 migration.

Runs against the single Redis server and the 3-master Redis Cluster that ``.ci/services.sh``
starts (``CONTEXTFOLD_TEST_REDIS_URL``, ``CONTEXTFOLD_TEST_REDIS_CLUSTER_URL``).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConfigError, StoreError
from contextfold.messages import Message
from contextfold.stores import RedisStore, open_store
from contextfold.stores._codec import encode_checkpoint, encode_message


@pytest.mark.parametrize(
    ("outer", "outer_cid", "inner_cid"),
    [(":c:x", "y", "x:c:y"), (":{a}", "b", "a}:{b"), (":{a}:", "b", "a}::{b")],
)
def test_nested_key_prefixes_never_read_each_others_conversations(
    any_redis_backend: Any, outer: str, outer_cid: str, inner_cid: str
) -> None:
    prefix = any_redis_backend.options["key_prefix"]
    cluster = any_redis_backend.options.get("cluster", False)
    nested = RedisStore(any_redis_backend.url, key_prefix=prefix + outer, cluster=cluster)
    plain = any_redis_backend.open()
    try:
        nested.append(outer_cid, [Message.user("under the longer prefix")])
        assert plain.last_seq(inner_cid) == 0
        assert plain.read(inner_cid) == []
        plain.append(inner_cid, [Message.user("under the shorter prefix")])
        assert [s.message.text for s in nested.read(outer_cid)] == ["under the longer prefix"]
    finally:
        nested.close()


def test_a_log_in_the_first_key_layout_is_migrated_on_first_use(redis_backend: Any) -> None:
    prefix = redis_backend.options["key_prefix"]
    old = [Message.user("from before", id="m1"), Message.assistant("reply", id="m2")]
    ckpt = CheckpointRecord(summary="s", last_covered_id="m1", last_covered_seq=1)
    client = redis_backend.raw_redis()
    try:  # what contextfold wrote before layout 2
        client.set(f"{prefix}:schema_version", "1")
        client.rpush(f"{prefix}:c:conv:m", *(encode_message(m) for m in old))
        client.rpush(f"{prefix}:c:conv:k", encode_checkpoint(ckpt))
        client.set(f"{prefix}:c:conv:latest", ckpt.id)
        client.sadd(f"{prefix}:conversations", "conv")
        store = redis_backend.open()
        assert [s.message for s in store.read("conv")] == old
        latest = store.latest_checkpoint("conv")
        assert latest is not None
        assert latest.id == ckpt.id
        assert store.append("conv", [old[1], Message.user("new")]) == [2, 3]
        assert store.list_conversations() == ["conv"]
        assert client.get(f"{prefix}:schema_version") == b"2"
        assert not client.exists(f"{prefix}:c:conv:m")
        # A second store opening the migrated data changes nothing.
        assert [s.seq for s in redis_backend.open().read("conv")] == [1, 2, 3]
    finally:
        client.close()


def test_a_newer_key_layout_is_refused(redis_backend: Any) -> None:
    client = redis_backend.raw_redis()
    client.set(f"{redis_backend.options['key_prefix']}:schema_version", "3")
    client.close()
    with pytest.raises(StoreError, match=r"schema version 3 .* newer"):
        redis_backend.open().last_seq("c")


def test_a_cluster_spreads_conversations_over_its_masters(redis_cluster_backend: Any) -> None:
    import redis.cluster

    prefix = redis_cluster_backend.options["key_prefix"]
    client = redis.cluster.RedisCluster.from_url(redis_cluster_backend.url)
    store = RedisStore(client, key_prefix=prefix)
    try:
        for i in range(24):
            assert store.append(f"c{i}", [Message.user("a"), Message.user("b")]) == [1, 2]
        nodes = {client.get_node_from_key(f"{prefix}:{{c{i}}}:m").name for i in range(24)}
        assert len(nodes) == 3  # the multi-key scripts really ran on every master
        assert store.list_conversations() == sorted(f"c{i}" for i in range(24))
    finally:
        store.close()
        assert client.ping()  # the caller's client is left open
        client.close()


async def test_an_asyncio_cluster_client_serves_the_async_api(redis_cluster_backend: Any) -> None:
    import redis.asyncio.cluster

    prefix = redis_cluster_backend.options["key_prefix"]
    client = redis.asyncio.cluster.RedisCluster.from_url(redis_cluster_backend.url)
    store = RedisStore(client, key_prefix=prefix)
    m = Message.user("x")
    assert await store.aappend("c", [m]) == [1]
    assert await store.aappend("c", [m, Message.user("y")]) == [1, 2]
    await store.adelete("c")
    assert await store.alast_seq("c") == 0
    await store.aclose()
    await client.aclose()


def test_a_cluster_url_scheme_opens_a_cluster_store(redis_cluster_backend: Any) -> None:
    url = redis_cluster_backend.url.replace("redis://", "redis+cluster://", 1)
    store = open_store(url, key_prefix=redis_cluster_backend.options["key_prefix"])
    try:
        assert store.append("c", [Message.user("x")]) == [1]
        assert "Cluster" in repr(store)
    finally:
        store.close()


def test_an_indexed_conversation_whose_log_is_gone_is_not_listed(any_redis_backend: Any) -> None:
    # What a delete racing an append can leave behind: the id in the index, no messages.
    prefix = any_redis_backend.options["key_prefix"]
    store = any_redis_backend.open()
    store.append("kept", [Message.user("hi")])
    raw = any_redis_backend.raw_redis()
    try:
        raw.sadd(f"{prefix}:conversations", "gone")
    finally:
        raw.close()
    assert store.list_conversations() == ["kept"]
    store.delete("gone")
    assert store.list_conversations() == ["kept"]


# -- Redis Cluster: errors of the cluster client, and prefixes that defeat the hash tag ----


def _append_error(store: Any, flavour: str) -> BaseException:
    """What one sync or async append on ``store`` raises (the test fails if it returns)."""

    async def aappend() -> None:
        try:
            await store.aappend("ticket-7", [Message.user("hi")])
        finally:
            await store.aclose()

    try:
        if flavour == "sync":
            try:
                store.append("ticket-7", [Message.user("hi")])
            finally:
                store.close()
        else:
            asyncio.run(aappend())
    except Exception as exc:  # handed to the test
        return exc
    raise AssertionError("the append worked")


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_cluster_store_with_no_reachable_node_raises_store_error(flavour: str) -> None:
    pytest.importorskip("redis")
    store = open_store("redis+cluster://127.0.0.1:1", connect_timeout=1, read_timeout=1)
    error = _append_error(store, flavour)
    assert isinstance(error, StoreError)
    assert "Redis Cluster" in str(error)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_cluster_store_on_a_plain_redis_server_raises_store_error(
    redis_backend: Any, flavour: str
) -> None:
    # No database number: a cluster has only 0 (and refuses the URL sooner otherwise).
    url = urlunsplit(urlsplit(redis_backend.url)._replace(path=""))
    store = RedisStore(url, key_prefix=redis_backend.options["key_prefix"], cluster=True)
    error = _append_error(store, flavour)
    assert isinstance(error, StoreError)
    assert "Cluster mode is not enabled" in str(error)


@pytest.mark.parametrize("prefix", ["app{}", "app{}x", "a}b{}c:{x}"])
def test_a_cluster_store_refuses_a_key_prefix_with_an_empty_hash_tag(
    redis_cluster_backend: Any, prefix: str
) -> None:
    import redis.cluster

    # The prefix's "{}" comes first in every key, so Redis would hash the whole key: the
    # keys of one conversation would fall in different slots and every script would fail.
    with pytest.raises(ConfigError, match="hash tag") as info:
        RedisStore("redis+cluster://127.0.0.1:1", key_prefix=prefix)
    assert info.value.argument == "key_prefix"
    client = redis.cluster.RedisCluster.from_url(redis_cluster_backend.url)
    try:
        with pytest.raises(ConfigError, match="hash tag"):
            RedisStore(client, key_prefix=prefix)
    finally:
        client.close()


def test_a_key_prefix_with_braces_works_on_one_server_and_on_a_cluster(
    any_redis_backend: Any,
) -> None:
    cluster = any_redis_backend.options.get("cluster", False)
    base = any_redis_backend.options["key_prefix"]
    prefixes = [base + ":{open", base + ":{tag}"] + ([] if cluster else [base + ":{}"])
    for prefix in prefixes:
        store = RedisStore(any_redis_backend.url, key_prefix=prefix, cluster=cluster)
        try:
            assert store.append("c", [Message.user("hi")]) == [1]
            assert [s.message.text for s in store.read("c")] == ["hi"]
            assert store.list_conversations() == ["c"]
            store.delete("c")
        finally:
            store.close()
