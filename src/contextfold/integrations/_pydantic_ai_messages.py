"""Lossless conversion between pydantic-ai ``ModelMessage`` lists and contextfold messages.

pydantic-ai groups parts by direction: a ``ModelRequest`` holds the system prompt, the user
prompt, tool returns and retry prompts; a ``ModelResponse`` holds text, thinking and tool
calls. Our strategies work on messages with one role each and pair a tool call with its
result across messages, so a request becomes one message per part (``system``, ``user``,
``tool``) and a response becomes one ``assistant`` message.

Nothing is lost on the way: every field we do not model (timestamps, provider details,
``instructions``, run ids, a part's exact kind) is kept, in pydantic-ai's own JSON form, in
the ``extra`` of our message or part under the ``"pydantic_ai"`` key. Converting back
restores it, with one rule: where a strategy changed what we model (a pruned tool output,
a trimmed text), our value wins. Parts we do not model (native tool calls, files, speech,
provider compactions) travel as text that says what they are, so they are counted and
summarized, and come back exactly as they were.

Messages a strategy made (a summary) have no ``"pydantic_ai"`` extra and become plain parts.
Equality is pydantic-ai's own: ``ModelMessagesTypeAdapter.dump_python(..., mode="json")`` of
the round trip equals that of the input.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    RetryPromptPart,
)
from pydantic_ai.messages import ToolCallPart as PaiToolCallPart
from pydantic_ai.messages import ToolReturnPart as PaiToolReturnPart

from contextfold.errors import FormatError
from contextfold.formats._common import check_messages
from contextfold.messages import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    new_id,
)

__all__ = ["NAMESPACE", "from_model_messages", "to_model_messages"]

#: The key of ``extra`` under which pydantic-ai's own fields are kept.
NAMESPACE = "pydantic_ai"

_Raw = dict[str, Any]


def from_model_messages(messages: Sequence[ModelMessage]) -> list[Message]:
    """Our messages for a pydantic-ai message list (see the module docstring).

    Raises:
        FormatError: an item is not a pydantic-ai ``ModelRequest`` or ``ModelResponse``.
    """
    items = list(messages)
    try:
        dumped: list[_Raw] = ModelMessagesTypeAdapter.dump_python(items, mode="json")
    except Exception as exc:  # pydantic raises several kinds for foreign objects
        raise FormatError(f"not a list of pydantic-ai messages: {exc}") from exc
    out: list[Message] = []
    for original, raw in zip(items, dumped, strict=True):
        parts = raw.pop("parts")
        head = {"group": new_id(), "message": raw}
        if isinstance(original, ModelRequest):
            if not parts:  # a request with only instructions
                out.append(Message("user", (), extra={NAMESPACE: {**head, "part": None}}))
            for obj, part in zip(original.parts, parts, strict=True):
                out.append(_request_part(obj, part, head))
        else:
            body = tuple(
                _response_part(obj, p) for obj, p in zip(original.parts, parts, strict=True)
            )
            out.append(Message("assistant", body, extra={NAMESPACE: head}))
    return out


def to_model_messages(messages: Sequence[Message]) -> list[ModelMessage]:
    """pydantic-ai messages for ours: the inverse of :func:`from_model_messages`.

    Consecutive messages that came from one pydantic-ai message join it again; the others
    (a summary, messages built by hand) each become a request or, for ``assistant``, a
    response.

    Raises:
        FormatError: the result is not valid for pydantic-ai (a message was built by hand
            with fields it rejects).
        ConfigError: ``messages`` is not a sequence of our messages.
    """
    check_messages(messages)
    raws: list[_Raw] = []
    group: object = None
    for message in messages:
        tag = _tag(message.extra)
        key = tag.get("group") if tag else None
        side = "response" if message.role == "assistant" else "request"
        if key is None or key != group or raws[-1]["kind"] != side:
            fields = dict(tag["message"]) if tag and "message" in tag else {"kind": side}
            fields["kind"] = side
            raws.append({**fields, "parts": []})
            group = key if key is not None else object()
        if side == "response":
            raws[-1]["parts"].extend(_response_raw(p) for p in message.parts)
        else:
            raws[-1]["parts"].extend(_request_raws(message, tag))
    try:
        return ModelMessagesTypeAdapter.validate_json(json.dumps(raws))
    except ValidationError as exc:
        raise FormatError(f"the messages do not make valid pydantic-ai messages: {exc}") from exc


# -- one field we model, kept exactly when unchanged ------------------------------------


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _keep(shell: _Raw, key: str, text: str, digests: dict[str, str]) -> None:
    """Drop ``shell[key]`` when ``text`` is it; otherwise keep it, with ``text``'s digest."""
    if shell.get(key) == text:
        del shell[key]
    else:
        digests[key] = _digest(text)


