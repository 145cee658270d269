"""Retention benchmark: how much of what matters survives compaction.

Two measurements, both on real data under ``../shared/data`` (never copied into the repo):

1. **LoCoMo QA answers.** Each of the 10 long two-person chats becomes a message list
   (speaker A as ``user``, speaker B as ``assistant``, the session date in front of each
   session's first message). A context is built at 5%, 10% and 25% of the conversation's
   tokens with every offline strategy (and LangChain ``trim_messages`` with the same counter).
   Score: the share of QA answers (categories 1-4) whose normalized answer (lowercase,
   punctuation removed, whitespace collapsed) appears as whole words in the normalized
   context, among those that appear in the full conversation.
2. **Claude Code file paths.** Each main session holds Claude Code's own compaction. The
   compacted span is everything before the ``compact_boundary`` record; the budget is the
   token length of Claude Code's own summary (under the approximate counter). Scores: the
   share of file paths mentioned at least twice in the span that appear in (a) Claude Code's
   summary and (b) our Checkpoint + ExtractiveSummarizer checkpoint written within that
   budget (target: 95%), and the share of the paths our "Files and code" section lists that
   are real: named in a tool call or result, or shaped like a file (an extension, or a
   leading ``/``, ``./`` or ``~/``; never ``/dev/``) (target: 90%).

Also reported: ExtractiveSummarizer throughput in MB of transcript text per second.

Run: ``python -m bench.retention [--tiny]`` (tiny: one conversation, one session). Prints
Markdown tables and writes ``bench/out/retention.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.claude_code_paths import bench_claude_code, claude_code_session, context_text
from contextfold.messages import Message, TextPart
from contextfold.strategies.checkpoint import Checkpoint
from contextfold.strategies.run import run
from contextfold.strategies.sliding import SlidingWindow
from contextfold.summarizers.base import SummaryRequest
from contextfold.summarizers.extractive import ExtractiveSummarizer, clear_token_cache
from contextfold.tokens.approx import ApproxCounter

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "bench" / "out"
FRACTIONS = (0.05, 0.10, 0.25)

# -- text normalization -----------------------------------------------------------------------

_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_WS = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Lowercase, punctuation removed, whitespace collapsed."""
    return _WS.sub(" ", _PUNCT.sub("", text.lower())).strip()


# -- LoCoMo -------------------------------------------------------------------------------------


def locomo_messages(sample: dict[str, Any], *, dated: bool = False) -> list[Message]:
    """Speaker A -> user, B -> assistant; the session date opens each session.

    With ``dated``, every message also carries its session's date as ``extra["timestamp"]``
    (what Recall prints beside an excerpt).
    """
    conv = sample["conversation"]
    a = conv["speaker_a"]
    sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    out: list[Message] = []
    for s in sessions:
        date = conv.get(f"session_{s}_date_time", "")
        for j, turn in enumerate(conv[f"session_{s}"]):
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            if j == 0 and date:
                text = f"[{date}] {text}"
            role = "user" if turn["speaker"] == a else "assistant"
            more = {"extra": {"timestamp": date}} if dated and date else {}
            out.append(
                Message(role, (TextPart(text),), id=turn["dia_id"], name=turn["speaker"], **more)
            )
    return out


def answers_present(sample: dict[str, Any], full_norm: str) -> list[str]:
    """Normalized answers (categories 1-4) that appear in the full conversation."""
    out = []
    padded = f" {full_norm} "
    for q in sample["qa"]:
        if q.get("category") == 5 or "answer" not in q:
            continue
        ans = normalize(str(q["answer"]))
        if ans and f" {ans} " in padded:
            out.append(ans)
    return out


def retained(answers: Sequence[str], messages: Iterable[Message]) -> float:
    padded = f" {normalize(context_text(messages))} "
    hits = sum(1 for a in answers if f" {a} " in padded)
    return hits / len(answers) if answers else 0.0


