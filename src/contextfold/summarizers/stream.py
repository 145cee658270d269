"""Adapt any streaming model call into a summarizer that never raises.

Many applications already have one function that streams a model answer (their own
provider layer, a gateway, an agent framework). :func:`stream_function_summarizer` turns such
a function into a summarizer: it builds the prompt, calls the function, consumes the events,
forwards text and thinking deltas to an optional ``on_delta`` callback, and maps the outcome
to a :class:`~contextfold.summarizers.base.SummarizationResult`.

The stream function
-------------------
It is called as::

    stream_fn(model, context, *, session_id, cache_write, max_output_tokens, cancel, deadline)

with

* ``model``: the model name given to :func:`stream_function_summarizer`;
* ``context``: a :class:`StreamContext` (``system`` text, ``messages``, ``tools``);
* ``session_id``: a fresh random id in isolated mode, so the summary call never shares a
  cache or routing identity with the conversation; ``None`` in cache-aligned mode (use the
  conversation's own);
* ``cache_write``: ``False`` in isolated mode: the summary prompt is one-off and should not
  be written to a prompt cache; ``True`` in cache-aligned mode;
* ``max_output_tokens``: the output cap (``int`` or ``None``);
* ``cancel``: the request's :class:`~contextfold.summarizers.base.CancelToken` or ``None``;
* ``deadline``: the absolute ``time.monotonic()`` deadline or ``None``.

It returns (or, if async, resolves to) an iterable or async iterable of events:
:class:`TextDelta`, :class:`ThinkingDelta`, :class:`ToolCallEvent`, :class:`UsageEvent` and
a final :class:`StopEvent` with a stop reason.

Outcomes: ``stop`` with text is a success (text blocks joined by a newline, thinking left
out); ``aborted`` fails with ``aborted``; ``error`` with ``error``; ``length`` and
``max_tokens`` with ``truncated``; a tool call (or ``tool_use``) with ``tool_call``; no text
with ``empty``; a stream that ends without a stop event with ``truncated``; a raising stream
function with ``error``.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import AsyncIterable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Union

from contextfold.messages import Message, TextPart
from contextfold.summarizers.base import (
    FailureCode,
    SummarizationResult,
    SummaryRequest,
    Usage,
    precheck,
)
from contextfold.summarizers.function import (
    after_check,
    guarded,
    in_running_loop,
    refuse_in_loop,
)

if TYPE_CHECKING:
    from contextfold.summarizers.prompts import PromptSet

__all__ = [
    "DeltaCallback",
    "StopEvent",
    "StopReason",
    "StreamContext",
    "StreamEvent",
    "StreamFunctionSummarizer",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallEvent",
    "UsageEvent",
    "stream_function_summarizer",
]

StopReason: TypeAlias = Literal["stop", "length", "max_tokens", "aborted", "error", "tool_use"]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of answer text. ``block`` numbers the text block it belongs to."""

    text: str
    block: int = 0
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of model reasoning; forwarded to ``on_delta`` but never part of the summary."""

    text: str
    kind: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """The model called a tool; a summary call must not, so this fails the call."""

    name: str
    arguments: str = ""
    id: str | None = None
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """Token usage reported during the stream (added up if sent several times)."""

    usage: Usage
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class StopEvent:
    """The end of the stream, with why it ended."""

    reason: StopReason
    error: str | None = None
    usage: Usage | None = None
    kind: Literal["stop"] = "stop"


StreamEvent: TypeAlias = Union[TextDelta, ThinkingDelta, ToolCallEvent, UsageEvent, StopEvent]  # noqa: UP007

DeltaCallback: TypeAlias = Callable[[Literal["text", "thinking"], str], None]


@dataclass(frozen=True, slots=True)
class StreamContext:
    """What the stream function should send: a system prompt, messages and tools."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[Mapping[str, Any], ...] = field(default=(), hash=False)


StreamFunction: TypeAlias = Callable[..., Any]


