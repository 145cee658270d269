"""Turn any plain callable into a summarizer that never raises.

:class:`FunctionSummarizer` wraps a sync or async function. By default the function receives
the messages to condense and the previous summary (``fn(messages, previous_summary)``), which
is all most hand-written summarizers need; with ``takes_request=True`` it receives the whole
:class:`~contextfold.summarizers.base.SummaryRequest` instead (kind, instructions, output cap,
deadline ...). Whatever it does, the result is a
:class:`~contextfold.summarizers.base.SummarizationResult`: an exception becomes
``failure(code="error")``, an empty answer ``"empty"``, a non-string answer ``"invalid"``, a
cancelled or late call ``"aborted"`` or ``"timeout"``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from contextfold.messages import Message
from contextfold.summarizers.base import SummarizationResult, SummaryRequest, precheck

__all__ = ["FunctionSummarizer", "SummaryFunction"]

SummaryFunction = Callable[..., "str | Awaitable[str]"]

_T = TypeVar("_T")

_POLL_S = 0.02


def is_async_callable(fn: Any) -> bool:
    """True for coroutine functions, async generator functions and objects with one as
    ``__call__``."""
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - we need the bound method itself
    return call is not None and (
        inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)
    )


def in_running_loop() -> bool:
    """True when called from inside a running asyncio event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def refuse_in_loop(pending: Any, what: str, model: str | None) -> SummarizationResult:
    """The failure for sync ``summarize()`` reaching async work inside a running loop.

    A second event loop cannot run there, and blocking the running one would deadlock, so
    the call fails with ``error`` (naming :meth:`asummarize` as the way out). An unstarted
    coroutine is closed so Python does not warn that it was never awaited.
    """
    if inspect.iscoroutine(pending):
        pending.close()
    return SummarizationResult.failure(
        f"an async {what} cannot run inside a running event loop "
        "through summarize(); use asummarize()",
        "error",
        model=model,
    )


def after_check(request: SummaryRequest) -> SummarizationResult | None:
    """The failure to return after the work, if it was cancelled or ran past the deadline."""
    if request.cancelled:
        reason = request.cancel.reason if request.cancel is not None else None
        return SummarizationResult.failure(reason or "cancelled", "aborted")
    if request.expired:
        return SummarizationResult.failure("deadline passed during the call", "timeout")
    return None


async def guarded(awaitable: Awaitable[_T], request: SummaryRequest) -> _T | SummarizationResult:
    """Await ``awaitable`` but give up when the request is cancelled or its deadline passes.

    Returns the awaited value, or a failure result (``aborted`` / ``timeout``); the
    underlying task is cancelled in the latter case. The cancel token is polled, since a
    ``threading.Event`` cannot be awaited directly.
    """
    task: asyncio.Future[_T] = asyncio.ensure_future(awaitable)
    try:
        while True:
            wait = _POLL_S if request.cancel is not None else None
            remaining = request.remaining()
            if remaining is not None:
                wait = remaining if wait is None else min(wait, remaining)
            done, _ = await asyncio.wait({task}, timeout=wait)
            if done:
                return task.result()
            late = after_check(request)
            if late is not None:
                task.cancel()
                return late
    except BaseException:
        task.cancel()
        raise


class FunctionSummarizer:
    """A summarizer backed by a plain function, sync or async.

    Args:
        fn: ``fn(messages, previous_summary) -> str`` (or a coroutine function), where
            ``messages`` is the tuple of :class:`~contextfold.messages.Message` to condense
            and ``previous_summary`` is ``str | None``. With ``takes_request=True``:
            ``fn(request) -> str``.
        model: a model name to report in results and checkpoint records.
        takes_request: pass the whole :class:`SummaryRequest` instead.

    A sync function cannot be interrupted once started, so its deadline and cancel token are
    checked before and after the call; an async function is cancelled as soon as either
    fires. Calling :meth:`summarize` on an async function runs it in a fresh event loop
    (outside a running loop only; use :meth:`asummarize` inside one).
    """

    def __init__(
        self, fn: SummaryFunction, *, model: str | None = None, takes_request: bool = False
    ) -> None:
        if not callable(fn):
            from contextfold.errors import ConfigError

            raise ConfigError(
                f"FunctionSummarizer needs a callable, got {type(fn).__name__} {fn!r}",
                argument="fn",
            )
        self.fn = fn
        self.model = model
        self.takes_request = takes_request

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
        return f"FunctionSummarizer({name}, model={self.model!r})"

    def _invoke(self, request: SummaryRequest) -> Any:
        if self.takes_request:
            return self.fn(request)
        messages: Sequence[Message] = request.messages
        return self.fn(messages, request.previous_summary)

    def _raised(self, exc: Exception) -> SummarizationResult:
        return SummarizationResult.failure(
            f"summary function raised {type(exc).__name__}: {exc}", "error", model=self.model
        )

    def _finish(self, value: Any, request: SummaryRequest) -> SummarizationResult:
        late = after_check(request)
        if late is not None:
            return late
        if isinstance(value, SummarizationResult):
            return value
        if not isinstance(value, str):
            return SummarizationResult.failure(
                f"summary function returned {type(value).__name__}, not str",
                "invalid",
                model=self.model,
            )
        text = value.strip()
        if not text:
            return SummarizationResult.failure(
                "summary function returned no text", "empty", model=self.model
            )
        return SummarizationResult.success(text, model=self.model)

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Call the function synchronously; never raises."""
        early = precheck(request)
        if early is not None:
            return early
        try:
            value = self._invoke(request)
            if inspect.isawaitable(value):
                if in_running_loop():
                    return refuse_in_loop(value, "summary function", self.model)
                value = asyncio.run(guarded(value, request))
        except Exception as exc:
            return self._raised(exc)
        return self._finish(value, request)

    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Call the function asynchronously (a sync one runs in a worker thread)."""
        early = precheck(request)
        if early is not None:
            return early
        try:
            if is_async_callable(self.fn):
                value: Any = await guarded(self._invoke(request), request)
            else:
                value = await guarded(asyncio.to_thread(self._invoke, request), request)
                if inspect.isawaitable(value):
                    value = await guarded(value, request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._raised(exc)
        return self._finish(value, request)
