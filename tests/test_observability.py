"""Logs and spans of builds, compactions and fallbacks (``contextfold.observability``)."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from contextfold import ConversationMemory, Message
from contextfold.strategies import Checkpoint, SlidingWindow, arun, run
from contextfold.testing import FakeSummarizer

trace = pytest.importorskip("opentelemetry.trace")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
export = pytest.importorskip("opentelemetry.sdk.trace.export")
in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")


def chat(n: int) -> list[Message]:
    out = [Message.system("You are the billing assistant.")]
    for i in range(n):
        out.append(Message.user(f"Question {i} about invoice INV-{i:04d} and its refund. " * 3))
        out.append(Message.assistant(f"Answer {i}: the refund for INV-{i:04d} is on its way. " * 3))
    return out


def compacting_memory(summarizer: FakeSummarizer) -> ConversationMemory:
    memory = ConversationMemory(strategy=Checkpoint(summarizer, max_tokens=400))
    memory.extend(chat(12))
    return memory


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An in-memory exporter behind an SDK provider, seen by contextfold for this test only.

    The global provider can be set once per process; the accessor is patched instead, so
    the rest of the suite keeps OpenTelemetry's no-op default.
    """
    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    yield exporter
    provider.shutdown()


# -- logging ------------------------------------------------------------------------------


def test_compaction_and_build_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    summarizer = FakeSummarizer(model="fake-model")
    with caplog.at_level(logging.DEBUG, logger="contextfold"):
        compacting_memory(summarizer).build_context()
    by_logger = {r.name: r for r in caplog.records}
    build = by_logger["contextfold.build"]
    assert build.levelno == logging.DEBUG
    compaction = by_logger["contextfold.compaction"]
    assert compaction.levelno == logging.INFO
    figures = compaction.contextfold  # type: ignore[attr-defined]
    assert figures["contextfold.strategy"] == "checkpoint"
    assert figures["contextfold.tokens.before"] > figures["contextfold.tokens.after"]
    assert figures["contextfold.tokens.after"] <= 400
    assert figures["contextfold.compacted"] is True
    assert figures["gen_ai.request.model"] == "fake-model"
    assert "contextfold.fallback" not in by_logger
    assert summarizer.calls == 1


def test_summarizer_fallback_is_a_warning_with_its_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="contextfold"):
        compacting_memory(FakeSummarizer(fail="timeout")).build_context()
    [record] = [r for r in caplog.records if r.name == "contextfold.fallback"]
    assert record.levelno == logging.WARNING
    reason = record.contextfold["contextfold.fallback.reason"]  # type: ignore[attr-defined]
    assert reason
    assert reason in record.getMessage()
    assert record.contextfold["contextfold.failure_code"] == "timeout"  # type: ignore[attr-defined]
    # Only WARNING was asked for: no build or compaction records.
    assert {r.name for r in caplog.records} == {"contextfold.fallback"}


def test_a_plain_window_logs_no_compaction(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="contextfold"):
        run(SlidingWindow(200), chat(12))
    names = [r.name for r in caplog.records]
    assert names == ["contextfold.build"]
    assert caplog.records[0].contextfold["contextfold.origin"] == "run"  # type: ignore[attr-defined]


