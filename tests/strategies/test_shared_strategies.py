"""One strategy object serves many conversations at once, and nothing leaks between them.

A server builds one strategy (with one summarizer) and hands it to every conversation. Here
one instance of each kind serves 100 conversations from 8 threads and 8 asyncio tasks at the
same time, over one shared store, while the summarizer always fails for one of them. Every
other conversation must summarize as usual and get exactly the contexts it gets when it is
served alone, build after build.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from contextfold import ConversationMemory, Message, ToolCallPart
from contextfold.formats import openai_chat
from contextfold.stores.memory import InMemoryStore
from contextfold.strategies import (
    Checkpoint,
    Hybrid,
    Pipeline,
    PruneToolOutputs,
    SlidingWindow,
    Strategy,
    StrategyState,
    Summarization,
    SummaryCompactor,
)
from contextfold.summarizers.base import SummarizationResult, SummaryRequest
from contextfold.testing import FixedCounter

CONVERSATIONS = 100
STEPS = ((0, 1), (2,), (3,), (4,))  # rounds of messages added before each build
POISONED = 7  # the conversation whose summaries always fail
COUNTER = FixedCounter(4, per_char=0.25)


class ContentSummarizer:
    """Sync and async; fails whenever the span mentions the poison word.

    The summary names the ids it covers, so a context built from another conversation's
    summary would show.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        first = request.messages[0].id if request.messages else "none"
        conversation = first.split("-")[0]
        with self._lock:
            self.calls[conversation] = self.calls.get(conversation, 0) + 1
        if any("POISON" in m.text for m in request.messages):
            return SummarizationResult.failure("the provider refused this span", "http_error")
        ids = ",".join(m.id for m in request.messages[:3])
        prior = (request.previous_summary or "")[:40]
        return SummarizationResult.success(f"covered {len(request.messages)} ({ids}) {prior}")

    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        await asyncio.sleep(0)  # let other tasks interleave
        return self.summarize(request)


def make_strategies(summarizer: ContentSummarizer) -> dict[str, Strategy]:
    return {
        "sliding": SlidingWindow(300),
        "prune": PruneToolOutputs(keep_recent=1, min_savings=0, max_tokens=300),
        "summary": Summarization(300, keep_recent=4, summarizer=summarizer),
        "hybrid": Hybrid(300, keep_recent=4, chunk_size=6, summarizer=summarizer),
        "checkpoint": Checkpoint(summarizer, max_tokens=300),
        "compactor": SummaryCompactor(summarizer, keep_recent_turns=2, budget_chars=1200),
        "pipeline": Pipeline(
            [
                PruneToolOutputs(keep_recent=1, min_savings=0),
                Hybrid(300, keep_recent=4, chunk_size=6, summarizer=summarizer),
            ],
            max_tokens=300,
        ),
    }


def round_messages(conversation: int, round_no: int) -> list[Message]:
    """Ten messages of one round: chat turns and one tool call with a long result."""
    c, r = conversation, round_no
    word = "POISON" if c == POISONED else f"topic{c}"
    out: list[Message] = []
    for t in range(3):
        out.append(
            Message.user(f"{word} question {r}.{t} about order {c * 100 + r}", id=f"{c}-u{r}{t}")
        )
        out.append(
            Message.assistant(f"answer {r}.{t} for {c}: " + "detail " * 12, id=f"{c}-a{r}{t}")
        )
    lookup = ToolCallPart(f"call_{c}_{r}", "lookup", json.dumps({"order": c * 100 + r}))
    call = Message.assistant(tool_calls=[lookup], id=f"{c}-c{r}")
    out.append(Message.user(f"look up order {c * 100 + r}", id=f"{c}-q{r}"))
    out.append(call)
    out.append(Message.tool_result(f"call_{c}_{r}", "record " * 60, id=f"{c}-t{r}"))
    out.append(Message.assistant(f"order {c * 100 + r} is on its way", id=f"{c}-f{r}"))
    return out


def snapshot(memory: ConversationMemory) -> tuple[object, ...]:
    ctx = memory.build_context()
    return _describe(ctx)


async def asnapshot(memory: ConversationMemory) -> tuple[object, ...]:
    ctx = await memory.abuild_context()
    return _describe(ctx)


def _describe(ctx: object) -> tuple[object, ...]:
    stats = ctx.stats  # type: ignore[attr-defined]
    payload = json.dumps(openai_chat.dump(list(ctx.messages)), sort_keys=True)  # type: ignore[attr-defined]
    return (
        payload,
        stats.current_tokens,
        stats.is_summarized,
        stats.fallback,
        stats.dropped_count,
        stats.summarized_count,
    )


def open_memory(strategy: Strategy, store: InMemoryStore, conversation: int) -> ConversationMemory:
    memory = ConversationMemory(
        strategy=strategy, store=store, counter=COUNTER, conversation_id=f"conv-{conversation}"
    )
    memory.add(Message.system(f"You help customer {conversation}.", id=f"{conversation}-sys"))
    return memory


