"""SDK exceptions translated into failure codes.

Nothing here imports a provider SDK: exceptions are recognised by their attributes and
class names, so the same mapping serves ``openai``, ``anthropic`` and ``litellm`` (which
re-uses the OpenAI exception names). A summarizer never raises for a provider failure, so
this is the boundary where an SDK's exception becomes a :class:`SummarizationResult`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from contextfold.summarizers.base import FailureCode, SummarizationResult, SummaryRequest

__all__ = ["failure_from_exception"]

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
