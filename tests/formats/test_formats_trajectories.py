"""Conversation files as they come: request bodies, trajectories, logs (formats.trajectories)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextfold import formats
from contextfold.errors import ConfigError, FormatError
from contextfold.formats import anthropic, openai_chat, trajectories
from contextfold.formats.trajectories import Shape
from contextfold.messages import Message
from shared_data import (
    DATA,
    ROOT,
    claude_code_main_sessions,
    claude_code_payload,
    require_data,
    swe_agent_openai,
)

EXAMPLES = sorted((ROOT / "examples").glob("*.json"))
SWE_FILES = sorted(p.name for p in (DATA / "swe-agent-trajectories").glob("*function_calling*"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_read_and_write_back_unchanged(path: Path) -> None:
    messages, shape = trajectories.read_file(path)
    assert shape.note is None
    assert trajectories.write_conversation(messages, shape) == json.loads(path.read_text())


def test_tau_bench_run_gives_its_traj(tau_runs: list[dict[str, Any]]) -> None:
    run = tau_runs[0]
    messages, shape = trajectories.read_conversation(run)
    assert shape == Shape("openai_chat", None, "read the 'traj' list (a tau-bench run)")
    assert messages == openai_chat.load(run["traj"])
    assert trajectories.write_conversation(messages, shape) == run["traj"]


def test_several_tau_bench_runs_are_refused(tau_runs: list[dict[str, Any]]) -> None:
    with pytest.raises(FormatError, match="holds 3 runs") as info:
        trajectories.find_conversation(tau_runs[:3])
    assert info.value.field == "traj"


@pytest.mark.parametrize("name", SWE_FILES)
def test_swe_agent_trajectory_reads_its_history(name: str) -> None:
    path = require_data() / "swe-agent-trajectories" / name
    messages, shape = trajectories.read_file(path)
    assert shape.format == "openai_chat"
    assert shape.note == "read the 'history' list (a SWE-agent trajectory)"
    history = json.loads(path.read_text())["history"]
    assert trajectories.swe_agent_messages(history) == [
        dict(m, **({"name": h["name"]} if h.get("name") is not None else {}))
        for m, h in zip(swe_agent_openai(path), history, strict=True)
    ]
    assert trajectories.write_conversation(messages, shape) == trajectories.swe_agent_messages(
        history
    )


def test_swe_agent_history_entries_must_be_objects() -> None:
    with pytest.raises(FormatError, match="history entry") as info:
        trajectories.find_conversation({"history": [{"role": "user", "content": "a"}, 3]})
    assert (info.value.index, info.value.field) == (1, "history")


def test_claude_code_log_is_merged_and_read_as_anthropic() -> None:
    path = claude_code_main_sessions()[0]
    messages, shape = trajectories.read_file(path)
    assert shape == Shape("anthropic", None, "merged a Claude Code session log")
    payload = {"messages": claude_code_payload(path)}
    assert messages == anthropic.load(payload)
    assert trajectories.write_conversation(messages, shape) == payload


def test_request_body_keeps_its_other_fields_in_its_own_format() -> None:
    body = {
        "model": "gpt-4o",
        "temperature": 0,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
        ],
    }
    messages, shape = trajectories.read_conversation(body)
    assert shape.format == "openai_chat"
    assert shape.envelope == body
    assert trajectories.write_conversation(messages, shape) == body
    shorter = trajectories.write_conversation(messages[1:], shape)
    assert shorter == {"model": "gpt-4o", "temperature": 0, "messages": body["messages"][1:]}
    # Converted, the body's fields belong to another provider: the bare payload comes back.
    assert trajectories.write_conversation(messages, shape, format="anthropic") == {
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}],
    }


def test_responses_and_anthropic_bodies() -> None:
    responses = {"model": "o4", "input": [{"role": "user", "content": "hi"}]}
    found = trajectories.find_conversation(responses)
    assert found.format == "openai_responses"
    assert found.payload_for("openai_responses") == responses["input"]
    messages, shape = trajectories.read_conversation(responses)
    assert trajectories.write_conversation(messages, shape) == responses
    body = {
        "model": "claude",
        "max_tokens": 9,
        "system": "s",
        "messages": [{"role": "user", "content": "q"}],
    }
    messages, shape = trajectories.read_conversation(body)
    assert shape.format == "anthropic"
    assert [m.role for m in messages] == ["system", "user"]
    assert trajectories.write_conversation(messages, shape) == body


def test_bare_lists_are_detected_or_loaded_as_told() -> None:
    chat = [{"role": "user", "content": "hi"}]
    assert trajectories.find_conversation(chat).choose() == "openai_chat"
    messages, shape = trajectories.read_conversation(chat, format="anthropic")
    assert shape.format == "anthropic"
    assert messages[0].text == "hi"
    mixed = [
        {"role": "tool", "tool_call_id": "a", "content": "x"},
        {"type": "function_call_output", "call_id": "b", "output": "y"},
    ]
    with pytest.raises(FormatError, match="mix"):
        trajectories.read_conversation(mixed)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"conversation": []}, "none of 'messages', 'input', 'traj' or 'history'"),
        (3, "expected a JSON list or object, got int"),
    ],
)
def test_data_without_a_conversation_is_a_format_error(data: Any, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        trajectories.read_conversation(data)


def test_misuse_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        trajectories.read_conversation([], format="gemini")
    assert info.value.argument == "format"
    with pytest.raises(ConfigError):
        trajectories.write_conversation([Message.user("hi")], Shape("openai_chat"), format="x")


def test_parse_json_or_jsonl() -> None:
    assert trajectories.parse_json_or_jsonl('[{"role": "user", "content": "a"}]') == [
        {"role": "user", "content": "a"}
    ]
    assert trajectories.parse_json_or_jsonl('{"a": 1}\n\n{"b": 2}\n') == [{"a": 1}, {"b": 2}]
    with pytest.raises(FormatError, match="empty input"):
        trajectories.parse_json_or_jsonl(" \n")
    with pytest.raises(FormatError, match="invalid JSON at line 2, column 12"):
        trajectories.parse_json_or_jsonl('[\n  {"a": 1} {"b": 2}]')
    with pytest.raises(FormatError, match="invalid JSON Lines record at line 2"):
        trajectories.parse_json_or_jsonl('{"a": 1}\n{"b": }\n')


def test_read_file_names_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'[{"role": "user", "content": "caf\xe9"}]')
    with pytest.raises(FormatError, match="not UTF-8 text"):
        trajectories.read_file(path)


def test_the_package_exposes_the_module() -> None:
    assert formats.trajectories is trajectories


@pytest.mark.parametrize("content", [None, 5, {"text": "hi"}])
def test_a_claude_code_record_with_odd_content_is_a_format_error(content: Any) -> None:
    from contextfold.formats.claude_code import merge_records

    record = {"type": "user", "message": {"role": "user", "content": content}}
    with pytest.raises(FormatError, match="content"):
        merge_records([record])


@pytest.mark.parametrize("ids", [5, {"a": 1}, "call_1"])
def test_swe_agent_tool_call_ids_that_are_not_a_list_are_a_format_error(ids: Any) -> None:
    entry = {"role": "tool", "content": "ok", "tool_call_ids": ids}
    with pytest.raises(FormatError, match="tool_call_ids"):
        trajectories.swe_agent_messages([entry])
