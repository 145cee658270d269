"""The summarize/asummarize template every provider adapter shares, written once.

One call is a sans-I/O generator (:meth:`ProviderSummarizer._flow`): it yields the I/O it
needs (start the call, open the stream, read the next event, close the stream, read the head
of a body that is no stream) and does the rest itself: parsing a plain answer, refusing a
streamed answer that is no event stream, folding stream events, checking cancellation and
the deadline between chunks, and turning every exception into a failure result. The sync and
async forms only answer those steps, through :func:`contextfold._drive.drive` and
:func:`~contextfold._drive.adrive`, the same loops every yield protocol uses.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from contextfold._drive import adrive, drive
from contextfold.summarizers._errors import failure_from_exception
from contextfold.summarizers._wire import clamp_tokens, document_type, not_a_stream
from contextfold.summarizers.base import SummarizationResult, SummaryRequest, Usage, precheck
from contextfold.summarizers.settings import SummarizerSettings

__all__ = ["GUARD_INTERVAL", "ProviderSummarizer", "StreamAccumulator", "guard_async"]

T = TypeVar("T")

#: How often the async guard looks at the cancel token and the deadline, in seconds.
GUARD_INTERVAL = 0.02

#: How much of a body that is no event stream is read, to quote it in the failure.
HEAD_BYTES = 1024

_END = object()  # what reading past the last stream event gives


@dataclass(frozen=True, slots=True)
class _Step:
    """One piece of I/O the call flow asks for, with the object it acts on."""

    kind: Literal["start", "open", "next", "close", "head"]
    target: Any = None


class _Interrupt(Exception):
    """Carries a task cancellation or Ctrl-C through the flow, so its stream gets closed.

    The drivers throw only ``Exception`` back into a generator; this wrapper lets the flow's
    ``finally`` close the stream, then the original is raised again to the caller.
    """

    def __init__(self, original: BaseException) -> None:
        super().__init__(repr(original))
        self.original = original


class StreamAccumulator(Protocol):
    """Folds a provider's stream events into one result."""

    events: int

    def feed(self, event: Any) -> SummarizationResult | None:
        """Take one event; return a failure to stop early (an error event), else None."""
        ...

    @property
    def complete(self) -> bool:
        """True once the provider said the answer is finished."""
        ...

    def result(self) -> SummarizationResult:
        """The verdict once the stream is over (``truncated`` when it never finished)."""
        ...


def _close_sync(stream: Any) -> None:
    close = getattr(stream, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):
            close()


def _read_head(response: Any) -> bytes:
    """The first :data:`HEAD_BYTES` of an HTTP response's body (the rest is left unread)."""
    head = b""
    for chunk in response.iter_bytes():
        head += chunk
        if len(head) >= HEAD_BYTES:
            break
    return head[:HEAD_BYTES]


async def _aread_head(response: Any) -> bytes:
    """:func:`_read_head` for an async HTTP response."""
    head = b""
    chunks = response.aiter_bytes()
    try:
        async for chunk in chunks:
            head += chunk
            if len(head) >= HEAD_BYTES:
                break
    finally:
        close = getattr(chunks, "aclose", None)
        if callable(close):
            await close()
    return head[:HEAD_BYTES]


async def _close_async(stream: Any) -> None:
    # ``aclose`` first: LiteLLM's async wrapper has both, and only ``aclose`` awaits the
    # provider stream's own close (the SDKs' async streams have an async ``close``).
    close = getattr(stream, "aclose", None) or getattr(stream, "close", None)
    if callable(close):
        try:
            outcome = close()
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            pass


async def guard_async(
    work: Awaitable[T],
    request: SummaryRequest,
    *,
    provider: str,
    model: str | None,
    answered: Callable[[], SummarizationResult | None] | None = None,
) -> T | SummarizationResult:
    """Await ``work`` but give up as soon as the request is cancelled or its deadline passes.

    Without a cancel token or a deadline the work is awaited directly. Otherwise it runs as
    a task that is cancelled (closing its HTTP stream) the moment the token fires or the
    deadline passes, so an async caller never waits for the next chunk to notice.

    ``answered`` gives the verdict on an answer already complete when the deadline passed
    (only the end of its stream was late): that one is returned instead of a timeout, as the
    sync path keeps it.
    """
    if request.cancel is None and request.deadline is None:
        return await work
    task = asyncio.ensure_future(work)
    try:
        while True:
            wait = GUARD_INTERVAL
            left = request.remaining()
            if left is not None:
                wait = min(wait, left)
            done, _ = await asyncio.wait({task}, timeout=max(wait, 0.0))
            if task in done:
                return task.result()
            if request.cancelled or request.expired:
                break
    except BaseException:
        task.cancel()
        raise
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    if request.cancelled:
        reason = request.cancel.reason if request.cancel is not None else None
        return SummarizationResult.failure(f"{provider}: {reason or 'cancelled'}", "aborted")
    kept = answered() if answered is not None else None
    if kept is not None:
        return kept
    return SummarizationResult.failure(
        f"{provider}: deadline passed before the answer arrived", "timeout", model=model
    )


