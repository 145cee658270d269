"""Claude Code sessions for the retention benchmark: file paths kept, and listed paths real.

Each main session under ``../shared/data/claude-code-sessions`` holds Claude Code's own
compaction. The compacted span is everything before the ``compact_boundary`` record; the
budget is the token length of Claude Code's own summary. :func:`bench_claude_code` scores
the share of file paths mentioned at least twice in the span that appear in Claude Code's
summary and in ours, and the share of the paths our "Files and code" section lists that
are real. ``bench/retention.py`` prints the table; the summarizer's tests reuse the scoring.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from contextfold.formats.claude_code import merge_records
from contextfold.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from contextfold.strategies.checkpoint import Checkpoint
from contextfold.strategies.run import run
from contextfold.summarizers.extractive import ExtractiveSummarizer
from contextfold.tokens.approx import ApproxCounter
from contextfold.turns import units

__all__ = [
    "anthropic_to_messages",
    "bench_claude_code",
    "claude_code_session",
    "context_text",
    "is_real_path",
    "listed_paths",
    "paths_mentioned",
    "tool_text",
]

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def context_text(messages: Iterable[Message]) -> str:
    """Everything a model would read in a context: text, tool calls and results."""
    out: list[str] = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, (TextPart, ToolResultPart)):
                out.append(p.text)
            elif isinstance(p, ToolCallPart):
                out.append(p.arguments)
    return "\n".join(out)


_PATH = re.compile(r"(?<![\w.])(?:/?[\w.@-]+/)+[\w@-][\w.@-]*\.[A-Za-z0-9]{1,8}\b")


def anthropic_to_messages(payload: Sequence[dict[str, Any]]) -> list[Message]:
    """Anthropic messages to ours (a small local converter, enough for this benchmark)."""
    out: list[Message] = []
    for i, m in enumerate(payload):
        parts: list[Any] = []
        for b in m["content"]:
            t = b.get("type")
            if t == "text":
                parts.append(TextPart(b.get("text", "")))
            elif t == "thinking":
                parts.append(ThinkingPart(b.get("thinking", "")))
            elif t == "tool_use":
                parts.append(ToolCallPart(b["id"], b["name"], json.dumps(b.get("input", {}))))
            elif t == "tool_result":
                c = b.get("content", "")
                if isinstance(c, list):
                    c = "\n".join(x.get("text", "") for x in c if isinstance(x, dict))
                parts.append(
                    ToolResultPart(b["tool_use_id"], str(c), is_error=bool(b.get("is_error")))
                )
        out.append(Message(m["role"], tuple(parts), id=f"m{i}"))
    return out


def claude_code_session(path: Path) -> tuple[list[Message], str, str]:
    """(span before the compaction, Claude Code's own summary, the session's cwd)."""
    before: list[dict[str, Any]] = []
    summary = ""
    cwd = ""
    seen_boundary = False
    with path.open() as fh:
        for line in fh:
            r = json.loads(line)
            cwd = cwd or r.get("cwd", "")
            if r.get("type") == "system" and r.get("subtype") == "compact_boundary":
                seen_boundary = True
                continue
            if r.get("type") not in ("user", "assistant") or not isinstance(r.get("message"), dict):
                continue
            if r.get("isCompactSummary"):
                c = r["message"]["content"]
                summary = c if isinstance(c, str) else "\n".join(b.get("text", "") for b in c)
                continue
            if not seen_boundary:
                before.append(r)
    return anthropic_to_messages(merge_records(before)), summary, cwd


_URL = re.compile(r"[a-z][a-z+.-]*://\S+")


def paths_mentioned(text: str, cwd: str) -> Counter[str]:
    """File paths (with an extension) mentioned in ``text``; URLs are not paths."""
    found: Counter[str] = Counter()
    for p in _PATH.findall(_URL.sub(" ", text)):
        if cwd and p.startswith(cwd + "/"):
            p = p[len(cwd) + 1 :]
        found[p.lstrip("./") if p.startswith("./") else p] += 1
    return found


_LISTED_SUFFIX = re.compile(r" \((?:read|modified)\)$")
_FILE_NAME = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")


def listed_paths(summary: str) -> list[str]:
    """The paths a checkpoint's "Files and code" section lists (one per bullet)."""
    out: list[str] = []
    inside = False
    for line in summary.splitlines():
        if line.startswith("## "):
            inside = line[3:].strip().lower() == "files and code"
        elif inside and line.startswith("- "):
            out.append(_LISTED_SUFFIX.sub("", line[2:].strip()))
    return out


