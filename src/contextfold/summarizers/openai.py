"""Summaries from OpenAI models, or any server that speaks the OpenAI API.

:class:`OpenAISummarizer` drives the official ``openai`` SDK, so it works with OpenAI itself
and with every OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio ...) through
``base_url``. Both the Chat Completions and the Responses API are supported, plain or
streamed.

Failures never raise: they come back as :class:`SummarizationResult` failures with a code
(``rate_limited`` for HTTP 429, ``http_error`` for other statuses, ``timeout``, ``aborted``,
``truncated`` when the answer hit the token limit or the stream broke off, ``too_long``
when the provider counts it longer than the cap asked for, ``empty``, ``tool_call``,
``error`` for anything else, malformed stream data included, and a 200
answer that is no completion or, to a streamed call, no event stream, such as a proxy's
HTML page). A leading
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

import uuid
from typing import Any, Literal

from contextfold.errors import ConfigError
from contextfold.formats.tools import tools_for_openai_responses
from contextfold.summarizers._chat import ChatStream, chat_body, parse_chat, replay_body
from contextfold.summarizers._provider import SDKSummarizer
from contextfold.summarizers._template import StreamAccumulator
from contextfold.summarizers._wire import (
    Finish,
    answer_tokens,
    field,
    finish_result,
    not_an_answer,
    token_usage,
)
from contextfold.summarizers.base import FailureCode, SummarizationResult, SummaryRequest, Usage
from contextfold.summarizers.prompts import PromptSet, build_isolated_prompt
from contextfold.summarizers.settings import SummarizerSettings

__all__ = ["OpenAISummarizer"]

# Hosts that take ``max_completion_tokens`` (and whose reasoning models reject ``max_tokens``).
_OFFICIAL_HOSTS = ("api.openai.com", "openai.azure.com")
_MAX_TOKENS_PARAMS = ("auto", "max_tokens", "max_completion_tokens")


class OpenAISummarizer(SDKSummarizer):
    """A summarizer backed by the ``openai`` SDK (Chat Completions or Responses API).

    Args:
        client: an ``openai.OpenAI`` (or ``AsyncOpenAI``) client to use. When omitted, one is
            created on first use from ``base_url``, ``api_key`` and the settings' ``timeout``
            and ``max_retries`` (the SDK reads ``OPENAI_API_KEY`` itself when no key is
            given).
        model: the model that writes summaries (a cheap one is usually right).
        api: ``"chat"`` for Chat Completions (every compatible server has it) or
            ``"responses"`` for the Responses API.
        base_url: the server, for example ``http://localhost:11434/v1`` for Ollama.
        api_key: the key for a client created here.
        async_client: an ``openai.AsyncOpenAI`` client for :meth:`asummarize`. When
            omitted, one is created from the same settings as the sync client (for other
            client classes, such as Azure's, pass both).
        settings: what every adapter shares: output cap, temperature, timeout, retries,
            streaming, prompts, extra body fields, cache key and cache isolation (see
            :class:`~contextfold.summarizers.SummarizerSettings`).
        max_tokens_param: the request field that carries the output cap. ``"auto"`` uses
            ``max_completion_tokens`` on OpenAI and Azure OpenAI (reasoning models reject
            ``max_tokens``) and ``max_tokens`` on other servers (which often know only
            that one). The Responses API always uses ``max_output_tokens``.

    Raises:
        MissingExtraError: the ``openai`` package is not installed.
        ConfigError: ``api`` is neither ``"chat"`` nor ``"responses"``, or another argument
            is invalid.
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
        async_client: Any = None,
        settings: SummarizerSettings | None = None,
        max_tokens_param: Literal["auto", "max_tokens", "max_completion_tokens"] = "auto",
    ) -> None:
        if api not in ("chat", "responses"):
            raise ConfigError(f"api must be 'chat' or 'responses', not {api!r}", argument="api")
        if max_tokens_param not in _MAX_TOKENS_PARAMS:
            raise ConfigError(
                f"max_tokens_param must be one of {_MAX_TOKENS_PARAMS}, not {max_tokens_param!r}",
                argument="max_tokens_param",
            )
        super().__init__(
            client,
            async_client=async_client,
            model=model,
            base_url=base_url,
            api_key=api_key,
            settings=settings,
        )
        self.api = api
        self.max_tokens_param = max_tokens_param

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
        settings = self.settings
        kwargs: dict[str, Any] = {"model": self.model}
        cap = self._output_cap(request)
        body = chat_body if self.api == "chat" else _responses_body
        kwargs.update(
            body(request, prompts=settings.prompts, tool_result_limit=settings.tool_result_limit)
        )
        if request.mode == "cache_aligned":
            if settings.cache_key is not None:
                kwargs["prompt_cache_key"] = settings.cache_key
        elif settings.isolate_cache:
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

    def _parse(self, response: Any, cap: int | None) -> SummarizationResult:
        if self.api == "chat":
            return parse_chat(response, self.model, cap=cap)
        return _parse_response(response, self.model, cap)

    def _accumulator(self, cap: int | None) -> StreamAccumulator:
        if self.api == "chat":
            return ChatStream(self.model, cap=cap)
        return _ResponsesStream(self.model, cap)


# -- Responses API --------------------------------------------------------------------------


def _responses_body(
    request: SummaryRequest, *, prompts: PromptSet | None, tool_result_limit: int
) -> dict[str, Any]:
    """The ``instructions``, ``input`` and ``tools`` of a Responses request; see chat_body."""
    if request.mode == "cache_aligned":
        from contextfold.formats import openai_responses

        return replay_body(
            request, prompts, "input", openai_responses.dump, tools_for_openai_responses
        )
    system_text, user_text = build_isolated_prompt(
        request, prompts=prompts, tool_result_limit=tool_result_limit
    )
    return {"instructions": system_text, "input": [{"role": "user", "content": user_text}]}


_TOOL_ITEMS = frozenset({"function_call", "custom_tool_call", "computer_call", "mcp_call"})


def responses_usage(usage: Any) -> Usage | None:
    """Usage from a Responses ``usage`` object (cached input tokens included)."""
    return token_usage(usage, input_key="input_tokens", output_key="output_tokens")


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
    response: Any, model: str, cap: int | None, streamed_text: str | None = None
) -> SummarizationResult:
    answered_by = field(response, "model") or model
    raw_usage = field(response, "usage")
    usage = responses_usage(raw_usage)
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
        cap=cap,
        tokens=answer_tokens(raw_usage, "output_tokens"),
    )


def _parse_response(response: Any, model: str, cap: int | None) -> SummarizationResult:
    if isinstance(response, (str, bytes)) or field(response, "output") is None:
        return not_an_answer(response, "response object", provider="openai", model=model)
    return _response_verdict(response, model, cap)


class _ResponsesStream:
    """Folds Responses streaming events up to ``response.completed`` (or its failures)."""

    _FINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})

    def __init__(self, model: str, cap: int | None) -> None:
        self.model = model
        self.cap = cap
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
        verdict = _response_verdict(self.final, self.model, self.cap, streamed_text=text)
        if self.tool_called and verdict.code != "tool_call":
            return SummarizationResult.failure(
                "openai: the model called a tool instead of writing the summary",
                "tool_call",
                usage=verdict.usage,
                model=verdict.model,
            )
        return verdict