def _restore(shell: Mapping[str, Any], key: str, text: str, tag: Mapping[str, Any]) -> Any:
    """The original value of ``key`` when ``text`` is unchanged, else ``text``."""
    digests = tag.get("digest") or {}
    if key in shell and digests.get(key) == _digest(text):
        return shell[key]
    return text


def _tag(extra: Mapping[str, Any]) -> Mapping[str, Any] | None:
    tag = extra.get(NAMESPACE)
    return tag if isinstance(tag, Mapping) else None


# -- requests ---------------------------------------------------------------------------


def _request_part(obj: Any, part: _Raw, head: _Raw) -> Message:
    """One message for one request part; ``part`` (a copy) becomes the kept shell."""
    digests: dict[str, str] = {}
    tag: _Raw = {**head, "part": part, "digest": digests}
    kind = part["part_kind"]
    if kind == "system-prompt":
        return Message("system", (TextPart(part.pop("content")),), extra={NAMESPACE: tag})
    if kind == "user-prompt":
        content = part.pop("content")
        tag["str"] = isinstance(content, str)
        items = [content] if isinstance(content, str) else content
        return Message("user", tuple(_user_item(i) for i in items), extra={NAMESPACE: tag})
    if isinstance(obj, (PaiToolReturnPart, RetryPromptPart)):
        if isinstance(obj, RetryPromptPart):
            text, failed = obj.model_response(), True
        else:
            text, failed = obj.model_response_str(), obj.outcome != "success"
        _keep(part, "content", text, digests)
        if obj.tool_name is None:  # a retry of the final output: the model reads it as user
            return Message("user", (TextPart(text),), extra={NAMESPACE: tag})
        result = ToolResultPart(
            part.pop("tool_call_id"), text, is_error=failed, name=part.pop("tool_name")
        )
        return Message("tool", (result,), extra={NAMESPACE: tag})
    tag["opaque"] = True
    return Message("user", (TextPart(_describe(part)),), extra={NAMESPACE: tag})


def _user_item(item: Any) -> Part:
    if isinstance(item, str):
        return TextPart(item)
    shell = dict(item)
    kind = shell.get("kind")
    if kind == "image-url":
        return ImagePart(url=shell.pop("url"), extra={NAMESPACE: {"part": shell}})
    if kind == "binary" and str(shell.get("media_type", "")).startswith("image/"):
        data = shell.pop("data")
        return ImagePart(data=data, mime=shell["media_type"], extra={NAMESPACE: {"part": shell}})
    if kind == "text-content":
        return TextPart(shell.pop("content"), extra={NAMESPACE: {"part": shell}})
    return TextPart(_describe(shell), extra={NAMESPACE: {"part": shell, "opaque": True}})


def _request_raws(message: Message, tag: Mapping[str, Any] | None) -> list[_Raw]:
    """The request parts of one of our messages."""
    shell = tag.get("part") if tag else None
    if tag is not None and shell is None and "part" in tag:
        return []  # the empty request of an instructions-only turn
    if not isinstance(shell, Mapping):
        return _plain_request_raws(message)
    assert tag is not None
    kind = shell["part_kind"]
    if tag.get("opaque"):
        return [dict(shell)]
    if kind == "system-prompt":
        return [{**shell, "content": message.text}]
    if kind == "user-prompt":
        parts = message.parts
        if tag.get("str") and len(parts) == 1 and isinstance(parts[0], TextPart):
            return [{**shell, "content": parts[0].text}]
        return [{**shell, "content": [_user_item_raw(p) for p in parts]}]
    if "tool_call_id" in shell:  # a retry of the final output kept its ids: no tool message
        return [{**shell, "content": _restore(shell, "content", message.text, tag)}]
    results = message.tool_results
    if len(results) != 1:
        return _plain_request_raws(message)
    result = results[0]
    content = _restore(shell, "content", result.text, tag)
    return [{**shell, "content": content, "tool_call_id": result.call_id, "tool_name": result.name}]


