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

from contextfold.formats.claude_code import merge_records

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
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not include_compact_summary:
        records = [r for r in records if not r.get("isCompactSummary")]
    return merge_records(records)


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
