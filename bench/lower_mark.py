"""The lower mark's trade-off: billed input against mean context size and answer retention.

Every budgeted strategy only appends between two compactions and, when the next request
would not fit, compacts once down to ``compact_to`` (a share of ``max_tokens``). A low mark
means fewer compactions (fewer cache rewrites) but smaller contexts right after each one; a
mark of 1.0 is the classic per-turn window. This benchmark replays the 10 LoCoMo
conversations (a request at every user turn, ``../shared/data``, never copied into the repo)
at a 4,000-token budget for each mark and reports, per strategy:

* billed input under Anthropic prices, as a ratio to resending the full history with
  caching: as replayed (sessions days apart start cold) and with a cache that never expires;
* prefix breaks, and the bound the issue sets on them: the tokens the conversation grows by
  divided by ``max_tokens`` minus the lower mark, plus one per conversation;
* mean context tokens;
* answer retention: the share of LoCoMo QA answers (categories 1-4) found in the context
  built after the conversation's last message, the same score as ``bench.retention``.

Run: ``python -m bench.lower_mark [--tiny]``. Prints a Markdown table, writes
``bench/out/lower_mark.json`` and, with matplotlib, ``docs/bench/lower_mark.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench._replay_data import DATA, ROOT, Replay, locomo
from bench._replay_strategies import COUNTER, Builder, full_history, through_memory, with_state
from bench.replay import Tally, replay_one
from bench.retention import answers_present, normalize, retained
from contextfold.pricing import ModelPrices, prices_for
from contextfold.strategies.checkpoint import Checkpoint
from contextfold.strategies.sliding import SlidingWindow
from contextfold.summarizers.extractive import ExtractiveSummarizer

OUT = ROOT / "bench" / "out"
CHARTS = ROOT / "docs" / "bench"
BUDGET = 4_000
MARKS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4)


def builders(mark: float) -> dict[str, Builder]:
    """The strategies swept, with their defaults except the lower mark."""
    return {
        "SlidingWindow": with_state(SlidingWindow(BUDGET, compact_to=mark)),
        "Checkpoint+Extractive": through_memory(
            lambda: Checkpoint(ExtractiveSummarizer(), max_tokens=BUDGET, compact_to=mark)
        ),
    }


def _last(build: Builder, replay: Replay) -> Sequence[Any] | None:
    """The context of the replay's last request (what the questions are asked against)."""
    last = None
    for context in build(replay):
        last = context
    return last


def sweep(
    replays: list[Replay], samples: list[dict[str, Any]], marks: Sequence[float] = MARKS
) -> list[dict[str, Any]]:
    base = prices_for("claude-sonnet-4-5", source="builtin")
    prices: dict[str, ModelPrices] = {
        "replayed": base,
        "warm": dataclasses.replace(
            base, cache_ttl_s=1e12, long_cache_ttl_s=None, cache_write_long=None
        ),
    }
    full = Tally()
    for replay in replays:
        replay_one(replay, full_history, BUDGET, prices, full)
    answers = [
        answers_present(s, normalize(" ".join(m.text for m in r.messages)))
        for s, r in zip(samples, replays, strict=True)
    ]
    grown = sum(COUNTER.count_messages(r.messages) for r in replays)
    rows = []
    for mark in marks:
        for name, build in builders(mark).items():
            t0 = time.perf_counter()
            tally = Tally()
            kept = 0.0
            for replay, wanted in zip(replays, answers, strict=True):
                one = Tally()
                replay_one(replay, build, BUDGET, prices, one)
                _add(tally, one)
                last = _last(build, replay)
                kept += retained(wanted, last or ())
            freed = BUDGET - int(BUDGET * mark)
            rows.append(
                {
                    "compact_to": mark,
                    "strategy": name,
                    "requests": tally.requests,
                    "prefix_breaks": tally.breaks,
                    "break_bound": (grown // freed + len(replays)) if freed else None,
                    "mean_context_tokens": tally.context_tokens / max(1, tally.requests),
                    "vs_full": tally.cost["replayed"] / full.cost["replayed"],
                    "vs_full_warm": tally.cost["warm"] / full.cost["warm"],
                    "answer_retention": kept / len(replays),
                }
            )
            print(f"  {name} @ {mark}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return rows


def _add(into: Tally, one: Tally) -> None:
    into.requests += one.requests
    into.context_tokens += one.context_tokens
    into.breaks += one.breaks
    for k in one.cost:
        into.add(k, one.cost[k], one.floor[k], one.read[k], one.write[k])


def table(rows: list[dict[str, Any]], conversations: int) -> str:
    lines = [
        f"## The lower mark: LoCoMo, {conversations} conversations, budget {BUDGET:,} tokens",
        "",
        "Billed input (claude-sonnet-4-5 prices) as a ratio to the full history resent with "
        "caching. Break bound: growth / (max_tokens - lower mark) + 1 per conversation.",
        "",
        "| compact_to | strategy | requests | prefix breaks | break bound | mean context "
        "| vs full (replayed) | vs full (cache never expires) | answers retained |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        bound = "-" if r["break_bound"] is None else f"{r['break_bound']:,}"
        lines.append(
            f"| {r['compact_to']:.1f} | {r['strategy']} | {r['requests']:,} | "
            f"{r['prefix_breaks']:,} | {bound} | {r['mean_context_tokens']:,.0f} | "
            f"{r['vs_full']:.2f}x | {r['vs_full_warm']:.2f}x | {r['answer_retention']:.0%} |"
        )
    return "\n".join(lines)


def chart(rows: list[dict[str, Any]]) -> None:
    """Billed cost against mean context size, one line per strategy, marks annotated."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name in dict.fromkeys(r["strategy"] for r in rows):
        mine = [r for r in rows if r["strategy"] == name]
        xs = [r["mean_context_tokens"] for r in mine]
        ys = [r["vs_full_warm"] for r in mine]
        ax.plot(xs, ys, marker="o", label=name)
        for r, x, y in zip(mine, xs, ys, strict=True):
            ax.annotate(f"{r['compact_to']:.1f}", (x, y), textcoords="offset points", xytext=(4, 4))
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("mean context tokens per request")
    ax.set_ylabel("billed input vs full history (cached)")
    ax.set_title(f"Lower mark (compact_to) on LoCoMo at {BUDGET:,} tokens")
    ax.legend()
    fig.tight_layout()
    CHARTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(CHARTS / "lower_mark.png", dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None, *, emit: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--tiny", action="store_true", help="LoCoMo conversation 0, marks 1.0 and 0.6 only"
    )
    args = parser.parse_args(argv)
    if not DATA.is_dir():
        print(f"shared data folder not found at {DATA}", file=sys.stderr)
        return 1
    samples = json.loads((DATA / "locomo" / "locomo10.json").read_text())
    replays = locomo(args.tiny)
    samples = samples[: len(replays)]
    rows = sweep(replays, samples, (1.0, 0.6) if args.tiny else MARKS)
    emit(table(rows, len(replays)))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "lower_mark.json").write_text(json.dumps({"tiny": args.tiny, "rows": rows}, indent=2))
    if not args.tiny:
        chart(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
