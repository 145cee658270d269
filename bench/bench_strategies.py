"""Summarizing strategies: build cost with checkpoint reuse, and what pruning saves.

Two measurements, side by side:

1. **Build time.** Synthetic agent histories (system prompt, user turns, answers, tool calls
   with results) of 1k, 10k and 100k messages, budget 8,000 tokens, ``ApproxCounter``, and a
   summarizer that answers instantly with a short fixed text (so the figures are the
   strategy's own cost, not a model's). ``first`` is the first build (it makes the summary
   calls); ``steady`` is the median build after that, one message appended before each and
   the previous checkpoint handed back, as a chat does on every request; ``calls`` counts
   summarizer calls over the steady builds (checkpoint reuse keeps it low).
2. **Pruning on real agent sessions.** The three Claude Code sessions in ``../shared/data``:
   tokens before and after ``PruneToolOutputs(keep_recent=3)``, and whether a
   ``Pipeline([PruneToolOutputs, Hybrid])`` at a quarter of the tokens still needs the
   summarizer.

Run: ``python -m bench.bench_strategies [--tiny]``. Prints Markdown tables and writes the raw
figures to ``bench/out/strategies.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.formats import anthropic
from contextfold.messages import Message, ToolCallPart
from contextfold.strategies import (
    Hybrid,
    Pipeline,
    PruneToolOutputs,
    Strategy,
    Summarization,
    SummaryCompactor,
)
from contextfold.strategies.run import run
from contextfold.summarizers.base import SummarizationResult, SummaryRequest
from contextfold.tokens.approx import ApproxCounter

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "bench" / "out" / "strategies.json"
BUDGET = 8_000
SIZES = [1_000, 10_000, 100_000]
TINY_SIZES = [1_000]
STEADY_BUILDS = 15


class InstantSummarizer:
    """Answers at once with a short text, so only the strategy's cost is measured."""

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        self.calls += 1
        return SummarizationResult.success(
            f"The user and the agent went through {len(request.messages)} more messages "
            "about orders, refunds and addresses; the open task is the refund of order 17."
        )


def build_history(n: int) -> list[Message]:
    out: list[Message] = [Message.system("You are a careful support agent. " * 8, id="sys")]
    t = 0
    while len(out) < n:
        out.append(Message.user(f"Please check order {t}; it has not arrived.", id=f"u{t}"))
        if t % 3 == 0:
            call = ToolCallPart(f"c{t}", "lookup_order", f'{{"order": {t}}}')
            out.append(Message.assistant(None, tool_calls=[call], id=f"a{t}"))
            out.append(Message.tool_result(f"c{t}", '{"status": "in_transit"}' * 20, id=f"t{t}"))
        out.append(Message.assistant(f"Order {t} is in transit; two more days.", id=f"b{t}"))
        t += 1
    return out[:n] if out[min(n, len(out)) - 1].role != "tool" else out[: n - 2]


Factory = Callable[[InstantSummarizer], Strategy]

FACTORIES: dict[str, Factory] = {
    "Summarization": lambda s: Summarization(BUDGET, keep_recent=8, summarizer=s),
    "Hybrid": lambda s: Hybrid(BUDGET, keep_recent=8, chunk_size=40, summarizer=s),
    "SummaryCompactor": lambda s: SummaryCompactor(s, keep_recent_turns=4, budget_chars=BUDGET * 4),
    "Pipeline(Prune, Hybrid)": lambda s: Pipeline(
        [
            PruneToolOutputs(keep_recent=3, min_savings=500),
            Hybrid(BUDGET, keep_recent=8, chunk_size=40, summarizer=s),
        ],
        max_tokens=BUDGET,
    ),
}


