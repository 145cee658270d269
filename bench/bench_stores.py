"""Store throughput and load time, side by side with the Agents SDK ``SQLiteSession``.

Run ``python -m bench.bench_stores`` (100k-message conversation) or ``--tiny`` (2k, seconds).

Measured in one run, each store in a fresh database or key space:

* **single append**: one message per call, ``append(cid, [m])`` against
  ``await session.add_items([item])`` (the SDK has only an async API; our async
  ``aappend`` is measured too, so the comparison also holds like for like; the SQLite
  store commits a small async append right in the event loop when no other writer holds
  the lock, since a WAL commit at ``synchronous=NORMAL`` does not wait for the disk);
* **batched append**: 1,000 messages per call, until the conversation holds N messages;
* **load all**: read the whole N-message conversation back, median of 3 (``read(cid)``
  decodes every row into ``Message`` objects; ``get_items()`` only ``json.loads``
  each row into a dict). The time includes a collection of the young generations right
  after, so garbage-collector work a store defers is counted, not hidden (contextfold's
  stores do not switch the collector off);
* **tail window**: the newest 50 messages, ``read(cid, after_seq=N-50, limit=50)`` against
  ``get_items(limit=50)``, median of repeated reads.

SQLite stores write to a file in a temporary folder. ``SQLiteStore`` runs at its default
``synchronous=NORMAL`` (survives a killed process, not necessarily power loss); a row with
``synchronous=FULL`` (survives power loss, like the SDK's default) is included for single
appends. Redis and PostgreSQL rows appear when ``CONTEXTFOLD_TEST_REDIS_URL`` /
``CONTEXTFOLD_TEST_POSTGRES_URL`` are set (``.ci/services.sh`` starts both).

Contenders are measured interleaved (each round times every store on the same slice of
work), so outside load on a shared machine hits all of them alike.

Messages are LoCoMo chat turns (text, about 120 characters on average) alternating user and
assistant, repeated to reach N; without the shared data folder, synthetic turns of similar
length are used. Raw figures go to ``bench/out/stores.json``; a Markdown table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextfold.messages import Message
from contextfold.stores import open_store
from contextfold.stores.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
OUT = Path(__file__).resolve().parent / "out" / "stores.json"
BATCH = 1000
TAIL = 50


def chat_turns() -> tuple[list[str], str]:
    """Text of real chat turns (LoCoMo), or synthetic ones when the data is absent."""
    path = DATA / "locomo" / "locomo10.json"
    if path.is_file():
        texts = []
        for sample in json.loads(path.read_text()):
            conv = sample["conversation"]
            sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
            for n in sessions:
                texts.extend(turn["text"] for turn in conv[f"session_{n}"])
        return texts, "LoCoMo turns"
    words = ["order", "refund", "shipping", "address", "invoice", "account", "status"]
    return [
        " ".join(words[(i * 7 + j) % len(words)] for j in range(15 + i % 10)) for i in range(5000)
    ], "synthetic turns"


def build_messages(n: int, texts: list[str]) -> list[Message]:
    return [
        (Message.user if i % 2 == 0 else Message.assistant)(texts[i % len(texts)]) for i in range(n)
    ]


def as_items(messages: list[Message]) -> list[dict[str, Any]]:
    return [{"role": m.role, "content": m.text} for m in messages]


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


# -- contenders ----------------------------------------------------------------------------
#
# The machine running this may be shared and busy, so contenders are measured interleaved:
# each round times every contender on the same slice of work, and the totals are summed per
# contender. A burst of outside load then hits all of them alike instead of one.


class Contender:
    """One store under test, driven through async callables so one loop runs them all."""

    name: str
    singles_share: int = 1  # single appends per round, relative to the others

    async def single(self, m: Message, item: dict[str, Any]) -> None:
        raise NotImplementedError

    async def async_single(self, m: Message, item: dict[str, Any]) -> None:
        raise NotImplementedError

    async def batch(self, ms: list[Message], items: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    async def load_all(self) -> int:
        raise NotImplementedError

    async def tail(self, n: int) -> int:
        raise NotImplementedError

    async def close(self) -> None:
        pass


class Session(Contender):
    """``agents.SQLiteSession`` on a file (its API is async only)."""

    def __init__(self, folder: Path) -> None:
        from agents import SQLiteSession

        self.name = "agents.SQLiteSession (file)"
        self.one = SQLiteSession("single", db_path=folder / "session_single.db")
        self.big = SQLiteSession("big", db_path=folder / "session_big.db")

    async def single(self, m: Message, item: dict[str, Any]) -> None:
        await self.one.add_items([item])

    async_single = single

    async def batch(self, ms: list[Message], items: list[dict[str, Any]]) -> None:
        await self.big.add_items(items)

    async def load_all(self) -> int:
        return len(await self.big.get_items())

    async def tail(self, n: int) -> int:
        return len(await self.big.get_items(limit=TAIL))

    async def close(self) -> None:
        self.one.close()
        self.big.close()


class Ours(Contender):
    """A contextfold store: sync calls for the sync columns, a second handle for async."""

    def __init__(self, name: str, make: Callable[[], Any], *, cleanup: bool) -> None:
        self.name = name
        self.store = make()
        self.astore = make()
        self.cleanup = cleanup
        self.cid = "bench-" + uuid.uuid4().hex[:8]

    async def single(self, m: Message, item: dict[str, Any]) -> None:
        self.store.append(self.cid + "-single", [m])

    async def async_single(self, m: Message, item: dict[str, Any]) -> None:
        await self.astore.aappend(self.cid + "-async", [m])

    async def batch(self, ms: list[Message], items: list[dict[str, Any]]) -> None:
        self.store.append(self.cid, ms)

    async def load_all(self) -> int:
        return len(self.store.read(self.cid))

    async def tail(self, n: int) -> int:
        window = self.store.read(self.cid, after_seq=n - TAIL, limit=TAIL)
        assert window[-1].seq == n
        return len(window)

    async def close(self) -> None:
        if self.cleanup:
            for suffix in ("", "-single", "-async"):
                self.store.delete(self.cid + suffix)
        self.store.close()
        await self.astore.aclose()


class OursFull(Ours):
    """SQLiteStore with ``synchronous=FULL``: single appends only (one fsync each)."""


async def measure(
    contenders: list[Contender],
    messages: list[Message],
    *,
    singles: int,
    session_singles: int,
    repeat: int,
    loads: int,
) -> dict[str, dict[str, Any]]:
    items = as_items(messages)
    n = len(messages)
    totals: dict[str, dict[str, float]] = {c.name: {} for c in contenders}

    def add(c: Contender, key: str, seconds: float, count: int) -> None:
        t = totals[c.name]
        t[key + "_s"] = t.get(key + "_s", 0.0) + seconds
        t[key + "_n"] = t.get(key + "_n", 0.0) + count

    rounds = 10
    slow = {c.name for c in contenders if isinstance(c, (Session, OursFull))}
    for phase in ("single", "async_single"):
        position = 0
        for _ in range(rounds):
            for c in contenders:
                if phase == "async_single" and isinstance(c, (Session, OursFull)):
                    continue
                k = (session_singles if c.name in slow else singles) // rounds
                fn = getattr(c, phase)
                started = time.perf_counter()
                for i in range(position, position + k):
                    await fn(messages[i % n], items[i % n])
                add(c, phase, time.perf_counter() - started, k)
            position += singles // rounds

    bulk = [c for c in contenders if not isinstance(c, OursFull)]
    for i in range(0, n, BATCH):
        for c in bulk:
            started = time.perf_counter()
            await c.batch(messages[i : i + BATCH], items[i : i + BATCH])
            add(c, "batched", time.perf_counter() - started, len(messages[i : i + BATCH]))

    loaded: dict[str, list[float]] = {c.name: [] for c in bulk}
    tails: dict[str, list[float]] = {c.name: [] for c in bulk}
    for _ in range(loads):
        for c in bulk:
            started = time.perf_counter()
            assert await c.load_all() == n
            # Count collector work a store deferred, if any.
            gc.collect(1)
            loaded[c.name].append(time.perf_counter() - started)
    for _ in range(repeat):
        for c in bulk:
            started = time.perf_counter()
            assert await c.tail(n) == TAIL
            tails[c.name].append(time.perf_counter() - started)

    results: dict[str, dict[str, Any]] = {}
    for c in contenders:
        t = totals[c.name]
        r: dict[str, Any] = {}
        for key in ("single", "async_single", "batched"):
            if t.get(key + "_n"):
                r[key + "_per_s"] = rate(int(t[key + "_n"]), t[key + "_s"])
        if isinstance(c, Session):
            r["async_single_per_s"] = r["single_per_s"]
        if loaded.get(c.name):
            r["load_all_ms"] = statistics.median(loaded[c.name]) * 1000
            r["tail_ms"] = statistics.median(tails[c.name]) * 1000
        results[c.name] = r
    for c in contenders:
        await c.close()
    return results


# -- report --------------------------------------------------------------------------------


def fmt_rate(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}/s"


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.2f} ms" if value < 10 else f"{value:,.0f} ms"


def table(results: dict[str, dict[str, Any]], n: int) -> str:
    base = results["agents.SQLiteSession (file)"]
    lines = [
        f"| store | single append | async single append | batched append ({BATCH}/call) "
        f"| load all {n:,} | tail {TAIL} of {n:,} |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {fmt_rate(r.get('single_per_s'))} "
            f"| {fmt_rate(r.get('async_single_per_s'))} | {fmt_rate(r.get('batched_per_s'))} "
            f"| {fmt_ms(r.get('load_all_ms'))} | {fmt_ms(r.get('tail_ms'))} |"
        )
    lines.append("")
    lines.append("Ratios against agents.SQLiteSession (higher is better for contextfold):")
    lines.append("")
    lines.append(
        "| store | single | async single | batched | load all (speed-up) | tail (speed-up) |"
    )
    lines.append("|---|---|---|---|---|---|")

    def ratio(r: dict[str, Any], key: str, base_key: str, *, inverse: bool = False) -> str:
        if r.get(key) is None or base.get(base_key) is None:
            return "–"
        value = base[base_key] / r[key] if inverse else r[key] / base[base_key]
        return f"{value:.1f}x"

    for name, r in results.items():
        if name == "agents.SQLiteSession (file)":
            continue

        lines.append(
            f"| {name} | {ratio(r, 'single_per_s', 'single_per_s')} "
            f"| {ratio(r, 'async_single_per_s', 'single_per_s')} "
            f"| {ratio(r, 'batched_per_s', 'batched_per_s')} "
            f"| {ratio(r, 'load_all_ms', 'load_all_ms', inverse=True)} "
            f"| {ratio(r, 'tail_ms', 'tail_ms', inverse=True)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small sizes, a few seconds")
    args = parser.parse_args(argv)
    n, singles, session_singles, repeat, loads = (
        (2_000, 200, 30, 10, 1) if args.tiny else (100_000, 5_000, 1_000, 200, 3)
    )
    texts, source = chat_turns()
    messages = build_messages(n, texts)
    # The inputs live for the whole run: keep them out of the collector's way, for everyone.
    gc.collect()
    gc.freeze()
    redis_url = os.environ.get("CONTEXTFOLD_TEST_REDIS_URL")
    pg_url = os.environ.get("CONTEXTFOLD_TEST_POSTGRES_URL")
    schema = "cfbench_" + uuid.uuid4().hex[:8]
    prefix = "cfbench-" + uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="cf-bench-stores-") as tmp:
        folder = Path(tmp)

        async def run() -> dict[str, dict[str, Any]]:
            contenders: list[Contender] = [
                Session(folder),
                Ours(
                    "SQLiteStore (file, synchronous=NORMAL)",
                    lambda: SQLiteStore(folder / "store.db"),
                    cleanup=False,
                ),
                OursFull(
                    "SQLiteStore (file, synchronous=FULL)",
                    lambda: SQLiteStore(folder / "full.db", synchronous="FULL"),
                    cleanup=False,
                ),
            ]
            if redis_url:
                contenders.append(
                    Ours(
                        "RedisStore", lambda: open_store(redis_url, key_prefix=prefix), cleanup=True
                    )
                )
            if pg_url:
                contenders.append(
                    Ours("PostgresStore", lambda: open_store(pg_url, schema=schema), cleanup=True)
                )
            return await measure(
                contenders,
                messages,
                singles=singles,
                session_singles=session_singles,
                repeat=repeat,
                loads=loads,
            )

        try:
            results = asyncio.run(run())
        finally:
            if redis_url:
                import redis

                client = redis.Redis.from_url(redis_url)
                keys = list(client.scan_iter(match=f"{prefix}:*"))
                if keys:
                    client.delete(*keys)
                client.close()
            if pg_url:
                import psycopg

                with psycopg.connect(pg_url, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    report = {
        "benchmark": "stores",
        "tiny": args.tiny,
        "messages": n,
        "source": source,
        "single_appends": {"contextfold": singles, "agents.SQLiteSession": session_singles},
        "batch": BATCH,
        "tail": TAIL,
        "results": results,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2))
    print(
        f"Stores, {n:,} messages ({source}), single appends measured over "
        f"{singles:,} calls (SQLiteSession and FULL: {session_singles:,}).\n"
    )
    print(table(results, n))
    return report


if __name__ == "__main__":
    main()
