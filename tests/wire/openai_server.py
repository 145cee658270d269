"""OpenAI wire format: Chat Completions and Responses payloads, plain and streamed.

The shapes follow the public API reference (``chat.completion``, ``chat.completion.chunk``
with ``stream_options.include_usage``, ``response`` objects and the Responses streaming
events ``response.created`` ... ``response.output_text.delta`` ... ``response.completed`` /
``response.incomplete`` / ``response.failed``).
"""

from __future__ import annotations

from typing import Any

from tests.wire import JSONReply, SSEReply, StreamItem

MODEL = "gpt-test-mini"
CREATED = 1_700_000_000


def error_body(message: str, *, type: str = "server_error", code: str | None = None) -> Any:
    """An OpenAI error envelope."""
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


def error_reply(status: int, message: str = "boom", **kwargs: Any) -> JSONReply:
    """An HTTP error answer with an OpenAI error envelope."""
    return JSONReply(error_body(message, **kwargs), status=status)


# -- Chat Completions ---------------------------------------------------------------------


def chat_usage(
    prompt: int = 120, completion: int = 30, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    """Chat Completions usage; ``completion`` counts the ``reasoning`` tokens too."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def tool_call(
    name: str = "lookup", arguments: str = '{"q": "x"}', *, call_id: str = "call_1"
) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat_completion(
    text: str | None = "A short summary.",
    *,
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    model: str = MODEL,
) -> dict[str, Any]:
    """A ``chat.completion`` object with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage if usage is not None else chat_usage(),
    }


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    model: str = MODEL,
    no_choices: bool = False,
) -> dict[str, Any]:
    """One ``chat.completion.chunk``."""
    choices = (
        [] if no_choices else [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}]
    )
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": choices,
        "usage": usage,
    }


def chat_stream(
    pieces: list[str],
    *,
    finish_reason: str | None = "stop",
    usage: dict[str, Any] | None = None,
    done: bool = True,
    between: list[StreamItem] | None = None,
) -> list[StreamItem]:
    """Stream items for a streamed chat answer.

    The role chunk, one chunk per text piece (``between`` is inserted after the first),
    the finish chunk (unless ``finish_reason`` is None), the usage chunk (empty choices, as
    ``include_usage`` sends it) and ``[DONE]``.
    """
    items: list[StreamItem] = [chunk({"role": "assistant", "content": ""})]
    for i, piece in enumerate(pieces):
        items.append(chunk({"content": piece}))
        if i == 0 and between:
            items.extend(between)
    if finish_reason is not None:
        items.append(chunk({}, finish_reason=finish_reason))
        items.append(chunk(no_choices=True, usage=usage if usage is not None else chat_usage()))
    if done:
        items.append("[DONE]")
    return items


def chat_stream_reply(pieces: list[str], **kwargs: Any) -> SSEReply:
    cut = bool(kwargs.pop("cut", False))
    return SSEReply(chat_stream(pieces, **kwargs), cut=cut)


