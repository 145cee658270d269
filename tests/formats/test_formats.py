"""Provider formats: exact round trips on the real data, ids, detection, malformed payloads."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from contextfold import formats, turns
from contextfold.errors import ConfigError, FormatError
from contextfold.formats import anthropic, openai_chat, openai_responses
from contextfold.messages import (
    ImagePart,
    Message,
    ThinkingPart,
)
from shared_data import DATA, claude_code_payload, require_data, swe_agent_openai

CLAUDE_FILES = sorted(
    str(p.relative_to(DATA / "claude-code-sessions"))
    for p in (DATA / "claude-code-sessions").rglob("*.jsonl")
)
SWE_FILES = sorted(p.name for p in (DATA / "swe-agent-trajectories").glob("*function_calling*"))


def _claude(name: str) -> dict[str, Any]:
    return {"messages": claude_code_payload(require_data() / "claude-code-sessions" / name)}


def _swe(name: str) -> list[dict[str, Any]]:
    return swe_agent_openai(require_data() / "swe-agent-trajectories" / name)


# -- lossless round trips on the real data ---------------------------------------------------


def test_data_files_are_found() -> None:
    require_data()
    assert len(CLAUDE_FILES) == 13
    assert len(SWE_FILES) == 5


@pytest.mark.parametrize("run", range(200))
def test_tau_bench_round_trip(tau_runs: list[dict[str, Any]], run: int) -> None:
    traj = tau_runs[run]["traj"]
    before = copy.deepcopy(traj)
    messages = openai_chat.load(traj, strict=True)
    assert openai_chat.dump(messages) == traj
    assert traj == before  # loading never edits the caller's payload
    assert formats.detect(traj) == "openai_chat"
    turns.validate(messages)


@pytest.mark.parametrize("name", SWE_FILES)
def test_swe_agent_round_trip(name: str) -> None:
    payload = _swe(name)
    messages = openai_chat.load(payload, strict=True)
    assert openai_chat.dump(messages) == payload
    assert formats.detect(payload) == "openai_chat"
    turns.validate(messages)


@pytest.mark.parametrize("name", CLAUDE_FILES)
def test_claude_code_round_trip(name: str) -> None:
    payload = _claude(name)
    messages = anthropic.load(payload, strict=True)
    assert anthropic.dump(messages) == payload
    assert formats.detect(payload) == "anthropic"
    assert formats.dump(formats.load(payload), "anthropic") == payload
    turns.validate(messages)


def test_responses_items_round_trip_and_group_model_output() -> None:
    items = [
        {"role": "developer", "content": "be brief"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
        {
            "type": "reasoning",
            "id": "rs_2",
            "summary": [
                {"type": "summary_text", "text": "a"},
                {"type": "summary_text", "text": "b"},
            ],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "f",
            "arguments": '{"x":1}',
            "status": "completed",
        },
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "call_2",
            "name": "g",
            "arguments": "{}",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "one"},
        {
            "type": "function_call_output",
            "id": "fco_2",
            "call_id": "call_2",
            "output": [{"type": "input_text", "text": "two"}],
        },
        {
            "type": "message",
            "id": "msg_9",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "done", "annotations": []}],
        },
        {"type": "item_reference", "id": "ref_1"},
        {"role": "user", "content": ""},
    ]
    messages = openai_responses.load(items)
    assert openai_responses.dump(messages) == items
    assert [m.role for m in messages] == [
        "developer",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    model_turn = messages[2]
    assert model_turn.id == "rs_1"
    assert [p.kind for p in model_turn.parts] == ["thinking", "thinking", "tool_call", "tool_call"]
    first, second = model_turn.parts[:2]
    assert isinstance(first, ThinkingPart)
    assert first.data == "gAAA"
    assert isinstance(second, ThinkingPart)
    assert second.text == "a\n\nb"
    assert messages[4].id == "fco_2"
    turns.validate(messages)

    chat = openai_chat.dump(messages)
    assert chat[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}},
            {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    }
    body = anthropic.dump(messages)
    assert body["system"] == "be brief"
    assert all(
        b["type"] not in ("thinking", "redacted_thinking")
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
    )
    turns.validate(anthropic.load(body))


def test_responses_rarer_items_and_parts_round_trip() -> None:
    items = [
        {
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,iVBO",
                    "detail": "auto",
                },
                {"type": "input_image", "file_id": "file_1", "detail": "low"},
                {"type": "input_image", "image_url": "https://x.test/i.png"},
                {"type": "input_file", "file_id": "file_2"},
                {"type": "output_text", "text": "quoted model text"},
            ],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "plan"}],
            "content": [{"type": "reasoning_text", "text": "raw"}],
            "encrypted_content": None,
        },
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
        {"type": "custom_tool_call", "call_id": "cc", "name": "patch", "input": "*** Begin"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "custom_tool_call_output", "call_id": "cc", "output": "applied"},
        {"type": "reasoning", "id": "rs_2", "summary": []},
    ]
    messages = openai_responses.load(items)
    assert openai_responses.dump(messages) == items
    images = [p for p in messages[0].parts if isinstance(p, ImagePart)]
    assert [(i.mime, i.data, i.url) for i in images] == [
        ("image/png", "iVBO", None),
        (None, None, None),
        (None, None, "https://x.test/i.png"),
    ]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    call = messages[1].tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("cc", "patch", "*** Begin")
    turns.validate(messages)
    # In another format only what it can carry remains.
    chat = openai_chat.dump(messages)
    assert chat[0]["content"][:2] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO", "detail": "auto"}},
        {"type": "image_url", "image_url": {"url": "https://x.test/i.png"}},
    ]
    assert chat[1]["content"] == "no"
    assert chat[2] == {"role": "tool", "tool_call_id": "cc", "content": "applied"}


# -- ids and copies --------------------------------------------------------------------------


def test_ids_are_deterministic_unique_and_stable_as_the_payload_grows(
    tau_runs: list[dict[str, Any]],
) -> None:
    traj = tau_runs[3]["traj"]
    first = openai_chat.load(traj)
    assert [m.id for m in first] == [m.id for m in openai_chat.load(copy.deepcopy(traj))]
    assert len({m.id for m in first}) == len(first)
    shorter = openai_chat.load(traj[:10])
    assert [m.id for m in shorter] == [m.id for m in first[:10]]
    twice = openai_chat.load([{"role": "user", "content": "same"}] * 3)
    assert len({m.id for m in twice}) == 3


def test_duplicate_provider_ids_still_give_unique_message_ids() -> None:
    items = [
        {"type": "message", "id": "m", "role": "user", "content": "a"},
        {"type": "message", "id": "m", "role": "user", "content": "b"},
    ]
    messages = openai_responses.load(items)
    assert messages[0].id == "m"
    assert messages[1].id != "m"
    assert openai_responses.dump(messages) == items


def test_loaded_messages_do_not_alias_the_payload_or_the_dump() -> None:
    body = {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}],
            }
        ]
    }
    messages = anthropic.load(body)
    body["messages"][0]["content"][0]["cache_control"]["type"] = "changed"
    assert messages[0].parts[0].extra["anthropic.cache_control"] == {"type": "ephemeral"}
    out = anthropic.dump(messages)
    out["messages"][0]["content"][0]["cache_control"]["type"] = "again"
    assert messages[0].parts[0].extra["anthropic.cache_control"] == {"type": "ephemeral"}


# -- detection and the package API -----------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ([], "openai_chat"),
        ([{"role": "user", "content": "hi"}], "openai_chat"),
        ([{"role": "tool", "tool_call_id": "a", "content": "x"}], "openai_chat"),
        ({"model": "gpt-4o", "messages": [{"role": "system", "content": "s"}]}, "openai_chat"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "anthropic"),
        ({"system": "s", "messages": []}, "anthropic"),
        ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]}], "anthropic"),
        ([{"type": "function_call_output", "call_id": "a", "output": "x"}], "openai_responses"),
        ([{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}], "openai_responses"),
    ],
)
def test_detect(payload: Any, expected: str) -> None:
    assert formats.detect(payload) == expected


@pytest.mark.parametrize(
    "payload",
    [
        "hello",
        42,
        {"input": []},
        [1, 2],
        [{"content": "no role"}],
        [
            {"type": "reasoning", "id": "r", "summary": []},
            {"role": "tool", "tool_call_id": "a", "content": ""},
        ],
    ],
)
def test_detect_rejects_unknown_payloads(payload: Any) -> None:
    with pytest.raises(FormatError):
        formats.detect(payload)


def test_unknown_format_name_is_a_config_error() -> None:
    # The name is the caller's argument, not part of the payload: misuse, not FormatError.
    with pytest.raises(ConfigError, match="unknown format 'gemini'") as info:
        formats.load([], "gemini")
    assert info.value.argument == "format"
    with pytest.raises(ConfigError, match="unknown format"):
        formats.dump([], "gemini")
    assert not isinstance(info.value, FormatError)


def test_misuse_raises_config_error_naming_the_argument() -> None:
    for module in (anthropic, openai_chat, openai_responses):
        with pytest.raises(ConfigError, match="strict must be True or False") as info:
            module.load([], strict="yes")  # type: ignore[arg-type]
        assert info.value.argument == "strict"
        with pytest.raises(ConfigError, match=r"messages\[0\] is a dict") as info:
            module.dump([{"role": "user", "content": "hi"}])  # type: ignore[list-item]
        assert info.value.argument == "messages"
        with pytest.raises(ConfigError, match="sequence of Message"):
            module.dump("hi")  # type: ignore[arg-type]


# -- malformed payloads ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "payload", "index", "field"),
    [
        (
            openai_chat,
            [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}],
            1,
            "role",
        ),
        (openai_chat, [{"role": "tool", "content": "x"}], 0, "tool_call_id"),
        (openai_chat, [{"role": "user", "content": 5}], 0, "content"),
        (
            openai_chat,
            [{"role": "user", "content": [{"type": "text", "text": 1}]}],
            0,
            "content[0].text",
        ),
        (
            openai_chat,
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f"}}],
                }
            ],
            0,
            "tool_calls[0].function.arguments",
        ),
        (openai_chat, [{"role": "assistant", "tool_calls": {}}], 0, "tool_calls"),
        (openai_chat, ["not an object"], 0, None),
        (anthropic, {"messages": [{"role": "system", "content": "x"}]}, 0, "role"),
        (
            anthropic,
            [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}],
            0,
            "content[0].tool_use_id",
        ),
        (anthropic, [{"role": "user"}], 0, "content"),
        (
            anthropic,
            [{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f"}]}],
            0,
            "content[0].input",
        ),
        (
            anthropic,
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": "yes"}],
                }
            ],
            0,
            "content[0].is_error",
        ),
        (openai_responses, [{"type": "function_call_output", "output": "x"}], 0, "call_id"),
        (
            openai_responses,
            [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}],
            1,
            "role",
        ),
        (
            openai_responses,
            [{"type": "function_call", "call_id": "a", "name": "f", "arguments": {}}],
            0,
            "arguments",
        ),
        (
            openai_responses,
            [{"type": "reasoning", "id": "r", "summary": [{"type": "summary_text"}]}],
            0,
            "summary[0].text",
        ),
    ],
)
def test_malformed_payloads_name_index_and_field(
    module: Any, payload: Any, index: int | None, field: str | None
) -> None:
    with pytest.raises(FormatError) as info:
        module.load(payload)
    assert info.value.index == index
    assert info.value.field == field


@pytest.mark.parametrize(
    ("module", "payload", "field"),
    [
        (
            openai_chat,
            [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "a",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{oops"},
                        }
                    ],
                }
            ],
            "tool_calls[0].function.arguments",
        ),
        (
            openai_chat,
            [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
            "content[0].type",
        ),
        (
            openai_responses,
            [{"type": "function_call", "call_id": "a", "name": "f", "arguments": "{oops"}],
            "arguments",
        ),
        (openai_responses, [{"type": "web_search_call", "id": "ws"}], "type"),
        (
            anthropic,
            [{"role": "user", "content": [{"type": "document", "source": {}}]}],
            "content[0].type",
        ),
        (
            anthropic,
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "a", "name": "f", "input": [1]}],
                }
            ],
            "content[0].input",
        ),
    ],
)
def test_strict_mode_rejects_what_lenient_mode_keeps(module: Any, payload: Any, field: str) -> None:
    lenient = module.load(payload)
    assert lenient  # kept, and it comes back on dump
    dumped = module.dump(lenient)
    assert (dumped["messages"] if module is anthropic else dumped) == payload
    with pytest.raises(FormatError) as info:
        module.load(payload, strict=True)
    assert info.value.field == field
    assert info.value.index == 0


def test_non_json_arguments_stay_raw_and_parse_lazily() -> None:
    messages = openai_chat.load(
        [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
                ],
            }
        ]
    )
    call = messages[0].tool_calls[0]
    assert call.arguments == "{oops"
    with pytest.raises(FormatError):
        call.parsed_arguments()


def test_payload_must_be_a_list_or_request_object() -> None:
    for module in (openai_chat, anthropic, openai_responses):
        with pytest.raises(FormatError):
            module.load("text")
    with pytest.raises(FormatError, match="messages"):
        anthropic.load({"system": "only"})


def test_deeply_nested_input_is_a_format_error_not_a_crash() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(FormatError, match="nested too deeply"):
        openai_chat.load([{"role": "user", "content": "a", "meta": deep}])
    with pytest.raises(FormatError):
        anthropic.load(
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "a", "name": "f", "input": deep}],
                }
            ]
        )
    with pytest.raises(FormatError, match="nested too deeply"):
        openai_responses.load([{"type": "web_search_call", "id": "w", "action": deep}])
    # Arguments too deep to parse still convert, as raw text.
    call = [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "[" * 100_000}}]
    body = anthropic.dump(openai_chat.load([{"role": "assistant", "tool_calls": call}]))
    assert body["messages"][0]["content"][0]["input"] == {"arguments": "[" * 100_000}


@pytest.mark.parametrize(
    "body",
    [
        {"system": [], "messages": []},
        {"system": "", "messages": []},
        {"system": [{"type": "text", "text": "one"}], "messages": []},
        {"system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "messages": []},
        {"messages": [{"role": "user", "content": ""}, {"role": "assistant", "content": []}]},
    ],
)
def test_anthropic_edge_shapes_round_trip(body: dict[str, Any]) -> None:
    assert anthropic.dump(anthropic.load(body)) == body


def _through_json(messages: list[Message]) -> list[Message]:
    return [Message.from_dict(json.loads(json.dumps(m.to_dict()))) for m in messages]


def test_round_trip_survives_serialization_as_stores_do(tau_runs: list[dict[str, Any]]) -> None:
    traj = tau_runs[5]["traj"]
    assert openai_chat.dump(_through_json(openai_chat.load(traj))) == traj
    body = _claude("8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
    assert anthropic.dump(_through_json(anthropic.load(body))) == body
    items = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
        {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "x", "status": "completed"},
    ]
    assert openai_responses.dump(_through_json(openai_responses.load(items))) == items


def test_an_id_field_on_a_message_becomes_its_id_and_round_trips() -> None:
    chat = [
        {"role": "user", "content": "a", "id": "u1"},
        {"role": "user", "content": "b", "id": "u1"},
    ]
    messages = openai_chat.load(chat)
    assert messages[0].id == "u1"
    assert messages[1].id not in ("u1", messages[0].id)
    assert openai_chat.dump(messages) == chat
    body = {"messages": [{"role": "user", "content": "a", "id": "m7"}]}
    assert anthropic.load(body)[0].id == "m7"
    assert anthropic.dump(anthropic.load(body)) == body


def _scramble(value: Any) -> None:
    """Mutate every dict and list inside ``value`` in place."""
    if isinstance(value, dict):
        for v in list(value.values()):
            _scramble(v)
        value.clear()
        value["scrambled"] = True
    elif isinstance(value, list):
        for v in value:
            _scramble(v)
        value.append("scrambled")


@pytest.mark.parametrize("fmt", formats.FORMAT_NAMES)
def test_mutating_payloads_never_reaches_loaded_messages(
    fmt: str, tau_runs: list[dict[str, Any]]
) -> None:
    if fmt == "anthropic":
        source: Any = _claude("tool_heavy.jsonl")
    elif fmt == "openai_chat":
        source = tau_runs[0]["traj"]
    else:
        source = [
            *openai_responses.dump(openai_chat.load(tau_runs[0]["traj"])),
            {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "s"}]},
            {"type": "web_search_call", "id": "ws", "action": {"query": "q"}},
        ]
    payload = copy.deepcopy(source)
    messages = formats.load(payload, fmt)
    _scramble(payload)
    first = formats.dump(messages, fmt)
    assert first == source
    _scramble(first)
    assert formats.dump(messages, fmt) == source


def test_detect_explains_objects_it_cannot_place() -> None:
    with pytest.raises(FormatError, match="Responses items"):
        formats.detect(
            {"messages": [{"type": "function_call_output", "call_id": "a", "output": ""}]}
        )
    mixed = [
        {"role": "tool", "tool_call_id": "a", "content": "x"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
    ]
    with pytest.raises(FormatError, match="mix"):
        formats.detect({"messages": mixed})


CHAT_SHAPES: list[list[dict[str, Any]]] = [
    [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c", "type": "custom", "custom": {"name": "patch", "input": "*** Begin"}}
            ],
        }
    ],
    [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}", "strict": True},
                    "index": 0,
                }
            ],
        }
    ],
    [
        {
            "role": "user",
            "content": [
                {
                    "type": "image_url",
                    "image_url": {"url": "https://x.test/a.png", "detail": None, "hint": 1},
                }
            ],
        }
    ],
    [
        {
            "role": "user",
            "content": [
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/webp;base64,UklG"},
                    "cache": "x",
                }
            ],
        }
    ],
    [
        {"role": "user", "name": None, "content": "hi"},
        {"role": "tool", "tool_call_id": "c", "name": None, "content": ""},
    ],
    [
        {"role": "tool", "tool_call_id": "c"},
        {"role": "tool", "tool_call_id": "d", "content": [{"type": "text", "text": "r"}]},
    ],
    [
        {
            "role": "assistant",
            "content": "x",
            "tool_calls": None,
            "function_call": {"name": "old", "arguments": "{}"},
        }
    ],
    [{"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
    [{"role": "developer", "content": "d", "tool_calls": [1]}],
]
ANTHROPIC_SHAPES: list[dict[str, Any]] = [
    {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "image", "source": {"type": "file", "file_id": "f1"}}],
            }
        ]
    },
    {
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "url", "url": "https://x.test/a.png", "extra": 1},
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            }
        ]
    },
    {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t"},
                    {"type": "tool_result", "tool_use_id": "u", "content": None, "is_error": None},
                ],
            }
        ]
    },
    {
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": None},
                    {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
                ],
            }
        ]
    },
    {
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "text", "data": "x", "media_type": "text/plain"},
                    }
                ],
            }
        ]
    },
    {
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "q", "metadata": {"k": "v"}}],
    },
    {
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [
                            {"type": "text", "text": "a"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": "iVBO",
                                },
                            },
                            {"type": "search_result", "title": "x"},
                        ],
                    }
                ],
            }
        ]
    },
]
RESPONSES_SHAPES: list[list[dict[str, Any]]] = [
    [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_image", "image_url": None, "file_id": "f", "detail": "high"}
            ],
        }
    ],
    [
        {
            "type": "message",
            "role": "system",
            "content": [{"type": "input_text", "text": "s"}],
            "status": "completed",
        }
    ],
    [
        {
            "type": "reasoning",
            "id": "r",
            "summary": [{"type": "summary_text", "text": "a", "extra": 1}],
        }
    ],
    [{"type": "reasoning", "id": "r"}],
    [
        {
            "type": "function_call_output",
            "call_id": "c",
            "output": [
                {"type": "input_image", "image_url": "https://x.test/i.png", "detail": "auto"},
                {"type": "input_file", "file_id": "f"},
            ],
        }
    ],
    [{"role": "assistant", "content": "easy"}, {"type": "item_reference", "id": "ref"}],
    [{"type": "message", "role": "assistant", "content": []}],
]


@pytest.mark.parametrize("payload", CHAT_SHAPES)
def test_rarer_chat_shapes_round_trip(payload: list[dict[str, Any]]) -> None:
    assert openai_chat.dump(openai_chat.load(payload)) == payload


@pytest.mark.parametrize("payload", ANTHROPIC_SHAPES)
def test_rarer_anthropic_shapes_round_trip(payload: dict[str, Any]) -> None:
    assert anthropic.dump(anthropic.load(payload)) == payload


@pytest.mark.parametrize("payload", RESPONSES_SHAPES)
def test_rarer_responses_shapes_round_trip(payload: list[dict[str, Any]]) -> None:
    assert openai_responses.dump(openai_responses.load(payload)) == payload


# -- detection of features only one format has ------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        [
            {"role": "user", "content": "list the files"},
            {"type": "shell_call", "call_id": "c1", "action": {"commands": ["ls"]}},
            {"type": "shell_call_output", "call_id": "c1", "output": [{"stdout": "a\n"}]},
        ],
        [
            {"role": "user", "content": "create a.txt"},
            {
                "type": "apply_patch_call",
                "call_id": "c2",
                "operation": {"type": "create_file", "path": "a.txt", "diff": "+hi\n"},
            },
            {"type": "apply_patch_call_output", "call_id": "c2", "output": "done"},
        ],
        [  # an input message's "type" is optional, a system or developer one's too
            {"role": "developer", "content": "Answer tersely."},
            {"role": "user", "content": "Weather?"},
            {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "21C"},
        ],
    ],
    ids=["shell", "apply-patch", "developer-without-type"],
)
def test_responses_inputs_the_loader_models_are_detected(payload: list[Any]) -> None:
    assert formats.detect(payload) == "openai_responses"
    assert formats.load(payload) == formats.load(payload, "openai_responses")


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "hi, I am Alice", "name": "alice"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help."}]},
    ],
    ids=["name", "refusal"],
)
def test_a_chat_request_body_with_chat_only_fields_is_chat(message: dict[str, Any]) -> None:
    """A participant's name or a refusal part is Chat's: read as Anthropic, the Chat dump
    lost them and the Anthropic dump kept fields its API rejects."""
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hello"}, message]}
    assert formats.detect(body) == "openai_chat"
    assert formats.dump(formats.load(body), "openai_chat") == body["messages"]
