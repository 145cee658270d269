"""The argument checks every integration's constructor makes, written once.

Each raises :class:`~contextfold.errors.ConfigError` naming the argument and the value, in the
constructor, so a misconfigured session or memory fails where it is built, not at its first
model call.
"""

from __future__ import annotations

from typing import Any

from contextfold.errors import ConfigError
from contextfold.stores import open_store
from contextfold.stores.base import AsyncStore, Store
from contextfold.strategies.base import Strategy
from contextfold.tokens.base import TokenCounter

__all__ = ["check_counter", "check_session_id", "check_strategy", "resolve_store"]


def check_session_id(session_id: object) -> str:
    """``session_id`` when it is a non-empty string."""
    if not isinstance(session_id, str) or not session_id:
        raise ConfigError(
            f"session_id must be a non-empty string, got {session_id!r}", argument="session_id"
        )
    return session_id


def check_strategy(strategy: object) -> None:
    """Refuse anything that is not a contextfold strategy."""
    if not isinstance(strategy, Strategy):
        raise ConfigError(
            f"strategy must be a contextfold Strategy, got {type(strategy).__name__}",
            argument="strategy",
        )


def check_counter(counter: object) -> None:
    """Refuse a counter without the :class:`~contextfold.tokens.base.TokenCounter` methods."""
    if counter is not None and not isinstance(counter, TokenCounter):
        raise ConfigError(
            f"counter must be a TokenCounter, got {type(counter).__name__}", argument="counter"
        )


def resolve_store(store: object) -> tuple[Any, bool]:
    """The store for ``store`` (a store, or a URL opened here) and whether it was opened here.

    The type is checked before a URL is opened, so a bad argument never leaves a connection
    behind.
    """
    if isinstance(store, str):
        return open_store(store), True
    if not isinstance(store, (Store, AsyncStore)):
        raise ConfigError(
            f"store must be a Store, an AsyncStore or a URL, got {type(store).__name__}",
            argument="store",
        )
    return store, False