def chat_tool_stream(
    name: str = "lookup", arguments: str = '{"q": "x"}', *, call_id: str = "call_1"
) -> list[StreamItem]:
    """A streamed answer that calls a tool instead of writing text."""
    first = {"index": 0, **tool_call(name, "", call_id=call_id)}
    return [
        chunk({"role": "assistant", "content": None, "tool_calls": [first]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
        chunk({}, finish_reason="tool_calls"),
        chunk(no_choices=True, usage=chat_usage()),
        "[DONE]",
    ]


# -- Responses API ----------------------------------------------------------------------------


def responses_usage(
    input: int = 200, output: int = 40, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    """Responses usage; ``output`` counts the ``reasoning`` tokens too."""
    return {
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input + output,
    }


def message_item(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call_item() -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "lookup",
        "arguments": '{"q": "x"}',
        "status": "completed",
    }


def response_object(
    text: str | None = "A short summary.",
    *,
    status: str = "completed",
    incomplete_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    output: list[dict[str, Any]] | None = None,
    error: dict[str, Any] | None = None,
    model: str = MODEL,
) -> dict[str, Any]:
    """A ``response`` object."""
    if output is None:
        output = [message_item(text)] if text is not None else []
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "model": model,
        "output": output,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "usage": usage if usage is not None else responses_usage(),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def responses_stream(
    pieces: list[str],
    *,
    final: str | None = "response.completed",
    final_response: dict[str, Any] | None = None,
    between: list[StreamItem] | None = None,
) -> list[StreamItem]:
    """Named SSE events of a streamed Responses answer.

    ``final`` is the closing event (``response.completed``, ``response.incomplete``,
    ``response.failed``) or None for a stream that stops without one.
    """
    text = "".join(pieces)
    seq = iter(range(1000))

    def ev(kind: str, **data: Any) -> tuple[str, dict[str, Any]]:
        return (kind, {"type": kind, "sequence_number": next(seq), **data})

    partial = response_object(None, status="in_progress", output=[])
    item = message_item("")
    item["status"] = "in_progress"
    item["content"] = []
    items: list[StreamItem] = [
        ev("response.created", response=partial),
        ev("response.in_progress", response=partial),
        ev("response.output_item.added", output_index=0, item=item),
        ev(
            "response.content_part.added",
            item_id="msg_1",
            output_index=0,
            content_index=0,
            part={"type": "output_text", "text": "", "annotations": []},
        ),
    ]
    for i, piece in enumerate(pieces):
        items.append(
            ev(
                "response.output_text.delta",
                item_id="msg_1",
                output_index=0,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        )
        if i == 0 and between:
            items.extend(between)
    items.append(
        ev(
            "response.output_text.done",
            item_id="msg_1",
            output_index=0,
            content_index=0,
            text=text,
            logprobs=[],
        )
    )
    items.append(ev("response.output_item.done", output_index=0, item=message_item(text)))
    if final is not None:
        body = final_response
        if body is None:
            status = {"response.completed": "completed", "response.incomplete": "incomplete"}
            body = response_object(
                text,
                status=status.get(final, "failed"),
                incomplete_reason="max_output_tokens" if final == "response.incomplete" else None,
            )
        items.append(ev(final, response=body))
    return items


def responses_tool_stream() -> list[StreamItem]:
    """A streamed Responses answer that is a function call."""
    call = function_call_item()
    return [
        ("response.created", {"type": "response.created", "sequence_number": 0,
                               "response": response_object(None, status="in_progress")}),
        ("response.output_item.added", {"type": "response.output_item.added",
                                        "sequence_number": 1, "output_index": 0, "item": call}),
        ("response.function_call_arguments.delta", {
            "type": "response.function_call_arguments.delta", "sequence_number": 2,
            "item_id": "fc_1", "output_index": 0, "delta": '{"q": "x"}'}),
        ("response.completed", {"type": "response.completed", "sequence_number": 3,
                                "response": response_object(None, output=[call])}),
    ]  # fmt: skip


# -- Responses API agent runs (a model that calls tools, then answers) ------------------------


def responses_call_reply(
    n: int, *, name: str = "lookup", arguments: str = '{"q": "x"}', reasoning: bool = False
) -> JSONReply:
    """A ``response`` whose output is function call ``n`` (ids ``fc_n`` / ``call_n``).

    With ``reasoning``, a reasoning item (``rs_n``, with encrypted content) comes first, as a
    reasoning model sends it.
    """
    output: list[dict[str, Any]] = []
    if reasoning:
        output.append(
            {
                "type": "reasoning",
                "id": f"rs_{n}",
                "summary": [{"type": "summary_text", "text": f"Think about step {n}."}],
                "encrypted_content": f"enc-{n}",
            }
        )
    call = {**function_call_item(), "id": f"fc_{n}", "call_id": f"call_{n}"}
    output.append({**call, "name": name, "arguments": arguments})
    body = response_object(None, output=output)
    body["id"] = f"resp_call_{n}"
    return JSONReply(body)


def responses_text_reply(n: int, text: str) -> JSONReply:
    """A ``response`` whose output is assistant message ``n`` (id ``msg_n``)."""
    item = {**message_item(text), "id": f"msg_{n}"}
    body = response_object(None, output=[item])
    body["id"] = f"resp_text_{n}"
    return JSONReply(body)
