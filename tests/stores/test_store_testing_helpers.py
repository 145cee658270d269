"""contextfold.testing.check_store / acheck_store: pass on every backend, catch broken stores."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from contextfold.messages import Message
from contextfold.stores import InMemoryStore
from contextfold.testing import acheck_store, check_store


def test_every_backend_passes(backend: Any) -> None:
    check_store(backend.open)


async def test_every_backend_passes_async(backend: Any) -> None:
    opened: list[Any] = []

    def make() -> Any:
        store = backend.open()
        opened.append(store)
        return store

    try:
        await acheck_store(make)
    finally:
        for store in opened:
            await store.aclose()


class ZeroBased(InMemoryStore):
    """Numbers messages from 0: a classic off-by-one."""

    def append(self, conversation_id: str, messages: Sequence[Message], /) -> list[int]:
        return [seq - 1 for seq in super().append(conversation_id, messages)]


class ReentrantLock(InMemoryStore):
    """Hands the compaction lock to everyone."""

    @contextmanager
    def compaction_lock(self, conversation_id: str, /, *, ttl: float = 120.0) -> Iterator[bool]:
        yield True


class LaxCheckpoints(InMemoryStore):
    """Ignores expected_previous."""

    def append_checkpoint(self, conversation_id: str, checkpoint: Any, /, **_: Any) -> Any:
        latest = self.latest_checkpoint(conversation_id)
        return super().append_checkpoint(
            conversation_id, checkpoint, expected_previous=latest.id if latest else None
        )


@pytest.mark.parametrize(
    ("broken", "rule"),
    [
        (ZeroBased, "first append gives 1..3"),
        (ReentrantLock, "a held lock is not taken twice"),
        (LaxCheckpoints, "accepted a conflicting checkpoint"),
    ],
)
def test_broken_stores_are_caught(broken: type[InMemoryStore], rule: str) -> None:
    store = broken()
    with pytest.raises(AssertionError, match=rule):
        check_store(lambda: store)


async def test_broken_store_is_caught_async() -> None:
    store = ZeroBased()
    with pytest.raises(AssertionError, match="first append"):
        await acheck_store(lambda: store)
