"""The one driver loop behind every yield protocol in the library.

Strategies yield summary calls, the memory core yields store operations, and the SQL and
Redis stores yield queries: each is a generator that asks for something, receives the answer
and finally returns a value. :func:`drive` and :func:`adrive` are the only loops that run
such a generator; each protocol's module passes the function that answers its requests (and
translates the errors of its boundary), so no caller writes ``send`` or ``StopIteration``
itself. httpx's ``Auth.sync_auth_flow`` / ``async_auth_flow`` is the model.

An exception raised while answering is thrown into the generator at its ``yield``, so the
generator may handle it (the memory core retries a conflicting checkpoint commit) or let it
propagate to the caller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["adrive", "drive", "relay"]

_Y = TypeVar("_Y")
_S = TypeVar("_S")
_R = TypeVar("_R")


def drive(flow: Generator[_Y, _S, _R], answer: Callable[[_Y], _S]) -> _R:
    """Run ``flow`` to its end, answering each request with ``answer(request)``."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            request = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as stop:
            result: _R = stop.value
            return result
        try:
            value, error = answer(request), None
        except Exception as exc:
            value, error = None, exc


async def adrive(flow: Generator[_Y, _S, _R], answer: Callable[[_Y], Awaitable[_S]]) -> _R:
    """Run ``flow`` to its end, awaiting ``answer(request)`` for each request."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            request = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as stop:
            result: _R = stop.value
            return result
        try:
            value, error = await answer(request), None
        except Exception as exc:
            value, error = None, exc


def relay(
    flow: Generator[_Y, _S, _R],
    answer: Callable[[_Y], Generator[Any, Any, _S]],
) -> Generator[Any, Any, _R]:
    """Run ``flow`` inside another generator: each request is answered by ``answer``'s flow.

    The caller ``yield from``\\ s this, so the requests ``answer`` makes reach the outer
    driver (the memory core answers a strategy's summary call by first taking the compaction
    lock through the store, then passing the call on).
    """
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            request = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as stop:
            result: _R = stop.value
            return result
        try:
            value, error = (yield from answer(request)), None
        except Exception as exc:
            value, error = None, exc
