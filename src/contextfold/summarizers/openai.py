"""Summaries from OpenAI models, or any server that speaks the OpenAI API.

:class:`OpenAISummarizer` drives the official ``openai`` SDK, so it works with OpenAI itself
and with every OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio ...) through
``base_url``. Both the Chat Completions and the Responses API are supported, plain or
streamed.

Failures never raise: they come back as :class:`SummarizationResult` failures with a code
(``rate_limited`` for HTTP 429, ``http_error`` for other statuses, ``timeout``, ``aborted``,
``truncated`` when the answer hit the token limit or the stream broke off, ``empty``,
``tool_call``, ``error`` for anything else, malformed stream data included). A leading
``<think>...</think>`` block, which reasoning models behind compatible servers write into the
answer text, is dropped like any other thinking.

Cache identity. OpenAI routes requests to its prompt cache by prefix and by
``prompt_cache_key``. An *isolated* summary call sends a fresh random ``prompt_cache_key`` so
it neither evicts nor pollutes the conversation's cached prefix (its prefix, our summary
prompt, is unrelated to the conversation's). A *cache-aligned* call replays the
conversation's own messages and sends ``cache_key`` (the conversation's own key, if you use
one), so the provider serves the replayed prefix from cache.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from contextfold.errors import ContextfoldError
from contextfold.messages import Message
from contextfold.summarizers._http_common import (
    Finish,
    SDKSummarizer,
    StreamAccumulator,
    as_int,
    clamp_tokens,
    field,
    finish_result,
    not_an_answer,
    tools_for_openai_chat,
    tools_for_openai_responses,
)
from contextfold.summarizers.base import FailureCode, SummarizationResult, SummaryRequest, Usage
from contextfold.summarizers.prompts import (
    PromptSet,
    build_cache_aligned_messages,
    build_isolated_prompt,
)

__all__ = ["OpenAISummarizer"]

# Hosts that take ``max_completion_tokens`` (and whose reasoning models reject ``max_tokens``).
_OFFICIAL_HOSTS = ("api.openai.com", "openai.azure.com")

_CHAT_FINISH: dict[str, Finish] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool",
    "function_call": "tool",
    "content_filter": "filter",
}


class OpenAISummarizer(SDKSummarizer):
    """A summarizer backed by the ``openai`` SDK (Chat Completions or Responses API).

    Args:
        client: an ``openai.OpenAI`` (or ``AsyncOpenAI``) client to use. When omitted, one is
            created on first use from ``base_url``, ``api_key``, ``timeout`` and
            ``max_retries`` (the SDK reads ``OPENAI_API_KEY`` itself when no key is given).
        model: the model that writes summaries (a cheap one is usually right).
        api: ``"chat"`` for Chat Completions (every compatible server has it) or
            ``"responses"`` for the Responses API.
        base_url: the server, for example ``http://localhost:11434/v1`` for Ollama.
        api_key: the key for a client created here.
        max_output_tokens: the most the model may write; the request's own cap also
            applies and the smaller wins.
        temperature: sampling temperature, when the model accepts one.
        timeout: seconds per call when the request has no deadline (a deadline, when set,
            bounds the call instead, whichever is shorter).
        extra_body: extra JSON fields for the request body (server-specific options).
        async_client: an ``openai.AsyncOpenAI`` client for :meth:`asummarize`. When
            omitted, one is created from the same settings as the sync client (for other
            client classes, such as Azure's, pass both).
        stream: stream the answer (SSE). Cancellation then acts between chunks, and
            a stream that breaks off is reported as ``truncated``.
        max_retries: SDK retries for clients created here; None keeps the SDK's default.
        prompts: the prompt set (see :mod:`contextfold.summarizers.prompts`).
        max_tokens_param: the request field that carries the output cap. ``"auto"`` uses
            ``max_completion_tokens`` on OpenAI and Azure OpenAI (reasoning models reject
            ``max_tokens``) and ``max_tokens`` on other servers (which often know only
            that one). The Responses API always uses ``max_output_tokens``.
        isolate_cache: send a fresh ``prompt_cache_key`` with every isolated call.
            Turn off for a server that rejects unknown fields.
        cache_key: the conversation's ``prompt_cache_key``, sent with cache-aligned calls.
        tool_result_limit: characters of each tool result kept in an isolated transcript.

    Raises:
        MissingExtraError: the ``openai`` package is not installed.
        ContextfoldError: ``api`` is neither ``"chat"`` nor ``"responses"``.
    """

    provider = "openai"
    sdk = ("openai", "OpenAISummarizer", "openai")
    client_classes = ("OpenAI", "AsyncOpenAI")

    def __init__(
        self,
        client: Any = None,
        *,
        model: str,
        api: Literal["chat", "responses"] = "chat",
        base_url: str | None = None,
        api_key: str | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        timeout: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        async_client: Any = None,
        stream: bool = False,
        max_retries: int | None = None,
        prompts: PromptSet | None = None,
        max_tokens_param: Literal["auto", "max_tokens", "max_completion_tokens"] = "auto",
        isolate_cache: bool = True,
        cache_key: str | None = None,
        tool_result_limit: int = 2000,
    ) -> None:
        if api not in ("chat", "responses"):
            raise ContextfoldError(f"api must be 'chat' or 'responses', not {api!r}")
        super().__init__(
            client,
            async_client=async_client,
            model=model,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            max_output_tokens=max_output_tokens,
            temperature=temperature,
            extra_body=extra_body,
            stream=stream,
            prompts=prompts,
            tool_result_limit=tool_result_limit,
        )
        self.api = api
        self.max_tokens_param = max_tokens_param
        self.isolate_cache = isolate_cache
        self.cache_key = cache_key

    def __repr__(self) -> str:
        return f"OpenAISummarizer(model={self.model!r}, api={self.api!r}, stream={self.stream})"

    # -- clients -----------------------------------------------------------------------

    def _mirror_settings(self, other: Any) -> dict[str, Any]:
        return {
            "base_url": str(other.base_url),
            "api_key": other.api_key,
            "organization": other.organization,
            "project": other.project,
            "max_retries": other.max_retries,
            "timeout": other.timeout,
        }

    # -- request -----------------------------------------------------------------------

    def _is_official(self, client: Any) -> bool:
        if "Azure" in type(client).__name__:
            return True
        url = str(getattr(client, "base_url", "") or self.base_url or "")
        return not url or any(host in url for host in _OFFICIAL_HOSTS)

    def build_request(self, request: SummaryRequest, *, client: Any = None) -> dict[str, Any]:
        """The keyword arguments of the SDK call for ``request`` (useful for inspection).

        Isolated mode sends our system prompt and the serialized transcript; cache-aligned
        mode replays the conversation's system messages, tools and messages and appends
        the instruction (see :mod:`contextfold.summarizers.prompts`).
        """
        kwargs: dict[str, Any] = {"model": self.model}
        cap = clamp_tokens(request.max_output_tokens, self.max_output_tokens)
        body = chat_body if self.api == "chat" else _responses_body
        kwargs.update(body(request, prompts=self.prompts, tool_result_limit=self.tool_result_limit))
        if request.mode == "cache_aligned":
            if self.cache_key is not None:
                kwargs["prompt_cache_key"] = self.cache_key
        elif self.isolate_cache:
            kwargs["prompt_cache_key"] = f"contextfold-summary-{uuid.uuid4().hex}"
        if self.api == "responses":
            kwargs["store"] = False  # a summary call is not a conversation turn to keep
            if cap is not None:
                kwargs["max_output_tokens"] = cap
        elif cap is not None:
            param = self.max_tokens_param
            if param == "auto":
                official = self._is_official(client)
                param = "max_completion_tokens" if official else "max_tokens"
            kwargs[param] = cap
        self._add_call_options(kwargs, request)
        return kwargs

    def _stream_options(self) -> dict[str, Any]:
        # Chat Completions reports usage in a stream only when asked to.
        return {"stream_options": {"include_usage": True}} if self.api == "chat" else {}

    def _send(self, client: Any, request: SummaryRequest) -> Any:
        kwargs = self.build_request(request, client=client)
        if self.api == "chat":
            return client.chat.completions.create(**kwargs)
        return client.responses.create(**kwargs)

    # -- answers -----------------------------------------------------------------------

    def _parse(self, response: Any) -> SummarizationResult:
        if self.api == "chat":
            return _parse_chat(response, self.model)
        return _parse_response(response, self.model)

    def _accumulator(self) -> StreamAccumulator:
        if self.api == "chat":
            return _ChatStream(self.model)
        return _ResponsesStream(self.model)


# -- request bodies ------------------------------------------------------------------------


def _replay(
    request: SummaryRequest,
    prompts: PromptSet | None,
    key: str,
    dump: Callable[[Sequence[Message]], list[dict[str, Any]]],
    convert_tools: Callable[[Iterable[Mapping[str, Any]]], list[dict[str, Any]]],
) -> dict[str, Any]:
    """A cache-aligned body: the conversation and instruction under ``key``, then its tools."""
    system, messages, tools = build_cache_aligned_messages(request, prompts=prompts)
    body: dict[str, Any] = {key: dump([*system, *messages])}
    if tools:
        body["tools"] = convert_tools(tools)
    return body


# -- Chat Completions ---------------------------------------------------------------------


def chat_body(
    request: SummaryRequest, *, prompts: PromptSet | None, tool_result_limit: int
) -> dict[str, Any]:
    """The ``messages`` (and ``tools``) of a Chat Completions request for ``request``.

    Isolated mode: our system prompt and one user message with the serialized transcript.
    Cache-aligned mode: the conversation's own system messages, messages and tools, then
    the instruction (see :mod:`contextfold.summarizers.prompts`). Every server that speaks the Chat
    Completions shape (LiteLLM included) takes this body.
    """
    if request.mode == "cache_aligned":
        from contextfold.formats import openai_chat

        return _replay(request, prompts, "messages", openai_chat.dump, tools_for_openai_chat)
    system_text, user_text = build_isolated_prompt(
        request, prompts=prompts, tool_result_limit=tool_result_limit
    )
    return {
        "messages": [
            {"role": "system", "content": system_text},
            {"role": "user", "content": user_text},
        ]
    }


def chat_usage(usage: Any) -> Usage | None:
    """Usage from a Chat Completions ``usage`` object (cached prompt tokens included)."""
    if usage is None:
        return None
    details = field(usage, "prompt_tokens_details")
    return Usage(
        input_tokens=as_int(field(usage, "prompt_tokens")),
        output_tokens=as_int(field(usage, "completion_tokens")),
        cache_read_tokens=as_int(field(details, "cached_tokens")),
    )


_THINK = re.compile(r"\A\s*<(think|thinking|reasoning)>.*?(?:</\1>|\Z)\s*", re.DOTALL)


def strip_think(text: str) -> str:
    """Drop a leading ``<think>...</think>`` block from an answer.

    Reasoning models served through OpenAI-compatible servers (Ollama, vLLM, llama.cpp)
    often put their chain of thought inside the answer text in such tags. It is scratch
    work, not summary: like thinking blocks elsewhere, it is left out. A block that never
    closes (the answer was all thinking) leaves nothing, so the result is ``empty``.
    """
    return _THINK.sub("", text, count=1)


def _chat_finish(reason: Any) -> Finish | None:
    if reason is None:
        return None
    return _CHAT_FINISH.get(str(reason), "stop")


def _parse_chat(response: Any, model: str) -> SummarizationResult:
    answered_by = field(response, "model") or model
    usage = chat_usage(field(response, "usage"))
    choices = field(response, "choices")
    if isinstance(response, (str, bytes)) or choices is None:
        return not_an_answer(response, "chat completion", provider="openai", model=answered_by)
    if not choices:
        return SummarizationResult.failure(
            "openai: the answer has no choices", "empty", usage=usage, model=answered_by
        )
    choice = choices[0]
    message = field(choice, "message")
    text = strip_think(str(field(message, "content") or ""))
    refusal = field(message, "refusal")
    tool_called = bool(field(message, "tool_calls")) or bool(field(message, "function_call"))
    finish = _chat_finish(field(choice, "finish_reason"))
    if finish is None:
        finish = "stop"  # a plain answer is whole even when a server omits the reason
    if refusal and not text.strip():
        finish = "refused"
    return finish_result(
        str(text),
        finish,
        provider="openai",
        model=answered_by,
        usage=usage,
        tool_called=tool_called,
        detail=str(refusal) if refusal else None,
    )


class _ChatStream:
    """Folds ``chat.completion.chunk`` events: text deltas, tool-call deltas, finish, usage."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.events = 0
        self.pieces: list[str] = []
        self.refusal: list[str] = []
        self.tool_called = False
        self.finish: Finish | None = None
        self.usage: Usage | None = None

    @property
    def complete(self) -> bool:
        return self.finish is not None

    def feed(self, chunk: Any) -> SummarizationResult | None:
        self.events += 1
        self.model = field(chunk, "model") or self.model
        usage = field(chunk, "usage")
        if usage is not None:
            self.usage = chat_usage(usage)
        for choice in field(chunk, "choices") or []:
            if as_int(field(choice, "index")) != 0:
                continue
            delta = field(choice, "delta")
            content = field(delta, "content")
            if content:
                self.pieces.append(str(content))
            refusal = field(delta, "refusal")
            if refusal:
                self.refusal.append(str(refusal))
            if field(delta, "tool_calls") or field(delta, "function_call"):
                self.tool_called = True
            reason = _chat_finish(field(choice, "finish_reason"))
            if reason is not None:
                self.finish = reason
        return None

    def result(self) -> SummarizationResult:
        text = strip_think("".join(self.pieces))
        finish = self.finish
        if finish == "stop" and self.refusal and not text.strip():
            finish = "refused"
        return finish_result(
            text,
            finish,
            provider="openai",
            model=self.model,
            usage=self.usage,
            tool_called=self.tool_called,
            detail="".join(self.refusal) or None,
        )


# -- Responses API --------------------------------------------------------------------------


def _responses_body(
    request: SummaryRequest, *, prompts: PromptSet | None, tool_result_limit: int
) -> dict[str, Any]:
    """The ``instructions``, ``input`` and ``tools`` of a Responses request; see chat_body."""
    if request.mode == "cache_aligned":
        from contextfold.formats import openai_responses

        return _replay(request, prompts, "input", openai_responses.dump, tools_for_openai_responses)
    system_text, user_text = build_isolated_prompt(
        request, prompts=prompts, tool_result_limit=tool_result_limit
    )
    return {"instructions": system_text, "input": [{"role": "user", "content": user_text}]}


_TOOL_ITEMS = frozenset({"function_call", "custom_tool_call", "computer_call", "mcp_call"})


def responses_usage(usage: Any) -> Usage | None:
    """Usage from a Responses ``usage`` object (cached input tokens included)."""
    if usage is None:
        return None
    details = field(usage, "input_tokens_details")
    return Usage(
        input_tokens=as_int(field(usage, "input_tokens")),
        output_tokens=as_int(field(usage, "output_tokens")),
        cache_read_tokens=as_int(field(details, "cached_tokens")),
    )


def _response_parts(response: Any) -> tuple[str, str, bool]:
    """``(text, refusal, tool_called)`` of a Responses ``output`` list."""
    texts: list[str] = []
    refusals: list[str] = []
    tool_called = False
    for item in field(response, "output") or []:
        kind = field(item, "type")
        if kind in _TOOL_ITEMS:
            tool_called = True
        if kind != "message":
            continue  # reasoning items and the like carry no answer text
        for part in field(item, "content") or []:
            part_kind = field(part, "type")
            if part_kind == "output_text":
                texts.append(str(field(part, "text") or ""))
            elif part_kind == "refusal":
                refusals.append(str(field(part, "refusal") or ""))
    return "".join(texts), "".join(refusals), tool_called


def _reported_error(error: Any, fallback: str) -> tuple[str, bool]:
    """``(label, rate_limited)`` for an error the Responses API reports in a 200 answer.

    A failed response and a stream's ``error`` event carry the same ``code`` and
    ``message``; quota and rate-limit codes are told apart so callers can back off.
    """
    code = field(error, "code")
    message = field(error, "message") or fallback
    if code in ("rate_limit_exceeded", "insufficient_quota"):
        return f"rate limited: {message}", True
    return (f"{code}: {message}" if code else str(message)), False


def _response_verdict(
    response: Any, model: str, streamed_text: str | None = None
) -> SummarizationResult:
    answered_by = field(response, "model") or model
    usage = responses_usage(field(response, "usage"))
    text, refusal, tool_called = _response_parts(response)
    if not text and streamed_text:
        text = streamed_text
    status = field(response, "status") or "completed"
    detail: str | None = None
    finish: Finish
    if status == "incomplete":
        reason = field(field(response, "incomplete_details"), "reason")
        detail = f"incomplete: {reason}" if reason else "incomplete"
        finish = "filter" if reason == "content_filter" else "length"
    elif status == "failed":
        label, limited = _reported_error(field(response, "error"), "the response failed")
        if limited:
            return SummarizationResult.failure(
                f"openai: {label}", "rate_limited", usage=usage, model=answered_by
            )
        detail = label
        finish = "error"
    elif status in ("completed", None):
        finish = "stop"
    else:
        detail = f"status {status}"
        finish = "error"
    if finish == "stop" and refusal and not text.strip():
        finish, detail = "refused", refusal
    return finish_result(
        text,
        finish,
        provider="openai",
        model=answered_by,
        usage=usage,
        tool_called=tool_called,
        detail=detail,
    )


def _parse_response(response: Any, model: str) -> SummarizationResult:
    if isinstance(response, (str, bytes)) or field(response, "output") is None:
        return not_an_answer(response, "response object", provider="openai", model=model)
    return _response_verdict(response, model)


class _ResponsesStream:
    """Folds Responses streaming events up to ``response.completed`` (or its failures)."""

    _FINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})

    def __init__(self, model: str) -> None:
        self.model = model
        self.events = 0
        self.pieces: list[str] = []
        self.tool_called = False
        self.final: Any = None

    @property
    def complete(self) -> bool:
        return self.final is not None

    def feed(self, event: Any) -> SummarizationResult | None:
        self.events += 1
        kind = field(event, "type")
        if kind == "response.output_text.delta":
            self.pieces.append(str(field(event, "delta") or ""))
        elif kind in ("response.output_item.added", "response.output_item.done"):
            if field(field(event, "item"), "type") in _TOOL_ITEMS:
                self.tool_called = True
        elif kind == "response.function_call_arguments.delta":
            self.tool_called = True
        elif kind in self._FINAL:
            self.final = field(event, "response")
        elif kind == "error":
            label, limited = _reported_error(event, "error event in the stream")
            code: FailureCode = "rate_limited" if limited else "error"
            return SummarizationResult.failure(f"openai: {label}", code, model=self.model)
        return None

    def result(self) -> SummarizationResult:
        text = "".join(self.pieces)
        if self.final is None:
            return finish_result(
                text,
                None,
                provider="openai",
                model=self.model,
                usage=None,
                tool_called=self.tool_called,
            )
        verdict = _response_verdict(self.final, self.model, streamed_text=text)
        if self.tool_called and verdict.code != "tool_call":
            return SummarizationResult.failure(
                "openai: the model called a tool instead of writing the summary",
                "tool_call",
                usage=verdict.usage,
                model=verdict.model,
            )
        return verdict
