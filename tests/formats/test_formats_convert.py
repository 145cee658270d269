"""Conversions between provider formats: tool pairing survives, each API's rules are met."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold import formats, turns
from contextfold.formats import anthropic, openai_chat, openai_responses
from contextfold.messages import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from shared_data import DATA, claude_code_payload, require_data

CLAUDE_FILES = sorted(
    str(p.relative_to(DATA / "claude-code-sessions"))
    for p in (DATA / "claude-code-sessions").rglob("*.jsonl")
)


def _claude(name: str) -> dict[str, Any]:
    return {"messages": claude_code_payload(require_data() / "claude-code-sessions" / name)}


def _base_id(new: str, originals: list[str]) -> str:
    """The original id of a call id the Anthropic dump made unique (``<id>_<n>``)."""
    return new if new in originals else new.rsplit("_", 1)[0]


def _anthropic_pairs(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(tool_use id, tool_result id) pairs, checking results follow their calls."""
    pairs: list[tuple[str, str]] = []
    waiting: list[str] = []
    for m in body["messages"]:
        blocks = m["content"] if isinstance(m["content"], list) else []
        for b in blocks:
            if b["type"] == "tool_result":
                pairs.append((waiting.pop(0), b["tool_use_id"]))
        assert not waiting, "a tool_use was not answered in the next message"
        waiting = [b["id"] for b in blocks if b["type"] == "tool_use"]
    return pairs


def test_every_tau_bench_run_becomes_a_valid_anthropic_request(
    tau_runs: list[dict[str, Any]],
) -> None:
    renamed = 0
    for run in tau_runs:
        body = anthropic.dump(openai_chat.load(run["traj"]))
        pairs = _anthropic_pairs(body)
        assert all(use == result for use, result in pairs)
        uses = [use for use, _ in pairs]
        assert len(set(uses)) == len(uses)
        renamed += len(uses) - len(
            {c["id"] for m in run["traj"] for c in m.get("tool_calls") or []}
        )
    assert renamed > 0  # the data does reuse ids, so the rewrite was exercised


def test_tool_ids_anthropic_refuses_are_rewritten_with_their_results() -> None:
    chat = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "functions.search:0",
                    "type": "function",
                    "function": {"name": "search", "arguments": "{}"},
                },
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "functions.search:0", "content": "r1"},
        {"role": "tool", "tool_call_id": "a", "content": "r2"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "r3"},
    ]
    body = anthropic.dump(openai_chat.load(chat))
    assert _anthropic_pairs(body) == [
        ("functions_search_0", "functions_search_0"),
        ("a", "a"),
        ("a_2", "a_2"),
    ]
    turns.validate(anthropic.load(body))