def time_builds(name: str, n: int) -> dict[str, Any]:
    history = build_history(n)
    counter = ApproxCounter()
    summarizer = InstantSummarizer()
    strategy = FACTORIES[name](summarizer)
    t0 = time.perf_counter()
    result = run(strategy, history, counter=counter)
    first = time.perf_counter() - t0
    first_calls = summarizer.calls
    checkpoint: CheckpointRecord | None = result.checkpoint
    times = []
    for i in range(STEADY_BUILDS):
        history.append(Message.user(f"And order {i}?", id=f"x{i}"))
        history.append(Message.assistant("Also in transit.", id=f"y{i}"))
        t0 = time.perf_counter()
        result = run(strategy, history, counter=counter, checkpoint=checkpoint)
        times.append(time.perf_counter() - t0)
        checkpoint = result.checkpoint or checkpoint
        assert result.tokens <= BUDGET
    return {
        "strategy": name,
        "messages": n,
        "first_ms": first * 1000,
        "first_calls": first_calls,
        "steady_ms": statistics.median(times) * 1000,
        "steady_calls": summarizer.calls - first_calls,
        "steady_builds": STEADY_BUILDS,
    }


def claude_code_sessions() -> list[tuple[str, list[Message]]]:
    base = DATA / "claude-code-sessions"
    if not base.is_dir():
        return []
    sys.path.insert(0, str(ROOT / "tests"))
    from shared_data import claude_code_payload  # the data README's merge rules

    paths = sorted(p for p in base.glob("*.jsonl") if len(p.stem) > 30)
    return [
        (
            p.stem[:8],
            anthropic.load({"messages": claude_code_payload(p, include_compact_summary=False)}),
        )
        for p in paths
    ]


def prune_figures() -> list[dict[str, Any]]:
    counter = ApproxCounter()
    rows = []
    for name, history in claude_code_sessions():
        before = counter.count_messages(history)
        pruned = run(PruneToolOutputs(keep_recent=3, min_savings=500), history, counter=counter)
        budget = before // 4
        summarizer = InstantSummarizer()
        pipe = Pipeline(
            [
                PruneToolOutputs(keep_recent=3, min_savings=500),
                Hybrid(budget, keep_recent=8, chunk_size=40, summarizer=summarizer),
            ],
            max_tokens=budget,
        )
        piped = run(pipe, history, counter=counter)
        rows.append(
            {
                "session": name,
                "messages": len(history),
                "tokens": before,
                "after_prune": pruned.tokens,
                "saved_share": 1 - pruned.tokens / before,
                "cleared_outputs": len(pruned.pruned),
                "pipeline_budget": budget,
                "pipeline_calls": summarizer.calls,
                "pipeline_tokens": piped.tokens,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="one small size, for CI")
    args = parser.parse_args(argv)
    sizes = TINY_SIZES if args.tiny else SIZES
    builds = [time_builds(name, n) for n in sizes for name in FACTORIES]
    prune = [] if args.tiny else prune_figures()

    print(
        f"Build cost, budget {BUDGET:,} tokens, instant summarizer ({platform.python_version()})\n"
    )
    print(
        "| strategy | messages | first build ms | first calls | steady build ms | calls in steady builds |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for r in builds:
        print(
            f"| {r['strategy']} | {r['messages']:,} | {r['first_ms']:.1f} | {r['first_calls']} "
            f"| {r['steady_ms']:.2f} | {r['steady_calls']} / {r['steady_builds']} |"
        )
    if prune:
        print("\nPruneToolOutputs(keep_recent=3) on Claude Code sessions (ApproxCounter)\n")
        print(
            "| session | messages | tokens | after pruning | saved | outputs cleared | pipeline at 25%: summarizer calls |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        for r in prune:
            print(
                f"| {r['session']} | {r['messages']} | {r['tokens']:,} | {r['after_prune']:,} "
                f"| {r['saved_share']:.0%} | {r['cleared_outputs']} | {r['pipeline_calls']} |"
            )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "python": platform.python_version(),
                "budget": BUDGET,
                "builds": builds,
                "prune": prune,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
