"""Fixtures for the framework integrations: the stores they run over.

The Redis and PostgreSQL stores need servers named by ``CONTEXTFOLD_TEST_REDIS_URL`` and
``CONTEXTFOLD_TEST_POSTGRES_URL``, and skip (outside CI) without them. Each test gets its own
Redis key prefix or PostgreSQL schema, removed afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from contextfold.stores import InMemoryStore, open_store

IN_CI = bool(os.environ.get("CI"))


def _server_url(name: str) -> str:
    var = f"CONTEXTFOLD_TEST_{name.upper()}_URL"
    url = os.environ.get(var, "")
    if not url:
        message = f"{name} server not configured: set {var}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return url


def _drop(name: str, url: str, tag: str) -> None:
    if name == "redis":
        import redis

        client = redis.Redis.from_url(url)
        try:
            keys = list(client.scan_iter(match=f"{tag}:*"))
            if keys:
                client.delete(*keys)
        finally:
            client.close()
    elif name == "postgres":
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{tag}" CASCADE')


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A fresh store of each backend, for async tests (closed and removed afterwards)."""
    name = request.param
    url, tag, options = f"sqlite:///{tmp_path / 'store.db'}", "", {}
    if name in ("redis", "postgres"):
        url, tag = _server_url(name), f"cfint_{uuid.uuid4().hex[:12]}"
        options = {"key_prefix": tag} if name == "redis" else {"schema": tag}
    store = InMemoryStore() if name == "memory" else open_store(url, **options)
    try:
        yield store
    finally:
        await store.aclose()
        store.close()
        if tag:
            _drop(name, url, tag)
