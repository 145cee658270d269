"""Store backends for the contract suite: in-memory, SQLite, Redis and PostgreSQL.

Redis and PostgreSQL need real servers, named by ``CONTEXTFOLD_TEST_REDIS_URL`` and
``CONTEXTFOLD_TEST_POSTGRES_URL`` (``.ci/services.sh`` starts both and exports them). Outside
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

ALL_BACKENDS = ("memory", "sqlite", "redis", "postgres")
PERSISTENT_BACKENDS = ("sqlite", "redis", "postgres")


def require_server(name: str) -> str:
    """The server URL for ``name``; skip when it is absent outside CI, fail in CI."""
    url = REDIS_URL if name == "redis" else POSTGRES_URL
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

    def cleanup(self) -> None:
        for store in self.opened:
            store.close()
        if self.name == "redis":
            import redis

            client = redis.Redis.from_url(self.url)
            try:
                keys = list(client.scan_iter(match=self.options["key_prefix"] + ":*"))
                if keys:
                    client.delete(*keys)
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
    return Backend(name, url, {"schema": f"cftest_{tag}"})


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b = make_backend(request.param, tmp_path)
    try:
        yield b
    finally:
        b.cleanup()


@pytest.fixture(params=PERSISTENT_BACKENDS)
def persistent_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b = make_backend(request.param, tmp_path)
    try:
        yield b
    finally:
        b.cleanup()


@pytest.fixture
def store(backend: Backend) -> Any:
    return backend.open()


@pytest.fixture
def redis_backend(tmp_path: Path) -> Iterator[Backend]:
    b = make_backend("redis", tmp_path)
    try:
        yield b
    finally:
        b.cleanup()


@pytest.fixture
def postgres_backend(tmp_path: Path) -> Iterator[Backend]:
    b = make_backend("postgres", tmp_path)
    try:
        yield b
    finally:
        b.cleanup()


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Iterator[Backend]:
    b = make_backend("sqlite", tmp_path)
    try:
        yield b
    finally:
        b.cleanup()
