"""ConversationMemory: building, stats, checkpoints, locking, restoring and reading cost."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import (
    BudgetError,
    ConfigError,
    ConflictError,
    FormatError,
    PairingError,
    StoreError,
)
from contextfold.memory import Context, ContextPlan, ConversationMemory, MemoryStats
from contextfold.messages import Message, ToolCallPart
from contextfold.stores.base import StoredMessage
from contextfold.stores.memory import InMemoryStore
from contextfold.stores.sqlite import SQLiteStore
from contextfold.strategies.base import PlanGenerator, StrategyState
from contextfold.strategies.checkpoint import Checkpoint
from contextfold.strategies.compactor import SummaryCompactor
from contextfold.strategies.hybrid import Hybrid
from contextfold.strategies.pipeline import Pipeline
from contextfold.strategies.prune import PruneToolOutputs
from contextfold.strategies.run import run
from contextfold.strategies.sliding import SlidingWindow
from contextfold.strategies.summarization import Summarization
from contextfold.summarizers.base import SummarizationResult, SummaryRequest
from contextfold.testing import FakeSummarizer, FixedCounter
from contextfold.tokens.approx import ApproxCounter
from contextfold.tokens.base import TokenCounter

IN_CI = bool(os.environ.get("CI"))
SUMMARY = "The user asked many questions about their order; every one was answered."


# -- helpers -------------------------------------------------------------------------------


def chat(n_turns: int, *, system: str | None = "You are a support agent.") -> list[Message]:
    """A plain chat: optional system message, then user/assistant turns of ~30 tokens each."""
    out: list[Message] = [Message.system(system)] if system else []
    for i in range(n_turns):
        out.append(Message.user(f"question {i}: " + "about my order " * 6))
        out.append(Message.assistant(f"answer {i}: " + "here is the status " * 5))
    return out


def tool_turn(i: int) -> list[Message]:
    """A turn with two parallel tool calls."""
    a, b = f"call_{i}_a", f"call_{i}_b"
    return [
        Message.user(f"look up order {i}"),
        Message.assistant(
            tool_calls=[ToolCallPart(a, "lookup", '{"n": 1}'), ToolCallPart(b, "lookup", "{}")]
        ),
        Message.tool_result(a, "shipped " * 10),
        Message.tool_result(b, "paid " * 10),
        Message.assistant(f"order {i} is shipped and paid"),
    ]


def ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.text for m in messages]


class CountingStore(InMemoryStore):
    """An in-memory store that records how many rows each read returned."""

    def __init__(self) -> None:
        super().__init__()
        self.rows_read = 0
        self.reads = 0

    def read(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        rows = super().read(conversation_id, after_seq=after_seq, limit=limit)
        self.reads += 1
        self.rows_read += len(rows)
        return rows

    async def aread(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        return self.read(conversation_id, after_seq=after_seq, limit=limit)


class Recording:
    """A strategy that delegates to another and records the history it was given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seen: list[list[Message]] = []
        self.checkpoints: list[CheckpointRecord | None] = []

    @property
    def name(self) -> str:
        return str(self.inner.name)

    def accepts_checkpoint(self, record: CheckpointRecord) -> bool:
        """The wrapped strategy's checkpoints (a pipeline's stages' included)."""
        owners = {self.name, *(s.name for s in getattr(self.inner, "stages", ()))}
        return record.strategy in owners

    def plan(
        self,
        messages: Sequence[Message],
        /,
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None = None,
        state: StrategyState | None = None,
    ) -> PlanGenerator:
        self.seen.append(list(messages))
        self.checkpoints.append(checkpoint)
        result = yield from self.inner.plan(
            messages, counter=counter, checkpoint=checkpoint, state=state
        )
        return result


def hybrid(summarizer: Any, max_tokens: int = 400) -> Hybrid:
    return Hybrid(max_tokens, keep_recent=4, chunk_size=4, summarizer=summarizer, max_chunks=64)


def _redis_url() -> str | None:
    return os.environ.get("CONTEXTFOLD_TEST_REDIS_URL")


