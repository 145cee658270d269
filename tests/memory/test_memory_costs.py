"""What a memory says a build cost and saved: only what happened, priced once.

Each test builds through a real :class:`ConversationMemory` on a real store, under the
built-in prices of one model, and checks a figure against what the request and its summary
calls really were: cache reads are not billed twice, an offline summary is free, a build
that was never handed back is not counted, a reopened conversation prices its full history
warm, and the calls of an attempt whose commit conflicted still count.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contextfold import Checkpoint, ConversationMemory, ExtractiveSummarizer, Message
from contextfold.errors import ConflictError
from contextfold.pricing import prices_for
from contextfold.stores.memory import InMemoryStore
from contextfold.strategies import SlidingWindow
from contextfold.summarizers.base import SummarizationResult, SummaryRequest, precheck
from contextfold.testing import FakeSummarizer
from contextfold.usage import Usage

SONNET = prices_for("claude-sonnet-4-5", source="builtin")


def invoices(memory: ConversationMemory, turns: int = 12) -> None:
    for i in range(turns):
        memory.add(Message.user(f"Question {i} about invoice INV-{i:04d}, and its refund."))
        memory.add(Message.assistant(f"Answer {i}: the refund for INV-{i:04d} is on its way."))


class Reporting:
    """A summarizer whose answers report ``usage``, as a provider's would."""

    model = "claude-sonnet-4-5"

    def __init__(self, usage: Usage) -> None:
        self.usage = usage

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        early = precheck(request)
        if early is not None:
            return early
        return SummarizationResult.success("summary text", usage=self.usage, model=self.model)


def test_a_summary_calls_cache_reads_are_priced_once() -> None:
    """``Usage.input_tokens`` counts the cache reads already: they were billed at the full
    input price as well as at the read price (5.5x the call's real cost)."""
    cached = Usage(input_tokens=9100, output_tokens=200, cache_read_tokens=9000)
    costs = []
    for usage in (cached, Usage()):
        memory = ConversationMemory(
            strategy=Checkpoint(Reporting(usage), max_tokens=300), prices=SONNET
        )
        invoices(memory)
        stats = memory.build_context().stats
        assert stats.compacted
        assert stats.estimated_cost_usd is not None
        costs.append(stats.estimated_cost_usd)
    call = SONNET.cost(uncached_tokens=100, cache_read_tokens=9000, output_tokens=200)
    assert costs[0] - costs[1] == pytest.approx(call)


def test_an_offline_summary_costs_nothing() -> None:
    memory = ConversationMemory(
        strategy=Checkpoint(ExtractiveSummarizer(), max_tokens=300), prices=SONNET
    )
    invoices(memory)
    stats = memory.build_context().stats
    assert stats.compacted
    assert stats.summarizer_tokens == 0
    assert stats.lifetime_tokens_saved == stats.tokens_saved
    # Priced as the request alone (shorter than the cacheable minimum: uncached input).
    assert stats.estimated_cost_usd == pytest.approx(
        SONNET.cost(uncached_tokens=stats.current_tokens)
    )


class _SlowTally(InMemoryStore):
    """An in-memory store whose running total takes long to read while ``slow`` is set."""

    slow = False

    async def aload_tally(self, conversation_id: str, counter: Any, /) -> Any:
        if self.slow:
            await asyncio.sleep(10)
        return await super().aload_tally(conversation_id, counter)


