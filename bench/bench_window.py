"""Sliding-window speed: contextfold ``SlidingWindow`` vs LangChain ``trim_messages``.

Both run side by side in one process on the same synthetic agent histories (system prompt,
user turns, assistant answers, tool calls with results) of 1k, 10k, 100k and 1M messages,
with the same budget and the same approximate counting: characters / 4 plus 3 tokens per
message (contextfold ``ApproxCounter``; LangChain ``count_tokens_approximately``).

Measured per history size:

* ``first``: the first build over a freshly loaded history (no cached counts; median of 5,
  clearing the counts in between).
* ``steady``: the median build (wall time; CPU time also recorded) after that, with one new message appended before each build
  (what a chat does on every request; the new message is counted once).
* ``trim_messages``: the median call of ``trim_messages(strategy="last", include_system=True,
  start_on="human")``. It caches nothing, so every call costs the same. Runs whose projected
  time passes the cap are not run and are reported as ``not run``.

Run: ``python -m bench.bench_window [--tiny]``. Prints a Markdown table and writes the raw
figures to ``bench/out/window.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextfold.messages import Message, ToolCallPart
from contextfold.strategies.sliding import SlidingWindow
from contextfold.tokens.approx import ApproxCounter
from contextfold.turns import validate

OUT = Path(__file__).resolve().parent / "out" / "window.json"
BUDGET = 8_000
SIZES = [1_000, 10_000, 100_000, 1_000_000]
TINY_SIZES = [1_000, 10_000]
TRIM_CAP_S = 60.0  # do not start a trim_messages run projected to take longer than this

# A small pool of texts, reused so that a million messages fit in memory.
_TEXTS = [
    "Can you check the status of order {n}? It was due last week and has not arrived yet.",
    "Sure. I looked it up: the parcel left the warehouse on Monday and is in transit now.",
    "Please also update the delivery address to the office; the apartment is not staffed.",
    "Done. The carrier confirmed the change; expect delivery within two working days. " * 2,
    "What did we decide about the refund for the damaged item in the previous order?",
    "The refund of 42.50 was approved and will show on the card within five days. " * 3,
]
_RESULT = '{"status": "in_transit", "eta_days": 2, "carrier": "ACME", "events": 7}' * 2


def build_history(n: int) -> list[Message]:
    """``n`` messages: a system prompt, then turns; every third turn makes a tool call."""
    out: list[Message] = [Message.system("You are a careful support agent. " * 8, id="sys")]
    t = 0
    while len(out) < n:
        out.append(Message.user(_TEXTS[t % 3 * 2].format(n=t), id=f"u{t}"))
        if t % 3 == 0 and len(out) + 3 <= n:
            call = ToolCallPart(f"c{t}", "get_order", f'{{"order_id": {t}}}')
            out.append(Message.assistant(tool_calls=[call], id=f"c{t}"))
            out.append(Message.tool_result(f"c{t}", _RESULT, id=f"r{t}"))
        out.append(Message.assistant(_TEXTS[t % 3 * 2 + 1], id=f"a{t}"))
        t += 1
    return out[:n] if out[-1].role != "assistant" or not out[-1].tool_calls else out


def to_langchain(history: list[Message]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for m in history:
        if m.role == "system":
            out.append(SystemMessage(m.text, id=m.id))
        elif m.role == "user":
            out.append(HumanMessage(m.text, id=m.id))
        elif m.role == "tool":
            r = m.tool_results[0]
            out.append(ToolMessage(r.text, tool_call_id=r.call_id, id=m.id))
        else:
            calls = [
                {"id": c.id, "name": c.name, "args": json.loads(c.arguments)} for c in m.tool_calls
            ]
            out.append(AIMessage(m.text, tool_calls=calls, id=m.id))
    return out


def _time(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall time of one call, with the garbage collector paused (as ``timeit`` does)."""
    t, _, value = _time2(fn)
    return t, value