def _postgres_url() -> str | None:
    return os.environ.get("CONTEXTFOLD_TEST_POSTGRES_URL")


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Every store backend; the real-server ones only when their URL is set."""
    kind = request.param
    if kind == "memory":
        yield InMemoryStore()
        return
    if kind == "sqlite":
        s = SQLiteStore(f"sqlite:///{tmp_path / 'memory.db'}")
        yield s
        s.close()
        return
    url = _redis_url() if kind == "redis" else _postgres_url()
    if not url:
        if IN_CI:
            pytest.fail(f"CONTEXTFOLD_TEST_{kind.upper()}_URL must be set in CI")
        pytest.skip(f"no {kind} server configured")
    from contextfold.stores import open_store

    s = open_store(url)
    before = set(s.list_conversations())
    yield s
    for cid in set(s.list_conversations()) - before:  # leave the shared server as it was
        s.delete(cid)
    s.close()


# -- the seed quick start and stats ----------------------------------------------------------


def test_seed_quick_start_support_chat() -> None:
    memory = ConversationMemory()  # SlidingWindow(8000), InMemoryStore, ApproxCounter
    memory.add(Message.user("Hello, I need help with my order"))
    memory.add(Message.assistant("Sure, what is your order number?"))
    memory.add(Message.user("It is 48213"))
    ctx = memory.build_context()
    assert texts(ctx) == [
        "Hello, I need help with my order",
        "Sure, what is your order number?",
        "It is 48213",
    ]
    stats = ctx.stats
    assert memory.stats is stats
    # ApproxCounter: ceil(len/4) + 3 per message: 8+3, 8+3, 3+3.
    assert stats.current_tokens == 28
    assert stats.total_tokens == 28
    assert stats.tokens_saved == 0
    assert stats.message_count == 3
    assert stats.context_message_count == 3
    assert stats.compression_ratio == 1.0
    assert stats.is_summarized is False
    assert stats.strategy == "sliding"
    assert stats.fallback is False
    assert stats.lifetime_tokens_saved == 0


def test_stats_arithmetic_with_fixed_counter() -> None:
    counter = FixedCounter(10, per_char=0)  # every message costs exactly 10 tokens
    memory = ConversationMemory(strategy=SlidingWindow(45), counter=counter)
    memory.extend(chat(3))  # system + 6 messages = 70 tokens
    ctx = memory.build_context()
    # Room after the system prompt: 35 -> only the newest whole turn (20) fits.
    assert texts(ctx)[0] == "You are a support agent."
    assert len(ctx) == 3
    s = ctx.stats
    assert (s.current_tokens, s.total_tokens, s.tokens_saved) == (30, 70, 40)
    assert s.compression_ratio == pytest.approx(30 / 70)
    assert (s.message_count, s.context_message_count, s.dropped_count) == (7, 3, 4)
    assert s.summarized_count == 0
    assert s.lifetime_tokens_saved == 40
    # A second build after one more turn: 90 tokens stored, 30 sent.
    memory.extend(chat(1, system=None))
    s2 = memory.build_context().stats
    assert (s2.current_tokens, s2.total_tokens, s2.tokens_saved) == (30, 90, 60)
    assert s2.lifetime_tokens_saved == 40 + 60
    assert s.lifetime_tokens_saved == 40  # an earlier snapshot does not move


def test_lifetime_savings_are_net_of_summarizer_cost() -> None:
    fake = FakeSummarizer(SUMMARY)
    memory = ConversationMemory(strategy=hybrid(fake))
    memory.extend(chat(30))
    first = memory.build_context().stats
    assert first.compacted
    assert first.summarizer_tokens > 0
    assert first.lifetime_tokens_saved == first.tokens_saved - first.summarizer_tokens
    second = memory.build_context().stats
    assert second.summarizer_tokens == 0
    assert second.lifetime_tokens_saved == (
        first.tokens_saved + second.tokens_saved - first.summarizer_tokens
    )


def test_a_limit_that_stopped_the_strategy_is_in_the_stats() -> None:
    bounded = Hybrid(100, keep_recent=2, chunk_size=2, summarizer=FakeSummarizer("S"), max_chunks=2)
    memory = ConversationMemory(strategy=bounded, counter=FixedCounter(10, per_char=0))
    memory.extend(chat(20, system=None))
    stats = memory.build_context().stats
    assert stats.dropped_count > 0
    assert stats.limit_reached is not None
    assert stats.limit_reached.startswith("max_chunks=2: ")
    assert stats.as_dict()["limit_reached"] == stats.limit_reached
    # without the bound the same history is folded whole, and nothing is dropped
    whole = Hybrid(100, keep_recent=2, chunk_size=2, summarizer=FakeSummarizer("S"))
    unbounded = ConversationMemory(strategy=whole, counter=FixedCounter(10, per_char=0))
    unbounded.extend(chat(20, system=None))
    free = unbounded.build_context().stats
    assert (free.dropped_count, free.limit_reached) == (0, None)


def test_tools_are_counted_and_returned() -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    counter = ApproxCounter()
    memory = ConversationMemory(tools=tools, counter=counter)
    memory.add(Message.user("hi"))
    ctx = memory.build_context()
    assert ctx.stats.tools_tokens == counter.count_tools(tools) > 0
    assert ctx.tools == tuple(tools)


# -- sync / async parity -----------------------------------------------------------------------


async def test_sync_and_async_give_the_same_contexts(tmp_path: Path) -> None:
    history = chat(25)
    results: list[list[tuple[list[str], dict[str, Any]]]] = []
    for use_async in (False, True):
        fake = FakeSummarizer(SUMMARY)
        store = SQLiteStore(f"sqlite:///{tmp_path / f'parity{use_async}.db'}")
        memory = ConversationMemory(strategy=hybrid(fake), store=store, conversation_id="c1")
        seen = []
        for chunk in (history[:21], history[21:41], history[41:]):
            if use_async:
                await memory.aextend(chunk)
                ctx = await memory.abuild_context()
            else:
                memory.extend(chunk)
                ctx = memory.build_context()
            d = ctx.stats.as_dict()
            d.pop("checkpoint_id")
            seen.append((texts(ctx), d))
        results.append(seen)
        store.close()
    assert results[0] == results[1]
    assert any(d["compacted"] for _, d in results[0])


# -- plan() ------------------------------------------------------------------------------------


def test_plan_calls_no_summarizer_and_persists_nothing() -> None:
    fake = FakeSummarizer(SUMMARY)
    store = InMemoryStore()
    memory = ConversationMemory(strategy=hybrid(fake), store=store)
    memory.extend(chat(30))
    plan = memory.plan()
    assert isinstance(plan, ContextPlan)
    assert fake.calls == 0
    assert store.checkpoints(memory.conversation_id) == []
    assert memory.stats is None  # a plan is not a build
    assert plan.would_summarize
    assert plan.summary_calls > 0
    assert "[dry run" in plan.messages[1].text
    # Every stored seq is accounted for exactly once.
    covered = sorted(s for r in (*plan.kept, *plan.dropped, *plan.summarized) for s in r)
    assert covered == list(range(1, 62))
    assert plan.stats.message_count == 61
    assert plan.stats.summarizer_tokens == 0
    assert plan.stats.compacted is False
    # The plan agrees with the real build on what is kept verbatim.
    ctx = memory.build_context()
    assert fake.calls > 0
    kept_seqs = [s for r in plan.kept for s in r]
    full = memory.read_messages()
    assert ids(full[s - 1] for s in kept_seqs[1:]) == ids(ctx.messages[1:])  # type: ignore[arg-type]


def test_plan_of_sliding_window_ranges() -> None:
    memory = ConversationMemory(strategy=SlidingWindow(45), counter=FixedCounter(10, per_char=0))
    memory.extend(chat(3))
    plan = memory.plan()
    assert plan.kept == (range(1, 2), range(6, 8))
    assert plan.dropped == (range(2, 6),)
    assert plan.summarized == ()
    assert plan.summary_calls == 0
    assert plan.stats.tokens_saved == 40


def test_plan_of_an_opened_long_conversation_accounts_for_unread_messages() -> None:
    store = CountingStore()
    store.append("long", chat(400))
    memory = ConversationMemory.open(store, conversation_id="long", strategy=SlidingWindow(500))
    store.rows_read = 0
    plan = memory.plan()
    assert store.rows_read <= 64
    assert plan.kept[0] == range(1, 2)
    assert plan.kept[-1].stop == 802
    assert plan.dropped == (range(2, plan.kept[-1].start),)
    assert sum(len(r) for r in (*plan.kept, *plan.dropped)) == 801
    assert plan.stats.dropped_count == len(plan.dropped[0])


# -- checkpoints -------------------------------------------------------------------------------


def test_two_builds_make_one_summarizer_call(store: Any) -> None:
    fake = FakeSummarizer(SUMMARY)
    strategy = Recording(hybrid(fake))
    memory = ConversationMemory(strategy=strategy, store=store)
    memory.extend(chat(30))
    first = memory.build_context()
    calls = fake.calls
    assert calls >= 1
    assert first.stats.compacted
    assert first.checkpoint is not None
    stored = store.checkpoints(memory.conversation_id)
    assert [c.id for c in stored] == [first.checkpoint.id]
    assert stored[0].last_covered_seq is not None
    second = memory.build_context()
    assert fake.calls == calls  # the span was summarized once
    assert second.stats.compacted is False
    assert second.checkpoint is not None
    assert second.checkpoint.id == first.checkpoint.id
    assert second.stats.is_summarized
    assert texts(second) == texts(first)
    # The second build handed the strategy only the prefix, the newest covered message (so
    # the checkpoint is found by position) and what follows it.
    covered = stored[0].last_covered_seq
    assert len(strategy.seen[1]) == 1 + 1 + (61 - covered)
    assert strategy.seen[1][1].id == stored[0].last_covered_id
    assert strategy.checkpoints[1] is not None
    assert second.stats.summarized_count == covered - 1


def make_strategy(kind: str, fake: FakeSummarizer) -> Any:
    if kind == "hybrid":
        return hybrid(fake)
    if kind == "summary":
        return Summarization(400, keep_recent=4, summarizer=fake)
    if kind == "checkpoint":
        return Checkpoint(fake, max_tokens=600)
    if kind == "compactor":
        return SummaryCompactor(fake, keep_recent_turns=4)
    return Pipeline([PruneToolOutputs(), hybrid(fake, 600)], max_tokens=600)


@pytest.mark.parametrize("kind", ["hybrid", "summary", "checkpoint", "compactor", "pipeline"])
def test_strategies_honour_the_checkpoint_contract(kind: str) -> None:
    """Given prefix + messages after the checkpoint, a strategy builds the same context as
    from the full history with the checkpoint inside it, and does not summarize again."""
    fake = FakeSummarizer(SUMMARY)
    strategy = Recording(make_strategy(kind, fake))
    memory = ConversationMemory(strategy=strategy)
    memory.extend(chat(30))
    first = memory.build_context()
    assert first.stats.compacted
    calls = fake.calls
    again = memory.build_context()
    assert fake.calls == calls
    assert texts(again) == texts(first)
    ckpt = memory.store.latest_checkpoint(memory.conversation_id)
    assert ckpt is not None
    # The prefix, the newest covered message, and what follows it.
    assert len(strategy.seen[1]) == 1 + 1 + 61 - ckpt.last_covered_seq
    memory.extend(chat(2, system=None))
    ctx = memory.build_context()
    ckpt = memory.store.latest_checkpoint(memory.conversation_id)
    assert ckpt is not None
    direct = run(
        make_strategy(kind, FakeSummarizer(SUMMARY)),
        memory.read_messages(),
        counter=memory.counter,
        checkpoint=ckpt,
    )
    assert texts(direct.messages) == texts(ctx)


def test_a_pipeline_reuses_its_stages_checkpoints() -> None:
    fake = FakeSummarizer(SUMMARY)
    memory = ConversationMemory(strategy=make_strategy("pipeline", fake))
    memory.extend(chat(30))
    first = memory.build_context()
    assert first.checkpoint is not None
    assert first.checkpoint.strategy == "hybrid"  # made by the pipeline's summarizing stage
    calls = fake.calls
    second = memory.build_context()
    assert fake.calls == calls
    assert second.checkpoint is not None
    assert second.checkpoint.id == first.checkpoint.id


def test_new_messages_extend_the_checkpoint_later() -> None:
    fake = FakeSummarizer(SUMMARY)
    memory = ConversationMemory(strategy=hybrid(fake))
    memory.extend(chat(30))
    first = memory.build_context()
    memory.extend(chat(20, system=None))
    second = memory.build_context()
    assert second.stats.compacted
    assert second.checkpoint is not None
    assert first.checkpoint is not None
    assert second.checkpoint.previous_id == first.checkpoint.id
    chain = memory.store.checkpoints(memory.conversation_id)
    assert [c.id for c in chain] == [first.checkpoint.id, second.checkpoint.id]
    assert chain[1].last_covered_seq > chain[0].last_covered_seq


def test_lock_held_elsewhere_builds_without_compacting(store: Any) -> None:
    fake = FakeSummarizer(SUMMARY)
    memory = ConversationMemory(strategy=hybrid(fake), store=store)
    memory.extend(chat(30))
    with store.compaction_lock(memory.conversation_id) as taken:
        assert taken
        ctx = memory.build_context()
    assert fake.calls == 0
    assert store.checkpoints(memory.conversation_id) == []
    assert ctx.stats.fallback is True
    assert "compaction lock" in (ctx.stats.fallback_reason or "")
    assert ctx.stats.is_summarized is False
    assert ctx.stats.current_tokens <= 400
    # Once the lock is free, the next build compacts.
    after = memory.build_context()
    assert after.stats.compacted
    assert fake.calls > 0


async def test_lock_held_elsewhere_async(tmp_path: Path) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path / 'lock.db'}")
    fake = FakeSummarizer(SUMMARY)
    memory = ConversationMemory(strategy=hybrid(fake), store=store)
    await memory.aextend(chat(30))
    async with store.acompaction_lock(memory.conversation_id) as taken:
        assert taken
        ctx = await memory.abuild_context()
    assert fake.calls == 0
    assert ctx.stats.fallback
    store.close()


def test_a_busy_lock_does_not_trip_the_strategys_loop_guard() -> None:
    """Builds skipped because another process compacts are not failed compactions: once the
    lock is free, this process compacts again."""
    store = InMemoryStore()
    fake = FakeSummarizer(SUMMARY)
    strategy = hybrid(fake)
    memory = ConversationMemory(strategy=strategy, store=store)
    memory.extend(chat(30))
    with store.compaction_lock(memory.conversation_id):
        for _ in range(5):
            assert "compaction lock" in (memory.build_context().stats.fallback_reason or "")
    assert memory.strategy_state.failed_compactions == 0
    after = memory.build_context()
    assert after.stats.compacted
    assert fake.calls > 0


def test_plan_leaves_the_strategy_state_alone() -> None:
    failing = FakeSummarizer(SUMMARY, fail="error")
    strategy = hybrid(failing)
    memory = ConversationMemory(strategy=strategy)
    memory.extend(chat(30))
    for _ in range(3):
        assert memory.build_context().stats.fallback
    tripped = memory.strategy_state
    assert tripped.failed_compactions >= strategy.max_failed_compactions
    memory.plan()  # a dry run "succeeds", but says nothing about the real summarizer
    assert memory.strategy_state == tripped


def test_lock_busy_falls_back_to_the_stored_checkpoint() -> None:
    store = InMemoryStore()
    fake = FakeSummarizer(SUMMARY)
    memory = ConversationMemory(strategy=hybrid(fake), store=store)
    memory.extend(chat(30))
    first = memory.build_context()
    calls = fake.calls
    memory.extend(chat(20, system=None))  # enough to need another compaction
    with store.compaction_lock(memory.conversation_id):
        ctx = memory.build_context()
    assert fake.calls == calls
    assert ctx.stats.fallback
    assert store.latest_checkpoint(memory.conversation_id).id == first.checkpoint.id  # type: ignore[union-attr]
    # The context still carries the stored summary, with the newest messages after it.
    assert ctx.checkpoint is not None
    assert ctx.checkpoint.id == first.checkpoint.id  # type: ignore[union-attr]
    assert ctx.stats.is_summarized
    assert SUMMARY in ctx.messages[1].text
    assert ctx.stats.current_tokens <= 400


def test_commit_conflict_reloads_and_rebuilds_once() -> None:
    store = InMemoryStore()
    cid = "conflict"
    other = ConversationMemory(
        strategy=hybrid(FakeSummarizer(SUMMARY)), store=store, conversation_id=cid
    )
    rival: list[CheckpointRecord] = []

    def summarize_and_race(request: SummaryRequest) -> str:
        # While this process summarizes, another one commits a checkpoint (its lock
        # expired, say): our commit must be rejected, and we rebuild on theirs.
        if not rival:
            rec = CheckpointRecord(
                summary="the rival summary",
                last_covered_id=other.read_messages()[20].id,
                strategy="hybrid",
                last_covered_seq=21,
            )
            rival.append(store.append_checkpoint(cid, rec, expected_previous=None))
        return SUMMARY

    fake = FakeSummarizer(summarize_and_race)
    memory = ConversationMemory(strategy=hybrid(fake), store=store, conversation_id=cid)
    memory.extend(chat(30))
    ctx = memory.build_context()
    chain = store.checkpoints(cid)
    assert chain[0].id == rival[0].id
    assert len(chain) == 2
    assert chain[1].previous_id == rival[0].id
    assert ctx.checkpoint is not None
    assert ctx.checkpoint.id == chain[1].id
    assert any("conflict" in n for n in ctx.stats.notes)


def test_a_second_conflict_is_raised() -> None:
    store = InMemoryStore()
    cid = "conflict2"

    def always_race(request: SummaryRequest) -> str:
        prev = store.latest_checkpoint(cid)
        rec = CheckpointRecord(
            summary="rival", last_covered_id=seed[3].id, strategy="other", last_covered_seq=4
        )
        store.append_checkpoint(cid, rec, expected_previous=prev.id if prev else None)
        return SUMMARY

    seed = chat(30)
    memory = ConversationMemory(
        strategy=hybrid(FakeSummarizer(always_race)), store=store, conversation_id=cid
    )
    memory.extend(seed)
    with pytest.raises(ConflictError):
        memory.build_context()
    assert memory.read_messages() == seed  # nothing stored was lost


class SlowSummarizer:
    """An async summarizer that waits until cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        self.started.set()
        await asyncio.sleep(30)
        return SummarizationResult.success(SUMMARY)


