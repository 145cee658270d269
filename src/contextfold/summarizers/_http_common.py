"""Pieces shared by the provider adapters (OpenAI, Anthropic, LiteLLM).

Each adapter turns a :class:`SummaryRequest` into one SDK call and the SDK's answer (or
exception) into a :class:`SummarizationResult`. What is common lives here: the lazy import
with a helpful error, the output cap, the per-call timeout derived from the deadline, the
translation of SDK exceptions into failure codes, tool-schema conversion for cache-aligned
calls, the async guard that makes cancellation immediate, and the bookkeeping of an SDK's
sync and async clients.

Nothing here imports a provider SDK: exceptions are recognised by their attributes and
class names, so the same mapping serves ``openai``, ``anthropic`` and ``litellm`` (which
re-uses the OpenAI exception names).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import importlib
import importlib.util
import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeAlias, TypeVar

from contextfold.errors import ContextfoldError, MissingExtraError
from contextfold.summarizers.base import (
    FailureCode,
    SummarizationResult,
    SummaryRequest,
    Usage,
    precheck,
)

if TYPE_CHECKING:
    from contextfold.summarizers.prompts import PromptSet

__all__ = [
    "Finish",
    "ProviderSummarizer",
    "SDKSummarizer",
    "StreamAccumulator",
    "as_int",
    "clamp_tokens",
    "ensure_installed",
    "failure_from_exception",
    "field",
    "finish_result",
    "guard_async",
    "import_extra",
    "is_async_client",
    "not_an_answer",
    "request_timeout",
    "tools_for_anthropic",
    "tools_for_openai_chat",
    "tools_for_openai_responses",
]

T = TypeVar("T")

#: How often the async guard looks at the cancel token and the deadline, in seconds.
GUARD_INTERVAL = 0.02

# Exception class names (anywhere in the MRO) that mean "the request timed out".
_TIMEOUT_NAMES = frozenset(
    {"APITimeoutError", "Timeout", "TimeoutException", "ReadTimeout", "ConnectTimeout"}
)
# Transport failures: the connection broke or never worked.
_TRANSPORT_NAMES = frozenset(
    {
        "APIConnectionError",
        "TransportError",
        "NetworkError",
        "ProtocolError",
        "RemoteProtocolError",
        "ReadError",
        "StreamError",
    }
)
_RATE_LIMIT_TYPES = frozenset({"rate_limit_error", "rate_limit_exceeded", "insufficient_quota"})


def ensure_installed(module: str, feature: str, extra: str) -> None:
    """Raise :class:`MissingExtraError` now if ``module`` cannot be imported later.

    Only the import machinery's finder runs (no import, no I/O), so constructors can fail
    early with an actionable message while the real import stays lazy.
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingExtraError(feature, extra)


def import_extra(module: str, feature: str, extra: str) -> Any:
    """Import ``module`` or raise :class:`MissingExtraError` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(feature, extra) from exc


def clamp_tokens(*caps: int | None) -> int | None:
    """The smallest positive cap given, or None when there is none.

    The request's cap (what the strategy can afford) and the adapter's cap (what the model
    may produce) both apply, so the smaller one wins.
    """
    values = [c for c in caps if c is not None and c > 0]
    return min(values) if values else None


def request_timeout(request: SummaryRequest, default: float | None) -> float | None:
    """Per-call timeout in seconds: the time left before the deadline, or ``default``.

    A deadline turns into an SDK timeout so a stalled server cannot hold the caller past it.
    The SDK applies it to each read, so streamed calls also check the deadline between
    chunks.
    """
    left = request.remaining()
    if left is None:
        return default
    left = max(left, 0.001)
    return min(left, default) if default is not None else left


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _exception_chain(exc: BaseException, depth: int = 8) -> list[BaseException]:
    """``exc`` and what it wraps (``original_exception``, causes, contexts), nearest first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < depth and current not in chain:
        chain.append(current)
        wrapped = getattr(current, "original_exception", None)
        if not isinstance(wrapped, BaseException):
            wrapped = current.__cause__
            if wrapped is None and not current.__suppress_context__:
                wrapped = current.__context__
        current = wrapped
    return chain


