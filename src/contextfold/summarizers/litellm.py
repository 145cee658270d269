"""Summaries from any of the providers LiteLLM speaks to, through ``litellm.completion``.

:class:`LiteLLMSummarizer` builds an OpenAI-style chat request (LiteLLM translates it for
each provider), sends it with ``litellm.completion`` / ``litellm.acompletion``, plain or
streamed, and maps the answer and LiteLLM's exception classes to the same failure codes as
the other adapters: ``rate_limited`` (429), ``http_error`` (other statuses), ``timeout``,
``aborted``, ``truncated`` (``finish_reason=length`` or a stream that breaks off),
``too_long`` (longer than the ``max_tokens`` sent, by the provider's count), ``empty``,
``tool_call`` and ``error``.

``litellm`` is imported on first use, never at import time: it is slow to import, and it may
try to download its model price map then (set ``LITELLM_LOCAL_MODEL_COST_MAP=True`` in the
environment to stop that).
"""

from __future__ import annotations

from typing import Any

from contextfold.errors import ConfigError
from contextfold.summarizers._chat import ChatStream, chat_body, parse_chat
from contextfold.summarizers._extras import ensure_installed, import_extra
from contextfold.summarizers._template import ProviderSummarizer, StreamAccumulator
from contextfold.summarizers._wire import request_timeout
from contextfold.summarizers.base import SummarizationResult, SummaryRequest
from contextfold.summarizers.settings import SummarizerSettings, settings_or_default

__all__ = ["LiteLLMSummarizer"]

# Settings LiteLLM takes under another name, or not at all: say which keyword to use.
_NOT_SENT = {
    "max_retries": "pass num_retries= to LiteLLMSummarizer instead",
    "extra_body": "pass the fields as keyword arguments instead",
    "cache_key": "pass prompt_cache_key= to LiteLLMSummarizer instead",
}


class LiteLLMSummarizer(ProviderSummarizer):
    """A summarizer backed by ``litellm.completion`` / ``litellm.acompletion``.

    Args:
        model: a LiteLLM model string, such as ``"anthropic/claude-haiku-4-5"`` or
            ``"openai/llama3"`` for an OpenAI-compatible server at ``api_base``.
        api_base: the server URL, for self-hosted or proxied models.
        api_key: the key; without it LiteLLM reads the provider's usual variable.
        settings: what every adapter shares (see
            :class:`~contextfold.summarizers.SummarizerSettings`). The output cap is sent as
            ``max_tokens``, which LiteLLM maps for each provider; ``temperature`` is sent
            when set. LiteLLM has its own names for retries and extra fields, so
            ``max_retries``, ``extra_body`` and ``cache_key`` are refused here.
        **kwargs: passed to every ``litellm.completion`` call unchanged (``num_retries``,
            ``temperature``, ``extra_headers`` ...).

    Raises:
        MissingExtraError: the ``litellm`` package is not installed.
        ConfigError: a setting LiteLLM does not take is set, or ``temperature`` is given
            both in the settings and as a keyword argument.
    """

    provider = "litellm"

    def __init__(
        self,
        *,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        settings: SummarizerSettings | None = None,
        **kwargs: Any,
    ) -> None:
        self.settings = settings_or_default(settings)
        for name, instead in _NOT_SENT.items():
            value = getattr(self.settings, name)
            if value is not None:
                raise ConfigError(
                    f"LiteLLMSummarizer does not send settings.{name} (got {value!r}); {instead}",
                    argument="settings",
                )
        if self.settings.temperature is not None and "temperature" in kwargs:
            raise ConfigError(
                "temperature is given twice, in settings and as a keyword argument",
                argument="temperature",
            )
        ensure_installed("litellm", "LiteLLMSummarizer", "litellm")
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.options = dict(kwargs)

    def __repr__(self) -> str:
        return f"LiteLLMSummarizer(model={self.model!r}, stream={self.stream})"

    def build_request(self, request: SummaryRequest) -> dict[str, Any]:
        """The keyword arguments of ``litellm.completion`` for ``request``."""
        settings = self.settings
        kwargs: dict[str, Any] = dict(self.options)
        kwargs["model"] = self.model
        kwargs.update(
            chat_body(
                request, prompts=settings.prompts, tool_result_limit=settings.tool_result_limit
            )
        )
        cap = self._output_cap(request)
        if cap is not None:
            kwargs["max_tokens"] = cap
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        if self.api_base is not None:
            kwargs["api_base"] = self.api_base
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        timeout = request_timeout(request, settings.timeout)
        if timeout is not None:
            kwargs["timeout"] = timeout
        if request.deadline is not None:
            kwargs["num_retries"] = 0  # retries would run past the deadline, billed unseen
        if settings.stream:
            kwargs["stream"] = True
            kwargs.setdefault("stream_options", {"include_usage": True})
        return kwargs

    def _start(self, request: SummaryRequest) -> Any:
        litellm = import_extra("litellm", "LiteLLMSummarizer", "litellm")
        return litellm.completion(**self.build_request(request))

    async def _astart(self, request: SummaryRequest) -> Any:
        litellm = import_extra("litellm", "LiteLLMSummarizer", "litellm")
        return await litellm.acompletion(**self.build_request(request))

    def _parse(self, response: Any, cap: int | None) -> SummarizationResult:
        return parse_chat(response, self.model, provider=self.provider, cap=cap)

    def _accumulator(self, cap: int | None) -> StreamAccumulator:
        # LiteLLM streams OpenAI-shaped chunks; only the provider named in reasons differs.
        return ChatStream(self.model, provider=self.provider, cap=cap)

    def _http_response(self, stream: Any) -> Any:
        # LiteLLM's wrapper reads the SDK stream it was given (for OpenAI-compatible servers
        # the ``openai`` one); its own HTTP streams keep no response to look at.
        return getattr(getattr(stream, "completion_stream", None), "response", None)
