from __future__ import annotations

import pytest

from contextfold.errors import FormatError
from contextfold.messages import ImagePart, Message, ThinkingPart, ToolCallPart, ToolResultPart


def test_round_trip_all_parts() -> None:
    msg = Message(
        "assistant",
        (
            ThinkingPart("why", signature="sig"),
            ToolCallPart("c1", "lookup", '{"q": 1}', extra={"type": "function"}),
            ImagePart(url="https://example.invalid/a.png"),
        ),
        name="bot",
        extra={"refusal": None},
    )
    assert Message.from_dict(msg.to_dict()) == msg
    result = Message.tool_result("c1", [ImagePart(data="AAAA", mime="image/png")], is_error=True)
    assert Message.from_dict(result.to_dict()) == result


def test_messages_are_frozen_and_hashable() -> None:
    msg = Message.user("hi")
    with pytest.raises(AttributeError):
        msg.role = "assistant"  # type: ignore[misc]
    assert hash(msg) == hash(Message.from_dict(msg.to_dict()))


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"v": 1, "id": "x", "role": "robot", "parts": []}, "role"),
        ({"v": 1, "id": 3, "role": "user", "parts": []}, "id"),
        ({"v": 9, "id": "x", "role": "user", "parts": []}, "v"),
        ({"v": 1, "id": "x", "role": "user", "parts": [{"kind": "laser"}]}, "parts[0].kind"),
    ],
)
def test_from_dict_rejects_malformed(data: dict[str, object], field: str) -> None:
    with pytest.raises(FormatError) as info:
        Message.from_dict(data)
    assert info.value.field == field


def test_tool_call_arguments_must_be_json_when_parsed() -> None:
    assert ToolCallPart("c", "f", '{"a": [1]}').parsed_arguments() == {"a": [1]}
    with pytest.raises(FormatError):
        ToolCallPart("c", "f", "{not json").parsed_arguments()


def test_views() -> None:
    r = Message("user", (ToolResultPart("c1", "ok"),))
    assert r.is_tool_result_only
    assert r.tool_results[0].text == "ok"
    assert not Message.user("x").is_tool_result_only