@pytest.mark.parametrize("run", [0, 17, 101, 199])
def test_tau_bench_converts_to_every_format(tau_runs: list[dict[str, Any]], run: int) -> None:
    traj = tau_runs[run]["traj"]
    messages = openai_chat.load(traj)
    calls = [c["id"] for m in traj for c in m.get("tool_calls") or []]

    body = anthropic.dump(messages)
    assert body["system"] == traj[0]["content"]
    assert all(m["role"] in ("user", "assistant") for m in body["messages"])
    uses = [
        b["id"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert len(set(uses)) == len(uses)  # reused ids get a suffix: Anthropic wants them unique
    assert [_base_id(u, calls) for u in uses] == calls
    back = anthropic.load(body)
    turns.validate(back)

    chat_again = openai_chat.dump(back)
    assert [m["role"] for m in chat_again] == [m["role"] for m in traj]
    assert [
        _base_id(c["id"], calls) for m in chat_again for c in m.get("tool_calls") or []
    ] == calls
    for a, b in zip(chat_again, traj, strict=False):
        for x, y in zip(a.get("tool_calls") or [], b.get("tool_calls") or [], strict=False):
            assert json.loads(x["function"]["arguments"]) == json.loads(y["function"]["arguments"])

    items = openai_responses.dump(messages)
    assert [i["call_id"] for i in items if i["type"] == "function_call"] == calls
    assert [i["call_id"] for i in items if i["type"] == "function_call_output"] == calls
    turns.validate(openai_responses.load(items))
    assert formats.detect(items) == "openai_responses"


@pytest.mark.parametrize("name", CLAUDE_FILES)
def test_claude_code_converts_to_chat_and_responses(name: str) -> None:
    payload = _claude(name)
    blocks = [b for m in payload["messages"] for b in m["content"]]
    uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    messages = anthropic.load(payload)

    chat = openai_chat.dump(messages)
    assert [m["tool_call_id"] for m in chat if m["role"] == "tool"] == results
    assert [c["id"] for m in chat for c in m.get("tool_calls") or []] == uses
    assert formats.detect(chat) == "openai_chat" or not uses
    chat_messages = openai_chat.load(chat)
    turns.validate(chat_messages)

    # Back to Anthropic: tool inputs survive exactly, thinking does not cross providers.
    again = anthropic.dump(chat_messages)
    inputs = {b["id"]: b["input"] for b in blocks if b["type"] == "tool_use"}
    for m in again["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b["type"] == "tool_use":
                assert b["input"] == inputs[b["id"]]
            assert b["type"] != "thinking"

    items = openai_responses.dump(messages)
    assert [i["call_id"] for i in items if i["type"] == "function_call_output"] == results
    turns.validate(openai_responses.load(items))


def test_parallel_calls_and_results_convert_both_ways() -> None:
    chat = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "weather in Paris and Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "w", "arguments": '{"c":"P"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "w", "arguments": '{"c":"O"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "rain"},
        {"role": "assistant", "content": "Sunny in Paris, rain in Oslo."},
    ]
    body = anthropic.dump(openai_chat.load(chat))
    assert body == {
        "system": "sys",
        "messages": [
            {"role": "user", "content": "weather in Paris and Oslo?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "c1", "name": "w", "input": {"c": "P"}},
                    {"type": "tool_use", "id": "c2", "name": "w", "input": {"c": "O"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"},
                    {"type": "tool_result", "tool_use_id": "c2", "content": "rain"},
                ],
            },
            {"role": "assistant", "content": "Sunny in Paris, rain in Oslo."},
        ],
    }
    back = openai_chat.dump(anthropic.load(body))
    assert [m["role"] for m in back] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [m.get("tool_call_id") for m in back[3:5]] == ["c1", "c2"]
    assert back[2]["content"] is None
    turns.validate(anthropic.load(body))


def test_results_with_trailing_text_in_one_user_message_split_for_chat() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": "boom",
                        "is_error": True,
                    },
                    {"type": "text", "text": "and also this"},
                ],
            },
        ]
    }
    chat = openai_chat.dump(anthropic.load(body))
    assert chat[2:] == [
        {"role": "tool", "tool_call_id": "t", "content": "boom"},
        {"role": "user", "content": "and also this"},
    ]
    assert anthropic.dump(anthropic.load(body)) == body


def test_non_leading_system_message_becomes_marked_user_text_for_anthropic() -> None:
    chat = [
        {"role": "system", "content": "a"},
        {"role": "developer", "content": "b"},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "late rule"},
    ]
    body = anthropic.dump(openai_chat.load(chat))
    assert body["system"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert body["messages"][-1] == {
        "role": "user",
        "content": anthropic.SYSTEM_PREFIX + "late rule",
    }


def test_images_convert_between_data_urls_and_base64_sources() -> None:
    chat = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/jpeg;base64,/9j/AA==", "detail": "high"},
                },
                {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
            ],
        }
    ]
    messages = openai_chat.load(chat)
    image = messages[0].parts[1]
    assert isinstance(image, ImagePart)
    assert (image.mime, image.data, image.detail) == ("image/jpeg", "/9j/AA==", "high")
    body = anthropic.dump(messages)
    assert body["messages"][0]["content"][1:] == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/AA=="},
        },
        {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
    ]
    chat_again = openai_chat.dump(anthropic.load(body))
    urls = [p["image_url"]["url"] for p in chat_again[0]["content"] if p["type"] == "image_url"]
    assert urls == ["data:image/jpeg;base64,/9j/AA==", "https://x.test/a.png"]
    items = openai_responses.dump(messages)
    assert items[0]["content"][1] == {
        "type": "input_image",
        "image_url": "data:image/jpeg;base64,/9j/AA==",
        "detail": "high",
    }