def test_a_cancelled_build_is_not_counted_as_sent() -> None:
    """It was counted before its total was brought up to date: the next build then read a
    cache written by a request never sent, 12x too cheap, and its savings counted twice."""

    async def main() -> tuple[Any, Any]:
        store = _SlowTally()
        writer = ConversationMemory(strategy=SlidingWindow(3000), store=store, conversation_id="c")
        for i in range(30):
            text = "lorem ipsum dolor sit amet " * 40 + str(i)
            await writer.aadd(Message.user(text) if i % 2 == 0 else Message.assistant(text))
        store.append("c", [Message.user("appended by another writer")])  # total behind

        def reader() -> ConversationMemory:
            return ConversationMemory(
                strategy=SlidingWindow(3000), store=store, conversation_id="c", prices=SONNET
            )

        cancelled = reader()
        store.slow = True
        task = asyncio.create_task(cancelled.abuild_context())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        store.slow = False
        after = (await cancelled.abuild_context()).stats
        first = (await reader().abuild_context()).stats
        return after, first

    after, first = asyncio.run(main())
    assert after.stable_prefix_tokens is None  # nothing was sent before it
    assert after.estimated_cost_usd == pytest.approx(first.estimated_cost_usd)
    assert after.lifetime_cost_usd == pytest.approx(first.lifetime_cost_usd)
    assert after.lifetime_tokens_saved == first.lifetime_tokens_saved


def test_a_reopened_conversation_prices_its_full_history_from_the_first_build() -> None:
    store = InMemoryStore()
    writer = ConversationMemory(strategy=SlidingWindow(600), store=store, conversation_id="c")
    for i in range(40):
        writer.add(Message.user(f"question {i}: " + "about the order and its refund " * 6))
        writer.add(Message.assistant(f"answer {i}: " + "the refund went out today " * 6))
    store.append("c", [Message.user("one more from elsewhere")])  # the total is behind
    reopened = ConversationMemory(
        strategy=SlidingWindow(600), store=store, conversation_id="c", prices=SONNET
    )
    first = reopened.build_context().stats
    assert first.total_tokens is not None
    assert first.full_history_cost_usd is not None
    assert first.lifetime_full_history_cost_usd == pytest.approx(first.full_history_cost_usd)
    reopened.add(Message.user("and the invoice?"))
    second = reopened.build_context().stats
    assert second.full_history_cost_usd is not None
    # The full history is in the cache written a moment ago: a read, not a rewrite.
    assert second.full_history_cost_usd < first.full_history_cost_usd / 5
    assert second.lifetime_full_history_cost_usd == pytest.approx(
        first.full_history_cost_usd + second.full_history_cost_usd
    )


class _ConflictingOnce(InMemoryStore):
    """Refuses the first checkpoint commit, as when another process committed first."""

    conflicts = 1

    def append_checkpoint(self, conversation_id: str, checkpoint: Any, /, **kw: Any) -> Any:
        if self.conflicts:
            self.conflicts -= 1
            raise ConflictError("another process stored a checkpoint first")
        return super().append_checkpoint(conversation_id, checkpoint, **kw)


def test_the_summary_calls_of_a_conflicted_attempt_still_count() -> None:
    summarizer = FakeSummarizer()
    memory = ConversationMemory(
        strategy=Checkpoint(summarizer, max_tokens=300),
        store=_ConflictingOnce(),
        conversation_id="c",
    )
    invoices(memory, 10)
    stats = memory.build_context().stats
    assert summarizer.calls == 2
    assert any("conflicted" in note for note in stats.notes)
    one = FakeSummarizer()
    single = ConversationMemory(strategy=Checkpoint(one, max_tokens=300))
    invoices(single, 10)
    assert stats.summarizer_tokens == 2 * single.build_context().stats.summarizer_tokens > 0


def test_a_retried_append_keeps_the_memorys_lifetime_figures() -> None:
    """A message appended again (a retry after a lost reply) is acknowledged at the seq it
    holds: that is no sign of a log written again, and nothing the memory counted is lost."""
    memory = ConversationMemory(strategy=SlidingWindow(300), prices=SONNET)
    invoices(memory)
    question = Message.user("And the refund for INV-0003?", id="q-1")
    memory.add(question)
    first = memory.build_context().stats
    memory.add(question)  # the retry: stored once, acknowledged
    second = memory.build_context().stats
    assert second.message_count == first.message_count
    assert second.stable_prefix_tokens is not None  # the cache simulation went on
    assert second.lifetime_tokens_saved == first.tokens_saved + second.tokens_saved
    assert second.lifetime_cost_usd == pytest.approx(
        first.estimated_cost_usd + second.estimated_cost_usd
    )
