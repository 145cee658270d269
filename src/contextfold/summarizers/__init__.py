"""Summarizers: the contract and the built-in implementations.

Always available (no third-party package): :class:`ExtractiveSummarizer` (the offline
default), :class:`FunctionSummarizer` (any plain callable) and
:func:`stream_function_summarizer` (any streaming model call). The provider adapters
:class:`OpenAISummarizer`, :class:`AnthropicSummarizer` and :class:`LiteLLMSummarizer` are
imported lazily on first access, so importing this package never imports an SDK; they share
one frozen :class:`SummarizerSettings` for everything but the model and the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contextfold.summarizers.base import (
    AsyncSummarizer,
    CancelToken,
    FailureCode,
    SummarizationResult,
    Summarizer,
    SummaryRequest,
    Usage,
)
from contextfold.summarizers.extractive import ExtractiveSummarizer
from contextfold.summarizers.function import FunctionSummarizer
from contextfold.summarizers.settings import SummarizerSettings
from contextfold.summarizers.stream import StreamFunctionSummarizer, stream_function_summarizer

if TYPE_CHECKING:
    from contextfold.summarizers.anthropic import AnthropicSummarizer
    from contextfold.summarizers.litellm import LiteLLMSummarizer
    from contextfold.summarizers.openai import OpenAISummarizer

__all__ = [
    "AnthropicSummarizer",
    "AsyncSummarizer",
    "CancelToken",
    "ExtractiveSummarizer",
    "FailureCode",
    "FunctionSummarizer",
    "LiteLLMSummarizer",
    "OpenAISummarizer",
    "StreamFunctionSummarizer",
    "SummarizationResult",
    "Summarizer",
    "SummarizerSettings",
    "SummaryRequest",
    "Usage",
    "stream_function_summarizer",
]

_LAZY = {
    "OpenAISummarizer": "contextfold.summarizers.openai",
    "AnthropicSummarizer": "contextfold.summarizers.anthropic",
    "LiteLLMSummarizer": "contextfold.summarizers.litellm",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