def is_real_path(path: str, tool_text: str) -> bool:
    """Named in a tool call or result, or shaped like a file; a device file never is."""
    if path.startswith("/dev/"):
        return False
    if path in tool_text:
        return True
    name = path.rstrip("/").rpartition("/")[2]
    return bool(_FILE_NAME.search(name)) or path.startswith(("/", "./", "~/"))


def tool_text(messages: Iterable[Message]) -> str:
    """Everything tool calls and results say (arguments and outputs)."""
    out: list[str] = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, ToolResultPart):
                out.append(p.text)
            elif isinstance(p, ToolCallPart):
                out.append(p.arguments)
    return "\n".join(out)


def bench_claude_code(tiny: bool) -> dict[str, Any]:
    base = DATA / "claude-code-sessions"
    files = sorted(p for p in base.glob("*.jsonl") if len(p.stem) > 30)
    if tiny:
        files = files[:1]
    counter = ApproxCounter()
    rows = []
    for path in files:
        span, cc_summary, cwd = claude_code_session(path)
        span_text = context_text(span)
        counts = paths_mentioned(span_text, cwd)
        wanted = sorted(p for p, c in counts.items() if c >= 2)
        budget = counter.count_text(cc_summary)  # Claude Code's own summary length
        # Keep only the newest indivisible unit verbatim; the checkpoint gets the rest of the
        # budget, capped at Claude Code's own summary length. One compaction measured at that
        # length, as Claude Code's is: the whole room (compact_to=1.0), not the lower mark a
        # cache-stable app compacts to ahead of later turns.
        newest = units(span)[-1]
        newest_tokens = counter.count_messages(span[newest[0] :])
        strategy = Checkpoint(
            ExtractiveSummarizer(max_output_tokens=budget),
            max_tokens=newest_tokens + budget + 200,
            keep_recent_tokens=0,
            max_output_tokens=budget,
            compact_to=1.0,
        )
        result = run(strategy, span, counter=counter)
        ours = result.checkpoint.summary if result.checkpoint is not None else ""
        listed = listed_paths(ours)
        tools = tool_text(span)
        real = sum(1 for p in listed if is_real_path(p, tools))
        rows.append(
            {
                "session": path.stem[:8],
                "span_messages": len(span),
                "paths_2plus": len(wanted),
                "budget_tokens": budget,
                "claude_code_kept": sum(1 for p in wanted if p in cc_summary),
                "ours_kept": sum(1 for p in wanted if p in ours),
                "ours_tokens": counter.count_text(ours),
                "listed": len(listed),
                "listed_real": real,
                "fallback": result.fallback,
            }
        )
        for name in ("claude_code", "ours"):  # shares, as the report's chart draws them
            kept = rows[-1][f"{name}_kept"]
            rows[-1][name] = kept / len(wanted) if wanted else 0.0
    wanted_total = sum(r["paths_2plus"] for r in rows)
    listed_total = sum(r["listed"] for r in rows)
    return {
        "sessions": rows,
        "survive": sum(r["ours_kept"] for r in rows) / wanted_total if wanted_total else 0.0,
        "claude_code_survive": (
            sum(r["claude_code_kept"] for r in rows) / wanted_total if wanted_total else 0.0
        ),
        "listed_real": (
            sum(r["listed_real"] for r in rows) / listed_total if listed_total else 1.0
        ),
    }
