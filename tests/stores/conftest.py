"""Store backends for the contract suite: in-memory, SQLite, Redis, Redis Cluster and PostgreSQL.

Redis, Redis Cluster and PostgreSQL need real servers, named by ``CONTEXTFOLD_TEST_REDIS_URL``,
``CONTEXTFOLD_TEST_REDIS_CLUSTER_URL`` (any node of a 3-master cluster) and
``CONTEXTFOLD_TEST_POSTGRES_URL`` (``.ci/services.sh`` starts them and exports them). Outside
CI a missing server skips its backend; in CI (``CI`` set) it fails the test. Every test gets its
own Redis key prefix or PostgreSQL schema, removed afterwards, so tests never collide.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from contextfold.stores import InMemoryStore, open_store
from contextfold.stores.base import Store

IN_CI = bool(os.environ.get("CI"))
REDIS_URL = os.environ.get("CONTEXTFOLD_TEST_REDIS_URL", "")
POSTGRES_URL = os.environ.get("CONTEXTFOLD_TEST_POSTGRES_URL", "")
REDIS_CLUSTER_URL = os.environ.get("CONTEXTFOLD_TEST_REDIS_CLUSTER_URL", "")

ALL_BACKENDS = ("memory", "sqlite", "redis", "redis_cluster", "postgres")
PERSISTENT_BACKENDS = ("sqlite", "redis", "redis_cluster", "postgres")
REDIS_BACKENDS = ("redis", "redis_cluster")


def require_server(name: str) -> str:
    """The server URL for ``name``; skip when it is absent outside CI, fail in CI."""
    urls = {"redis": REDIS_URL, "redis_cluster": REDIS_CLUSTER_URL, "postgres": POSTGRES_URL}
    url = urls[name]
    if not url:
        var = f"CONTEXTFOLD_TEST_{name.upper()}_URL"
        message = f"{name} server not configured: set {var} (.ci/services.sh starts one)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return url


@dataclass
class Backend:
    """How to open (again) the store under test: same data, new connection."""

    name: str
    url: str
    options: dict[str, Any] = field(default_factory=dict)
    shared: InMemoryStore | None = None
    opened: list[Store] = field(default_factory=list)

    def open(self) -> Any:
        """A new store instance on the same data (the in-memory store is shared)."""
        if self.shared is not None:
            return self.shared
        store = open_store(self.url, **self.options)
        self.opened.append(store)
        return store

    def spec(self) -> dict[str, Any]:
        """What a worker process needs to open the same store."""
        return {"url": self.url, "options": self.options}

    def raw_redis(self) -> Any:
        """A plain redis-py client on the same server or cluster (close it after use)."""
        import redis
        import redis.cluster

        if self.name == "redis_cluster":
            return redis.cluster.RedisCluster.from_url(self.url)
        return redis.Redis.from_url(self.url)

    def cleanup(self) -> None:
        for store in self.opened:
            store.close()
        if self.name in REDIS_BACKENDS:
            client = self.raw_redis()
            try:
                # One key at a time: on a cluster the keys live in different slots.
                for key in list(client.scan_iter(match=self.options["key_prefix"] + ":*")):
                    client.delete(key)
            finally:
                client.close()
        elif self.name == "postgres":
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.options["schema"]}" CASCADE')


def make_backend(name: str, tmp_path: Path) -> Backend:
    tag = uuid.uuid4().hex[:12]
    if name == "memory":
        return Backend(name, "memory://", shared=InMemoryStore())
    if name == "sqlite":
        return Backend(name, f"sqlite:///{tmp_path / 'store.db'}")
    url = require_server(name)
    if name == "redis":
        return Backend(name, url, {"key_prefix": f"cftest-{tag}"})
    if name == "redis_cluster":
        return Backend(name, url, {"key_prefix": f"cftest-{tag}", "cluster": True})
    return Backend(name, url, {"schema": f"cftest_{tag}"})


def backend_for(name: str, tmp_path: Path) -> Iterator[Backend]:
    """The backend ``name`` for one test, its data removed afterwards."""
    b = make_backend(name, tmp_path)
    try:
        yield b
    finally:
        b.cleanup()


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backend_for(request.param, tmp_path)


@pytest.fixture(params=PERSISTENT_BACKENDS)
def persistent_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backend_for(request.param, tmp_path)


@pytest.fixture
def store(backend: Backend) -> Any:
    return backend.open()


@pytest.fixture
def redis_backend(tmp_path: Path) -> Iterator[Backend]:
    yield from backend_for("redis", tmp_path)


@pytest.fixture(params=REDIS_BACKENDS)
def any_redis_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backend_for(request.param, tmp_path)


@pytest.fixture(params=["redis", "postgres"])
def network_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The single-server network stores (the fault proxy forwards to one port)."""
    yield from backend_for(request.param, tmp_path)


@pytest.fixture
def redis_cluster_backend(tmp_path: Path) -> Iterator[Backend]:
    yield from backend_for("redis_cluster", tmp_path)


@pytest.fixture
def postgres_backend(tmp_path: Path) -> Iterator[Backend]:
    yield from backend_for("postgres", tmp_path)


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Iterator[Backend]:
    yield from backend_for("sqlite", tmp_path)
