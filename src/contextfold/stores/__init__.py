"""Stores: the append-only log of messages and checkpoints, one backend per module.

``open_store`` picks a backend from a URL::

    open_store("memory://")                       # InMemoryStore
    open_store("sqlite:///chats.db")              # SQLiteStore, relative path
    open_store("sqlite:////var/lib/app/chats.db") # SQLiteStore, absolute path
    open_store("redis://localhost:6379/0")        # RedisStore (extra: redis)
    open_store("postgresql://user@host/db")       # PostgresStore (extra: postgres)

The Redis and PostgreSQL modules import their drivers only when a store is created, so this
package imports with no optional dependency installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contextfold._lazy import lazy_exports
from contextfold.stores._checks import redact_url
from contextfold.stores.base import (
    AsyncCheckpointLog,
    AsyncCompactionLock,
    AsyncMessageLog,
    AsyncStore,
    CheckpointLog,
    CompactionLock,
    MessageLog,
    Store,
    StoreConfigError,
    StoredMessage,
    has_async_checkpoints,
    has_async_compaction_lock,
    has_checkpoints,
    has_compaction_lock,
)
from contextfold.stores.memory import InMemoryStore
from contextfold.stores.partial import AsyncPartialStore, PartialStore, as_async_store, as_store
from contextfold.stores.sqlite import SQLiteStore

if TYPE_CHECKING:
    from contextfold.stores.postgres import PostgresStore
    from contextfold.stores.redis import RedisStore

__all__ = [
    "AsyncCheckpointLog",
    "AsyncCompactionLock",
    "AsyncMessageLog",
    "AsyncPartialStore",
    "AsyncStore",
    "CheckpointLog",
    "CompactionLock",
    "InMemoryStore",
    "MessageLog",
    "PartialStore",
    "PostgresStore",
    "RedisStore",
    "SQLiteStore",
    "Store",
    "StoreConfigError",
    "StoredMessage",
    "as_async_store",
    "as_store",
    "has_async_checkpoints",
    "has_async_compaction_lock",
    "has_checkpoints",
    "has_compaction_lock",
    "open_store",
]


def open_store(target: str | Store, /, **options: Any) -> Store:
    """A store for a URL, or ``target`` itself when it already is a store.

    Args:
        target: ``memory://``, ``sqlite:///path``, ``redis://...``, ``rediss://...``,
            ``redis+cluster://...`` (any node of a Redis Cluster), ``postgresql://...`` (or
            ``postgres://``), or a store instance.
        **options: keyword options of the chosen backend's constructor (for example
            ``synchronous="FULL"`` for SQLite or ``schema="app"`` for PostgreSQL).

    Raises:
        StoreConfigError: the URL scheme is unknown, or the options do not apply (a
            :class:`~contextfold.errors.ConfigError`, also a ``StoreError``).
        StoreError: the store cannot be opened.
        MissingExtraError: the backend's optional dependency is not installed.
    """
    if not isinstance(target, str):
        if isinstance(target, Store):
            if options:
                raise StoreConfigError(
                    "options cannot be applied to an existing store instance", argument="options"
                )
            return target
        raise StoreConfigError(
            f"expected a store URL or a Store, got {type(target).__name__}", argument="target"
        )
    scheme = target.split(":", 1)[0].lower() if ":" in target else ""
    if scheme == "memory":
        if options:
            raise StoreConfigError(
                f"InMemoryStore takes no options, got {sorted(options)}", argument="options"
            )
        return InMemoryStore()
    if scheme == "sqlite":
        return SQLiteStore(target, **options)
    if scheme in ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster"):
        from contextfold.stores.redis import RedisStore

        return RedisStore(target, **options)
    if scheme in ("postgresql", "postgres"):
        from contextfold.stores.postgres import PostgresStore

        return PostgresStore(target, **options)
    raise StoreConfigError(
        f"unknown store URL {redact_url(target)!r}: expected memory://, sqlite:///, redis://, "
        "rediss:// or postgresql://",
        argument="target",
    )


# The optional backends load on first use, so importing this package needs no extras.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {"RedisStore": "contextfold.stores.redis", "PostgresStore": "contextfold.stores.postgres"},
)
