"""What every model-backed summarizer is configured with, apart from its client.

pydantic-ai keeps a model's client (its provider) apart from its settings; so do we. An
adapter takes the few options people change most often as keyword arguments (``model``, the
client, ``base_url`` and ``api_key``) and everything the adapters share in one frozen
:class:`SummarizerSettings`, which can be built once and shared by several adapters::

    settings = SummarizerSettings(max_output_tokens=800, timeout=30, stream=True)
    OpenAISummarizer(model="gpt-4o-mini", settings=settings)
    AnthropicSummarizer(model="claude-haiku-4-5", settings=settings)

Bad values raise :class:`~contextfold.errors.ConfigError` when the settings are built, not
at the first call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from contextfold.errors import ConfigError

if TYPE_CHECKING:
    from contextfold.summarizers.prompts import PromptSet

__all__ = ["SummarizerSettings"]


@dataclass(frozen=True, slots=True)
class SummarizerSettings:
    """The options every provider adapter shares; frozen so one object can serve many.

    Attributes:
        max_output_tokens: the most the model may write; the request's own cap also applies
            and the smaller wins. None leaves it to the provider (Anthropic, which requires a
            value, then gets 4096). An answer the provider counts longer than the cap sent (a
            server that ignored it) fails with ``too_long``.
        temperature: sampling temperature, when the model accepts one.
        timeout: seconds per call when the request has no deadline (a deadline, when set,
            bounds the call instead, whichever is shorter); also the timeout of a client the
            adapter creates.
        max_retries: SDK retries for a client the adapter creates; None keeps the SDK's
            default.
        stream: stream the answer (SSE). Cancellation and the deadline then act between
            chunks, and a stream that breaks off is reported as ``truncated``.
        prompts: the prompt set (see :mod:`contextfold.summarizers.prompts`); None uses the
            default one.
        extra_body: extra JSON fields for the request body (server-specific options).
        tool_result_limit: characters of each tool result kept in an isolated transcript.
        cache_key: the conversation's own prompt-cache key, sent with cache-aligned calls by
            providers that route their cache by key (OpenAI's ``prompt_cache_key``).
        isolate_cache: keep isolated calls out of the conversation's prompt cache (OpenAI:
            a fresh ``prompt_cache_key`` per call; turn off for a server that rejects
            unknown fields). Anthropic's isolated calls never write ``cache_control``, so
            there it changes nothing.

    Raises:
        ConfigError: a number is out of range or a field has the wrong type.
    """

    max_output_tokens: int | None = None
    temperature: float | None = None
    timeout: float | None = None
    max_retries: int | None = None
    stream: bool = False
    prompts: PromptSet | None = None
    extra_body: Mapping[str, Any] | None = field(default=None, hash=False)
    tool_result_limit: int = 2000
    cache_key: str | None = None
    isolate_cache: bool = True

    def __post_init__(self) -> None:
        """Check every field now, so a mistake surfaces where the settings are written."""
        _check_int("max_output_tokens", self.max_output_tokens, minimum=1, optional=True)
        _check_int("max_retries", self.max_retries, minimum=0, optional=True)
        _check_int("tool_result_limit", self.tool_result_limit, minimum=1, optional=False)
        _check_number("temperature", self.temperature, positive=False)
        _check_number("timeout", self.timeout, positive=True)
        for name in ("stream", "isolate_cache"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(
                    f"{name} must be True or False, not {getattr(self, name)!r}", argument=name
                )
        if self.cache_key is not None and not isinstance(self.cache_key, str):
            raise ConfigError(
                f"cache_key must be a string, not {self.cache_key!r}", argument="cache_key"
            )
        if self.extra_body is not None:
            if not isinstance(self.extra_body, Mapping):
                raise ConfigError(
                    f"extra_body must be a mapping, not {self.extra_body!r}", argument="extra_body"
                )
            # A private copy, read-only: the caller's dict may change, the settings may not.
            object.__setattr__(self, "extra_body", MappingProxyType(dict(self.extra_body)))


def _check_int(name: str, value: Any, *, minimum: int, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        wanted = "a positive integer" if minimum > 0 else "a non-negative integer"
        raise ConfigError(f"{name} must be {wanted}, not {value!r}", argument=name)


def _check_number(name: str, value: Any, *, positive: bool) -> None:
    if value is None:
        return
    number_like = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number_like or not math.isfinite(value) or value < 0 or (positive and value == 0):
        wanted = "a positive number" if positive else "a non-negative number"
        raise ConfigError(f"{name} must be {wanted}, not {value!r}", argument=name)


def settings_or_default(settings: SummarizerSettings | None) -> SummarizerSettings:
    """``settings``, or the defaults when None; anything else is a :class:`ConfigError`.

    Adapters call it first, so a dict or a stray positional value is refused in the
    constructor, naming the argument.
    """
    if settings is None:
        return SummarizerSettings()
    if not isinstance(settings, SummarizerSettings):
        raise ConfigError(
            f"settings must be a SummarizerSettings, not {settings!r}", argument="settings"
        )
    return settings
