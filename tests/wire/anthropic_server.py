"""Anthropic Messages API wire format: message objects, streaming events and errors.

A streamed answer is ``message_start``, then per content block ``content_block_start``,
``content_block_delta``\\* and ``content_block_stop``, then ``message_delta`` (stop reason and
output tokens) and ``message_stop``; ``ping`` may appear anywhere and ``error`` can arrive
mid-stream (for example ``overloaded_error``).
"""

from __future__ import annotations

from typing import Any

from tests.wire import JSONReply, StreamItem

MODEL = "claude-test-haiku"


def usage(
    input: int = 150,
    output: int = 25,
    cache_read: int = 0,
    cache_write: int = 0,
) -> dict[str, Any]:
    return {
        "input_tokens": input,
        "output_tokens": output,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_write,
    }


def error_body(type: str, message: str = "boom") -> dict[str, Any]:
    """Anthropic's error envelope."""
    return {"type": "error", "error": {"type": type, "message": message}}


def error_reply(status: int, type: str = "api_error", message: str = "boom") -> JSONReply:
    return JSONReply(error_body(type, message), status=status)


def message(
    texts: list[str] | None = None,
    *,
    stop_reason: str | None = "end_turn",
    thinking: str | None = None,
    tool_use: bool = False,
    usage_: dict[str, Any] | None = None,
    model: str = MODEL,
) -> dict[str, Any]:
    """A ``message`` object: optional thinking block, text blocks, optional tool_use."""
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "signature": "sig"})
    content.extend({"type": "text", "text": t} for t in (texts or []))
    if tool_use:
        content.append({"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": 1}})
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage_ if usage_ is not None else usage(),
    }


def _ev(kind: str, **data: Any) -> tuple[str, dict[str, Any]]:
    return (kind, {"type": kind, **data})


def message_stream(
    blocks: list[list[str]],
    *,
    stop_reason: str = "end_turn",
    thinking: list[str] | None = None,
    tool_use: bool = False,
    usage_: dict[str, Any] | None = None,
    stop: bool = True,
    between: list[StreamItem] | None = None,
) -> list[StreamItem]:
    """Events of a streamed answer.

    Args:
        blocks: text blocks, each given as its deltas.
        stop_reason: sent in ``message_delta``.
        thinking: deltas of a leading thinking block.
        tool_use: add a tool_use block streamed as ``input_json_delta``.
        usage_: input usage for ``message_start`` (output tokens go in ``message_delta``).
        stop: send ``message_delta`` and ``message_stop`` (False: the stream just ends).
        between: items inserted after the first text delta.
    """
    start_usage = dict(usage_ if usage_ is not None else usage())
    final_output = start_usage.get("output_tokens", 25)
    start_usage["output_tokens"] = 1
    head = message([], stop_reason=None, usage_=start_usage)
    items: list[StreamItem] = [_ev("message_start", message=head), ("ping", {"type": "ping"})]
    index = 0
    if thinking is not None:
        items.append(
            _ev(
                "content_block_start",
                index=index,
                content_block={"type": "thinking", "thinking": "", "signature": ""},
            )
        )
        for piece in thinking:
            delta = {"type": "thinking_delta", "thinking": piece}
            items.append(_ev("content_block_delta", index=index, delta=delta))
        sig = {"type": "signature_delta", "signature": "c2ln"}
        items.append(_ev("content_block_delta", index=index, delta=sig))
        items.append(_ev("content_block_stop", index=index))
        index += 1
    inserted = False
    for block in blocks:
        items.append(
            _ev("content_block_start", index=index, content_block={"type": "text", "text": ""})
        )
        for piece in block:
            delta = {"type": "text_delta", "text": piece}
            items.append(_ev("content_block_delta", index=index, delta=delta))
            if between and not inserted:
                items.extend(between)
                inserted = True
        items.append(_ev("content_block_stop", index=index))
        index += 1
    if tool_use:
        items.append(
            _ev(
                "content_block_start",
                index=index,
                content_block={"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}},
            )
        )
        delta = {"type": "input_json_delta", "partial_json": '{"q": 1}'}
        items.append(_ev("content_block_delta", index=index, delta=delta))
        items.append(_ev("content_block_stop", index=index))
    if stop:
        items.append(
            _ev(
                "message_delta",
                delta={"stop_reason": stop_reason, "stop_sequence": None},
                usage={"output_tokens": final_output},
            )
        )
        items.append(_ev("message_stop"))
    return items


def stream_error(type: str = "overloaded_error", message: str = "Overloaded") -> StreamItem:
    """An ``error`` event inside a 200 stream."""
    return ("error", error_body(type, message))
