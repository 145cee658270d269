"""The store contract, runnable against any store: ``check_store`` and ``acheck_store``.

These are the checks contextfold's own backends pass (append numbering, reads, checkpoint
commits and conflicts, the compaction lock, listing and deleting), so a store written
outside contextfold can prove it behaves the same. The checks are written once, as a
generator of store calls; :func:`check_store` answers them with the sync methods and
:func:`acheck_store` with the ``a``-prefixed ones, both through the library's one driver loop.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Generator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from contextfold._drive import adrive, drive
from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConflictError
from contextfold.messages import Message
from contextfold.stores.base import has_async_state_log, has_state_log

__all__ = ["acheck_store", "check_store"]


@dataclass(frozen=True)
class _Call:
    handle: int  # 0: the first store, 1: a second handle on the same data
    method: str  # the sync name; the async driver adds the ``a`` prefix
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    conflict: bool = False  # the call must raise ConflictError


@dataclass(frozen=True)
class _Lock:
    handle: int
    conversation_id: str
    ttl: float
    key: str  # names the held lock for the matching _Unlock


@dataclass(frozen=True)
class _Unlock:
    key: str


@dataclass(frozen=True)
class _Sleep:
    seconds: float


@dataclass(frozen=True)
class _KeepsState:
    """Ask whether the store keeps strategy states (an optional ability)."""


_Step = _Call | _Lock | _Unlock | _Sleep | _KeepsState
_Checks = Generator[_Step, Any, None]


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(f"store contract violated: {what}")


def _contract(prefix: str) -> _Checks:
    tag = f"{prefix}-{uuid.uuid4().hex[:10]}"
    a, b = f"{tag}-a", f"{tag}-b"
    sent = [Message.user(f"message {i}") for i in range(5)]
    yield from _appends_and_reads(a, b, sent)
    yield from _checkpoints(a, b, sent)
    yield from _compaction_lock(a, b)
    if (yield _KeepsState()):
        yield from _strategy_state(a, b)
    yield from _listing_and_deleting(a, b, sent)


def _strategy_state(a: str, b: str) -> _Checks:
    """Saved whole, read back equal from another handle, per conversation, replaced."""
    _expect((yield _Call(0, "load_state", (a,))) is None, "no state before one is saved")
    state = {"window": {"start_id": "m-1", "request_id": None}, "failed_compactions": 2}
    yield _Call(0, "save_state", (a, state))
    _expect((yield _Call(1, "load_state", (a,))) == state, "a second handle reads the state")
    _expect((yield _Call(1, "load_state", (b,))) is None, "states are per conversation")
    yield _Call(1, "save_state", (a, {"failed_compactions": 1}))
    replaced = yield _Call(0, "load_state", (a,))
    _expect(replaced == {"failed_compactions": 1}, "a saved state replaces the previous one")


def _appends_and_reads(a: str, b: str, sent: list[Message]) -> _Checks:
    _expect((yield _Call(0, "append", (a, sent[:3]))) == [1, 2, 3], "first append gives 1..3")
    _expect((yield _Call(0, "append", (a, []))) == [], "an empty append returns []")
    _expect((yield _Call(0, "append", (a, sent[3:]))) == [4, 5], "sequences continue at 4")
    _expect((yield _Call(1, "last_seq", (a,))) == 5, "a second handle sees last_seq 5")
    log = yield _Call(1, "read", (a,))
    _expect([s.seq for s in log] == [1, 2, 3, 4, 5], "read returns seq 1..5 in order")
    _expect([s.message for s in log] == sent, "read returns the messages appended, unchanged")
    window = yield _Call(0, "read", (a,), {"after_seq": 1, "limit": 2})
    _expect([s.seq for s in window] == [2, 3], "read(after_seq=1, limit=2) is seq 2..3")
    _expect((yield _Call(0, "read", (a,), {"after_seq": 5})) == [], "nothing after the last")
    _expect((yield _Call(0, "read", (b,))) == [], "an unknown conversation reads as empty")
    _expect((yield _Call(0, "last_seq", (b,))) == 0, "an unknown conversation has last_seq 0")


def _checkpoints(a: str, b: str, sent: list[Message]) -> _Checks:
    _expect((yield _Call(0, "latest_checkpoint", (a,))) is None, "no checkpoint at first")
    first = CheckpointRecord(summary="one", last_covered_id=sent[1].id, last_covered_seq=2)
    yield _Call(0, "append_checkpoint", (a, first), {"expected_previous": None})
    latest = yield _Call(1, "latest_checkpoint", (a,))
    _expect(latest is not None and latest.id == first.id, "latest_checkpoint is the commit")
    _expect(latest is not None and latest.to_dict() == first.to_dict(), "checkpoint unchanged")
    second = CheckpointRecord(
        summary="two", last_covered_id=sent[3].id, last_covered_seq=4, previous_id=first.id
    )
    stale = {"expected_previous": None}
    yield _Call(0, "append_checkpoint", (a, second), stale, conflict=True)
    beyond = second.replace(last_covered_seq=9)
    yield _Call(0, "append_checkpoint", (a, beyond), {"expected_previous": first.id}, True)
    missing = second.replace(last_covered_seq=None)
    yield _Call(0, "append_checkpoint", (a, missing), {"expected_previous": first.id}, True)
    unknown = CheckpointRecord(summary="x", last_covered_id="m", last_covered_seq=1)
    yield _Call(0, "append_checkpoint", (b, unknown), {"expected_previous": None}, True)
    yield _Call(0, "append_checkpoint", (a, second), {"expected_previous": first.id})
    ids = [k.id for k in (yield _Call(1, "checkpoints", (a,)))]
    _expect(ids == [first.id, second.id], "rejected checkpoints leave no trace")


def _compaction_lock(a: str, b: str) -> _Checks:
    """Single flight across handles, released on exit, expires after ttl."""
    _expect((yield _Lock(0, a, 30.0, "outer")) is True, "a free lock is taken")
    _expect((yield _Lock(1, a, 30.0, "inner")) is False, "a held lock is not taken twice")
    yield _Unlock("inner")
    _expect((yield _Lock(1, b, 30.0, "other")) is True, "locks are per conversation")
    yield _Unlock("other")
    yield _Unlock("outer")
    _expect((yield _Lock(1, a, 30.0, "again")) is True, "a released lock can be taken")
    yield _Unlock("again")
    _expect((yield _Lock(0, a, 0.2, "short")) is True, "a short lock is taken")
    deadline = time.monotonic() + 5.0
    while True:
        yield _Sleep(0.1)
        taken = yield _Lock(1, a, 30.0, "late")
        if taken or time.monotonic() > deadline:
            break
        yield _Unlock("late")
    _expect(taken is True, "an expired lock can be taken by another holder")
    yield _Unlock("short")  # the first holder leaves late: it must not free the new lock
    _expect((yield _Lock(0, a, 30.0, "third")) is False, "a late release frees nothing")
    yield _Unlock("third")
    yield _Unlock("late")


def _listing_and_deleting(a: str, b: str, sent: list[Message]) -> _Checks:
    yield _Call(0, "append", (b, sent[:1]))
    listed = yield _Call(1, "list_conversations")
    _expect(a in listed and b in listed, "list_conversations names both conversations")
    _expect(listed == sorted(listed), "list_conversations is sorted")
    yield _Call(0, "delete", (a,))
    _expect((yield _Call(1, "read", (a,))) == [], "a deleted conversation reads as empty")
    _expect((yield _Call(1, "checkpoints", (a,))) == [], "delete removes the checkpoints")
    if (yield _KeepsState()):
        _expect((yield _Call(1, "load_state", (a,))) is None, "delete removes the state")
    _expect(a not in (yield _Call(1, "list_conversations")), "a deleted id is not listed")
    _expect((yield _Call(0, "last_seq", (b,))) == 1, "delete leaves other conversations alone")
    yield _Call(0, "delete", (b,))


def _lock_taken(value: Any) -> bool:
    _expect(isinstance(value, bool), f"compaction_lock must yield a bool, got {value!r}")
    return bool(value)


def _check_conflict(step: _Call, name: str, conflicted: bool) -> None:
    """A call must raise :class:`ConflictError` exactly when its step says so."""
    if conflicted:
        _expect(step.conflict, f"{name}{step.args[:1]} raised ConflictError")
    else:
        _expect(not step.conflict, f"{name} accepted a conflicting checkpoint")


def check_store(make_store: Callable[[], Any], *, prefix: str = "contract") -> None:
    """Run the store contract against a synchronous store.

    Args:
        make_store: returns a handle on the store under test; it is called twice, and both
            handles must see the same data (return the same object for a process-local store).
        prefix: prefix of the conversation ids the check creates (and deletes at the end).

    Raises:
        AssertionError: naming the first rule the store breaks.
    """
    handles = [make_store(), make_store()]
    held: dict[str, AbstractContextManager[Any]] = {}

    def answer(step: _Step) -> Any:
        if isinstance(step, _Call):
            method = getattr(handles[step.handle], step.method)
            try:
                reply, conflicted = method(*step.args, **step.kwargs), False
            except ConflictError:
                reply, conflicted = None, True
            _check_conflict(step, step.method, conflicted)
            return reply
        if isinstance(step, _Lock):
            manager = handles[step.handle].compaction_lock(step.conversation_id, ttl=step.ttl)
            taken = _lock_taken(manager.__enter__())
            held[step.key] = manager
            return taken
        if isinstance(step, _KeepsState):
            return has_state_log(handles[0])
        if isinstance(step, _Unlock):
            held.pop(step.key).__exit__(None, None, None)
        else:
            time.sleep(step.seconds)
        return None

    try:
        drive(_contract(prefix), answer)
    finally:
        for manager in held.values():
            manager.__exit__(None, None, None)


async def acheck_store(make_store: Callable[[], Any], *, prefix: str = "contract") -> None:
    """Run the store contract against an asynchronous store (the ``a``-prefixed methods).

    Same arguments and errors as :func:`check_store`.
    """
    handles = [make_store(), make_store()]
    held: dict[str, AbstractAsyncContextManager[Any]] = {}

    async def answer(step: _Step) -> Any:
        if isinstance(step, _Call):
            method = getattr(handles[step.handle], "a" + step.method)
            try:
                pending: Awaitable[Any] = method(*step.args, **step.kwargs)
                reply, conflicted = await pending, False
            except ConflictError:
                reply, conflicted = None, True
            _check_conflict(step, "a" + step.method, conflicted)
            return reply
        if isinstance(step, _Lock):
            handle = handles[step.handle]
            manager = handle.acompaction_lock(step.conversation_id, ttl=step.ttl)
            taken = _lock_taken(await manager.__aenter__())
            held[step.key] = manager
            return taken
        if isinstance(step, _KeepsState):
            return has_async_state_log(handles[0])
        if isinstance(step, _Unlock):
            await held.pop(step.key).__aexit__(None, None, None)
        else:
            await asyncio.sleep(step.seconds)
        return None

    try:
        await adrive(_contract(prefix), answer)
    finally:
        for manager in held.values():
            await manager.__aexit__(None, None, None)
