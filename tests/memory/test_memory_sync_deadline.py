"""A sync build bounds a sync summarizer by the strategy's ``deadline_s``, as the async one does."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator

import pytest

from contextfold.memory import ConversationMemory
from contextfold.messages import Message
from contextfold.strategies.run import run
from contextfold.strategies.summarization import Summarization
from contextfold.summarizers.base import SummarizationResult, SummaryRequest
from contextfold.testing import FakeSummarizer

TRACE: contextvars.ContextVar[str] = contextvars.ContextVar("trace", default="none")


class Hanging:
    """A sync summarizer that does not answer until released (or 5 s pass)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.seen_trace: list[str] = []

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        self.seen_trace.append(TRACE.get())
        self.release.wait(5.0)
        return SummarizationResult.success("a summary that came too late")


@pytest.fixture
def hanging() -> Iterator[Hanging]:
    summarizer = Hanging()
    yield summarizer
    summarizer.release.set()  # let the abandoned worker thread finish


def _history() -> list[Message]:
    out = [Message.system("You are a support agent.")]
    for i in range(30):
        out.append(Message.user(f"question {i}: " + "about my order " * 6))
        out.append(Message.assistant(f"answer {i}: " + "here is the status " * 5))
    return out


def test_sync_build_context_stops_waiting_for_a_sync_summarizer_at_the_deadline(
    hanging: Hanging,
) -> None:
    strategy = Summarization(400, keep_recent=4, summarizer=hanging, deadline_s=1.0)
    memory = ConversationMemory(strategy=strategy)
    memory.extend(_history())
    started = time.monotonic()
    context = memory.build_context()
    elapsed = time.monotonic() - started
    assert elapsed < 3.0, f"waited {elapsed:.1f} s with a 1 s deadline"
    assert context.stats.fallback
    assert "deadline" in (context.stats.fallback_reason or "")
    assert not context.stats.compacted


def test_sync_run_bounds_a_sync_summarizer_and_keeps_context_variables(
    hanging: Hanging,
) -> None:
    strategy = Summarization(400, keep_recent=4, summarizer=hanging, deadline_s=0.5)
    token = TRACE.set("request-7")
    try:
        started = time.monotonic()
        result = run(strategy, _history())
    finally:
        TRACE.reset(token)
    assert time.monotonic() - started < 2.5
    assert result.failure_code == "timeout"
    assert hanging.seen_trace == ["request-7"]


def test_a_summarizer_within_its_deadline_is_answered_as_before() -> None:
    fake = FakeSummarizer("The user asked about orders; each was answered.")
    strategy = Summarization(400, keep_recent=4, summarizer=fake, deadline_s=30.0)
    result = run(strategy, _history())
    assert result.checkpoint is not None
    assert result.fallback is None
    assert fake.calls == 1