class _Collector:
    """Folds stream events into a result; shared by the sync and async paths."""

    def __init__(self, model: str, on_delta: DeltaCallback | None) -> None:
        self.model = model
        self.on_delta = on_delta
        self.blocks: dict[int, list[str]] = {}
        self.usage: Usage | None = None
        self.tool_call: ToolCallEvent | None = None
        self.stop: StopEvent | None = None
        self.bad_event: str | None = None

    def feed(self, event: Any) -> bool:
        """Take one event; False once the stream is over (stop event or a bad event)."""
        if isinstance(event, TextDelta):
            self.blocks.setdefault(event.block, []).append(event.text)
            if self.on_delta is not None and event.text:
                self.on_delta("text", event.text)
        elif isinstance(event, ThinkingDelta):
            if self.on_delta is not None and event.text:
                self.on_delta("thinking", event.text)
        elif isinstance(event, ToolCallEvent):
            self.tool_call = self.tool_call or event
        elif isinstance(event, UsageEvent):
            self.usage = event.usage if self.usage is None else self.usage + event.usage
        elif isinstance(event, StopEvent):
            if event.usage is not None:
                self.usage = event.usage if self.usage is None else self.usage + event.usage
            self.stop = event
            return False
        else:
            self.bad_event = type(event).__name__
            return False
        return True

    def result(self) -> SummarizationResult:
        def fail(reason: str, code: FailureCode) -> SummarizationResult:
            return SummarizationResult.failure(reason, code, usage=self.usage, model=self.model)

        if self.bad_event is not None:
            return fail(f"stream yielded an unknown event {self.bad_event}", "invalid")
        stop = self.stop
        if stop is None:
            return fail("stream ended without a stop event", "truncated")
        if stop.reason == "aborted":
            return fail(stop.error or "stream aborted", "aborted")
        if stop.reason == "error":
            return fail(f"summarization failed: {stop.error or 'stream error'}", "error")
        if stop.reason in ("length", "max_tokens"):
            return fail(f"summary cut off by the output limit ({stop.reason})", "truncated")
        if self.tool_call is not None or stop.reason == "tool_use":
            name = self.tool_call.name if self.tool_call else "a tool"
            return fail(f"the model called {name} instead of writing a summary", "tool_call")
        if stop.reason != "stop":
            return fail(f"unknown stop reason {stop.reason!r}", "invalid")
        text = "\n".join("".join(self.blocks[k]) for k in sorted(self.blocks)).strip()
        if not text:
            return fail("the model returned no text", "empty")
        return SummarizationResult.success(text, usage=self.usage, model=self.model)


def _drain(
    stream: Iterable[Any], request: SummaryRequest, collector: _Collector
) -> SummarizationResult:
    """Feed a sync event stream to ``collector``, checking the request between events."""
    for event in stream:
        late = after_check(request)
        if late is not None:
            return late
        if not collector.feed(event):
            break
    return after_check(request) or collector.result()