def _time2(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and CPU time of one call (CPU time is steadier on a busy machine)."""
    gc.disable()
    try:
        cpu = time.process_time()
        start = time.perf_counter()
        value = fn()
        wall = time.perf_counter() - start
        return wall, time.process_time() - cpu, value
    finally:
        gc.enable()


def bench_sliding(sizes: list[int], steady_runs: int) -> dict[int, dict[str, Any]]:
    """Time SlidingWindow on every size, interleaving the sizes run by run.

    All histories are built first; then each round times one build on each size in turn, so
    a busy machine slows every size alike and the ratios between sizes stay meaningful.
    """
    histories = {n: build_history(n) for n in sizes}
    counter = ApproxCounter()
    window = SlidingWindow(BUDGET)
    gc.collect()
    firsts: dict[int, list[float]] = {n: [] for n in sizes}
    walls: dict[int, list[float]] = {n: [] for n in sizes}
    cpus: dict[int, list[float]] = {n: [] for n in sizes}
    results: dict[int, Any] = {}
    # The first build over a freshly loaded history: no message has a cached count. Taken
    # five times per size, clearing the counts in between.
    for _ in range(5):
        for n, history in histories.items():
            for m in history[-5000:]:
                m._token_cache.clear()
            history[0]._token_cache.clear()
            t, results[n] = _time(lambda h=history: window.fit(h, counter=counter))
            firsts[n].append(t)
    for n in sizes:
        validate(results[n].messages)
        assert results[n].tokens <= BUDGET
    # Steady state: one new message before each build, as in a chat.
    for k in range(steady_runs):
        for n, history in histories.items():
            history.append(Message.user(f"one more question, number {k}", id=f"extra-u{k}"))
            t, cpu, results[n] = _time2(lambda h=history: window.fit(h, counter=counter))
            walls[n].append(t)
            cpus[n].append(cpu)
            history.append(Message.assistant("an answer", id=f"extra-a{k}"))
    return {
        n: {
            "messages": n,
            "first_s": statistics.median(firsts[n]),
            "steady_s": statistics.median(walls[n]),
            "steady_cpu_s": statistics.median(cpus[n]),
            "steady_runs": steady_runs,
            "kept": len(results[n].messages),
            "tokens": results[n].tokens,
        }
        for n in sizes
    }


def bench_trim(n: int, runs: int, projected: float | None) -> dict[str, Any]:
    if projected is not None and projected > TRIM_CAP_S:
        return {"messages": n, "skipped": True, "projected_s": projected}
    from langchain_core.messages import trim_messages
    from langchain_core.messages.utils import count_tokens_approximately

    lc = to_langchain(build_history(n))
    gc.collect()
    times: list[float] = []
    out: list[Any] = []
    for _ in range(runs):
        t, out = _time(
            lambda: trim_messages(
                lc,
                max_tokens=BUDGET,
                token_counter=count_tokens_approximately,
                strategy="last",
                include_system=True,
                start_on="human",
            )
        )
        times.append(t)
    return {
        "messages": n,
        "skipped": False,
        "per_call_s": statistics.median(times),
        "runs": runs,
        "kept": len(out),
        "tokens": count_tokens_approximately(out),
    }


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="1k and 10k messages only")
    args = parser.parse_args(argv)
    sizes = TINY_SIZES if args.tiny else SIZES
    bench_sliding([500], steady_runs=3)  # warm up imports and code paths, untimed
    sliding = bench_sliding(sizes, steady_runs=20 if args.tiny else 200)
    print("SlidingWindow done", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    last_trim: tuple[int, float] | None = None
    for n in sizes:
        ours = sliding[n]
        projected = None if last_trim is None else last_trim[1] * n / last_trim[0]
        runs = 5 if n <= 10_000 else 1
        theirs = bench_trim(n, runs, projected)
        if not theirs["skipped"]:
            last_trim = (n, theirs["per_call_s"])
        rows.append({"messages": n, "sliding": ours, "trim_messages": theirs})
        print(f"trim_messages {n} done", file=sys.stderr)

    base = rows[0]["sliding"]["steady_s"]
    base_cpu = rows[0]["sliding"]["steady_cpu_s"]
    lines = [
        f"Budget {BUDGET} tokens, chars/4 + 3 per message for both. "
        f"Python {platform.python_version()}.",
        "",
        "| messages | SlidingWindow first | SlidingWindow steady | steady vs 1k (wall / CPU) "
        "| trim_messages per call | speed-up (steady) | tokens sent (ours / LC) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        s, t = row["sliding"], row["trim_messages"]
        if t["skipped"]:
            trim = f"not run (≈{t['projected_s']:.0f} s projected)"
            speed = "-"
            kept = f"{s['tokens']:,} / -"
        else:
            trim = fmt(t["per_call_s"])
            speed = f"{t['per_call_s'] / s['steady_s']:,.0f}x"
            kept = f"{s['tokens']:,} / {t['tokens']:,}"
        lines.append(
            f"| {row['messages']:,} | {fmt(s['first_s'])} | {fmt(s['steady_s'])} "
            f"| {s['steady_s'] / base:.2f}x / {s['steady_cpu_s'] / base_cpu:.2f}x "
            f"| {trim} | {speed} | {kept} |"
        )
    table = "\n".join(lines)
    print(table)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "budget": BUDGET,
                "tiny": args.tiny,
                "python": platform.python_version(),
                "rows": rows,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