def _status_of(exc: BaseException) -> int | None:
    for attr in ("status_code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _error_type(exc: BaseException) -> str | None:
    """The provider's error type (``rate_limit_error``, ``overloaded_error`` ...), if any."""
    value = getattr(exc, "type", None)
    if isinstance(value, str):
        return value
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            for key in ("type", "code"):
                found = inner.get(key)
                if isinstance(found, str):
                    return found
    value = getattr(exc, "code", None)
    return value if isinstance(value, str) else None


def _message_of(exc: BaseException) -> str:
    for attr in ("api_message", "message"):
        value = getattr(exc, attr, None)
        if isinstance(value, str) and value:
            return _shorten(value)
    text = str(exc)
    return _shorten(text) if text else type(exc).__name__


def _shorten(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def failure_from_exception(
    exc: BaseException,
    request: SummaryRequest,
    *,
    provider: str,
    model: str | None,
    streamed: bool = False,
) -> SummarizationResult:
    """Translate an SDK exception into a failure result with a distinct code.

    Args:
        exc: what the SDK (or the stream) raised.
        request: the request being served; a cancelled token or a passed deadline take
            precedence, because closing a stream on purpose surfaces as a transport error.
        provider: the provider name used in the reason text.
        model: the model name reported in the result.
        streamed: True once at least one stream event arrived; a broken connection then
            means the answer was cut short (``truncated``) rather than never started.
    """

    def fail(reason: str, code: FailureCode) -> SummarizationResult:
        return SummarizationResult.failure(f"{provider}: {reason}", code, model=model)

    if request.cancelled:
        reason = request.cancel.reason if request.cancel is not None else None
        return fail(reason or "cancelled", "aborted")
    names = _class_names(exc)
    chain = _exception_chain(exc)
    bad_json = next((e for e in chain if isinstance(e, json.JSONDecodeError)), None)
    if bad_json is not None:
        return fail(f"malformed stream data: {_shorten(str(bad_json))}", "error")
    if any(_class_names(e) & _TIMEOUT_NAMES or isinstance(e, TimeoutError) for e in chain):
        return fail("request timed out", "timeout")
    inner = getattr(exc, "original_exception", None)
    if "MidStreamFallbackError" in names and isinstance(inner, BaseException):
        # LiteLLM wraps whatever broke a stream; judge the original, as a streamed failure.
        return failure_from_exception(inner, request, provider=provider, model=model, streamed=True)
    message = _message_of(exc)
    if names & _TRANSPORT_NAMES and "APIStatusError" not in names:
        if request.expired:
            return fail("deadline passed while waiting for the provider", "timeout")
        if streamed or "finish_reason" in message:
            return fail(f"stream cut short: {message}", "truncated")
        return fail(f"connection failed: {message}", "error")
    status = _status_of(exc)
    err_type = _error_type(exc)
    if status == 429 or "RateLimitError" in names or err_type in _RATE_LIMIT_TYPES:
        return fail(f"rate limited (HTTP 429): {message}", "rate_limited")
    if err_type == "overloaded_error" or status == 529:
        return fail(f"HTTP 529 overloaded: {message}", "http_error")
    if status is not None and status >= 400:
        return fail(f"HTTP {status}: {message}", "http_error")
    if err_type is not None and err_type.endswith("_error") and "APIStatusError" in names:
        # An error event inside a 200 stream (Anthropic): the type names the cause.
        return fail(f"{err_type}: {message}", "http_error")
    if request.expired:
        return fail("deadline passed", "timeout")
    return fail(f"{type(exc).__name__}: {message}", "error")


async def guard_async(
    work: Awaitable[T],
    request: SummaryRequest,
    *,
    provider: str,
    model: str | None,
) -> T | SummarizationResult:
    """Await ``work`` but give up as soon as the request is cancelled or its deadline passes.

    Without a cancel token or a deadline the work is awaited directly. Otherwise it runs as
    a task that is cancelled (closing its HTTP stream) the moment the token fires or the
    deadline passes, so an async caller never waits for the next chunk to notice.
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
    return SummarizationResult.failure(
        f"{provider}: deadline passed before the answer arrived", "timeout", model=model
    )


# -- tool schemas --------------------------------------------------------------------------
#
# A cache-aligned call replays the conversation's tool schemas. They arrive in whichever
# provider shape the conversation used; a schema already in the target shape is passed
# through untouched (byte-identical, so the prefix cache still matches), others are converted.


def _function_fields(tool: Mapping[str, Any]) -> tuple[str, str | None, Any] | None:
    """``(name, description, json_schema)`` of a tool in any known shape, else None."""
    fn = tool.get("function")
    if tool.get("type") == "function" and isinstance(fn, Mapping) and "name" in fn:
        return str(fn["name"]), fn.get("description"), fn.get("parameters")
    if "input_schema" in tool and "name" in tool:
        return str(tool["name"]), tool.get("description"), tool.get("input_schema")
    if tool.get("type") == "function" and "name" in tool:
        return str(tool["name"]), tool.get("description"), tool.get("parameters")
    return None


def _convert_tools(
    tools: Iterable[Mapping[str, Any]],
    *,
    native: Callable[[Mapping[str, Any]], bool],
    build: Callable[[dict[str, Any]], dict[str, Any]],
    schema_key: str,
) -> list[dict[str, Any]]:
    """Tool schemas in one provider's shape.

    A tool that is ``native`` already, or in no shape we know, is copied as it is; any
    other is rebuilt: ``build`` wraps ``{"name", "description" (if any), schema_key}``.
    """
    out: list[dict[str, Any]] = []
    for tool in tools:
        found = None if native(tool) else _function_fields(tool)
        if found is None:
            out.append(dict(tool))
            continue
        name, description, schema = found
        fields: dict[str, Any] = {"name": name}
        if description is not None:
            fields["description"] = description
        fields[schema_key] = schema if schema is not None else {"type": "object", "properties": {}}
        out.append(build(fields))
    return out


def tools_for_openai_chat(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas in Chat Completions shape (``{"type": "function", "function": ...}``)."""
    return _convert_tools(
        tools,
        native=lambda t: t.get("type") == "function" and isinstance(t.get("function"), Mapping),
        build=lambda fields: {"type": "function", "function": fields},
        schema_key="parameters",
    )


def tools_for_openai_responses(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas in Responses shape (``{"type": "function", "name": ..., ...}``)."""
    return _convert_tools(
        tools,
        native=lambda t: t.get("type") == "function" and "name" in t,
        build=lambda fields: {"type": "function", **fields},
        schema_key="parameters",
    )


def tools_for_anthropic(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas in Anthropic shape (``{"name", "description", "input_schema"}``).

    A tool already in that shape, or a server tool (any other ``type``), is kept as it is.
    """
    return _convert_tools(
        tools,
        native=lambda t: "input_schema" in t or t.get("type") not in (None, "function"),
        build=lambda fields: fields,
        schema_key="input_schema",
    )


def not_an_answer(
    response: Any, expected: str, *, provider: str, model: str | None
) -> SummarizationResult:
    """The failure for a 200 answer that is not what the API returns (a proxy's error page).

    The reason quotes the start of the text (or names the type) so the cause can be seen.
    """
    preview = response if isinstance(response, str) else type(response).__name__
    preview = " ".join(str(preview).split())[:120]
    return SummarizationResult.failure(
        f"{provider}: the server's answer is not a {expected}: {preview!r}", "error", model=model
    )


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name`` for SDK models, ``obj[name]`` for dicts; ``default`` when absent."""
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    value = getattr(obj, name, default)
    return default if value is None else value


def as_int(value: Any) -> int:
    """A non-negative int from a usage figure that may be missing or oddly typed."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float):
        return max(int(value), 0)
    return 0


# -- the shared call template ---------------------------------------------------------------

Finish: TypeAlias = Literal["stop", "length", "tool", "filter", "refused", "error"]


def finish_result(
    text: str,
    finish: Finish | None,
    *,
    provider: str,
    model: str | None,
    usage: Usage | None,
    tool_called: bool = False,
    detail: str | None = None,
) -> SummarizationResult:
    """The verdict on a finished answer, failing closed.

    A tool call beats everything (the model did not do what was asked), then a cut-off
    answer (a partial summary would silently lose facts), then filters and refusals, then
    an empty answer. Only a complete, non-empty text answer is a success.

    Args:
        text: the answer text, text blocks joined.
        finish: the normalized finish reason; None when the provider never said it was done.
        provider: the provider name used in the reason text.
        model: the model that answered.
        usage: what the call cost, kept on failures too.
        tool_called: the answer contains a tool call.
        detail: extra words for the reason (the provider's own reason string).
    """
    extra = f" ({detail})" if detail else ""

    def fail(reason: str, code: FailureCode) -> SummarizationResult:
        return SummarizationResult.failure(
            f"{provider}: {reason}{extra}", code, usage=usage, model=model
        )

    if tool_called or finish == "tool":
        return fail("the model called a tool instead of writing the summary", "tool_call")
    if finish is None:
        return fail("the stream ended before the answer was complete", "truncated")
    if finish == "length":
        return fail("the answer hit the output token limit", "truncated")
    if finish == "filter":
        return fail("the answer was stopped by a content filter", "error")
    if finish == "refused":
        return fail("the model refused to summarize", "error")
    if finish == "error":
        return fail("the provider reported an error", "error")
    body = text.strip()
    if not body:
        return fail("the answer has no text", "empty")
    return SummarizationResult.success(body, usage=usage, model=model)


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


class ProviderSummarizer(abc.ABC):
    """The summarize/asummarize template every provider adapter shares.

    Subclasses say how to start a call (:meth:`_start` / :meth:`_astart`), how to read a
    plain answer (:meth:`_parse`) and how to fold a stream (:meth:`_accumulator`). This
    class does the rest once: the pre-checks, cancellation and deadline checks between
    chunks, closing the stream, and turning every exception into a failure result.
    """

    provider: ClassVar[str] = "provider"
    model: str
    stream: bool

    @abc.abstractmethod
    def _start(self, request: SummaryRequest) -> Any:
        """Send the request synchronously; a response object or an iterable stream."""

    @abc.abstractmethod
    async def _astart(self, request: SummaryRequest) -> Any:
        """Send the request asynchronously; a response object or an async stream."""

    @abc.abstractmethod
    def _parse(self, response: Any) -> SummarizationResult:
        """The result of a plain (non-streamed) answer."""

    @abc.abstractmethod
    def _accumulator(self) -> StreamAccumulator:
        """A fresh fold for one streamed answer."""

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

    def _cancelled(self, request: SummaryRequest) -> SummarizationResult | None:
        """``aborted`` when the caller cancelled: even a finished answer is then dropped."""
        if request.cancelled:
            reason = request.cancel.reason if request.cancel is not None else None
            return SummarizationResult.failure(
                f"{self.provider}: {reason or 'cancelled'}", "aborted", model=self.model
            )
        return None

    def _interrupted(self, request: SummaryRequest) -> SummarizationResult | None:
        """Between stream chunks: cancelled, or past the deadline with the answer unfinished."""
        cancelled = self._cancelled(request)
        if cancelled is not None:
            return cancelled
        if request.expired:
            return SummarizationResult.failure(
                f"{self.provider}: deadline passed while the answer was streaming",
                "timeout",
                model=self.model,
            )
        return None

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
        acc: StreamAccumulator | None = None
        try:
            answer = self._start(request)
            if not self.stream:
                return self._cancelled(request) or self._parse(answer)
            acc = self._accumulator()
            try:
                for event in answer:
                    stop = self._interrupted(request) or acc.feed(event)
                    if stop is not None:
                        return stop
            finally:
                _close_sync(answer)
            return self._cancelled(request) or acc.result()
        except Exception as exc:
            return self._fail(exc, request, acc)

    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Async form of :meth:`summarize`; cancellation and the deadline act immediately."""
        early = precheck(request)
        if early is not None:
            return early
        return await guard_async(
            self._arun(request), request, provider=self.provider, model=self.model
        )

    async def _arun(self, request: SummaryRequest) -> SummarizationResult:
        acc: StreamAccumulator | None = None
        try:
            answer = await self._astart(request)
            if not self.stream:
                return self._cancelled(request) or self._parse(answer)
            acc = self._accumulator()
            try:
                async for event in answer:
                    stop = self._interrupted(request) or acc.feed(event)
                    if stop is not None:
                        return stop
            finally:
                await _close_async(answer)
            return self._cancelled(request) or acc.result()
        except Exception as exc:
            return self._fail(exc, request, acc)


def is_async_client(client: Any) -> bool:
    """True for an SDK's async client class (``AsyncOpenAI``, ``AsyncAnthropic`` ...)."""
    return type(client).__name__.startswith("Async")


class SDKSummarizer(ProviderSummarizer):
    """A provider adapter that talks through an SDK's sync and async client pair.

    The client bookkeeping is the same for every such SDK, so it lives here: clients passed
    in are used as they are (an async one given as ``client`` serves :meth:`asummarize`);
    a missing one is created on first use, mirroring the other client's server and key (so
    sync and async calls reach the same place) or else from the adapter's own settings;
    :meth:`close` and :meth:`aclose` close only what was created here. Subclasses name the
    SDK module and its client classes, and say which settings a mirrored client copies.
    """

    #: The SDK module to import, as ``(module, feature named in errors, extra to install)``.
    sdk: ClassVar[tuple[str, str, str]]
    #: The names of the SDK's sync and async client classes.
    client_classes: ClassVar[tuple[str, str]]

    def __init__(
        self,
        client: Any,
        *,
        async_client: Any,
        model: str,
        base_url: str | None,
        api_key: str | None,
        timeout: float | None,
        max_retries: int | None,
        max_output_tokens: int | None,
        temperature: float | None,
        extra_body: Mapping[str, Any] | None,
        stream: bool,
        prompts: PromptSet | None,
        tool_result_limit: int,
    ) -> None:
        """Keep the settings every SDK adapter has and the clients given.

        Fails now (not on the first call) when a client must be created later and the SDK
        is not installed.
        """
        if client is None or async_client is None:
            ensure_installed(*self.sdk)
        if client is not None and is_async_client(client):
            client, async_client = None, async_client or client
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        self.extra_body = dict(extra_body) if extra_body else None
        self.stream = stream
        self.prompts = prompts
        self.tool_result_limit = tool_result_limit
        self._client = client
        self._async_client = async_client
        self._owned: list[Any] = []
        self._lock = threading.Lock()

    @abc.abstractmethod
    def _send(self, client: Any, request: SummaryRequest) -> Any:
        """Make the SDK call on ``client`` (its answer, or an awaitable for an async client)."""

    def _start(self, request: SummaryRequest) -> Any:
        return self._send(self._sync_client(), request)

    async def _astart(self, request: SummaryRequest) -> Any:
        return await self._send(self._async_client_(), request)

    def _stream_options(self) -> dict[str, Any]:
        """Request fields that go with ``stream=True`` (none unless the provider needs some)."""
        return {}

    def _add_call_options(self, kwargs: dict[str, Any], request: SummaryRequest) -> None:
        """The request fields every SDK call carries alike, added to ``kwargs`` in place.

        Temperature and extra body fields when set, the stream flag, and the per-call
        timeout that keeps the call inside the request's deadline.
        """
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.stream:
            kwargs["stream"] = True
            kwargs.update(self._stream_options())
        timeout = request_timeout(request, self.timeout)
        if timeout is not None:
            kwargs["timeout"] = timeout
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)

    @abc.abstractmethod
    def _mirror_settings(self, other: Any) -> dict[str, Any]:
        """The constructor settings that make a twin of ``other`` (an SDK client)."""

    def _client_settings(self, other: Any) -> dict[str, Any]:
        if other is not None:
            # Mirror the client the caller gave us, so sync and async talk to the same server.
            if type(other).__name__ not in self.client_classes:
                raise ContextfoldError(
                    f"cannot derive a twin of a {type(other).__name__} client; "
                    "pass both client= and async_client="
                )
            return self._mirror_settings(other)
        settings: dict[str, Any] = {}
        if self.base_url is not None:
            settings["base_url"] = self.base_url
        if self.api_key is not None:
            settings["api_key"] = self.api_key
        if self.timeout is not None:
            settings["timeout"] = self.timeout
        if self.max_retries is not None:
            settings["max_retries"] = self.max_retries
        return settings

    def _create_client(self, class_name: str, twin: Any) -> Any:
        """A new SDK client of ``class_name``, owned (and later closed) by this adapter."""
        module = import_extra(*self.sdk)
        client = getattr(module, class_name)(**self._client_settings(twin))
        self._owned.append(client)
        return client

    def _sync_client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._create_client(self.client_classes[0], self._async_client)
            return self._client

    def _async_client_(self) -> Any:
        with self._lock:
            if self._async_client is None:
                self._async_client = self._create_client(self.client_classes[1], self._client)
            return self._async_client

    def close(self) -> None:
        """Close the sync client this summarizer created (clients passed in are left open)."""
        for owned in list(self._owned):
            if owned is self._client:
                owned.close()
                self._owned.remove(owned)
                self._client = None

    async def aclose(self) -> None:
        """Close every client this summarizer created (clients passed in are left open)."""
        self.close()
        for owned in list(self._owned):
            await owned.close()
            self._owned.remove(owned)
            self._async_client = None