class StreamFunctionSummarizer:
    """A summarizer over a streaming call; see the module docstring for the protocol.

    Build one with :func:`stream_function_summarizer`.
    """

    def __init__(
        self,
        stream_fn: StreamFunction,
        model: str,
        *,
        prompts: PromptSet | None = None,
        on_delta: DeltaCallback | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        if not callable(stream_fn):
            from contextfold.errors import ConfigError

            raise ConfigError(
                f"stream_function_summarizer needs a callable stream function, not {stream_fn!r}",
                argument="stream_fn",
            )
        self.stream_fn = stream_fn
        self.model = model
        self.prompts = prompts
        self.on_delta = on_delta
        self.max_output_tokens = max_output_tokens

    def __repr__(self) -> str:
        return f"StreamFunctionSummarizer(model={self.model!r})"

    # -- request building ------------------------------------------------------------------

    def _cap(self, request: SummaryRequest) -> int | None:
        caps = [c for c in (self.max_output_tokens, request.max_output_tokens) if c is not None]
        return min(caps) if caps else None

    def _call_kwargs(self, request: SummaryRequest) -> tuple[StreamContext, dict[str, Any]]:
        from contextfold.summarizers.prompts import (
            build_cache_aligned_messages,
            build_isolated_prompt,
        )

        if request.mode == "cache_aligned":
            system_msgs, messages, tools = build_cache_aligned_messages(
                request, prompts=self.prompts
            )
            system = "\n\n".join(m.text for m in system_msgs if m.text)
            context = StreamContext(system, messages, tools)
            session_id: str | None = None
            cache_write = True
        else:
            system, user = build_isolated_prompt(request, prompts=self.prompts)
            context = StreamContext(system, (Message("user", (TextPart(user),), id="summary"),))
            session_id = "summary-" + uuid.uuid4().hex
            cache_write = False
        kwargs: dict[str, Any] = {
            "session_id": session_id,
            "cache_write": cache_write,
            "max_output_tokens": self._cap(request),
            "cancel": request.cancel,
            "deadline": request.deadline,
        }
        return context, kwargs

    def _open(self, request: SummaryRequest) -> Any:
        """Call the stream function for ``request``; what it returns is not looked at yet."""
        context, kwargs = self._call_kwargs(request)
        return self.stream_fn(self.model, context, **kwargs)

    def _fail(self, exc: BaseException) -> SummarizationResult:
        return SummarizationResult.failure(
            f"stream function raised {type(exc).__name__}: {exc}", "error", model=self.model
        )

    def _not_a_stream(self, stream: Any) -> SummarizationResult:
        return SummarizationResult.failure(
            f"stream function returned {type(stream).__name__}, not an event stream",
            "invalid",
            model=self.model,
        )

    # -- sync ------------------------------------------------------------------------------

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Run the stream synchronously; never raises.

        An async stream function is run in a fresh event loop (only outside a running loop).
        """
        early = precheck(request)
        if early is not None:
            return early
        return self._run_sync(request)

    def _run_sync(self, request: SummaryRequest) -> SummarizationResult:
        collector = _Collector(self.model, self.on_delta)
        try:
            stream = self._open(request)
            if inspect.isawaitable(stream) or isinstance(stream, AsyncIterable):
                if in_running_loop():
                    return refuse_in_loop(stream, "stream function", self.model)
                return asyncio.run(self._consume_async(stream, request, collector))
            if not isinstance(stream, Iterable):
                return self._not_a_stream(stream)
            return _drain(stream, request, collector)
        except Exception as exc:
            return self._fail(exc)

    # -- async -----------------------------------------------------------------------------

    async def _consume_async(
        self, stream: Any, request: SummaryRequest, collector: _Collector
    ) -> SummarizationResult:
        try:
            if inspect.isawaitable(stream):
                stream = await guarded(stream, request)
                if isinstance(stream, SummarizationResult):
                    return stream
            if isinstance(stream, AsyncIterable):
                iterator = stream.__aiter__()
                while True:
                    try:
                        event = await guarded(iterator.__anext__(), request)
                    except StopAsyncIteration:
                        break
                    if isinstance(event, SummarizationResult):
                        return event
                    if not collector.feed(event):
                        break
            elif isinstance(stream, Iterable):
                return _drain(stream, request, collector)
            else:
                return self._not_a_stream(stream)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._fail(exc)
        return after_check(request) or collector.result()

    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Run the stream asynchronously; never raises.

        A sync stream function (a plain generator) is consumed in a worker thread so it does
        not block the event loop.
        """
        early = precheck(request)
        if early is not None:
            return early
        from contextfold.summarizers.function import is_async_callable

        if not is_async_callable(self.stream_fn):
            result = await guarded(asyncio.to_thread(self._run_sync, request), request)
            return result
        collector = _Collector(self.model, self.on_delta)
        try:
            stream = self._open(request)
        except Exception as exc:
            return self._fail(exc)
        return await self._consume_async(stream, request, collector)


def stream_function_summarizer(
    stream_fn: StreamFunction,
    model: str,
    *,
    prompts: PromptSet | None = None,
    on_delta: DeltaCallback | None = None,
    max_output_tokens: int | None = None,
) -> StreamFunctionSummarizer:
    """Adapt a streaming model call into a summarizer (sync and async).

    Args:
        stream_fn: the streaming call; see the module docstring for its arguments and the
            events it yields. Sync or async, generator or coroutine.
        model: the model name passed to ``stream_fn`` and reported in results.
        prompts: the prompt set;
            :data:`contextfold.summarizers.prompts.DEFAULT_PROMPTS` when omitted.
        on_delta: called as ``on_delta("text" | "thinking", chunk)`` for every delta, to show
            progress; an exception it raises fails the call with ``error``.
        max_output_tokens: the adapter's own output cap; the smaller of it and the
            request's cap is passed on.
    """
    return StreamFunctionSummarizer(
        stream_fn,
        model,
        prompts=prompts,
        on_delta=on_delta,
        max_output_tokens=max_output_tokens,
    )
