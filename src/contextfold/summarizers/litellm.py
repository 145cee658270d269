"""Summaries from any of the providers LiteLLM speaks to, through ``litellm.completion``.

:class:`LiteLLMSummarizer` builds an OpenAI-style chat request (LiteLLM translates it for
each provider), sends it with ``litellm.completion`` / ``litellm.acompletion``, plain or
streamed, and maps the answer and LiteLLM's exception classes to the same failure codes as
the other adapters: ``rate_limited`` (429), ``http_error`` (other statuses), ``timeout``,
``aborted``, ``truncated`` (``finish_reason=length`` or a stream that breaks off),
``empty``, ``tool_call`` and ``error``.

``litellm`` is imported on first use, never at import time: it is slow to import, and it may
try to download its model price map then (set ``LITELLM_LOCAL_MODEL_COST_MAP=True`` in the
environment to stop that).
"""

from __future__ import annotations

from typing import Any

from contextfold.summarizers._http_common import (
    ProviderSummarizer,
    StreamAccumulator,
    clamp_tokens,
    ensure_installed,
    import_extra,
    request_timeout,
)
from contextfold.summarizers.base import SummarizationResult, SummaryRequest
from contextfold.summarizers.openai import _ChatStream, _parse_chat, chat_body
from contextfold.summarizers.prompts import PromptSet

__all__ = ["LiteLLMSummarizer"]


class LiteLLMSummarizer(ProviderSummarizer):
    """A summarizer backed by ``litellm.completion`` / ``litellm.acompletion``.

    Args:
        model: a LiteLLM model string, such as ``"anthropic/claude-haiku-4-5"`` or
            ``"openai/llama3"`` for an OpenAI-compatible server at ``api_base``.
        api_base: the server URL, for self-hosted or proxied models.
        api_key: the key; without it LiteLLM reads the provider's usual variable.
        max_output_tokens: the most the model may write; the request's own cap also
            applies and the smaller wins. Sent as ``max_tokens``, which LiteLLM maps for
            each provider.
        timeout: seconds per call when the request has no deadline.
        stream: stream the answer; cancellation then acts between chunks.
        prompts: the prompt set (see :mod:`contextfold.summarizers.prompts`).
        tool_result_limit: characters of each tool result kept in an isolated transcript.
        **kwargs: passed to every ``litellm.completion`` call unchanged (``num_retries``,
            ``temperature``, ``extra_headers`` ...).

    Raises:
        MissingExtraError: the ``litellm`` package is not installed.
    """

    provider = "litellm"

    def __init__(
        self,
        *,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        max_output_tokens: int | None = None,
        timeout: float | None = None,
        stream: bool = False,
        prompts: PromptSet | None = None,
        tool_result_limit: int = 2000,
        **kwargs: Any,
    ) -> None:
        ensure_installed("litellm", "LiteLLMSummarizer", "litellm")
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.max_output_tokens = max_output_tokens
        self.timeout = timeout
        self.stream = stream
        self.prompts = prompts
        self.tool_result_limit = tool_result_limit
        self.options = dict(kwargs)

    def __repr__(self) -> str:
        return f"LiteLLMSummarizer(model={self.model!r}, stream={self.stream})"

    def build_request(self, request: SummaryRequest) -> dict[str, Any]:
        """The keyword arguments of ``litellm.completion`` for ``request``."""
        kwargs: dict[str, Any] = dict(self.options)
        kwargs["model"] = self.model
        kwargs.update(
            chat_body(request, prompts=self.prompts, tool_result_limit=self.tool_result_limit)
        )
        cap = clamp_tokens(request.max_output_tokens, self.max_output_tokens)
        if cap is not None:
            kwargs["max_tokens"] = cap
        if self.api_base is not None:
            kwargs["api_base"] = self.api_base
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        timeout = request_timeout(request, self.timeout)
        if timeout is not None:
            kwargs["timeout"] = timeout
        if self.stream:
            kwargs["stream"] = True
            kwargs.setdefault("stream_options", {"include_usage": True})
        return kwargs

    def _start(self, request: SummaryRequest) -> Any:
        litellm = import_extra("litellm", "LiteLLMSummarizer", "litellm")
        return litellm.completion(**self.build_request(request))

    async def _astart(self, request: SummaryRequest) -> Any:
        litellm = import_extra("litellm", "LiteLLMSummarizer", "litellm")
        return await litellm.acompletion(**self.build_request(request))

    def _parse(self, response: Any) -> SummarizationResult:
        return _relabel(_parse_chat(response, self.model))

    def _accumulator(self) -> StreamAccumulator:
        return _LiteLLMStream(self.model)


def _relabel(result: SummarizationResult) -> SummarizationResult:
    """Name LiteLLM, not OpenAI, in reasons: the answer came through LiteLLM."""
    if result.ok or not result.reason or not result.reason.startswith("openai: "):
        return result
    return SummarizationResult.failure(
        "litellm: " + result.reason[len("openai: ") :],
        result.code or "error",
        usage=result.usage,
        model=result.model,
    )


class _LiteLLMStream(_ChatStream):
    """LiteLLM streams OpenAI-shaped chunks; only the provider name in reasons differs."""

    def result(self) -> SummarizationResult:
        return _relabel(super().result())