def test_anthropic_only_fields_stay_out_of_chat() -> None:
    body = {
        "system": [{"type": "text", "text": "policy", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "hello"},
                ],
            },
        ],
    }
    messages = anthropic.load(body)
    assert anthropic.dump(messages) == body
    assert messages[0].parts[0].extra["anthropic.cache_control"] == {"type": "ephemeral"}
    thinking = messages[2].parts[0]
    assert isinstance(thinking, ThinkingPart)
    assert thinking.signature == "sig"
    chat = openai_chat.dump(messages)
    assert chat == [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]


def test_chat_only_fields_round_trip_and_stay_out_of_anthropic() -> None:
    chat = [
        {
            "role": "user",
            "name": "ann",
            "content": [
                {"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}},
                {"type": "text", "text": "listen"},
            ],
        },
        {"role": "assistant", "content": None, "refusal": "no", "audio": None},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "still no"}]},
        {"role": "assistant", "content": "", "tool_calls": []},
        {
            "role": "assistant",
            "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "not json"}}],
        },
        {"role": "tool", "tool_call_id": "x", "content": None},
    ]
    messages = openai_chat.load(chat)
    assert openai_chat.dump(messages) == chat
    assert messages[0].name == "ann"
    assert messages[1].extra["openai_chat.refusal"] == "no"
    body = anthropic.dump(messages)
    assert body["messages"][0] == {"role": "user", "content": "listen"}
    # The replies with nothing Anthropic can carry are left out: it refuses empty content.
    assert body["messages"][1] == {"role": "assistant", "content": "still no"}
    assert body["messages"][2]["content"] == [
        {"type": "tool_use", "id": "x", "name": "f", "input": {"arguments": "not json"}}
    ]
    assert len(body["messages"]) == 4
    assert all(m["content"] not in ([], "") for m in body["messages"])
    assert all("refusal" not in m and "audio" not in m for m in body["messages"])


def test_edited_responses_message_falls_back_to_conversion() -> None:
    items = [
        {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "x"},
    ]
    messages = openai_responses.load(items)
    edited = messages[0].replace(parts=(TextPart("thinking aloud"), *messages[0].parts))
    out = openai_responses.dump([edited, messages[1]])
    assert out == [
        {"type": "message", "role": "assistant", "content": "thinking aloud"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "x"},
    ]


def test_hand_built_messages_dump_to_every_format() -> None:
    messages = [
        Message.system("sys"),
        Message.user("q"),
        Message.assistant("let me look", tool_calls=[ToolCallPart("k", "search", '{"q": "a"}')]),
        Message.tool_result("k", "found", is_error=False),
        Message.assistant("answer"),
    ]
    for name in formats.FORMAT_NAMES:
        payload = formats.dump(messages, name)
        assert formats.detect(payload) == name or name == "openai_chat"
        back = formats.load(payload, name)
        turns.validate(back)
        assert [m.text for m in back if not m.tool_results] == ["sys", "q", "let me look", "answer"]


def test_empty_system_from_chat_stays_a_string_for_anthropic() -> None:
    assert anthropic.dump(openai_chat.load([{"role": "system", "content": ""}])) == {
        "system": "",
        "messages": [],
    }