def test_silent_unless_configured() -> None:
    # Python prints warnings of unconfigured libraries to stderr ("last resort"), unless the
    # library has a handler: the NullHandler on "contextfold" keeps a fallback quiet.
    code = (
        "from contextfold import ConversationMemory, Checkpoint, Message\n"
        "from contextfold.testing import FakeSummarizer\n"
        "m = ConversationMemory(strategy=Checkpoint(FakeSummarizer(fail='error'), max_tokens=60))\n"
        "m.extend([Message.user('w ' * 80), Message.assistant('ok ' * 80), Message.user('hi')])\n"
        "assert m.build_context().stats.fallback\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


# -- spans --------------------------------------------------------------------------------


def test_memory_build_and_compaction_spans(spans: Any) -> None:
    compacting_memory(FakeSummarizer(model="fake-model")).build_context()
    finished = {s.name: s for s in spans.get_finished_spans()}
    build, compaction = finished["contextfold.build"], finished["contextfold.compaction"]
    assert compaction.parent is not None
    assert compaction.parent.span_id == build.context.span_id
    attrs = build.attributes
    assert attrs["contextfold.origin"] == "memory"
    assert attrs["contextfold.strategy"] == "checkpoint"
    assert attrs["contextfold.tokens.before"] > attrs["contextfold.tokens.after"]
    assert attrs["contextfold.fallback"] is False
    assert compaction.attributes["gen_ai.request.model"] == "fake-model"
    assert compaction.attributes["gen_ai.usage.output_tokens"] > 0
    assert compaction.attributes["contextfold.checkpoint.id"].startswith("ckpt_")
    assert build.start_time <= compaction.start_time <= compaction.end_time <= build.end_time


def test_build_spans_count_what_the_memory_stats_count(spans: Any, tmp_path: Any) -> None:
    """A build on a checkpoint, or a window over a reopened log, does not read the older
    messages: the span counted only what the strategy saw (1 summarized against 16)."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    first = ConversationMemory(
        strategy=Checkpoint(FakeSummarizer(), max_tokens=300), store=url, conversation_id="c"
    )
    first.extend(chat(10))
    first.build_context()
    first.add(Message.user("one more question"))
    for memory in (
        first,
        ConversationMemory(
            strategy=Checkpoint(FakeSummarizer(), max_tokens=300), store=url, conversation_id="c"
        ),
        ConversationMemory(strategy=SlidingWindow(120), store=url, conversation_id="c"),
    ):
        spans.clear()
        stats = memory.build_context().stats
        assert stats.summarized_count + stats.dropped_count > 0
        build = next(s for s in spans.get_finished_spans() if s.name == "contextfold.build")
        assert build.attributes["contextfold.messages.summarized"] == stats.summarized_count
        assert build.attributes["contextfold.messages.dropped"] == stats.dropped_count


def test_reused_summary_makes_no_compaction_span(spans: Any) -> None:
    memory = compacting_memory(FakeSummarizer())
    memory.build_context()
    spans.clear()
    memory.add(Message.user("One more question."))
    memory.build_context()
    names = [s.name for s in spans.get_finished_spans()]
    assert names == ["contextfold.build"]
    attrs = spans.get_finished_spans()[0].attributes
    assert attrs["contextfold.checkpoint.id"].startswith("ckpt_")
    assert attrs["contextfold.summary_calls"] == 0


def test_fallback_span_carries_the_reason(spans: Any) -> None:
    compacting_memory(FakeSummarizer(fail="error")).build_context()
    [build] = [s for s in spans.get_finished_spans() if s.name == "contextfold.build"]
    assert build.attributes["contextfold.fallback"] is True
    assert build.attributes["contextfold.fallback.reason"]
    assert [e.name for e in build.events] == ["contextfold.fallback"]


async def test_run_and_arun_spans_agree(spans: Any) -> None:
    history = chat(12)
    run(SlidingWindow(200), history)
    await arun(SlidingWindow(200), history)
    first, second = spans.get_finished_spans()
    assert first.attributes == second.attributes
    assert first.attributes["contextfold.origin"] == "run"


def test_span_nests_under_the_applications_span(spans: Any) -> None:
    tracer = trace.get_tracer_provider().get_tracer("app")
    with tracer.start_as_current_span("handle request") as outer:
        run(SlidingWindow(200), chat(3))
    build = next(s for s in spans.get_finished_spans() if s.name == "contextfold.build")
    assert build.parent is not None
    assert build.parent.span_id == outer.get_span_context().span_id


def test_build_spans_carry_the_cache_figures(spans: Any) -> None:
    """With prices, each build's span says what the cache can serve and what it cost."""
    memory = ConversationMemory(strategy=SlidingWindow(4_000), prices="claude-sonnet-4-5")
    memory.extend(chat(10))
    memory.build_context()
    memory.add(Message.user("And one more thing."))
    memory.build_context()
    first, second = (s.attributes for s in spans.get_finished_spans())
    assert "contextfold.cache.stable_prefix_tokens" not in first  # nothing to compare with
    assert second["contextfold.cache.stable_prefix_tokens"] > 0
    assert second["contextfold.cost.estimated_usd"] > 0
    assert second["contextfold.cost.full_history_usd"] > 0
