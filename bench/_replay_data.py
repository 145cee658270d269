"""The conversations ``bench.replay`` replays, and when each of their requests is sent.

Read from ``../shared/data`` (never copied into the repo): LoCoMo (a request at every user
turn; sessions start at their recorded dates, messages 30 s apart), the τ-bench airline runs
(a request after every tool result, messages 10 s apart) and the Claude Code sessions (a
request after every tool-result message, when its last result was logged).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.claude_code_paths import anthropic_to_messages
from bench.retention import locomo_messages
from contextfold.formats import openai_chat
from contextfold.formats.claude_code import merge_records
from contextfold.messages import Message

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
LOCOMO_GAP_S = 30.0
TAU_GAP_S = 10.0


@dataclass
class Replay:
    """One conversation: its messages, and when each request is sent (index -> seconds)."""

    name: str
    messages: list[Message]
    requests: list[tuple[int, float]]  # (index of the last message of the request, time)


_DATE = re.compile(r"(\d{1,2}):(\d{2}) (am|pm) on (\d{1,2}) (\w+), (\d{4})")


def _session_start(text: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` as seconds since the epoch (UTC)."""
    m = _DATE.search(text)
    if m is None:
        return 0.0
    hour, minute, half, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if half == "pm" else 0)
    when = dt.datetime.strptime(f"{day} {month} {year} {h}:{minute}", "%d %B %Y %H:%M")
    return when.replace(tzinfo=dt.timezone.utc).timestamp()


def locomo(tiny: bool) -> list[Replay]:
    """A request at every user (speaker A) turn; sessions start at their recorded dates."""
    samples = json.loads((DATA / "locomo" / "locomo10.json").read_text())[: 1 if tiny else None]
    out = []
    for sample in samples:
        conv = sample["conversation"]
        msgs = locomo_messages(sample)
        requests, last_session, k, start = [], None, 0, 0.0
        for i, m in enumerate(msgs):
            session = (m.id or "D0:").split(":")[0][1:]
            if session != last_session:
                start = max(_session_start(conv.get(f"session_{session}_date_time", "")), start)
                last_session, k = session, 0
            at = start + k * LOCOMO_GAP_S
            k += 1
            if m.role == "user":
                requests.append((i, at))
        out.append(Replay(sample["sample_id"], msgs, requests))
    return out


def tau_bench(tiny: bool) -> list[Replay]:
    """A request after every tool result; messages 10 s apart."""
    runs = json.loads((DATA / "tau-bench" / "gpt-4o-airline.json").read_text())
    out = []
    for r in runs[: 3 if tiny else None]:
        msgs = _with_ids(openai_chat.load(r["traj"]), f"t{r['task_id']}-{r['trial']}")
        requests = [(i, i * TAU_GAP_S) for i, m in enumerate(msgs) if m.role == "tool"]
        out.append(Replay(f"task {r['task_id']} trial {r['trial']}", msgs, requests))
    return out


def claude_code(tiny: bool) -> list[Replay]:
    """A request after every tool-result message, at the time the last result was logged.

    The session's whole history is replayed, without Claude Code's own compaction summary.
    """
    base = DATA / "claude-code-sessions"
    files = (
        [base / "tool_heavy.jsonl"]
        if tiny
        else sorted(p for p in base.glob("*.jsonl") if len(p.stem) > 30)
    )
    out = []
    for path in files:
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        records = [r for r in records if not r.get("isCompactSummary")]
        logged: dict[str, float] = {}
        for r in records:
            content = (r.get("message") or {}).get("content")
            for b in content if isinstance(content, list) else ():
                if isinstance(b, dict) and b.get("type") == "tool_result" and r.get("timestamp"):
                    stamp = dt.datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00"))
                    logged[b["tool_use_id"]] = stamp.timestamp()
        msgs = _with_ids(anthropic_to_messages(merge_records(records)), path.stem[:8])
        requests, last = [], 0.0
        for i, m in enumerate(msgs):
            if m.tool_results and all(p.call_id in logged for p in m.tool_results):
                last = max([last, *(logged[p.call_id] for p in m.tool_results)])
                requests.append((i, last))
        out.append(Replay(path.stem[:8], msgs, requests))
    return out


def _with_ids(msgs: Sequence[Message], prefix: str) -> list[Message]:
    return [m if m.id else m.replace(id=f"{prefix}-{i}") for i, m in enumerate(msgs)]