def test_images_in_tool_results_move_after_the_tool_messages_for_chat() -> None:
    shot = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
    }
    body = {
        "messages": [
            {"role": "user", "content": "look at both pages"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "s1", "name": "screenshot", "input": {"page": 1}},
                    {"type": "tool_use", "id": "s2", "name": "screenshot", "input": {"page": 2}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "s1",
                        "content": [{"type": "text", "text": "page 1"}, shot],
                    },
                    {"type": "tool_result", "tool_use_id": "s2", "content": [shot]},
                ],
            },
            {"role": "assistant", "content": "Both pages look fine."},
        ]
    }
    chat = openai_chat.dump(anthropic.load(body))
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert chat[2]["content"] == [{"type": "text", "text": "page 1"}]
    assert isinstance(chat[3]["content"], str)
    assert chat[4]["content"] == [
        {"type": "text", "text": "[images returned by tool call s1]"},
        image,
        {"type": "text", "text": "[images returned by tool call s2]"},
        image,
    ]
    turns.validate(openai_chat.load(chat))
    # A Chat tool message with list content is left as it was.
    odd = [chat[0], chat[1], {"role": "tool", "tool_call_id": "s1", "content": [image]}]
    odd[1] = {**chat[1], "tool_calls": chat[1]["tool_calls"][:1]}
    assert openai_chat.dump(openai_chat.load(odd)) == odd


def test_results_come_first_in_an_anthropic_user_message() -> None:
    messages = [
        Message.user("q"),
        Message.assistant(tool_calls=[ToolCallPart("t1", "f")]),
        Message.user([TextPart("by the way"), ToolResultPart("t1", "done")]),
    ]
    body = anthropic.dump(messages)
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "done"},
        {"type": "text", "text": "by the way"},
    ]


def test_a_converted_message_with_nothing_for_anthropic_is_left_out() -> None:
    chat = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "again"},
    ]
    assert anthropic.dump(openai_chat.load(chat))["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "again"},
    ]
    items = [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"},
        {"type": "message", "role": "user", "content": "again"},
    ]
    body = anthropic.dump(openai_responses.load(items))
    assert all(m["content"] not in ([], "") for m in body["messages"])
    # An Anthropic payload's own empty messages still round trip as they were.
    own = {"messages": [{"role": "user", "content": ""}, {"role": "assistant", "content": []}]}
    assert anthropic.dump(anthropic.load(own)) == own


def test_parallel_calls_sent_one_per_message_dump_to_one_chat_assistant_message() -> None:
    """Chat wants a call's results right after the message that made it: two assistant
    messages in a row, each with a call, were refused."""
    body = {
        "messages": [
            {"role": "user", "content": "Weather in Lyon and Paris?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "ta", "name": "w", "input": {"c": "L"}}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "And Paris."},
                    {"type": "tool_use", "id": "tb", "name": "w", "input": {"c": "P"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "ta", "content": "21C"},
                    {"type": "tool_result", "tool_use_id": "tb", "content": "18C"},
                ],
            },
        ]
    }
    chat = formats.dump(formats.load(body), "openai_chat")
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in chat[1]["tool_calls"]] == ["ta", "tb"]
    assert chat[1]["content"] == "And Paris."
    formats.load(chat, "openai_chat")  # and it reads back as valid Chat


@pytest.mark.parametrize("target", ["openai_chat", "openai_responses"])
def test_a_tool_result_only_another_format_can_carry_says_so(target: str) -> None:
    body = {
        "messages": [
            {"role": "user", "content": "Read the spec."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [
                            {
                                "type": "document",
                                "source": {
                                    "type": "text",
                                    "media_type": "text/plain",
                                    "data": "The spec says 42.",
                                },
                            }
                        ],
                    }
                ],
            },
        ]
    }
    dumped = json.dumps(formats.dump(formats.load(body), target))
    assert "cannot carry" in dumped
    assert '"content": []' not in dumped
    assert '"output": []' not in dumped


def test_an_edited_responses_answer_dumps_as_valid_input() -> None:
    """An output message's text parts (with annotations) lose their id and status once the
    turn is edited; a list of output_text is valid only in an output message."""
    items = [
        {"role": "user", "content": "Book me a flight."},
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me look that up.", "annotations": []}],
        },
        {"type": "function_call", "call_id": "c1", "name": "search", "arguments": "{}"},
    ]
    repaired = turns.repair(formats.load(items, "openai_responses"))  # the call has no output
    dumped = formats.dump(repaired, "openai_responses")
    assert dumped[1] == {"type": "message", "role": "assistant", "content": "Let me look that up."}
