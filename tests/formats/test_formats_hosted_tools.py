"""The Responses API's built-in tool items pair like function calls, so repair can fix them."""

from __future__ import annotations

from typing import Any

import pytest

from contextfold import formats, turns
from contextfold.errors import PairingError
from contextfold.formats import openai_responses

CALLS: dict[str, dict[str, Any]] = {
    "computer_call": {
        "type": "computer_call",
        "id": "cu_1",
        "call_id": "call_c",
        "action": {"type": "click", "x": 10, "y": 20, "button": "left"},
        "pending_safety_checks": [],
        "status": "completed",
    },
    "shell_call": {
        "type": "shell_call",
        "id": "sh_1",
        "call_id": "call_s",
        "action": {"commands": ["ls -la"], "timeout_ms": 1000, "max_output_length": 4096},
        "status": "completed",
    },
    "local_shell_call": {
        "type": "local_shell_call",
        "id": "ls_1",
        "call_id": "call_l",
        "action": {"type": "exec", "command": ["pwd"], "env": {}},
        "status": "completed",
    },
    "apply_patch_call": {
        "type": "apply_patch_call",
        "id": "ap_1",
        "call_id": "call_a",
        "operation": {"type": "update_file", "path": "a.py", "diff": "@@\n-x\n+y\n"},
        "status": "completed",
    },
}
OUTPUTS: dict[str, dict[str, Any]] = {
    "computer_call": {
        "type": "computer_call_output",
        "call_id": "call_c",
        "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"},
    },
    "shell_call": {
        "type": "shell_call_output",
        "call_id": "call_s",
        "output": [{"stdout": "a.py\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    },
    "local_shell_call": {"type": "local_shell_call_output", "id": "call_l", "output": "/work"},
    "apply_patch_call": {
        "type": "apply_patch_call_output",
        "call_id": "call_a",
        "status": "completed",
    },
}
USER = {"type": "message", "role": "user", "content": "go on"}
KINDS = sorted(CALLS)


@pytest.mark.parametrize("kind", KINDS)
def test_orphan_builtin_tool_calls_do_not_survive_repair(kind: str) -> None:
    payload = [USER, CALLS[kind], {"type": "message", "role": "user", "content": "next"}]
    messages = formats.load(payload, "openai_responses")
    with pytest.raises(PairingError):
        turns.validate(messages)
    fixed = turns.repair(messages)
    turns.validate(fixed)
    dumped = openai_responses.dump(fixed)
    assert all(item.get("type") != kind for item in dumped)
    assert [item["content"] for item in dumped] == ["go on", "next"]


@pytest.mark.parametrize("kind", KINDS)
def test_orphan_builtin_tool_outputs_do_not_survive_repair(kind: str) -> None:
    payload = [USER, OUTPUTS[kind]]
    messages = formats.load(payload, "openai_responses")
    fixed = turns.repair(messages)
    assert openai_responses.dump(fixed) == [USER]


@pytest.mark.parametrize("kind", KINDS)
def test_paired_builtin_tool_items_round_trip_and_pair(kind: str) -> None:
    payload = [
        USER,
        CALLS[kind],
        OUTPUTS[kind],
        {"type": "message", "role": "user", "content": "x"},
    ]
    messages = formats.load(payload, "openai_responses")
    turns.validate(messages)
    assert turns.repair(messages) == messages
    assert messages[1].tool_calls[0].id == messages[2].tool_results[0].call_id
    assert openai_responses.dump(messages) == payload
    # A window cut never separates the call from its output.
    assert 2 not in turns.safe_cut_points(messages)
    # Converted to another format, the pair stays a pair.
    turns.validate(formats.load(formats.dump(messages, "openai_chat"), "openai_chat"))


def test_builtin_tool_call_names_and_arguments() -> None:
    messages = formats.load([USER, CALLS["apply_patch_call"]], "openai_responses")
    call = messages[1].tool_calls[0]
    assert call.name == "apply_patch"
    assert call.parsed_arguments() == CALLS["apply_patch_call"]["operation"]
