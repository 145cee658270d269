"""Reading provider answers and sizing provider calls, alike for every adapter.

SDK answers are read through :func:`field` (SDK models and plain dicts alike) and judged by
:func:`finish_result`, which fails closed, against the output cap too (by the provider's own
count, :func:`answer_tokens`); :func:`clamp_tokens` and :func:`request_timeout`
turn a request's limits and an adapter's settings into the call's output cap and timeout.
A 200 answer of the wrong kind (a proxy's error page) is told apart by :func:`not_an_answer`
and, for a streamed call, by :func:`document_type` and :func:`not_a_stream`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from contextfold.summarizers.base import FailureCode, SummarizationResult, SummaryRequest, Usage

__all__ = [
    "Finish",
    "answer_tokens",
    "as_int",
    "clamp_tokens",
    "document_type",
    "field",
    "finish_result",
    "not_a_stream",
    "not_an_answer",
    "request_timeout",
    "token_usage",
]

#: A provider's finish reason, normalized.
Finish: TypeAlias = Literal["stop", "length", "tool", "filter", "refused", "error"]


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


_DOCUMENT_SUBTYPES = frozenset({"html", "xhtml+xml", "xml", "json"})


def document_type(response: Any) -> str | None:
    """The media type of an HTTP response that declares a document (HTML, JSON, XML).

    No event stream is one, whatever its format: Server-Sent Events (``text/event-stream``),
    Bedrock's ``application/vnd.amazon.eventstream``, or a server that mislabels its stream
    ``text/plain``. None for those and for a response that declares no type.
    """
    headers = getattr(response, "headers", None)
    value = headers.get("content-type") if isinstance(headers, Mapping) else None
    if not isinstance(value, str):
        return None
    kind = value.split(";", 1)[0].strip().lower()
    subtype = kind.rpartition("/")[2]
    if subtype in _DOCUMENT_SUBTYPES or subtype.endswith(("+json", "+xml")):
        return kind
    return None


def not_a_stream(
    kind: str, head: bytes, *, provider: str, model: str | None
) -> SummarizationResult:
    """The failure for a 200 answer to a streamed call that is no event stream.

    A proxy's HTML error page or a server that ignored ``stream`` holds no event, so read as
    a stream it would pass for an answer cut short (``truncated``). The reason names the
    media type ``kind`` and quotes the start of the body ``head``, as :func:`not_an_answer`.
    """
    preview = " ".join(head.decode("utf-8", "replace").split())[:120]
    return SummarizationResult.failure(
        f"{provider}: the server's answer is not an event stream but {kind}: {preview!r}",
        "error",
        model=model,
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


def answer_tokens(usage: Any, output_key: str) -> int | None:
    """The answer's own tokens by the provider's count; None when it reports none.

    That is the output figure ``output_key`` less the reasoning tokens reported in
    ``<output_key>_details``: reasoning is no part of the answer text, and some servers'
    output caps leave it out (DeepSeek's reasoner), so it must not fail a summary.
    """
    output = field(usage, output_key)
    if output is None:
        return None
    reasoning = field(field(usage, f"{output_key}_details"), "reasoning_tokens")
    return max(as_int(output) - as_int(reasoning), 0)


def finish_result(
    text: str,
    finish: Finish | None,
    *,
    provider: str,
    model: str | None,
    usage: Usage | None,
    tool_called: bool = False,
    detail: str | None = None,
    cap: int | None = None,
    tokens: int | None = None,
) -> SummarizationResult:
    """The verdict on a finished answer, failing closed.

    A tool call beats everything (the model did not do what was asked), then a cut-off
    answer (a partial summary would silently lose facts), then filters and refusals, then
    an empty answer, then one longer than its cap (a server that ignored the cap: the
    summary would take more room than its caller planned, and cutting it would lose facts
    as a cut-off answer does). Only a complete, non-empty text answer within its cap is a
    success.

    Args:
        text: the answer text, text blocks joined.
        finish: the normalized finish reason; None when the provider never said it was done.
        provider: the provider name used in the reason text.
        model: the model that answered.
        usage: what the call cost, kept on failures too.
        tool_called: the answer contains a tool call.
        detail: extra words for the reason (the provider's own reason string).
        cap: the output cap the call asked for (None: none was sent).
        tokens: the answer's tokens by the provider's count (:func:`answer_tokens`); None
            when it reports none, and the answer is then not judged against ``cap``.
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
    if cap is not None and tokens is not None and tokens > cap:
        return fail(
            f"the answer has {tokens} tokens, over the output cap of {cap} it was asked for "
            "(the server ignored the cap)",
            "too_long",
        )
    return SummarizationResult.success(body, usage=usage, model=model)


def token_usage(usage: Any, *, input_key: str, output_key: str) -> Usage | None:
    """Usage from an OpenAI-style ``usage`` object, cached input tokens included.

    Chat Completions and Responses report the same figures under different names
    (``prompt_tokens`` / ``input_tokens`` ...); the cached count sits in ``<input_key>_details``.
    """
    if usage is None:
        return None
    details = field(usage, f"{input_key}_details")
    return Usage(
        input_tokens=as_int(field(usage, input_key)),
        output_tokens=as_int(field(usage, output_key)),
        cache_read_tokens=as_int(field(details, "cached_tokens")),
    )
