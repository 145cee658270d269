"""The summarizer contract.

A summarizer turns a :class:`SummaryRequest` (the span to condense, the prior summary, the
instructions, an output cap, a deadline and a cancel token) into a
:class:`SummarizationResult`. It **never raises** for provider failures: HTTP errors, rate
limits, timeouts, truncated or empty answers are returned as failures with a distinct
:data:`FailureCode`, so a strategy can fall back without losing anything.

Every built-in summarizer implements both :class:`Summarizer` (``summarize``) and
:class:`AsyncSummarizer` (``asummarize``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from contextfold.messages import Message
from contextfold.usage import Usage

__all__ = [
    "AsyncSummarizer",
    "CancelToken",
    "FailureCode",
    "RequestMode",
    "SummarizationResult",
    "Summarizer",
    "SummaryKind",
    "SummaryRequest",
    "Usage",
]

FailureCode: TypeAlias = Literal[
    "error",  # any other provider or adapter failure
    "http_error",  # the provider answered with an HTTP error status
    "rate_limited",  # HTTP 429 or the provider's rate-limit error
    "timeout",  # the deadline passed or the request timed out
    "aborted",  # cancelled through the cancel token, or the stream was aborted
    "truncated",  # finish_reason=length / stop_reason=max_tokens / stream cut short
    "too_long",  # longer than the output cap asked for, by the provider's count
    "empty",  # no text in the answer
    "tool_call",  # the model called a tool instead of writing text
    "not_smaller",  # the summary is not smaller than what it replaces
    "invalid",  # the answer does not follow the required structure
]

RequestMode: TypeAlias = Literal["isolated", "cache_aligned"]
SummaryKind: TypeAlias = Literal["summary", "update", "checkpoint", "turn_prefix"]


class CancelToken:
    """A thread-safe cancellation flag shared between a caller and a summarizer."""

    __slots__ = ("_event", "reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None

    def cancel(self, reason: str = "cancelled") -> None:
        """Ask every holder of this token to stop."""
        self.reason = reason
        self._event.set()

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled or ``timeout`` seconds pass; True when cancelled."""
        return self._event.wait(timeout)


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """What to summarize and under which limits.

    Attributes:
        messages: the span to condense, oldest first.
        previous_summary: the summary this one extends or merges, if any.
        kind: which prompt applies: a fresh ``summary``, an ``update`` merging the previous
            summary, a structured ``checkpoint``, or the ``turn_prefix`` of a split turn.
        instructions: extra focus from the caller, appended to the prompt.
        max_output_tokens: cap on the summary length; adapters pass it to the provider.
        deadline: absolute ``time.monotonic()`` after which the call must give up.
        cancel: cooperative cancellation.
        mode: ``isolated`` (a serialized transcript and our own system prompt) or
            ``cache_aligned`` (replay ``system``/``tools``/``prefix`` verbatim and append the
            instruction as the last user message, so the provider's prefix cache is reused).
        system: the conversation's own system prompt (cache-aligned mode).
        prefix: the conversation's messages before ``messages`` (cache-aligned mode).
        tools: the conversation's tool schemas (cache-aligned mode).
        details: structured state carried between checkpoints (files read and modified).
    """

    messages: tuple[Message, ...]
    previous_summary: str | None = None
    kind: SummaryKind = "summary"
    instructions: str | None = None
    max_output_tokens: int | None = None
    deadline: float | None = None
    cancel: CancelToken | None = field(default=None, compare=False)
    mode: RequestMode = "isolated"
    system: tuple[Message, ...] = ()
    prefix: tuple[Message, ...] = ()
    tools: tuple[Mapping[str, Any], ...] = field(default=(), hash=False)
    details: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def remaining(self) -> float | None:
        """Seconds left before the deadline (never negative), or None without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    @property
    def expired(self) -> bool:
        """True when the deadline has passed."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    @property
    def cancelled(self) -> bool:
        """True when the cancel token was triggered."""
        return self.cancel is not None and self.cancel.cancelled


@dataclass(frozen=True, slots=True)
class SummarizationResult:
    """Success (``text``) or failure (``reason`` and ``code``); never an exception.

    Use :meth:`success` and :meth:`failure` to build one.
    """

    ok: bool
    text: str = ""
    usage: Usage | None = None
    model: str | None = None
    reason: str | None = None
    code: FailureCode | None = None
    aborted: bool = False
    details: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @classmethod
    def success(
        cls,
        text: str,
        *,
        usage: Usage | None = None,
        model: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> SummarizationResult:
        """A successful summary."""
        return cls(True, text, usage, model, details=dict(details or {}))

    @classmethod
    def failure(
        cls,
        reason: str,
        code: FailureCode = "error",
        *,
        aborted: bool = False,
        usage: Usage | None = None,
        model: str | None = None,
    ) -> SummarizationResult:
        """A failure with a human-readable reason and a machine-readable code."""
        return cls(False, "", usage, model, reason, code, aborted or code == "aborted")


@runtime_checkable
class Summarizer(Protocol):
    """Synchronous summarizer. Must not raise for provider failures."""

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Condense ``request.messages``."""
        ...


@runtime_checkable
class AsyncSummarizer(Protocol):
    """Asynchronous summarizer. Must not raise for provider failures."""

    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Condense ``request.messages``."""
        ...


def precheck(request: SummaryRequest) -> SummarizationResult | None:
    """The failure to return before doing any work, if cancelled or past the deadline."""
    if request.cancelled:
        reason = request.cancel.reason if request.cancel is not None else None
        return SummarizationResult.failure(reason or "cancelled before start", "aborted")
    if request.expired:
        return SummarizationResult.failure("deadline passed before start", "timeout")
    return None