async def test_a_cancelled_build_changes_nothing() -> None:
    store = InMemoryStore()
    slow = SlowSummarizer()
    memory = ConversationMemory(strategy=hybrid(slow), store=store)
    await memory.aextend(chat(30))
    task = asyncio.create_task(memory.abuild_context())
    await asyncio.wait_for(slow.started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cid = memory.conversation_id
    assert store.checkpoints(cid) == []
    assert len(await memory.aread_messages()) == 61  # nothing stored was touched
    with store.compaction_lock(cid) as taken:
        assert taken  # released on cancellation
    again = ConversationMemory(
        strategy=hybrid(FakeSummarizer(SUMMARY)), store=store, conversation_id=cid
    )
    assert (await again.abuild_context()).stats.compacted


async def test_concurrent_async_builds_on_one_memory_run_one_at_a_time() -> None:
    class Sleepy:
        def __init__(self) -> None:
            self.calls = 0

        async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
            self.calls += 1
            await asyncio.sleep(0.01)
            return SummarizationResult.success(SUMMARY)

    sleepy = Sleepy()
    store = InMemoryStore()
    memory = ConversationMemory(strategy=hybrid(sleepy), store=store)
    await memory.aextend(chat(30))
    contexts = await asyncio.gather(*(memory.abuild_context() for _ in range(3)))
    assert [c.stats.compacted for c in contexts].count(True) == 1
    assert not any(c.stats.fallback for c in contexts)
    assert len({tuple(texts(c)) for c in contexts}) == 1
    assert len(store.checkpoints(memory.conversation_id)) == 1


def test_threads_sharing_one_memory_wait_for_each_other(tmp_path: Path) -> None:
    memory = ConversationMemory(
        strategy=SlidingWindow(300), store=SQLiteStore(f"sqlite:///{tmp_path / 't.db'}")
    )
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(20):
                memory.add(Message.user(f"thread {k} message {i}"))
                ctx = memory.build_context()
                assert ctx.stats.current_tokens <= 300
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    final = memory.build_context()
    # The window the memory kept extends as a stateless one would, from where it began.
    expected = run(
        SlidingWindow(300),
        memory.read_messages(),
        counter=memory.counter,
        state=memory.strategy_state,
    )
    assert ids(final) == ids(expected.messages)
    assert final.stats.total_tokens == memory.counter.count_messages(memory.read_messages())
    memory.store.close()


# -- restoring -----------------------------------------------------------------------------


def test_open_restores_a_sqlite_conversation(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chats.db'}"
    fake = FakeSummarizer(SUMMARY)
    with ConversationMemory(
        strategy=hybrid(fake), store=SQLiteStore(url), conversation_id="user-42"
    ) as writer:
        writer.extend(chat(30))
        before = writer.build_context()
        writer.store.close()
    calls = fake.calls
    reopened = ConversationMemory.open(
        SQLiteStore(url), conversation_id="user-42", strategy=hybrid(fake)
    )
    ctx = reopened.build_context()
    assert fake.calls == calls  # the stored checkpoint is reused after a restart
    assert texts(ctx) == texts(before)
    assert len(reopened.read_messages()) == 61
    # Built on the checkpoint, without reading the log: the total is the store's tally.
    assert ctx.stats.total_tokens == before.stats.total_tokens
    assert ctx.stats.total_tokens == reopened.counter.count_messages(reopened.read_messages())
    assert reopened.count_totals(ctx.stats).total_tokens == before.stats.total_tokens
    reopened.store.close()


async def test_aopen_restores(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    store = SQLiteStore(url)
    writer = ConversationMemory(store=store, conversation_id="c")
    await writer.aextend(chat(5))
    memory = await ConversationMemory.aopen(store, conversation_id="c")
    ctx = await memory.abuild_context()
    assert len(ctx) == 11
    assert await memory.aread_messages() == await writer.aread_messages()
    store.close()


def test_total_tokens_of_an_opened_conversation_are_counted_on_request() -> None:
    store = CountingStore()
    counter = ApproxCounter()
    history = chat(400)
    store.append("long", history)
    memory = ConversationMemory.open(
        store, conversation_id="long", strategy=SlidingWindow(500), counter=counter
    )
    store.rows_read = 0
    ctx = memory.build_context()
    assert store.rows_read <= 64  # a page around the window, not 801 messages
    # Unknown without reading the log, and reading a stat never reads it.
    store.rows_read = 0
    plain = ctx.stats
    assert plain.total_tokens is None
    assert plain.tokens_saved is None
    assert plain.compression_ratio is None
    assert plain.lifetime_tokens_saved is None
    assert plain.as_dict()["total_tokens"] is None
    assert store.rows_read == 0
    counted = memory.count_totals(plain)
    assert store.rows_read >= len(history)
    assert counted.total_tokens == counter.count_messages(history)
    assert counted.tokens_saved == counted.total_tokens - counted.current_tokens
    assert counted.lifetime_tokens_saved == counted.tokens_saved
    assert counted.current_tokens == plain.current_tokens
    assert plain.total_tokens is None  # the snapshot handed out does not change
    store.rows_read = 0
    assert memory.count_totals(counted) is counted  # already complete: no read
    assert memory.count_totals(plain).total_tokens == counted.total_tokens
    assert store.rows_read == 0
    # Kept up to date from then on, reading only what is new.
    memory.add(Message.user("one more"))
    s2 = memory.build_context().stats
    assert s2.total_tokens == counter.count_messages([*history, Message.user("one more")])
    assert store.rows_read == 0
    assert s2.tokens_saved is not None
    assert counted.tokens_saved is not None
    assert s2.lifetime_tokens_saved == counted.tokens_saved + s2.tokens_saved
    # Once totals are known, the lifetime ledger holds no per-build state.
    for _ in range(3):
        memory.add(Message.user("again"))
        memory.build_context()
    assert memory._core.ledger.pending == []


def test_a_memory_that_wrote_the_log_knows_its_totals_without_reading() -> None:
    store = CountingStore()
    counter = ApproxCounter()
    memory = ConversationMemory(
        store=store, conversation_id="new", strategy=SlidingWindow(200), counter=counter
    )
    memory.extend(chat(100))  # the first seq is 1: this memory has seen every message
    store.rows_read = 0
    stats = memory.build_context().stats
    assert stats.total_tokens == counter.count_messages(chat(100))
    assert stats.lifetime_tokens_saved == stats.tokens_saved
    assert store.rows_read <= 64
    assert memory.count_totals(stats) is stats


def test_count_totals_of_a_plan_cleared_or_foreign_stats() -> None:
    store = CountingStore()
    store.append("long", chat(100))
    memory = ConversationMemory.open(store, conversation_id="long", strategy=SlidingWindow(300))
    plan = memory.plan()
    assert plan.stats.total_tokens is None
    counted = memory.count_totals(plan.stats)
    assert counted.total_tokens == memory.counter.count_messages(chat(100))
    assert counted.lifetime_tokens_saved == counted.tokens_saved  # projected, not recorded
    assert memory.stats is None
    other = ConversationMemory(store=store, conversation_id="long")
    with pytest.raises(ConfigError) as info:
        other.count_totals(counted)
    assert info.value.argument == "stats"
    built = memory.build_context().stats
    memory.clear()
    with pytest.raises(StoreError, match="cleared"):
        memory.count_totals(built)  # never counts a log it did not build from


def test_messages_is_a_method_now() -> None:
    memory = ConversationMemory()
    memory.add(Message.user("hi"))
    assert texts(memory.read_messages()) == ["hi"]
    with pytest.raises(AttributeError, match="read_messages"):
        _ = memory.messages


# -- reading cost ----------------------------------------------------------------------------


def test_steady_state_reads_only_new_messages() -> None:
    store = CountingStore()
    store.append("c", chat(2000))
    memory = ConversationMemory.open(store, conversation_id="c", strategy=SlidingWindow(2000))
    memory.build_context()
    writer = ConversationMemory(store=store, conversation_id="c")  # another process, say
    for i in range(5):
        writer.add(Message.user(f"new {i}"))
        store.rows_read = store.reads = 0
        ctx = memory.build_context()
        # The new message, and in the same read the newest cached one, which tells the log
        # is still the one cached (not deleted and written again elsewhere).
        assert store.rows_read == 2
        assert store.reads == 1
        assert ctx.messages[-1].text == f"new {i}"
    # Messages added through this memory are already cached: nothing is read.
    memory.add(Message.user("mine"))
    store.rows_read = 0
    memory.build_context()
    assert store.rows_read == 0


def test_checkpoint_builds_read_only_after_the_checkpoint() -> None:
    store = CountingStore()
    fake = FakeSummarizer(SUMMARY)
    store.append("c", chat(200))
    memory = ConversationMemory(strategy=hybrid(fake), store=store, conversation_id="c")
    memory.build_context()
    ckpt = store.latest_checkpoint("c")
    assert ckpt is not None
    assert ckpt.last_covered_seq is not None
    fresh = ConversationMemory.open(store, conversation_id="c", strategy=hybrid(fake))
    store.rows_read = 0
    fresh.build_context()
    # The prefix page plus what follows the checkpoint; never the covered span.
    assert store.rows_read <= 16 + (401 - ckpt.last_covered_seq)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.lists(st.tuples(st.sampled_from(["chat", "tools"]), st.integers(1, 40)), max_size=6),
    budget=st.integers(80, 900),
    system=st.booleans(),
)
# A kept request older than the units the newest turn needs: the read must reach the anchor.
@example(plan=[("chat", 1), ("tools", 1), ("chat", 1)], budget=142, system=True)
def test_windowed_reads_build_what_the_full_history_builds(
    plan: list[tuple[str, int]], budget: int, system: bool
) -> None:
    """Reading only a window never changes the context the sliding window builds."""
    store = InMemoryStore()
    full: list[Message] = [Message.system("rules " * 20)] if system else []
    store.append("c", full)
    reader = ConversationMemory.open(store, conversation_id="c", strategy=SlidingWindow(budget))
    state = StrategyState()
    for kind, n in plan:
        batch = (
            chat(n, system=None)
            if kind == "chat"
            else [m for i in range(n) for m in tool_turn(len(full) + i)]
        )
        store.append("c", batch)
        full.extend(batch)
        try:
            expected = run(SlidingWindow(budget), full, counter=reader.counter, state=state)
        except BudgetError:  # the request and the newest unit do not fit: neither path builds
            with pytest.raises(BudgetError):
                reader.build_context()
            continue
        state = expected.state
        ctx = reader.build_context()
        assert ids(ctx) == ids(expected.messages)
        assert ctx.stats.dropped_count == expected.dropped_count
        assert ctx.stats.context_message_count + ctx.stats.dropped_count == len(full)
        assert ctx.stats.current_tokens == expected.tokens <= budget
        total = reader.count_totals(ctx.stats).total_tokens  # appended by another handle
        assert total == reader.counter.count_messages(full)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.lists(
        st.tuples(st.sampled_from(["chat", "tools"]), st.integers(1, 12)), min_size=1, max_size=6
    ),
    budget=st.integers(250, 900),
)
def test_hybrid_through_memory_matches_a_direct_run(
    plan: list[tuple[str, int]], budget: int
) -> None:
    """Built step by step through the store, with checkpoints committed and reused, the
    context is what the strategy builds from the full history and the same checkpoint."""
    store = InMemoryStore()
    memory = ConversationMemory(
        strategy=hybrid(FakeSummarizer(SUMMARY), budget), store=store, conversation_id="c"
    )
    full: list[Message] = [Message.system("You are a support agent.")]
    memory.add(full[0])
    for kind, n in plan:
        start = len(full)
        batch = (
            chat(n, system=None)
            if kind == "chat"
            else [m for i in range(n) for m in tool_turn(start + i)]
        )
        memory.extend(batch)
        full.extend(batch)
        before = store.latest_checkpoint("c")
        ctx = memory.build_context()
        direct = run(
            hybrid(FakeSummarizer(SUMMARY), budget),
            full,
            counter=memory.counter,
            checkpoint=before,
        )
        assert texts(ctx) == texts(direct.messages)
        assert ctx.stats.current_tokens <= budget
        assert ctx.stats.message_count == len(full)


# -- errors and clearing -----------------------------------------------------------------------


def test_budget_error_propagates() -> None:
    memory = ConversationMemory(strategy=SlidingWindow(5))
    memory.add(Message.system("a long system prompt " * 10))
    memory.add(Message.user("hi"))
    with pytest.raises(BudgetError):
        memory.build_context()
    assert len(memory.read_messages()) == 2


def test_pairing_error_propagates() -> None:
    memory = ConversationMemory()
    memory.add(Message.user("hi"))
    memory.add(Message.tool_result("nobody_called", "orphan"))
    with pytest.raises(PairingError):
        memory.build_context()


class BrokenStore(InMemoryStore):
    def read(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        raise OSError("disk on fire")


def test_store_failures_become_store_errors() -> None:
    store = BrokenStore()
    store.append("c", [Message.user("kept")])  # written by another process: not cached
    memory = ConversationMemory(store=store, conversation_id="c")
    with pytest.raises(StoreError, match="disk on fire") as info:
        memory.build_context()
    assert isinstance(info.value.__cause__, OSError)
    assert store.last_seq("c") == 1


class GappyStore(InMemoryStore):
    def read(
        self, conversation_id: str, /, *, after_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        rows = super().read(conversation_id, after_seq=after_seq, limit=limit)
        return rows[1:]


def test_a_damaged_log_is_reported() -> None:
    store = GappyStore()
    store.append("c", chat(3))
    memory = ConversationMemory(store=store, conversation_id="c")
    with pytest.raises(StoreError, match="sequence number"):
        memory.build_context()


def test_bad_input_is_rejected_without_writing() -> None:
    memory = ConversationMemory()
    with pytest.raises(FormatError):
        memory.add({"role": "user", "content": "hi"})  # type: ignore[arg-type]
    with pytest.raises(FormatError):
        memory.extend([Message.user("ok"), "not a message"])  # type: ignore[list-item]
    for batch in (None, "hello", Message.user("one"), 5):
        with pytest.raises(FormatError, match="sequence of Message"):
            memory.extend(batch)  # type: ignore[arg-type]
        with pytest.raises(FormatError, match="sequence of Message"):
            asyncio.run(memory.aextend(batch))  # type: ignore[arg-type]
    for stats in (None, {}, "stats"):
        with pytest.raises(ConfigError, match="MemoryStats") as info:
            memory.count_totals(stats)  # type: ignore[arg-type]
        assert info.value.argument == "stats"
    assert memory.read_messages() == []
    for kwargs, shown in (
        ({"conversation_id": ""}, "''"),
        ({"conversation_id": 7}, "7"),
        ({"store": 42}, "int"),
        ({"strategy": object()}, "object"),
        ({"lock_ttl": 0}, "0"),
        ({"lock_ttl": "soon"}, "'soon'"),
        ({"lock_ttl": True}, "True"),
    ):
        with pytest.raises(ConfigError) as info:
            ConversationMemory(**kwargs)  # type: ignore[arg-type]
        (argument,) = kwargs
        assert info.value.argument == argument  # names the argument and the value
        assert argument in str(info.value)
        assert shown in str(info.value)
        assert isinstance(info.value, ValueError)


def test_clear_starts_an_empty_conversation(store: Any) -> None:
    memory = ConversationMemory(strategy=hybrid(FakeSummarizer(SUMMARY)), store=store)
    memory.extend(chat(30))
    old = memory.build_context().stats
    memory.clear()
    assert memory.read_messages() == []
    assert memory.stats is None
    assert store.latest_checkpoint(memory.conversation_id) is None
    memory.add(Message.user("fresh start"))
    ctx = memory.build_context()
    assert texts(ctx) == ["fresh start"]
    assert ctx.stats.lifetime_tokens_saved == 0
    assert old.current_tokens > 0  # handed-out stats keep their figures


def test_a_clear_elsewhere_is_noticed() -> None:
    store = InMemoryStore()
    memory = ConversationMemory(store=store, conversation_id="c")
    memory.extend(chat(5))
    memory.build_context()
    other = ConversationMemory(store=store, conversation_id="c")
    other.clear()
    other.add(Message.user("a new start"))
    ctx = memory.build_context()
    assert texts(ctx) == ["a new start"]
    assert ctx.stats.total_tokens == memory.counter.count_messages(other.read_messages())


def test_empty_conversation_builds_an_empty_context() -> None:
    ctx = ConversationMemory().build_context()
    assert len(ctx) == 0
    assert ctx.stats.total_tokens == 0
    assert ctx.stats.compression_ratio == 1.0


# -- provider payloads -------------------------------------------------------------------------


def _tool_memory() -> ConversationMemory:
    memory = ConversationMemory()
    memory.add(Message.system("You look up orders."))
    memory.extend(tool_turn(1))
    memory.add(Message.user("thanks"))
    return memory


def test_to_openai_loads_back() -> None:
    from contextfold.formats import openai_chat

    ctx = _tool_memory().build_context()
    payload = ctx.to_openai()
    assert [m["role"] for m in payload] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    back = openai_chat.load(payload, strict=True)
    assert texts(back) == texts(ctx)
    assert [c.id for m in back for c in m.tool_calls] == ["call_1_a", "call_1_b"]


def test_to_anthropic_loads_back() -> None:
    anthropic = pytest.importorskip("contextfold.formats.anthropic")
    ctx = _tool_memory().build_context()
    payload = ctx.to_anthropic()
    assert set(payload) >= {"system", "messages"}
    assert "You look up orders." in str(payload["system"])
    assert payload["messages"][0]["role"] == "user"
    back = anthropic.load(payload)
    assert [c.id for m in back for c in m.tool_calls] == ["call_1_a", "call_1_b"]


def test_to_responses_loads_back() -> None:
    responses = pytest.importorskip("contextfold.formats.openai_responses")
    ctx = _tool_memory().build_context()
    items = ctx.to_responses()
    kinds = [i.get("type", "message") for i in items]
    assert kinds.count("function_call") == 2
    assert kinds.count("function_call_output") == 2
    back = responses.load(items)
    assert [c.id for m in back for c in m.tool_calls] == ["call_1_a", "call_1_b"]


def test_context_is_a_sequence_of_messages() -> None:
    memory = ConversationMemory()
    memory.extend(chat(2))
    ctx = memory.build_context()
    assert isinstance(ctx, Context)
    assert isinstance(ctx.stats, MemoryStats)
    assert list(ctx) == list(ctx.messages)
    assert len(ctx) == 5
    assert ctx[0].role == "system"
    assert ctx[-2:] == ctx.messages[-2:]


# -- several processes on one conversation --------------------------------------------------


def test_two_servers_compact_a_span_once(tmp_path: Path) -> None:
    """Two memories on separate connections to one database: while one summarizes, the
    other builds without paying for the same span, then reuses the committed checkpoint."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    seed = chat(30)
    setup = SQLiteStore(url)
    setup.append("shared", seed)
    setup.close()
    entered, release = threading.Event(), threading.Event()

    def slow(request: SummaryRequest) -> str:
        entered.set()
        release.wait(10)
        return SUMMARY

    slow_fake, quick_fake = FakeSummarizer(slow), FakeSummarizer(SUMMARY)
    store_a, store_b = SQLiteStore(url), SQLiteStore(url)
    a = ConversationMemory.open(store_a, conversation_id="shared", strategy=hybrid(slow_fake))
    b = ConversationMemory.open(store_b, conversation_id="shared", strategy=hybrid(quick_fake))
    done: list[Context] = []
    worker = threading.Thread(target=lambda: done.append(a.build_context()))
    worker.start()
    assert entered.wait(10)
    during = b.build_context()
    release.set()
    worker.join(10)
    assert quick_fake.calls == 0
    assert during.stats.fallback
    assert done[0].stats.compacted
    after = b.build_context()
    assert quick_fake.calls == 0
    assert after.checkpoint is not None
    assert after.checkpoint.id == done[0].checkpoint.id  # type: ignore[union-attr]
    assert len(store_b.checkpoints("shared")) == 1
    store_a.close()
    store_b.close()


RACER = """
import json, sys, time
sys.path.insert(0, {tests!r})
from test_memory import SUMMARY, hybrid
from contextfold.memory import ConversationMemory
from contextfold.stores.sqlite import SQLiteStore
from contextfold.testing import FakeSummarizer

def slow(request):
    time.sleep(0.3)
    return SUMMARY

fake = FakeSummarizer(slow)
store = SQLiteStore({url!r})
memory = ConversationMemory.open(store, conversation_id="race", strategy=hybrid(fake))
print("ready", flush=True)
sys.stdin.readline()
ctx = memory.build_context()
print(json.dumps({{"calls": fake.calls, "compacted": ctx.stats.compacted,
                  "checkpoint": ctx.stats.checkpoint_id, "fallback": ctx.stats.fallback}}))
store.close()
"""


def test_two_processes_racing_make_one_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    setup = SQLiteStore(url)
    setup.append("race", chat(30))
    code = RACER.format(tests=str(Path(__file__).parent), url=url)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
    for p in procs:  # release both at once
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    chain = setup.checkpoints("race")
    setup.close()
    assert len(chain) == 1
    winners = [o for o in outs if o["compacted"]]
    assert len(winners) == 1
    loser = next(o for o in outs if not o["compacted"])
    assert loser["calls"] == 0  # never paid for the span the winner summarized
    assert winners[0]["checkpoint"] == chain[0].id


# -- store shapes, URLs and closing ------------------------------------------------------------


class AsyncOnly:
    """Exposes only the async half of an InMemoryStore."""

    def __init__(self) -> None:
        self._inner = InMemoryStore()

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("a"):
            raise AttributeError(name)
        return getattr(self._inner, name)


async def test_async_only_store() -> None:
    store: Any = AsyncOnly()
    memory = ConversationMemory(store=store, conversation_id="c", strategy=SlidingWindow(100))
    await memory.aextend(chat(20))
    with pytest.raises(StoreError, match="async-only"):
        memory.build_context()
    fresh = await ConversationMemory.aopen(store, conversation_id="c", strategy=SlidingWindow(100))
    stats = (await fresh.abuild_context()).stats
    assert stats.context_message_count < 41
    # The writer's appends kept the store's running total: known without reading the log.
    assert stats.total_tokens == fresh.counter.count_messages(chat(20))
    assert fresh.count_totals(stats) == stats  # nothing to count, so no sync I/O either
    await store.aappend("d", chat(20))  # written without counts: no running total
    fresh = await ConversationMemory.aopen(store, conversation_id="d", strategy=SlidingWindow(100))
    stats = (await fresh.abuild_context()).stats
    assert stats.total_tokens is None  # reading it does no I/O, sync or not
    with pytest.raises(StoreError, match="async-only"):
        fresh.count_totals(stats)  # counting would need a sync read
    counted = await fresh.acount_totals(stats)
    assert counted.total_tokens == fresh.counter.count_messages(chat(20))
    assert await fresh.acount_history() == counted.total_tokens
    assert fresh.count_totals(stats).total_tokens == counted.total_tokens  # known: no I/O


async def test_sync_only_store_serves_async_calls() -> None:
    class SyncOnly:
        def __init__(self) -> None:
            self._inner = InMemoryStore()

        def __getattr__(self, name: str) -> Any:
            if name.startswith("a") and name not in ("append", "append_checkpoint"):
                raise AttributeError(name)
            return getattr(self._inner, name)

    memory = ConversationMemory(store=SyncOnly(), conversation_id="c")  # type: ignore[arg-type]
    await memory.aextend(chat(2))
    assert len(await memory.abuild_context()) == 5


def test_url_store_is_owned_and_closed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'owned.db'}"
    with ConversationMemory.open(url, conversation_id="c") as memory:
        memory.extend(chat(2))
        assert len(memory.build_context()) == 5
    with pytest.raises(StoreError):
        memory.store.last_seq("c")  # closed with the memory
    other = ConversationMemory.open(url, conversation_id="c")
    assert len(other.read_messages()) == 5
    other.close()


def test_open_fails_cleanly_on_a_bad_url() -> None:
    with pytest.raises(StoreError):
        ConversationMemory.open("nosuchscheme://x", conversation_id="c")


# -- real data ---------------------------------------------------------------------------------


def test_swe_agent_trajectory_windows_match_the_full_history(data_dir: Path) -> None:
    """A real coding-agent trajectory, built step by step: every windowed build equals the
    sliding window over the whole history, and every context keeps its tool pairs."""
    from contextfold.formats import openai_chat
    from contextfold.turns import safe_cut_points, validate
    from shared_data import swe_agent_openai

    path = data_dir / "swe-agent-trajectories" / "marshmallow-1867__function_calling.traj"
    history = openai_chat.load(swe_agent_openai(path))
    store = InMemoryStore()
    memory = ConversationMemory(strategy=SlidingWindow(6000), store=store, conversation_id="t")
    reader = ConversationMemory(strategy=SlidingWindow(6000), store=store, conversation_id="t")
    cuts = safe_cut_points(history)[1:]
    done = 0
    for end in cuts[:: max(1, len(cuts) // 12)]:
        memory.extend(history[done:end])
        done = end
        ctx = reader.build_context()
        expected = run(SlidingWindow(6000), history[:end], counter=reader.counter)
        assert ids(ctx) == ids(expected.messages)
        validate(ctx.messages, allow_pending_tail=True)
        assert ctx.stats.current_tokens <= 6000


def test_claude_code_session_through_memory(data_dir: Path) -> None:
    """A real Claude Code session (Anthropic shape: tool results inside user messages),
    stored and rebuilt by a reader that only reads windows: the same contexts as the sliding
    window over the whole history, and payloads that load back with their tool pairs."""
    from contextfold.formats import anthropic
    from contextfold.turns import safe_cut_points, validate
    from shared_data import claude_code_main_sessions, claude_code_payload

    path = claude_code_main_sessions()[0]
    history = anthropic.load({"messages": claude_code_payload(path)})
    store = InMemoryStore()
    writer = ConversationMemory(store=store, conversation_id="cc")
    reader = ConversationMemory(strategy=SlidingWindow(20_000), store=store, conversation_id="cc")
    cuts = safe_cut_points(history)[1:]
    done = 0
    state = StrategyState()
    for end in cuts[:: max(1, len(cuts) // 8)]:
        writer.extend(history[done:end])
        done = end
        ctx = reader.build_context()
        expected = run(SlidingWindow(20_000), history[:end], counter=reader.counter, state=state)
        state = expected.state
        assert ids(ctx) == ids(expected.messages)
        validate(ctx.messages, allow_pending_tail=True)
        body = ctx.to_anthropic()
        back = anthropic.load(body)
        validate(back, allow_pending_tail=True)
        assert len(back) == len(ctx)