def serve_alone(kind: str) -> dict[int, list[tuple[object, ...]]]:
    """Every conversation on its own: a fresh strategy and store each, one build at a time."""
    out: dict[int, list[tuple[object, ...]]] = {}
    for c in range(CONVERSATIONS):
        strategy = make_strategies(ContentSummarizer())[kind]
        memory = open_memory(strategy, InMemoryStore(), c)
        seen = []
        for step in STEPS:
            for r in step:
                memory.extend(round_messages(c, r))
            seen.append(snapshot(memory))
        out[c] = seen
    return out


def serve_together(
    kind: str,
) -> tuple[dict[int, list[tuple[object, ...]]], ContentSummarizer]:
    """All conversations at once: one strategy, one summarizer, one store; 8 threads and 8
    asyncio tasks, round by round interleaved."""
    summarizer = ContentSummarizer()
    strategy = make_strategies(summarizer)[kind]
    store = InMemoryStore()
    memories = {c: open_memory(strategy, store, c) for c in range(CONVERSATIONS)}
    results: dict[int, list[tuple[object, ...]]] = {c: [] for c in range(CONVERSATIONS)}
    healthy = [c for c in range(CONVERSATIONS) if c != POISONED]
    by_threads = [c for c in healthy if c % 2 == 0]
    by_tasks = [c for c in healthy if c % 2 == 1]

    def thread_work(c: int) -> None:
        for step in STEPS:
            for r in step:
                memories[c].extend(round_messages(c, r))
            results[c].append(snapshot(memories[c]))

    async def task_work(c: int) -> None:
        for step in STEPS:
            for r in step:
                await memories[c].aextend(round_messages(c, r))
            results[c].append(await asnapshot(memories[c]))

    def keep_failing() -> None:
        # The poisoned conversation keeps building while the others run: its failures must
        # stay its own.
        for _ in range(20):
            snapshot(memories[POISONED])

    # The poisoned conversation goes first: its summaries fail until its loop guard trips.
    thread_work(POISONED)

    async def tasks(chunk: list[int]) -> None:
        await asyncio.gather(*(task_work(c) for c in chunk))

    def run_tasks() -> None:
        chunks = [by_tasks[i::8] for i in range(8)]

        async def main() -> None:
            await asyncio.gather(*(tasks(chunk) for chunk in chunks))

        asyncio.run(main())

    with ThreadPoolExecutor(max_workers=9) as pool:
        loop_done = pool.submit(run_tasks)
        done = [pool.submit(keep_failing)]
        done += [pool.submit(thread_work, c) for c in by_threads]
        for future in done:
            future.result()
        loop_done.result()
    return results, summarizer


KINDS = ["sliding", "prune", "summary", "hybrid", "checkpoint", "compactor", "pipeline"]


@pytest.mark.parametrize("kind", KINDS)
def test_one_strategy_serves_many_conversations_as_if_each_were_alone(kind: str) -> None:
    alone = serve_alone(kind)
    together, summarizer = serve_together(kind)
    for c in range(CONVERSATIONS):
        got = together[c][: len(STEPS)]
        assert got == alone[c], f"conversation {c} differs when served together"
    if kind in ("sliding", "prune"):
        return
    # The poisoned conversation fell back on every build, and its loop guard stopped calling
    # the summarizer; every other conversation summarized normally.
    assert all(snap[3] for snap in together[POISONED])
    assert summarizer.calls[str(POISONED)] == _calls_when_alone(kind)
    healthy = [c for c in range(CONVERSATIONS) if c != POISONED]
    assert all(any(snap[2] for snap in together[c]) for c in healthy)
    assert all(not any(snap[3] for snap in together[c]) for c in healthy)
    assert all(summarizer.calls[str(c)] >= 1 for c in healthy)


def _calls_when_alone(kind: str) -> int:
    """Summarizer calls the poisoned conversation makes over its builds, served alone."""
    summarizer = ContentSummarizer()
    memory = open_memory(make_strategies(summarizer)[kind], InMemoryStore(), POISONED)
    for step in STEPS:
        for r in step:
            memory.extend(round_messages(POISONED, r))
        memory.build_context()
    for _ in range(20):
        memory.build_context()
    return summarizer.calls[str(POISONED)]


def test_a_strategy_cannot_be_changed_in_place() -> None:
    strategy = Hybrid(300, keep_recent=4, chunk_size=6, summarizer=ContentSummarizer())
    with pytest.raises(AttributeError, match="immutable"):
        strategy.max_tokens = 10  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        SlidingWindow(100).max_tokens = 5  # type: ignore[misc]


def test_strategy_state_round_trips_through_json() -> None:
    state = StrategyState(
        failed_compactions=2, stages=(StrategyState(), StrategyState(failed_compactions=1))
    )
    data = json.loads(json.dumps(state.to_dict()))
    assert StrategyState.from_dict(data) == state
    assert StrategyState().to_dict() == {}
    # Damaged data gives a fresh state rather than an error in the middle of a build.
    assert StrategyState.from_dict({"failed_compactions": "3", "stages": "x"}) == StrategyState()