def _plain_request_raws(message: Message) -> list[_Raw]:
    """Request parts for a message that did not come from pydantic-ai (a summary, say)."""
    results = message.tool_results
    out: list[_Raw] = [
        {
            "part_kind": "tool-return",
            "tool_name": r.name or "",
            "tool_call_id": r.call_id,
            "content": r.text,
            "outcome": "failed" if r.is_error else "success",
        }
        for r in results
    ]
    rest = [p for p in message.parts if not isinstance(p, ToolResultPart)]
    if not rest:
        return out
    if message.role in ("system", "developer"):
        out.append({"part_kind": "system-prompt", "content": message.text})
    elif len(rest) == 1 and isinstance(rest[0], TextPart) and not _tag(rest[0].extra):
        out.append({"part_kind": "user-prompt", "content": rest[0].text})
    else:
        out.append({"part_kind": "user-prompt", "content": [_user_item_raw(p) for p in rest]})
    return out


def _user_item_raw(part: Part) -> Any:
    tag = _tag(part.extra)
    shell = dict(tag["part"]) if tag and isinstance(tag.get("part"), Mapping) else None
    if shell is not None and tag is not None and tag.get("opaque"):
        return shell
    if isinstance(part, ImagePart):
        if part.url is not None:
            return {"kind": "image-url", **(shell or {}), "url": part.url}
        base = shell or {"kind": "binary", "media_type": part.mime or "image/png"}
        return {**base, "data": part.data or ""}
    if isinstance(part, TextPart):
        return {**shell, "content": part.text} if shell is not None else part.text
    if isinstance(part, ThinkingPart):
        return part.text
    return _part_text(part)


# -- responses --------------------------------------------------------------------------


def _response_part(obj: Any, part: _Raw) -> Part:
    kind = part["part_kind"]
    if kind == "text":
        return TextPart(part.pop("content"), extra={NAMESPACE: {"part": part}})
    if kind == "thinking":
        text, signature = part.pop("content"), part.pop("signature")
        return ThinkingPart(text=text, signature=signature, extra={NAMESPACE: {"part": part}})
    if isinstance(obj, PaiToolCallPart):
        digests: dict[str, str] = {}
        arguments = obj.args_as_json_str()
        _keep(part, "args", arguments, digests)
        call_id, name = part.pop("tool_call_id"), part.pop("tool_name")
        tag = {"part": part, "digest": digests}
        return ToolCallPart(call_id, name, arguments, extra={NAMESPACE: tag})
    return TextPart(_describe(part), extra={NAMESPACE: {"part": part, "opaque": True}})


def _response_raw(part: Part) -> _Raw:
    tag = _tag(part.extra)
    shell: _Raw = dict(tag["part"]) if tag and isinstance(tag.get("part"), Mapping) else {}
    if tag is not None and tag.get("opaque"):
        return shell
    if isinstance(part, ToolCallPart):
        args = _restore(shell, "args", part.arguments, tag or {})
        return {
            "part_kind": "tool-call",
            **shell,
            "tool_call_id": part.id,
            "tool_name": part.name,
            "args": args,
        }
    if isinstance(part, ThinkingPart):
        return {"part_kind": "thinking", **shell, "content": part.text, "signature": part.signature}
    return {"part_kind": "text", **shell, "content": _part_text(part)}


# -- text for what we do not model ------------------------------------------------------


def _part_text(part: Part) -> str:
    if isinstance(part, (TextPart, ThinkingPart)):
        return part.text
    if isinstance(part, ToolResultPart):
        return part.text
    if isinstance(part, ToolCallPart):
        return f"[tool call {part.name}({part.arguments})]"
    return f"[image {part.url or part.mime or ''}]".replace(" ]", "]")


def _describe(raw: Mapping[str, Any]) -> str:
    """A short text standing for a part we do not model, so it is counted and summarized."""
    kind = raw.get("part_kind") or raw.get("kind") or "part"
    for key in ("content", "transcript", "url"):
        value = raw.get(key)
        if isinstance(value, str) and value:
            return f"[{kind}] {value}"
    if "tool_name" in raw:
        args = raw.get("args")
        text = args if isinstance(args, str) else json.dumps(args)
        return f"[{kind}] {raw['tool_name']}({text})"
    return f"[{kind}]"
