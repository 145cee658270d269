"""Conversations the store tests write: every part kind, and a real agent trajectory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from contextfold import formats
from contextfold.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def rich_conversation() -> list[Message]:
    """A short conversation using every part kind, names, extras and odd text."""
    call = ToolCallPart(id="call_1", name="lookup", arguments='{"q": "48213"}')
    return [
        Message.system("You are terse."),
        Message.user([TextPart("look at this"), ImagePart(url="https://x.test/a.png")]),
        Message.assistant(
            [ThinkingPart(text="plan", signature="s1"), TextPart("checking")],
            tool_calls=[call],
        ),
        Message.tool_result("call_1", "found: 48213", name="lookup"),
        Message.assistant("It is 48213 — ünïcødé 🙂", name="bot", extra={"k": [1, {"x": None}]}),
        Message.user("thanks\n\n</summary> [end]"),
    ]


def real_conversation() -> list[Message]:
    """A SWE-agent function-calling trajectory, loaded through the OpenAI Chat format."""
    path = DATA / "swe-agent-trajectories" / "function_calling_simple.traj"
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"shared data missing in CI: {path}")
        pytest.skip(f"shared data not found at {path}")
    history = json.loads(path.read_text())["history"]
    payload = []
    for m in history:
        item = {k: m[k] for k in ("role", "content", "tool_calls") if m.get(k) is not None}
        if m.get("tool_call_ids"):
            item["tool_call_id"] = m["tool_call_ids"][0]
        payload.append(item)
    return formats.load(payload, "openai_chat")
