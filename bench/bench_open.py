"""Opening a stored conversation: open + first build, 1,000 vs 100,000 messages, per strategy.

Run ``python -m bench.bench_open`` (1k and 100k messages) or ``--tiny`` (200 and 2,000).

What a server pays after a restart, once the conversation has been compacted: for every
strategy, a conversation of each size is written to the store (batched appends), then one
memory builds until the strategy stops compacting (its first checkpoint, or for ``Hybrid``
its chunks, are stored). Then, several times, a new store handle, ``ConversationMemory.open``
and one ``build_context`` are timed together; the median is reported with the ratio of the
large conversation to the small one (the target is at most 3x: the cost follows the budget,
not the history).

Stores: SQLite (a file in a temporary folder), and PostgreSQL when
``CONTEXTFOLD_TEST_POSTGRES_URL`` points at a server (in a schema of its own,
``contextfold_bench_open``). The summarizer is ``FakeSummarizer``
(no network); the messages are the synthetic support chat of :mod:`bench.bench_memory`.

The conversations are written through a memory, as an application does, so the store keeps
their running token total; the table says whether the first build knew ``total_tokens``
(without reading the log). Also timed: loading all messages of the large conversation (``store.read``) next to the Agents
SDK ``SQLiteSession.get_items()`` on the same messages as Responses items, and as a floor,
our stored rows fetched and parsed with ``json.loads`` without building messages.

Raw figures go to ``bench/out/open.json``; Markdown tables go to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.bench_memory import as_responses_items, conversation, fill
from contextfold.memory import ConversationMemory
from contextfold.messages import Message
from contextfold.stores.sqlite import SQLiteStore
from contextfold.strategies.base import Strategy
from contextfold.strategies.checkpoint import Checkpoint
from contextfold.strategies.compactor import SummaryCompactor
from contextfold.strategies.hybrid import Hybrid
from contextfold.strategies.pipeline import Pipeline
from contextfold.strategies.prune import PruneToolOutputs
from contextfold.strategies.sliding import SlidingWindow
from contextfold.strategies.summarization import Summarization
from contextfold.testing import FakeSummarizer

OUT = Path(__file__).resolve().parent / "out" / "open.json"
BUDGET = 8000
TARGET_RATIO = 3.0
SUMMARY = "The customer asked about orders, refunds and deliveries; each was looked up."


def strategies() -> dict[str, Callable[[], Strategy]]:
    """Every shipped strategy, each with a fresh fake summarizer."""

    def fake() -> FakeSummarizer:
        return FakeSummarizer(SUMMARY)

    return {
        "SlidingWindow": lambda: SlidingWindow(BUDGET),
        "Summarization": lambda: Summarization(BUDGET, keep_recent=8, summarizer=fake()),
        "Hybrid": lambda: Hybrid(
            BUDGET, keep_recent=8, chunk_size=400, summarizer=fake(), max_chunks=8
        ),
        "Checkpoint": lambda: Checkpoint(fake(), max_tokens=BUDGET),
        "SummaryCompactor": lambda: SummaryCompactor(
            fake(), keep_recent_turns=4, budget_chars=4 * BUDGET
        ),
        "Pipeline": lambda: Pipeline(
            [PruneToolOutputs(), Summarization(BUDGET, keep_recent=8, summarizer=fake())],
            max_tokens=BUDGET,
        ),
    }


def settle(make_store: Callable[[], Any], cid: str, make: Callable[[], Strategy]) -> int:
    """Build until the strategy stops compacting; the number of builds it took."""
    store = make_store()
    memory = ConversationMemory.open(store, conversation_id=cid, strategy=make())
    builds = 0
    try:
        for builds in range(1, 400):  # noqa: B007  (the count is the result)
            if not memory.build_context().stats.compacted:
                break
    finally:
        store.close()
    return builds


def time_open(
    make_store: Callable[[], Any], cid: str, make: Callable[[], Strategy], reps: int
) -> dict[str, Any]:
    """Median of ``reps`` × (new handle + open + first build)."""
    samples: list[float] = []
    compacted = False
    context_messages = 0
    total_known = True
    for _ in range(reps):
        strategy = make()
        gc.collect()
        start = time.perf_counter()
        store = make_store()
        memory = ConversationMemory.open(store, conversation_id=cid, strategy=strategy)
        context = memory.build_context()
        samples.append((time.perf_counter() - start) * 1000.0)
        compacted = compacted or context.stats.compacted
        context_messages = context.stats.context_message_count
        total_known = total_known and context.stats.total_tokens is not None
        store.close()
    return {
        "median_ms": statistics.median(samples),
        "all_ms": samples,
        "compacted_again": compacted,
        "context_messages": context_messages,
        "total_known_at_first_build": total_known,
    }


def fill_through_memory(store: Any, cid: str, messages: list[Message]) -> None:
    """Append as an application does, through a memory (so the store keeps the total)."""
    memory = ConversationMemory(store=store, conversation_id=cid)
    for i in range(0, len(messages), 1000):
        memory.extend(messages[i : i + 1000])


def stores(folder: Path) -> dict[str, Callable[[int], Callable[[], Any]]]:
    """Per store, a maker of handle factories for one size."""
    out: dict[str, Callable[[int], Callable[[], Any]]] = {
        "SQLite": lambda n: lambda: SQLiteStore(f"sqlite:///{folder / f'open_{n}.db'}"),
    }
    url = os.environ.get("CONTEXTFOLD_TEST_POSTGRES_URL")
    if url:
        from contextfold.stores.postgres import PostgresStore

        # A schema of its own: the benchmark never touches tables another run migrated.
        out["PostgreSQL"] = lambda n: lambda: PostgresStore(url, schema="contextfold_bench_open")
    return out


def measure_store(
    make_for: Callable[[int], Callable[[], Any]], sizes: tuple[int, int], reps: int
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for n in sizes:
        messages = conversation(n)
        make_store = make_for(n)
        for name, make in strategies().items():
            cid = f"open-{name}-{n}-{uuid.uuid4().hex[:8]}"
            seed = make_store()
            fill_through_memory(seed, cid, messages)
            seed.close()
            builds = settle(make_store, cid, make)
            result = time_open(make_store, cid, make, reps)
            figures.setdefault(name, {})[str(n)] = {"settle_builds": builds, **result}
            cleanup = make_store()
            cleanup.delete(cid)
            cleanup.close()
    return figures


def load_all(folder: Path, messages: list[Message], reps: int) -> dict[str, Any]:
    """``store.read`` of every message vs ``SQLiteSession.get_items()``, medians in ms."""
    from agents import SQLiteSession

    url = f"sqlite:///{folder / 'load_all.db'}"
    seed = SQLiteStore(url)
    fill(seed, "all", messages)
    seed.close()
    ours: list[float] = []
    for _ in range(reps):
        store = SQLiteStore(url)
        gc.collect()
        start = time.perf_counter()
        rows = store.read("all")
        ours.append((time.perf_counter() - start) * 1000.0)
        store.close()
        assert len(rows) == len(messages)
    floor = _parse_only(folder / "load_all.db", reps, len(messages))
    items = as_responses_items(messages)

    async def session_times() -> list[float]:
        session = SQLiteSession("bench", str(folder / "session.db"))
        for i in range(0, len(items), 1000):
            await session.add_items(items[i : i + 1000])  # type: ignore[arg-type]
        out: list[float] = []
        for _ in range(reps):
            gc.collect()
            start = time.perf_counter()
            got = await session.get_items()
            out.append((time.perf_counter() - start) * 1000.0)
            assert len(got) == len(items)
        session.close()
        return out

    theirs = asyncio.run(session_times())
    return {
        "messages": len(messages),
        "items": len(items),
        "read_median_ms": statistics.median(ours),
        "parse_only_median_ms": statistics.median(floor),
        "get_items_median_ms": statistics.median(theirs),
    }


def _parse_only(path: Path, reps: int, expected: int) -> list[float]:
    """Fetching our rows with ``sqlite3`` and ``json.loads`` of each, no message built: what
    ``get_items()`` does, on our stored form (a floor for any reader returning messages)."""
    import sqlite3

    out: list[float] = []
    for _ in range(reps):
        conn = sqlite3.connect(path)
        gc.collect()
        start = time.perf_counter()
        rows = conn.execute("SELECT data FROM contextfold_messages ORDER BY key").fetchall()
        parsed = [json.loads(data) for (data,) in rows]
        out.append((time.perf_counter() - start) * 1000.0)
        conn.close()
        assert len(parsed) == expected
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small sizes, a few seconds")
    args = parser.parse_args(argv)
    small, large = (200, 2_000) if args.tiny else (1_000, 100_000)
    reps = 3 if args.tiny else 5
    report: dict[str, Any] = {"budget": BUDGET, "sizes": [small, large], "stores": {}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for store_name, make_for in stores(folder).items():
            report["stores"][store_name] = measure_store(make_for, (small, large), reps)
        report["load_all"] = load_all(folder, conversation(large), 3)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2))
    _print(report, small, large)
    return report


def _print(report: dict[str, Any], small: int, large: int) -> None:
    print(f"open + first build after the first checkpoint, budget {BUDGET:,} tokens (median ms)\n")
    print(
        f"| store | strategy | {small:,} messages | {large:,} messages | ratio "
        f"| within {TARGET_RATIO:.0f}x | total known at the first build |"
    )
    print("|---|---|---|---|---|---|---|")
    for store_name, figures in report["stores"].items():
        for name, by_size in figures.items():
            a, b = by_size[str(small)]["median_ms"], by_size[str(large)]["median_ms"]
            ratio = b / a if a else float("inf")
            ok = "yes" if ratio <= TARGET_RATIO else "**no**"
            known = by_size[str(large)].get("total_known_at_first_build")
            print(
                f"| {store_name} | {name} | {a:.2f} | {b:.2f} | {ratio:.2f}x | {ok} "
                f"| {'yes' if known else '**no**'} |"
            )
    la = report["load_all"]
    speed = la["get_items_median_ms"] / la["read_median_ms"]
    print(f"\nloading every message of a {la['messages']:,}-message conversation (median ms)\n")
    print("| reader | ms | speed vs `SQLiteSession.get_items()` |")
    print("|---|---|---|")
    print(
        f"| `SQLiteStore.read()` ({la['messages']:,} messages) | {la['read_median_ms']:.0f} | {speed:.2f}x |"
    )
    if "parse_only_median_ms" in la:
        floor = la["parse_only_median_ms"]
        print(
            f"| floor: our rows fetched and `json.loads` each, no message built "
            f"| {floor:.0f} | {la['get_items_median_ms'] / floor:.2f}x |"
        )
    print(
        f"| `SQLiteSession.get_items()` ({la['items']:,} items) | {la['get_items_median_ms']:.0f} | 1.00x |"
    )


if __name__ == "__main__":
    main()
