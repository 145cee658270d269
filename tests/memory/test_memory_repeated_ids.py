"""Histories whose message ids repeat: nothing may be lost and the stats must tell the truth.

``formats.load`` derives an id from position, role and content, so an app that loads each
turn on its own gives every identical "continue" the same id. A checkpoint located by that
id would be found at the newest copy, and every message before it treated as summarized.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold import formats
from contextfold.memory import ConversationMemory
from contextfold.messages import Message
from contextfold.stores.memory import InMemoryStore
from contextfold.strategies.hybrid import Hybrid
from contextfold.strategies.run import run
from contextfold.strategies.summarization import Summarization
from contextfold.testing import FakeSummarizer
from contextfold.tokens.approx import ApproxCounter

STEPS = 80


def _step_text(i: int) -> str:
    return f"step {i}: " + "did some careful work on the task " * 6


def _turn(i: int) -> list[Message]:
    """One step loaded on its own, the way an agent loop that loads each turn does it."""
    loaded = formats.load([{"role": "user", "content": "continue"}])
    loaded += formats.load([{"role": "assistant", "content": _step_text(i)}])
    return loaded


def _strategy(name: str, fake: FakeSummarizer) -> Any:
    if name == "hybrid":
        return Hybrid(1500, keep_recent=3, chunk_size=5, summarizer=fake, max_chunks=64)
    return Summarization(1500, keep_recent=3, summarizer=fake)


def test_turns_loaded_one_at_a_time_repeat_ids() -> None:
    """The premise: the same text at the same position of its payload gets the same id."""
    assert _turn(1)[0].id == _turn(2)[0].id


def test_one_payload_gets_distinct_ids_even_for_repeated_messages() -> None:
    payload = [{"role": "user", "content": "continue"}] * 5
    for fmt in ("openai_chat", "anthropic"):
        body: Any = {"messages": payload} if fmt == "anthropic" else payload
        loaded = formats.load(body, fmt)
        assert len({m.id for m in loaded}) == 5, fmt
    repeated_item_ids = [
        {"type": "message", "role": "user", "content": "continue", "id": "same"}
    ] * 3
    loaded = formats.load(repeated_item_ids, "openai_responses")
    assert len({m.id for m in loaded}) == 3


@pytest.mark.parametrize("name", ["hybrid", "summarization"])
def test_repeated_ids_lose_no_message_and_stats_count_what_happened(name: str) -> None:
    fake = FakeSummarizer("The agent worked through the steps of the task.")
    memory = ConversationMemory(
        store=InMemoryStore(), strategy=_strategy(name, fake), counter=ApproxCounter()
    )
    memory.extend(formats.load([{"role": "system", "content": "You are an agent."}]))
    for i in range(STEPS):
        memory.extend(_turn(i))
        context = memory.build_context()
    summarized = {m.text for request in fake.requests for m in request.messages}
    sent = {m.text for m in context.messages}
    lost = [i for i in range(STEPS) if _step_text(i) not in summarized | sent]
    assert lost == []
    stats = context.stats
    assert stats.is_summarized
    assert stats.dropped_count == 0
    # Every stored message is kept, summarized or dropped, exactly once, as the stats say.
    plan = memory.plan()
    accounted = sorted(s for r in (*plan.kept, *plan.summarized, *plan.dropped) for s in r)
    assert accounted == list(range(1, stats.message_count + 1))
    assert plan.stats.summarized_count == sum(len(r) for r in plan.summarized)
    assert plan.stats.dropped_count == sum(len(r) for r in plan.dropped) == 0


@pytest.mark.parametrize("name", ["hybrid", "summarization"])
def test_checkpoint_is_not_found_at_a_newer_message_repeating_its_id(name: str) -> None:
    counter = ApproxCounter()
    history = formats.load([{"role": "system", "content": "You are an agent."}])
    for i in range(STEPS):
        history += _turn(i)
    first = run(
        _strategy(name, FakeSummarizer("First part of the work.")), history, counter=counter
    )
    assert first.checkpoint is not None
    later = history + [m for i in range(STEPS, STEPS + 20) for m in _turn(i)]
    fake = FakeSummarizer("Second part of the work.")
    result = run(_strategy(name, fake), later, counter=counter, checkpoint=first.checkpoint)
    summarized = {m.text for request in fake.requests for m in request.messages}
    sent = {m.text for m in result.messages}
    new_steps = [_step_text(i) for i in range(STEPS, STEPS + 20)]
    assert [t for t in new_steps if t not in summarized | sent] == []
