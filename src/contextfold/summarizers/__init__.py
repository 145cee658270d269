"""Summarizers: the contract and the built-in implementations.

Always available (no third-party package): :class:`ExtractiveSummarizer` (the offline
default), :class:`FunctionSummarizer` (any plain callable) and
:func:`stream_function_summarizer` (any streaming model call). The provider adapters
:class:`OpenAISummarizer`, :class:`AnthropicSummarizer` and :class:`LiteLLMSummarizer` are
imported lazily on first access, so importing this package never imports an SDK; they share
one frozen :class:`SummarizerSettings` for everything but the model and the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextfold._lazy import lazy_exports
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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "OpenAISummarizer": "contextfold.summarizers.openai",
        "AnthropicSummarizer": "contextfold.summarizers.anthropic",
        "LiteLLMSummarizer": "contextfold.summarizers.litellm",
    },
)