def langchain_trim(
    messages: Sequence[Message], budget: int, counter: ApproxCounter
) -> list[Message]:
    """LangChain ``trim_messages`` (last, start on human) with our counter."""
    from langchain_core.messages import AIMessage, HumanMessage, trim_messages

    lc = [
        (HumanMessage if m.role == "user" else AIMessage)(content=m.text, id=m.id, name=m.name)
        for m in messages
    ]
    by_id = {m.id: m for m in messages}

    def count(ms: list[Any]) -> int:
        return sum(counter.count_message(by_id[x.id]) for x in ms)

    kept = trim_messages(
        lc, max_tokens=budget, token_counter=count, strategy="last", start_on="human"
    )
    return [by_id[x.id] for x in kept]


def locomo_strategies(budget: int) -> dict[str, Callable[[Sequence[Message]], list[Message]]]:
    counter = ApproxCounter()
    out: dict[str, Callable[[Sequence[Message]], list[Message]]] = {}
    out["SlidingWindow"] = lambda ms: list(run(SlidingWindow(budget), ms, counter=counter).messages)
    out["Checkpoint+Extractive"] = lambda ms: list(
        run(
            Checkpoint(
                ExtractiveSummarizer(max_output_tokens=budget),
                max_tokens=budget,
                keep_recent_tokens=budget // 5,
            ),
            ms,
            counter=counter,
        ).messages
    )
    try:
        from contextfold.strategies import Summarization

        out["Summarization+Extractive"] = lambda ms: list(
            run(
                Summarization(
                    budget,
                    keep_recent=8,
                    summarizer=ExtractiveSummarizer(max_output_tokens=budget),
                    max_output_tokens=int(budget * 0.7),
                ),
                ms,
                counter=counter,
            ).messages
        )
    except ImportError:
        pass
    try:
        from contextfold.strategies import Hybrid

        out["Hybrid+Extractive"] = lambda ms: list(
            run(
                Hybrid(
                    budget,
                    keep_recent=8,
                    chunk_size=max(8, len(ms) // 8),
                    summarizer=ExtractiveSummarizer(max_output_tokens=budget),
                    max_output_tokens=int(budget * 0.7),
                ),
                ms,
                counter=counter,
            ).messages
        )
    except ImportError:
        pass
    try:
        import langchain_core  # noqa: F401

        out["langchain trim_messages"] = lambda ms: langchain_trim(ms, budget, counter)
    except ImportError:
        pass
    return out


def bench_locomo(tiny: bool) -> dict[str, Any]:
    samples = json.loads((DATA / "locomo" / "locomo10.json").read_text())
    if tiny:
        samples = samples[:1]
    counter = ApproxCounter()
    # scores[strategy][fraction] = list of (hits, total)
    scores: dict[str, dict[float, list[tuple[float, int]]]] = {}
    errors: list[str] = []
    for sample in samples:
        msgs = locomo_messages(sample)
        total = counter.count_messages(msgs)
        answers = answers_present(sample, normalize(context_text(msgs)))
        for frac in FRACTIONS:
            budget = int(total * frac)
            for name, build in locomo_strategies(budget).items():
                try:
                    ctx = build(msgs)
                    tokens = counter.count_messages(ctx)
                    share = retained(answers, ctx)
                    if tokens > budget and not name.startswith("langchain"):
                        errors.append(
                            f"{name} over budget on {sample['sample_id']}: {tokens}>{budget}"
                        )
                except Exception as exc:  # a peer or strategy failing is a result too
                    errors.append(f"{name} failed on {sample['sample_id']} at {frac}: {exc!r}")
                    continue
                scores.setdefault(name, {}).setdefault(frac, []).append((share, len(answers)))
    table: dict[str, dict[str, float]] = {}
    for name, by_frac in scores.items():
        table[name] = {}
        for frac, vals in by_frac.items():
            weight = sum(n for _, n in vals)
            table[name][f"{int(frac * 100)}%"] = (
                sum(s * n for s, n in vals) / weight if weight else 0.0
            )
    return {"conversations": len(samples), "retention": table, "errors": errors}


# -- throughput ----------------------------------------------------------------------------------


def bench_throughput(tiny: bool, repeats: int = 3) -> dict[str, Any]:
    """MB of transcript text summarized per CPU second, best of ``repeats`` per span.

    CPU time of this process is the figure for one core whatever else the machine runs; the
    best of a few runs removes most of the noise a busy machine adds even to CPU time. Each
    run starts with an empty token cache, so a repeat is not cheaper than a first call.
    """
    base = DATA / "claude-code-sessions"
    files = sorted(p for p in base.glob("*.jsonl") if len(p.stem) > 30)[: 1 if tiny else None]
    cc_spans = [claude_code_session(p)[0] for p in files]
    samples = json.loads((DATA / "locomo" / "locomo10.json").read_text())[: 1 if tiny else None]
    chat_spans = [locomo_messages(s) for s in samples]
    summarizer = ExtractiveSummarizer(max_output_tokens=4000)
    by_kind: dict[str, dict[str, float]] = {}
    total_bytes = 0
    total_seconds = 0.0
    for kind, group in (("claude code sessions", cc_spans), ("locomo chats", chat_spans)):
        size = 0
        took = 0.0
        for span in group:
            request = SummaryRequest(tuple(span), kind="checkpoint")
            times = []
            for _ in range(repeats):
                # Start cold: the summarizer remembers token readings across calls, and
                # the figure should be what a first summary of this text costs.
                clear_token_cache()
                t0 = time.process_time()
                res = summarizer.summarize(request)
                times.append(time.process_time() - t0)
                assert res.ok, res.reason
            size += len(context_text(span).encode())
            took += min(times)
        by_kind[kind] = {
            "bytes": size,
            "seconds": took,
            "mb_per_s": size / 1e6 / took if took else 0.0,
        }
        total_bytes += size
        total_seconds += took
    return {
        "bytes": total_bytes,
        "seconds": total_seconds,
        "mb_per_s": total_bytes / 1e6 / total_seconds if total_seconds else float("inf"),
        "repeats": repeats,
        "by_kind": by_kind,
    }


# -- main ----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="one conversation, one session")
    args = parser.parse_args(argv)
    if not DATA.is_dir():
        print(f"shared data folder not found at {DATA}", file=sys.stderr)
        return 1
    locomo = bench_locomo(args.tiny)
    cc = bench_claude_code(args.tiny)
    speed = bench_throughput(args.tiny)

    print(f"## LoCoMo: QA answers retained ({locomo['conversations']} conversations)\n")
    cols = [f"{int(f * 100)}%" for f in FRACTIONS]
    print("| strategy | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for name, by in locomo["retention"].items():
        print(f"| {name} | " + " | ".join(f"{by.get(c, 0.0):.1%}" for c in cols) + " |")
    if locomo["errors"]:
        print("\nerrors: " + "; ".join(locomo["errors"][:10]))
    print("\n## Claude Code: file paths (mentioned >= 2 times) surviving compaction\n")
    print(
        "| session | paths | budget tokens | Claude Code summary | Checkpoint+Extractive "
        "| our tokens | listed | listed real |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")

    def share(a: int, b: int) -> str:
        return f"{a / b:.1%}" if b else "-"

    for r in cc["sessions"]:
        print(
            f"| {r['session']} | {r['paths_2plus']} | {r['budget_tokens']} | "
            f"{share(r['claude_code_kept'], r['paths_2plus'])} | "
            f"{share(r['ours_kept'], r['paths_2plus'])} "
            f"| {r['ours_tokens']} | {r['listed']} | {share(r['listed_real'], r['listed'])} |"
        )
    print(
        f"\nAll sessions: {cc['survive']:.1%} of the paths survive (target 95%; Claude Code's "
        f"own summary {cc['claude_code_survive']:.1%}), {cc['listed_real']:.1%} of the listed "
        "paths are real (target 90%)."
    )
    print("\n## ExtractiveSummarizer throughput (CPU time, one core, best of 3)\n")
    print(
        f"{speed['bytes'] / 1e6:.2f} MB in {speed['seconds']:.2f} s: **{speed['mb_per_s']:.2f} MB/s**"
    )
    for name, row in speed["by_kind"].items():
        print(f"- {name}: {row['bytes'] / 1e6:.2f} MB, {row['mb_per_s']:.2f} MB/s")

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "retention.json").write_text(
        json.dumps(
            {"tiny": args.tiny, "locomo": locomo, "claude_code": cc, "throughput": speed}, indent=2
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
