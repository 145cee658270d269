"""Fakes for tests, shipped so users can test their own code without a model.

* :class:`FakeSummarizer` returns canned or computed summaries, records every request, and
  can be told to fail with any failure code.
* :class:`FixedCounter` counts every message as a fixed number of tokens (or text as one
  token per character), which makes budgets easy to reason about in tests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence

from contextfold.messages import Message
from contextfold.summarizers.base import (
    FailureCode,
    SummarizationResult,
    SummaryRequest,
    Usage,
    precheck,
)
from contextfold.tokens.base import BaseCounter

__all__ = ["FakeSummarizer", "FixedCounter"]


class FakeSummarizer:
    """A deterministic summarizer for tests; sync and async.

    Args:
        text: the summary to return, or a function of the request. The default describes
            the span: ``"summary of N messages: <first words of each>"``.
        fail: make every call fail with this code.
        fail_times: fail only the first N calls (then succeed).
        model: the model name reported in results.
    """

    def __init__(
        self,
        text: str | Callable[[SummaryRequest], str] | None = None,
        *,
        fail: FailureCode | None = None,
        fail_times: int | None = None,
        model: str = "fake-summarizer",
    ) -> None:
        self.text = text
        self.fail = fail
        self.fail_times = fail_times
        self.model = model
        self.requests: list[SummaryRequest] = []

    @property
    def calls(self) -> int:
        """How many requests were received."""
        return len(self.requests)

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Return the configured summary or failure; records the request."""
        self.requests.append(request)
        early = precheck(request)
        if early is not None:
            return early
        if self.fail is not None and (self.fail_times is None or self.calls <= self.fail_times):
            return SummarizationResult.failure(f"fake failure ({self.fail})", self.fail)
        if callable(self.text):
            body = self.text(request)
        elif self.text is not None:
            body = self.text
        else:
            body = _describe(request.messages, request.previous_summary)
        usage = Usage(
            input_tokens=sum(len(m.text) for m in request.messages) // 4 + 1,
            output_tokens=len(body) // 4 + 1,
        )
        return SummarizationResult.success(body, usage=usage, model=self.model)

    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Async form of :meth:`summarize`."""
        return self.summarize(request)


def _describe(messages: Sequence[Message], previous: str | None) -> str:
    heads = "; ".join(" ".join(m.text.split()[:4]) for m in messages if m.text)
    digest = hashlib.sha256(heads.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    lead = f"{previous.strip()} | " if previous else ""
    return f"{lead}summary of {len(messages)} messages [{digest}]: {heads[:200]}"


class FixedCounter(BaseCounter):
    """Counts text as ``per_char`` tokens per character and messages with a fixed overhead.

    ``FixedCounter(per_message=10)`` with ``per_char=0`` makes every message cost exactly 10.
    """

    def __init__(self, per_message: int = 1, *, per_char: int = 1) -> None:
        self.per_char = per_char
        super().__init__(
            message_overhead=per_message,
            tool_call_overhead=0,
            tool_result_overhead=0,
            image_tokens=per_message,
        )

    def _config_key(self) -> Hashable:
        return self.per_char

    def count_text(self, text: str, /) -> int:
        return len(text) * self.per_char
