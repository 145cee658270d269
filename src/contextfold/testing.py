"""Fakes for tests, shipped so users can test their own code without a model.

* :class:`FakeSummarizer` returns canned or computed summaries, records every request, and
  can be told to fail with any failure code.
* :class:`FixedCounter` counts every message as a fixed number of tokens (or text as one
  token per character), which makes budgets easy to reason about in tests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence

from contextfold.messages import Message
from contextfold.summarizers.base import (
    FailureCode,
    SummarizationResult,
    SummaryRequest,
    Usage,
    precheck,
)
from contextfold.tokens.base import BaseCounter

__all__ = ["FakeSummarizer", "FixedCounter"]


class FakeSummarizer:
    """A deterministic summarizer for tests; sync and async.

    Args:
        text: the summary to return, or a function of the request. The default describes
            the span: ``"summary of N messages: <first words of each>"``.
        fail: make every call fail with this code.
        fail_times: fail only the first N calls (then succeed).
        model: the model name reported in results.
    """

    def __init__(
        self,
        text: str | Callable[[SummaryRequest], str] | None = None,
        *,
        fail: FailureCode | None = None,
        fail_times: int | None = None,
        model: str = "fake-summarizer",
    ) -> None:
        self.text = text
        self.fail = fail
        self.fail_times = fail_times
        self.model = model
        self.requests: list[SummaryRequest] = []

    @property
    def calls(self) -> int:
        """How many requests were received."""
        return len(self.requests)

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Return the configured summary or failure; records the request."""
        self.requests.append(request)
        early = precheck(request)
        if early is not None:
            return early
        if self.fail is not None and (self.fail_times is None or self.calls <= self.fail_times):
            return SummarizationResult.failure(f"fake failure ({self.fail})", self.fail)
        if callable(self.text):
            body = self.text(request)
        elif self.text is not None:
            body = self.text
        else:
            body = _describe(request.messages, request.previous_summary)
        usage = Usage(
            input_tokens=sum(len(m.text) for m in request.messages) // 4 + 1,
            output_tokens=len(body) // 4 + 1,
        )
        return SummarizationResult.success(body, usage=usage, model=self.model)

    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Async form of :meth:`summarize`."""
        return self.summarize(request)


def _describe(messages: Sequence[Message], previous: str | None) -> str:
    heads = "; ".join(" ".join(m.text.split()[:4]) for m in messages if m.text)
    digest = hashlib.sha256(heads.encode()).hexdigest()[:8]
    lead = f"{previous.strip()} | " if previous else ""
    return f"{lead}summary of {len(messages)} messages [{digest}]: {heads[:200]}"


class FixedCounter(BaseCounter):
    """Counts text as ``per_char`` tokens per character and messages with a fixed overhead.

    ``FixedCounter(per_message=10)`` with ``per_char=0`` makes every message cost exactly 10.
    """

    def __init__(self, per_message: int = 1, *, per_char: int = 1) -> None:
        self.per_char = per_char
        super().__init__(
            message_overhead=per_message,
            tool_call_overhead=0,
            tool_result_overhead=0,
            image_tokens=per_message,
        )

    def _config_key(self) -> Hashable:
        return self.per_char

    def count_text(self, text: str, /) -> int:
        return len(text) * self.per_char


# -- store contract -----------------------------------------------------------------------
#
# ``check_store`` / ``acheck_store`` run the store contract against any Store: the same
# checks contextfold's own backends pass. The checks are written once, as a generator of
# store calls, and a sync and an async driver carry them out.

import asyncio  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Awaitable, Generator  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

from contextfold.checkpoints import CheckpointRecord  # noqa: E402
from contextfold.errors import ConflictError  # noqa: E402

__all__ += ["acheck_store", "check_store"]


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


_Step = _Call | _Lock | _Unlock | _Sleep


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(f"store contract violated: {what}")


def _contract(prefix: str) -> Generator[_Step, Any, None]:
    tag = f"{prefix}-{uuid.uuid4().hex[:10]}"
    a, b = f"{tag}-a", f"{tag}-b"
    sent = [Message.user(f"message {i}") for i in range(5)]

    # Appends and sequence numbers.
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

    # Checkpoints.
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

    # Compaction lock: single flight across handles, released on exit, expires after ttl.
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

    # Listing and deleting.
    yield _Call(0, "append", (b, sent[:1]))
    listed = yield _Call(1, "list_conversations")
    _expect(a in listed and b in listed, "list_conversations names both conversations")
    _expect(listed == sorted(listed), "list_conversations is sorted")
    yield _Call(0, "delete", (a,))
    _expect((yield _Call(1, "read", (a,))) == [], "a deleted conversation reads as empty")
    _expect((yield _Call(1, "checkpoints", (a,))) == [], "delete removes the checkpoints")
    _expect(a not in (yield _Call(1, "list_conversations")), "a deleted id is not listed")
    _expect((yield _Call(0, "last_seq", (b,))) == 1, "delete leaves other conversations alone")
    yield _Call(0, "delete", (b,))


def _lock_taken(value: Any) -> bool:
    _expect(isinstance(value, bool), f"compaction_lock must yield a bool, got {value!r}")
    return bool(value)


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
    held: dict[str, Any] = {}
    steps = _contract(prefix)
    reply: Any = None
    try:
        while True:
            step = steps.send(reply)
            reply = None
            if isinstance(step, _Call):
                method = getattr(handles[step.handle], step.method)
                try:
                    reply = method(*step.args, **step.kwargs)
                except ConflictError:
                    _expect(step.conflict, f"{step.method}{step.args[:1]} raised ConflictError")
                    continue
                _expect(not step.conflict, f"{step.method} accepted a conflicting checkpoint")
            elif isinstance(step, _Lock):
                manager = handles[step.handle].compaction_lock(step.conversation_id, ttl=step.ttl)
                reply = _lock_taken(manager.__enter__())
                held[step.key] = manager
            elif isinstance(step, _Unlock):
                held.pop(step.key).__exit__(None, None, None)
            else:
                time.sleep(step.seconds)
    except StopIteration:
        pass
    finally:
        for manager in held.values():
            manager.__exit__(None, None, None)


async def acheck_store(make_store: Callable[[], Any], *, prefix: str = "contract") -> None:
    """Run the store contract against an asynchronous store (the ``a``-prefixed methods).

    Same arguments and errors as :func:`check_store`.
    """
    handles = [make_store(), make_store()]
    held: dict[str, Any] = {}
    steps = _contract(prefix)
    reply: Any = None
    try:
        while True:
            step = steps.send(reply)
            reply = None
            if isinstance(step, _Call):
                method = getattr(handles[step.handle], "a" + step.method)
                try:
                    pending: Awaitable[Any] = method(*step.args, **step.kwargs)
                    reply = await pending
                except ConflictError:
                    _expect(step.conflict, f"a{step.method}{step.args[:1]} raised ConflictError")
                    continue
                _expect(not step.conflict, f"a{step.method} accepted a conflicting checkpoint")
            elif isinstance(step, _Lock):
                handle = handles[step.handle]
                manager = handle.acompaction_lock(step.conversation_id, ttl=step.ttl)
                reply = _lock_taken(await manager.__aenter__())
                held[step.key] = manager
            elif isinstance(step, _Unlock):
                await held.pop(step.key).__aexit__(None, None, None)
            else:
                await asyncio.sleep(step.seconds)
    except StopIteration:
        pass
    finally:
        for manager in held.values():
            await manager.__aexit__(None, None, None)
