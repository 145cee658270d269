"""Property tests for the provider formats.

* On arbitrary JSON-like input, ``load`` (each format, lenient and strict) and ``detect`` raise
  nothing but :class:`FormatError`.
* Well-formed payloads round trip exactly, and conversions keep every call paired.
"""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import formats, turns
from contextfold.errors import FormatError
from contextfold.formats import anthropic, openai_chat, openai_responses

FAST = settings(max_examples=100, deadline=None)

# Field names and values the loaders look at, so random input reaches deep into them.
KEYS = [
    "role",
    "content",
    "type",
    "text",
    "name",
    "id",
    "tool_calls",
    "tool_call_id",
    "function",
    "arguments",
    "custom",
    "input",
    "image_url",
    "url",
    "detail",
    "refusal",
    "call_id",
    "output",
    "summary",
    "encrypted_content",
    "status",
    "source",
    "media_type",
    "data",
    "tool_use_id",
    "is_error",
    "thinking",
    "signature",
    "messages",
    "system",
    "cache_control",
]
WORDS = [
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "text",
    "image_url",
    "refusal",
    "input_audio",
    "function",
    "custom",
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "reasoning",
    "item_reference",
    "input_text",
    "output_text",
    "input_image",
    "summary_text",
    "image",
    "base64",
    "url",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "document",
    "data:image/png;base64,AA",
    "{}",
    "{bad",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.sampled_from(WORDS),
    st.text(max_size=8),
)
json_like = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=5)), inner, max_size=5),
    ),
    max_leaves=25,
)
# Shaped like a payload: lists of message-ish objects, or a request object.
message_like = st.dictionaries(st.sampled_from(KEYS), json_like, max_size=6)
payload_like = st.one_of(
    json_like,
    st.lists(message_like, max_size=5),
    st.fixed_dictionaries(
        {"messages": st.lists(message_like, max_size=5)}, optional={"system": json_like}
    ),
)

LOADERS = (openai_chat.load, openai_responses.load, anthropic.load)


@FAST
@given(payload_like)
def test_load_raises_only_format_errors_and_what_loads_dumps(payload: Any) -> None:
    for load in LOADERS:
        with contextlib.suppress(FormatError):
            load(payload, strict=True)
        try:
            messages = load(payload)
        except FormatError:
            continue
        assert isinstance(messages, list)
        for name in formats.FORMAT_NAMES:
            json.dumps(formats.dump(messages, name))  # JSON-ready, no exception


@FAST
@given(payload_like)
def test_detect_and_auto_load_raise_only_format_errors(payload: Any) -> None:
    try:
        name = formats.detect(payload)
    except FormatError:
        return
    assert name in formats.FORMAT_NAMES
    with contextlib.suppress(FormatError):
        formats.load(payload)


# -- well-formed payloads --------------------------------------------------------------------

text = st.text(min_size=1, max_size=12)
ident = st.from_regex(r"[a-z]{2,6}_[0-9]{1,4}", fullmatch=True)
args = st.dictionaries(st.sampled_from(["a", "b", "q"]), st.integers() | st.text(max_size=5))


@st.composite
def chat_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(text)})
    counter = 0
    for _ in range(draw(st.integers(0, 4))):
        user: dict[str, Any] = {"role": "user", "content": draw(text)}
        if draw(st.booleans()):
            user["content"] = [{"type": "text", "text": draw(text)}]
        if draw(st.booleans()):
            user["name"] = draw(text)
        out.append(user)
        for _ in range(draw(st.integers(0, 2))):
            n = draw(st.integers(1, 3))
            ids = [f"call_{counter + k}" for k in range(n)]
            counter += n
            content = draw(st.one_of(st.none(), text))
            calls = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": draw(ident), "arguments": json.dumps(draw(args))},
                }
                for call_id in ids
            ]
            out.append({"role": "assistant", "content": content, "tool_calls": calls})
            out.extend(
                {"role": "tool", "tool_call_id": call_id, "content": draw(st.text(max_size=10))}
                for call_id in ids
            )
        out.append({"role": "assistant", "content": draw(text)})
    return out


