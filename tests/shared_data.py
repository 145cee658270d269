"""Paths to the real data sets and loaders for them, importable from any test folder.

Kept out of ``conftest.py`` on purpose: several folders have a conftest of their own, so
``from shared_data import ...`` would be ambiguous.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
IN_CI = bool(os.environ.get("CI"))


def require_data() -> Path:
    """The shared data folder; skip outside CI when it is absent, fail in CI."""
    if not DATA.is_dir():
        if IN_CI:
            pytest.fail(f"shared data folder missing in CI: {DATA}")
        pytest.skip(f"shared data folder not found at {DATA}")
    return DATA


def claude_code_payload(
    path: Path, *, include_compact_summary: bool = True
) -> list[dict[str, Any]]:
    """Merge a Claude Code session's JSONL records into Anthropic messages (data README)."""
    out: list[dict[str, Any]] = []
    with path.open() as fh:
        for line in fh:
            r = json.loads(line)
            if r.get("type") not in ("user", "assistant") or not isinstance(r.get("message"), dict):
                continue
            if r.get("isCompactSummary") and not include_compact_summary:
                continue
            m = r["message"]
            c = m["content"]
            blocks = [{"type": "text", "text": c}] if isinstance(c, str) else list(c)
            is_results = all(b.get("type") == "tool_result" for b in blocks)
            if m["role"] == "assistant":
                if out and out[-1]["role"] == "assistant" and out[-1]["_id"] == m.get("id"):
                    out[-1]["content"] += blocks
                elif (
                    len(out) >= 2
                    and out[-2]["role"] == "assistant"
                    and out[-2]["_id"] == m.get("id")
                    and out[-1]["_results"]
                ):
                    out[-2]["content"] += blocks
                else:
                    out.append(
                        {
                            "role": "assistant",
                            "content": blocks,
                            "_id": m.get("id"),
                            "_results": False,
                        }
                    )
            elif is_results and out and out[-1]["role"] == "user" and out[-1]["_results"]:
                out[-1]["content"] += blocks
            else:
                out.append({"role": "user", "content": blocks, "_id": None, "_results": is_results})
    return [{"role": x["role"], "content": x["content"]} for x in out]


def claude_code_main_sessions() -> list[Path]:
    """The three main Claude Code sessions (each with a compaction)."""
    base = require_data() / "claude-code-sessions"
    return sorted(
        p for p in base.rglob("*.jsonl") if "subagents" not in p.parts and len(p.stem) > 30
    )


def swe_agent_openai(path: Path) -> list[dict[str, Any]]:
    """A SWE-agent function-calling trajectory as OpenAI chat messages (data README)."""
    tr = json.loads(path.read_text())
    return [
        dict(
            {k: m[k] for k in ("role", "content", "tool_calls") if m.get(k) is not None},
            **({"tool_call_id": m["tool_call_ids"][0]} if m.get("tool_call_ids") else {}),
        )
        for m in tr["history"]
    ]
