"""build_context latency on a long stored conversation, next to the Agents SDK SQLiteSession.

Run ``python -m bench.bench_memory`` (1k and 100k messages) or ``--tiny`` (200 and 2,000).

For each size, a conversation is written to a fresh SQLite database (``SQLiteStore``, batched
appends). Then:

* **first build**: a new store handle, ``ConversationMemory.open`` and one ``build_context``
  (the cost of serving a conversation after a restart);
* **steady state**: a second store handle (another process, say) appends one message, then the
  memory builds again. This is the worst case for the memory's cache, because it has to read
  the new row. The median and the 95th percentile over the repetitions are reported.

The same messages, as Responses items, go into ``agents.SQLiteSession`` in a second database,
and ``get_items()`` (which loads the whole session) is timed on the largest size.

The strategy is ``SlidingWindow(8000)`` with the default ``ApproxCounter``. The messages are
synthetic support-chat turns, a third of them with two parallel tool calls, of 20 to 200 tokens
each. They are generated rather than taken from the shared data sets, so that a 100k-message
conversation needs no copying.

``--stores`` adds the large size on ``InMemoryStore``, and on Redis and PostgreSQL when
``CONTEXTFOLD_TEST_REDIS_URL`` / ``CONTEXTFOLD_TEST_POSTGRES_URL`` point at servers.

Raw figures go to ``bench/out/memory.json``; a Markdown table goes to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextfold.memory import ConversationMemory
from contextfold.messages import Message, ToolCallPart
from contextfold.stores.memory import InMemoryStore
from contextfold.stores.sqlite import SQLiteStore
from contextfold.strategies.sliding import SlidingWindow

OUT = Path(__file__).resolve().parent / "out" / "memory.json"
BUDGET = 8000
WORDS = [
    "order",
    "refund",
    "shipping",
    "address",
    "invoice",
    "account",
    "delivery",
    "tracking",
    "package",
    "warehouse",
    "payment",
    "card",
    "billing",
    "status",
    "support",
    "ticket",
    "replacement",
    "return",
    "label",
    "carrier",
    "customs",
]


def conversation(n: int, seed: int = 7) -> list[Message]:
    """``n`` messages: a system prompt, then chat and tool turns with unique call ids."""
    rng = random.Random(seed)
    out = [Message.system("You are a careful support agent for an online shop.")]

    def words(lo: int, hi: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))

    turn = 0
    while len(out) < n:
        turn += 1
        out.append(Message.user(f"[{turn}] " + words(10, 60)))
        if turn % 3 == 0:
            a, b = f"call_{turn}_a", f"call_{turn}_b"
            out.append(
                Message.assistant(
                    tool_calls=[
                        ToolCallPart(a, "lookup_order", json.dumps({"order": turn})),
                        ToolCallPart(b, "lookup_customer", json.dumps({"turn": turn})),
                    ]
                )
            )
            out.append(Message.tool_result(a, words(30, 150)))
            out.append(Message.tool_result(b, words(20, 80)))
        out.append(Message.assistant(words(20, 120)))
    return out[:n] if _safe_end(out[:n]) else out[: _last_safe(out, n)]


def _safe_end(messages: list[Message]) -> bool:
    """True when no tool call is left unanswered at the end."""
    open_ids: set[str] = set()
    for m in messages:
        open_ids.update(c.id for c in m.tool_calls)
        open_ids.difference_update(r.call_id for r in m.tool_results)
    return not open_ids


def _last_safe(messages: list[Message], n: int) -> int:
    k = n
    while k > 0 and not _safe_end(messages[:k]):
        k -= 1
    return k


def as_responses_items(messages: list[Message]) -> list[dict[str, Any]]:
    """The messages as Responses input items (what SQLiteSession stores)."""
    items: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            for r in m.tool_results:
                items.append(
                    {"type": "function_call_output", "call_id": r.call_id, "output": r.text}
                )
        elif m.tool_calls:
            for c in m.tool_calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": c.arguments,
                    }
                )
        else:
            items.append({"role": m.role, "content": m.text})
    return items


class _Unclosed:
    """A handle on a shared in-memory store whose close() keeps the data."""

    def __init__(self, inner: InMemoryStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def close(self) -> None:
        pass


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return (time.perf_counter() - start) * 1000.0, value


def fill(store: Any, cid: str, messages: list[Message]) -> None:
    for i in range(0, len(messages), 1000):
        store.append(cid, messages[i : i + 1000])


def measure_memory(open_handle: Callable[[], Any], cid: str, reps: int) -> dict[str, Any]:
    """First build on a fresh handle, then steady-state builds after another handle appends."""
    store = open_handle()

    def first() -> Any:
        memory = ConversationMemory.open(store, conversation_id=cid, strategy=SlidingWindow(BUDGET))
        return memory, memory.build_context()

    # A full collection over the benchmark's own 100k generated messages would otherwise land
    # in whichever timed call crosses the collector's threshold (hundreds of ms, by chance).
    gc.collect()
    first_ms, (memory, ctx) = timed(first)
    writer = open_handle()
    steady: list[float] = []
    for i in range(reps):
        writer.append(cid, [Message.user(f"one more question, number {i}")])
        ms, ctx = timed(memory.build_context)
        steady.append(ms)
    assert ctx.messages[-1].text == f"one more question, number {reps - 1}"
    stats = ctx.stats
    result = {
        "first_build_ms": first_ms,
        "steady_median_ms": statistics.median(steady),
        "steady_p95_ms": sorted(steady)[max(0, int(len(steady) * 0.95) - 1)],
        "steady_all_ms": steady,
        "context_messages": stats.context_message_count,
        "context_tokens": stats.current_tokens,
        "message_count": stats.message_count,
    }
    # Counting the whole stored history is a separate, one-off cost (count_totals).
    assert stats.total_tokens is None  # opened on a log another handle wrote: unknown
    count_ms, total = timed(lambda: memory.count_totals(stats).total_tokens)
    result["total_tokens"] = total
    result["first_total_tokens_ms"] = count_ms
    if writer is not store:
        writer.close()
    store.close()
    return result


def other_stores() -> dict[str, Callable[[], Any]]:
    """Redis and PostgreSQL handles when their test servers are configured."""
    from contextfold.stores import open_store

    out: dict[str, Callable[[], Any]] = {}
    for name, var in (
        ("redis", "CONTEXTFOLD_TEST_REDIS_URL"),
        ("postgres", "CONTEXTFOLD_TEST_POSTGRES_URL"),
    ):
        url = os.environ.get(var)
        if url:
            out[name] = lambda url=url: open_store(url)  # type: ignore[misc]
    return out


def measure_session(path: Path, items: list[dict[str, Any]], reps: int) -> dict[str, Any]:
    from agents import SQLiteSession

    async def go() -> dict[str, Any]:
        session = SQLiteSession("bench", str(path))
        for i in range(0, len(items), 1000):
            await session.add_items(items[i : i + 1000])  # type: ignore[arg-type]
        loads: list[float] = []
        n = 0
        for _ in range(reps):
            start = time.perf_counter()
            got = await session.get_items()
            loads.append((time.perf_counter() - start) * 1000.0)
            n = len(got)
        session.close()
        return {
            "get_items_median_ms": statistics.median(loads),
            "get_items_all_ms": loads,
            "items": n,
        }

    return asyncio.run(go())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small sizes, a few seconds")
    parser.add_argument(
        "--stores",
        action="store_true",
        help="also time the large size on InMemoryStore, and on Redis/PostgreSQL when "
        "CONTEXTFOLD_TEST_REDIS_URL / CONTEXTFOLD_TEST_POSTGRES_URL are set",
    )
    args = parser.parse_args(argv)
    small, large = (200, 2_000) if args.tiny else (1_000, 100_000)
    reps = 10 if args.tiny else 50
    session_reps = 2 if args.tiny else 3
    report: dict[str, Any] = {"budget": BUDGET, "strategy": "SlidingWindow", "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (small, large):
            messages = conversation(n)
            url = f"sqlite:///{Path(tmp) / f'memory_{n}.db'}"
            seed = SQLiteStore(url)
            fill(seed, "bench", messages)
            seed.close()
            result = measure_memory(lambda url=url: SQLiteStore(url), "bench", reps)  # type: ignore[misc]
            report["sizes"][str(n)] = {"stored": len(messages), **result}
        if args.stores:
            large_msgs = conversation(large)
            shared = InMemoryStore()
            backends: dict[str, Callable[[], Any]] = {"memory": lambda: _Unclosed(shared)}
            backends.update(other_stores())
            report["stores"] = {}
            for name, make in backends.items():
                cid = f"bench-{uuid.uuid4().hex[:8]}"
                handle = make()
                fill(handle, cid, large_msgs)
                handle.close()
                report["stores"][name] = measure_memory(make, cid, reps)
                cleanup = make()
                cleanup.delete(cid)
                cleanup.close()
        session_db = Path(tmp) / "session.db"
        large_msgs = conversation(large)
        report["sqlite_session"] = {
            "messages": len(large_msgs),
            **measure_session(session_db, as_responses_items(large_msgs), session_reps),
        }
    s, b = report["sizes"][str(small)], report["sizes"][str(large)]
    sess = report["sqlite_session"]["get_items_median_ms"]
    report["steady_ratio_large_vs_small"] = b["steady_median_ms"] / s["steady_median_ms"]
    report["speedup_vs_get_items"] = sess / b["steady_median_ms"]
    report["first_build_speedup_vs_get_items"] = sess / b["first_build_ms"]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2))

    print(f"build_context latency, SlidingWindow({BUDGET}), SQLiteStore (ms)\n")
    print(
        "| conversation | first build (open + build) | steady median | steady p95 | context msgs | count_totals (first call) |"
    )
    print("|---|---|---|---|---|---|")
    for n in (small, large):
        r = report["sizes"][str(n)]
        print(
            f"| {r['stored']:,} messages | {r['first_build_ms']:.2f} | {r['steady_median_ms']:.3f} "
            f"| {r['steady_p95_ms']:.3f} | {r['context_messages']} | {r['first_total_tokens_ms']:.1f} |"
        )
    print(
        f"| `SQLiteSession.get_items()` on {report['sqlite_session']['items']:,} items | {sess:.1f} | | | | |"
    )
    print()
    print(
        f"steady state {large:,} vs {small:,}: {report['steady_ratio_large_vs_small']:.2f}x (target <= 2x)"
    )
    print(
        f"steady state vs get_items() on {large:,}: {report['speedup_vs_get_items']:.0f}x faster (target >= 100x)"
    )
    print(
        f"first build vs get_items() on {large:,}: {report['first_build_speedup_vs_get_items']:.0f}x faster"
    )
    if "stores" in report:
        print(f"\nbuild_context on {large:,} messages per store (ms)\n")
        print("| store | first build (open + build) | steady median | steady p95 |")
        print("|---|---|---|---|")
        for name, r in report["stores"].items():
            print(
                f"| {name} | {r['first_build_ms']:.2f} | {r['steady_median_ms']:.3f} | {r['steady_p95_ms']:.3f} |"
            )
    return report


if __name__ == "__main__":
    main()