@st.composite
def anthropic_bodies(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": []}
    if draw(st.booleans()):
        body["system"] = draw(st.one_of(text, st.just([{"type": "text", "text": "policy"}])))
    counter = 0
    for _ in range(draw(st.integers(0, 4))):
        body["messages"].append({"role": "user", "content": draw(text)})
        for _ in range(draw(st.integers(0, 2))):
            n = draw(st.integers(1, 3))
            ids = [f"toolu_{counter + k}" for k in range(n)]
            counter += n
            blocks: list[dict[str, Any]] = []
            if draw(st.booleans()):
                blocks.append({"type": "thinking", "thinking": draw(text), "signature": "s"})
            blocks += [
                {"type": "tool_use", "id": i, "name": draw(ident), "input": draw(args)} for i in ids
            ]
            body["messages"].append({"role": "assistant", "content": blocks})
            results: list[dict[str, Any]] = []
            for i in ids:
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": i}
                result["content"] = draw(
                    st.one_of(text, st.just([{"type": "text", "text": "out"}]))
                )
                if draw(st.booleans()):
                    result["is_error"] = draw(st.booleans())
                results.append(result)
            body["messages"].append({"role": "user", "content": results})
        body["messages"].append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    return body


def _call_ids(messages: list[Any]) -> list[str]:
    return [c.id for m in messages for c in m.tool_calls]


@FAST
@given(chat_conversations())
def test_chat_round_trips_and_converts(payload: list[dict[str, Any]]) -> None:
    messages = openai_chat.load(payload)
    assert openai_chat.dump(messages) == payload
    assert [m.id for m in openai_chat.load(payload)] == [m.id for m in messages]
    for name in ("anthropic", "openai_responses"):
        dumped = formats.dump(messages, name)
        assert formats.dump(formats.load(dumped, name), name) == dumped
        converted = formats.load(dumped, name)
        turns.validate(converted)
        assert _call_ids(converted) == _call_ids(messages)
        back = openai_chat.load(openai_chat.dump(converted))
        turns.validate(back)
        assert _call_ids(back) == _call_ids(messages)


@FAST
@given(anthropic_bodies())
def test_anthropic_round_trips_and_converts(body: dict[str, Any]) -> None:
    messages = anthropic.load(body)
    assert anthropic.dump(messages) == body
    turns.validate(messages)
    for name in ("openai_chat", "openai_responses"):
        dumped = formats.dump(messages, name)
        assert formats.dump(formats.load(dumped, name), name) == dumped
        converted = formats.load(dumped, name)
        turns.validate(converted)
        assert _call_ids(converted) == _call_ids(messages)
        inputs = {c.id: c.parsed_arguments() for m in messages for c in m.tool_calls}
        assert {c.id: c.parsed_arguments() for m in converted for c in m.tool_calls} == inputs


@st.composite
def responses_items(draw: st.DrawFn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if draw(st.booleans()):
        items.append({"role": "developer", "content": draw(text)})
    counter = 0
    for _ in range(draw(st.integers(0, 4))):
        items.append(
            draw(
                st.sampled_from(
                    [
                        {"role": "user", "content": "hi"},
                        {
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": "hey"}],
                        },
                    ]
                )
            )
        )
        for _ in range(draw(st.integers(0, 2))):
            if draw(st.booleans()):
                items.append(
                    {
                        "type": "reasoning",
                        "id": f"rs_{counter}",
                        "summary": [{"type": "summary_text", "text": draw(text)}],
                        "encrypted_content": draw(st.one_of(st.none(), text)),
                    }
                )
            n = draw(st.integers(1, 3))
            ids = [f"call_{counter + k}" for k in range(n)]
            counter += n
            for call_id in ids:
                call: dict[str, Any] = {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": draw(ident),
                    "arguments": json.dumps(draw(args)),
                }
                if draw(st.booleans()):
                    call.update(id="fc_" + call_id, status="completed")
                items.append(call)
            for call_id in ids:
                items.append(
                    {"type": "function_call_output", "call_id": call_id, "output": draw(text)}
                )
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{counter}",
                "status": "completed",
                "content": [{"type": "output_text", "text": draw(text), "annotations": []}],
            }
        )
    return items


@FAST
@given(responses_items())
def test_responses_round_trip_and_convert(items: list[dict[str, Any]]) -> None:
    messages = openai_responses.load(items)
    assert openai_responses.dump(messages) == items
    turns.validate(messages)
    for name in ("openai_chat", "anthropic"):
        dumped = formats.dump(messages, name)
        assert formats.dump(formats.load(dumped, name), name) == dumped
        converted = formats.load(dumped, name)
        turns.validate(converted)
        assert _call_ids(converted) == _call_ids(messages)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    """A well-formed payload of any format with a few values replaced or keys removed."""
    payload = copy.deepcopy(
        draw(st.one_of(chat_conversations(), anthropic_bodies(), responses_items()))
    )
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(payload) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = payload
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_like)
    return payload


@FAST
@given(mutated())
def test_mutated_payloads_raise_only_format_errors(payload: Any) -> None:
    with contextlib.suppress(FormatError):
        formats.detect(payload)
    for load in LOADERS:
        with contextlib.suppress(FormatError):
            load(payload, strict=True)
        try:
            messages = load(payload)
        except FormatError:
            continue
        for name in formats.FORMAT_NAMES:
            json.dumps(formats.dump(messages, name))