class ProviderSummarizer(abc.ABC):
    """The summarize/asummarize template every provider adapter shares.

    Subclasses say how to start a call (:meth:`_start` / :meth:`_astart`), how to read a
    plain answer (:meth:`_parse`) and how to fold a stream (:meth:`_accumulator`), both
    judged against the output cap the call asks for (:meth:`_output_cap`). This class does
    the rest once: the pre-checks, cancellation and deadline checks between chunks, closing
    the stream, and turning every exception into a failure result.
    """

    provider: ClassVar[str] = "provider"
    model: str
    settings: SummarizerSettings

    @property
    def stream(self) -> bool:
        """True when answers are streamed (``settings.stream``)."""
        return self.settings.stream

    @abc.abstractmethod
    def _start(self, request: SummaryRequest) -> Any:
        """Send the request synchronously; a response object or an iterable stream."""

    @abc.abstractmethod
    async def _astart(self, request: SummaryRequest) -> Any:
        """Send the request asynchronously; a response object or an async stream."""

    @abc.abstractmethod
    def _parse(self, response: Any, cap: int | None) -> SummarizationResult:
        """The result of a plain (non-streamed) answer to a call asking for ``cap`` tokens."""

    @abc.abstractmethod
    def _accumulator(self, cap: int | None) -> StreamAccumulator:
        """A fresh fold for one streamed answer to a call asking for ``cap`` tokens."""

    def _output_cap(self, request: SummaryRequest) -> int | None:
        """The output cap the call for ``request`` sends: the request's or the settings',
        whichever is smaller (None when neither is set)."""
        return clamp_tokens(request.max_output_tokens, self.settings.max_output_tokens)

    def _fail(
        self, exc: BaseException, request: SummaryRequest, acc: StreamAccumulator | None
    ) -> SummarizationResult:
        if acc is not None and acc.complete and not request.cancelled:
            return acc.result()  # the answer was whole; only the tail of the stream broke
        return failure_from_exception(
            exc,
            request,
            provider=self.provider,
            model=self.model,
            streamed=acc is not None and acc.events > 0,
        )

    def _cancelled(
        self, request: SummaryRequest, usage: Usage | None = None
    ) -> SummarizationResult | None:
        """``aborted`` when the caller cancelled: even a finished answer is then dropped,
        though what it cost (``usage``, when it is known) is still reported."""
        if request.cancelled:
            reason = request.cancel.reason if request.cancel is not None else None
            return SummarizationResult.failure(
                f"{self.provider}: {reason or 'cancelled'}",
                "aborted",
                usage=usage,
                model=self.model,
            )
        return None

    def _answer_usage(self, answer: Any) -> Usage | None:
        """What a plain answer cost, read without judging it (None when unreadable)."""
        try:
            return self._parse(answer, None).usage
        except Exception:
            return None

    def _interrupted(
        self, request: SummaryRequest, acc: StreamAccumulator
    ) -> SummarizationResult | None:
        """Between stream chunks: cancelled, or past the deadline with the answer unfinished.

        A finished answer is not interrupted by the deadline: what may still come (a usage
        chunk, ``[DONE]``) adds no text, and the async guard keeps such an answer too.
        """
        cancelled = self._cancelled(request, getattr(acc, "usage", None))
        if cancelled is not None:
            return cancelled
        if request.expired and not acc.complete:
            return SummarizationResult.failure(
                f"{self.provider}: deadline passed while the answer was streaming",
                "timeout",
                model=self.model,
            )
        return None

    def _http_response(self, stream: Any) -> Any:
        """The HTTP response an SDK stream reads (the SDKs' ``response``); None if unknown."""
        return getattr(stream, "response", None)

    def _no_stream(self, answer: Any) -> Generator[_Step, Any, SummarizationResult | None]:
        """The failure for a streamed call answered with something else, or None.

        A proxy's HTML error page (or a server ignoring ``stream``) may answer 200: the SDK
        reads it as a stream with no event, which would pass for an answer cut short. Its
        declared media type (a document, see :func:`document_type`) tells, and the head of
        its body is quoted to show what came. Any other answer is read as a stream.
        """
        response = self._http_response(answer)
        kind = document_type(response)
        if kind is None:
            return None
        head = yield _Step("head", response)
        return not_a_stream(kind, head, provider=self.provider, model=self.model)

    def _fold(self, request: SummaryRequest) -> StreamAccumulator | None:
        """The fold for one call's stream; None when answers are not streamed."""
        return self._accumulator(self._output_cap(request)) if self.stream else None

    def _flow(
        self, request: SummaryRequest, acc: StreamAccumulator | None
    ) -> Generator[_Step, Any, SummarizationResult]:
        """One call, sans I/O: yields the steps to perform and receives their outcome.

        ``acc`` folds the stream (None for a plain answer); the caller made it, so the
        async guard can look at it when the deadline passes. An exception raised by a step
        comes back at its ``yield`` and becomes a failure result; the stream is closed
        whichever way the reading ends.
        """
        try:
            answer = yield _Step("start")
            if acc is None:
                cap = self._output_cap(request)
                if request.cancelled:
                    return self._cancelled(request, self._answer_usage(answer)) or self._parse(
                        answer, cap
                    )
                return self._parse(answer, cap)
            try:
                refused = yield from self._no_stream(answer)
                if refused is not None:
                    return refused
                events = yield _Step("open", answer)
                while (event := (yield _Step("next", events))) is not _END:
                    # Fed first: a chunk that arrived carries what the call cost.
                    stop = acc.feed(event) or self._interrupted(request, acc)
                    if stop is not None:
                        return stop
            finally:
                yield _Step("close", answer)
            return self._cancelled(request, getattr(acc, "usage", None)) or acc.result()
        except _Interrupt:
            raise
        except Exception as exc:
            return self._fail(exc, request, acc)

    def _perform(self, request: SummaryRequest, step: _Step) -> Any:
        """Do ``step`` synchronously."""
        try:
            if step.kind == "start":
                return self._start(request)
            if step.kind == "open":
                return iter(step.target)
            if step.kind == "next":
                return next(step.target, _END)
            if step.kind == "head":
                return _read_head(step.target)
            _close_sync(step.target)
            return None
        except Exception:
            raise
        except BaseException as exc:
            raise _Interrupt(exc) from exc

    async def _aperform(self, request: SummaryRequest, step: _Step) -> Any:
        """Do ``step`` asynchronously."""
        try:
            if step.kind == "start":
                return await self._astart(request)
            if step.kind == "open":
                return aiter(step.target)
            if step.kind == "next":
                return await anext(step.target, _END)
            if step.kind == "head":
                return await _aread_head(step.target)
            await _close_async(step.target)
            return None
        except Exception:
            raise
        except BaseException as exc:
            raise _Interrupt(exc) from exc

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Ask the provider for a summary; never raises for provider failures.

        A cancel token or a deadline is checked before the call and between stream chunks
        (the stream is then closed); the deadline also bounds each network read. An answer
        that arrived whole is kept even if the deadline passed meanwhile (it is paid for);
        a cancelled request drops it.
        """
        early = precheck(request)
        if early is not None:
            return early
        try:
            return drive(self._flow(request, self._fold(request)), partial(self._perform, request))
        except _Interrupt as stop:
            raise stop.original from None

    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Async form of :meth:`summarize`; cancellation and the deadline act immediately.

        The deadline passing while only the end of a finished stream is awaited keeps the
        answer, as :meth:`summarize` does.
        """
        early = precheck(request)
        if early is not None:
            return early
        acc = self._fold(request)

        def answered() -> SummarizationResult | None:
            return acc.result() if acc is not None and acc.complete else None

        return await guard_async(
            self._arun(request, acc),
            request,
            provider=self.provider,
            model=self.model,
            answered=answered,
        )

    async def _arun(
        self, request: SummaryRequest, acc: StreamAccumulator | None
    ) -> SummarizationResult:
        try:
            return await adrive(self._flow(request, acc), partial(self._aperform, request))
        except _Interrupt as stop:
            raise stop.original from None
