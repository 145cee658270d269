"""Lossless conversion between LangChain messages and :class:`~contextfold.messages.Message`.

The message model carries what strategies and counters need (roles, text, images, tool calls
and results, reasoning); everything else a LangChain message holds (``additional_kwargs``,
``response_metadata``, ``usage_metadata``, ``artifact``, a content block's ``id`` or
``annotations`` ...) rides along in ``extra`` under ``"langchain.<field>"``, and shape details
(content sent as a list, an absent id) under ``"langchain:<hint>"``. A LangChain message
converted and converted back therefore equals the original, and a contextfold message of a
shape LangChain can hold comes back equal too, with one normalization: LangChain holds
tool-call arguments parsed, so their text comes back as ``json.dumps(args, ensure_ascii=False)``
writes it (spacing and escapes of the original text are not kept; the values are).

A content block keeps its raw form only when the canonical block built from its part would
differ. On the way back the raw block is used while the part still says what the block says;
a part a strategy rewrote (a pruned tool output, say) is written out from its new content, so
an edit is never undone by a stale copy.

Ids matter beyond the round trip: a checkpoint names the last message it covers by id, so a
message without a LangChain id gets one derived from its position and content, the same on
every call.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from contextfold.errors import FormatError
from contextfold.formats._common import check_messages, data_url
from contextfold.messages import (
    ImagePart,
    Message,
    Part,
    Role,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["from_langchain", "message_from_langchain", "to_langchain"]

NS = "langchain"
_RAW = f"{NS}:raw"
_CLASSES: dict[str, type[BaseMessage]] = {
    cls.__name__: cls
    for cls in (SystemMessage, HumanMessage, AIMessage, ToolMessage, AIMessageChunk)
}
_DEFAULT_CLASS: dict[str, type[BaseMessage]] = {
    "system": SystemMessage,
    "developer": SystemMessage,
    "user": HumanMessage,
    "assistant": AIMessage,
}
_ROLES: dict[str, Role] = {
    "system": "system",
    "human": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "tool": "tool",
}
# Fields the message model carries itself; every other field goes to ``extra``.
_MODELED = frozenset({"content", "type", "id", "name", "tool_calls", "tool_call_id", "status"})
_DEVELOPER = {"__openai_role__": "developer"}


# -- LangChain -> contextfold -------------------------------------------------------------


def from_langchain(messages: Sequence[BaseMessage]) -> list[Message]:
    """Convert LangChain messages to contextfold messages, one for one.

    Raises:
        FormatError: an item is not a LangChain message of a supported class (system, human,
            AI, AI chunk, tool), or its content is malformed; ``index`` names it.
    """
    seen: set[str] = set()
    out = []
    for i, msg in enumerate(messages):
        converted = message_from_langchain(msg, index=i)
        if converted.id in seen:  # ids must be unique for checkpoints to name one message
            converted = converted.replace(
                id=_derived_id(f"dup{i}", converted),
                extra={**converted.extra, f"{NS}:id": converted.id},
            )
        seen.add(converted.id)
        out.append(converted)
    return out


def message_from_langchain(msg: BaseMessage, *, index: int | str = 0) -> Message:
    """Convert one LangChain message; ``index`` seeds the id of a message that has none."""
    if not isinstance(msg, BaseMessage) or type(msg).__name__ not in _CLASSES:
        raise FormatError(
            f"expected a LangChain system, human, AI or tool message, got {type(msg).__name__}",
            index=index if isinstance(index, int) else None,
        )
    role = _ROLES[msg.type]
    extra = _field_extras(msg)
    if role == "system" and getattr(msg, "additional_kwargs", None) == _DEVELOPER:
        role = "developer"
        del extra[f"{NS}.additional_kwargs"]
    if type(msg) is not _class_for(role):
        extra[f"{NS}:class"] = type(msg).__name__
    parts: list[Part]
    if isinstance(msg, ToolMessage):
        parts = [_tool_result(msg, index)]
    else:
        parts = _content_parts(msg.content, extra, index)
        if isinstance(msg, AIMessage):
            calls = enumerate(msg.tool_calls)
            parts.extend(_tool_call_part(call, f"{index}.{j}") for j, call in calls)
    name = None if isinstance(msg, ToolMessage) else msg.name
    draft = Message(role, tuple(parts), id="pending", name=name)
    if isinstance(msg.id, str) and msg.id:
        msg_id = msg.id
    else:
        msg_id = _derived_id(index, draft)
        extra[f"{NS}:no_id"] = True
    return Message(role, draft.parts, id=msg_id, name=name, extra=extra)


def _class_for(role: str) -> type[BaseMessage]:
    return _DEFAULT_CLASS.get(role, ToolMessage)


def _field_extras(msg: BaseMessage) -> dict[str, Any]:
    """The message's fields the model does not carry, where they differ from the default."""
    extra: dict[str, Any] = {}
    for name, info in type(msg).model_fields.items():
        if name in _MODELED:
            continue
        value = getattr(msg, name)
        default = info.get_default(call_default_factory=True)
        if value != default:
            extra[f"{NS}.{name}"] = copy.deepcopy(value)
    return extra


def _derived_id(index: int | str, draft: Message) -> str:
    """A stable id from position and content, for a message that came without one."""
    body = json.dumps(draft.to_dict()["parts"], sort_keys=True, default=str)
    digest = hashlib.blake2b(
        f"{index}\x00{draft.role}\x00{body}".encode("utf-8", "surrogatepass"), digest_size=12
    )
    return "lc_" + digest.hexdigest()


def _content_parts(content: Any, extra: dict[str, Any], index: int | str) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    if not isinstance(content, list):
        raise FormatError(
            f"content must be a string or a list, got {type(content).__name__}",
            index=index if isinstance(index, int) else None,
            field="content",
        )
    parts = [_load_block(block, index) for block in content]
    if _fits_str(parts):
        extra[f"{NS}:content"] = "list"
    return parts


def _load_block(block: Any, index: int | str) -> Part:
    if not isinstance(block, (str, dict)):
        raise FormatError(
            f"a content block must be a string or an object, got {type(block).__name__}",
            index=index if isinstance(index, int) else None,
            field="content",
        )
    part = _canonical_part(block)
    if part is None:  # a block we do not model: kept opaque, costs nothing in counts
        return TextPart("", extra={_RAW: copy.deepcopy(block)})
    if _dump_canonical(part) != block:
        part = dataclasses.replace(part, extra={_RAW: copy.deepcopy(block)})
    return part


def _canonical_part(block: Any) -> Part | None:
    """The part a block stands for (its extras aside), or None for a block not modeled."""
    if isinstance(block, str):
        return TextPart(block)
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return TextPart(block["text"])
    if kind == "reasoning":
        return ThinkingPart(_str_or(block.get("reasoning"), ""))
    if kind == "thinking":
        text = _str_or(block.get("thinking"), "")
        return ThinkingPart(text, signature=_str_or(block.get("signature"), None))
    if kind == "redacted_thinking":
        return ThinkingPart(redacted=True, data=_str_or(block.get("data"), None))
    if kind == "image_url":
        value = block.get("image_url")
        if isinstance(value, str):
            return ImagePart(url=value)
        if isinstance(value, dict):
            url = _str_or(value.get("url"), None)
            return ImagePart(url=url, detail=_str_or(value.get("detail"), None))
        return None
    if kind == "image":
        data = _str_or(block.get("base64"), None) or _str_or(block.get("data"), None)
        url = _str_or(block.get("url"), None)
        return ImagePart(url=url, data=data, mime=_str_or(block.get("mime_type"), None))
    return None


def _str_or(value: Any, default: Any) -> Any:
    return value if isinstance(value, str) else default


def _tool_result(msg: ToolMessage, index: int | str) -> ToolResultPart:
    content: str | tuple[Part, ...]
    if isinstance(msg.content, str):
        content = msg.content
    else:
        content = tuple(_load_block(block, index) for block in msg.content)
    return ToolResultPart(msg.tool_call_id, content, is_error=msg.status == "error", name=msg.name)


def _tool_call_part(call: Mapping[str, Any], where: str) -> ToolCallPart:
    """A tool call; one without an id gets one from its place (``message.call``) and name."""
    extra: dict[str, Any] = {
        f"{NS}.{k}": copy.deepcopy(v) for k, v in call.items() if k not in ("id", "name", "args")
    }
    if call.get("type") == "tool_call":
        del extra[f"{NS}.type"]
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        extra[f"{NS}:no_id"] = call_id if call_id is not None else True
        call_id = (
            "lc_call_"
            + hashlib.blake2b(
                f"{where}\x00{call.get('name')}".encode("utf-8", "surrogatepass"), digest_size=8
            ).hexdigest()
        )
    args = call.get("args", {})
    if isinstance(args, dict) and set(args) == {"__arguments__"}:
        text = args["__arguments__"]  # arguments LangChain could not hold as an object
        arguments = text if isinstance(text, str) else json.dumps(args, ensure_ascii=False)
    else:
        arguments = json.dumps(args, ensure_ascii=False)
    return ToolCallPart(call_id, str(call.get("name", "")), arguments, extra=extra)


# -- contextfold -> LangChain -------------------------------------------------------------


def to_langchain(messages: Sequence[Message]) -> list[BaseMessage]:
    """Convert contextfold messages to LangChain messages.

    A ``tool`` message becomes one :class:`~langchain_core.messages.ToolMessage` per result,
    and tool results inside a user message (Anthropic's layout) become tool messages ahead
    of what is left of it, so the output is valid for every LangChain chat model.
    """
    check_messages(messages)
    out: list[BaseMessage] = []
    for m in messages:
        out.extend(_dump_message(m))
    return out


def _dump_message(m: Message) -> list[BaseMessage]:
    results = [p for p in m.parts if isinstance(p, ToolResultPart)]
    others = [p for p in m.parts if not isinstance(p, ToolResultPart)]
    out: list[BaseMessage] = []
    for n, result in enumerate(results):
        fields = _fields_back(m) if n == 0 else {}
        fields["id"] = _id_back(m) if n == 0 else f"{m.id}_{n}"
        out.append(
            ToolMessage(
                content=result.content
                if isinstance(result.content, str)
                else _blocks(result.content),
                tool_call_id=result.call_id,
                status="error" if result.is_error else "success",
                name=result.name,
                **fields,
            )
        )
    if m.role == "tool" or (results and not others):
        return out
    fields = _fields_back(m) if not results else {}
    if m.role == "developer" and "additional_kwargs" not in fields:
        fields["additional_kwargs"] = dict(_DEVELOPER)
    cls = _CLASSES.get(str(m.extra.get(f"{NS}:class", "")), _class_for(m.role))
    calls = [p for p in others if isinstance(p, ToolCallPart)]
    content = _content_back(m, [p for p in others if not isinstance(p, ToolCallPart)])
    if calls:
        fields["tool_calls"] = [_dump_call(c) for c in calls]
    msg_id = _id_back(m) if not results else f"{m.id}_{len(results)}"
    out.append(cls(content=content, id=msg_id, name=m.name, **fields))
    return out


def _fields_back(m: Message) -> dict[str, Any]:
    prefix = NS + "."
    return {k[len(prefix) :]: copy.deepcopy(v) for k, v in m.extra.items() if k.startswith(prefix)}


def _id_back(m: Message) -> str | None:
    if m.extra.get(f"{NS}:no_id"):
        return None
    original = m.extra.get(f"{NS}:id")
    return original if isinstance(original, str) else m.id


def _fits_str(parts: Sequence[Part]) -> bool:
    """Whether ``parts`` would be written as a plain string content."""
    if not parts:
        return True
    only = parts[0]
    return len(parts) == 1 and type(only) is TextPart and bool(only.text) and not only.extra


def _content_back(m: Message, parts: Sequence[Part]) -> str | list[str | dict[str, Any]]:
    if _fits_str(parts) and m.extra.get(f"{NS}:content") != "list":
        return parts[0].text if parts else ""  # type: ignore[union-attr]
    return _blocks(parts)


def _blocks(parts: Sequence[Part]) -> list[str | dict[str, Any]]:
    return [_dump_block(p) for p in parts]


def _dump_block(part: Part) -> Any:
    raw = part.extra.get(_RAW) if part.extra else None
    if raw is not None:
        canonical = _canonical_part(raw)
        if canonical is None and isinstance(part, TextPart) and not part.text:
            return copy.deepcopy(raw)
        if canonical is not None and dataclasses.replace(part, extra={}) == canonical:
            return copy.deepcopy(raw)
    return _dump_canonical(part)


def _dump_canonical(part: Part) -> Any:
    """The block LangChain's chat models read for ``part``."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ThinkingPart):
        if part.redacted:
            return {"type": "redacted_thinking", "data": part.data or ""}
        if part.signature is not None:
            return {"type": "thinking", "thinking": part.text, "signature": part.signature}
        return {"type": "reasoning", "reasoning": part.text}
    if isinstance(part, ImagePart):
        if part.detail is not None:
            url = part.url if part.url is not None else data_url(part.mime, part.data or "")
            return {"type": "image_url", "image_url": {"url": url, "detail": part.detail}}
        if part.data is not None:
            block: dict[str, Any] = {"type": "image", "base64": part.data}
            if part.mime is not None:
                block["mime_type"] = part.mime
            return block
        return {"type": "image", "url": part.url}
    if isinstance(part, ToolResultPart):  # a nested result: its text is what can be kept
        return {"type": "text", "text": part.text}
    return {"type": "text", "text": f"[tool call {part.name}: {part.arguments}]"}


def _dump_call(c: ToolCallPart) -> dict[str, Any]:
    try:
        args = c.parsed_arguments()
    except FormatError:
        args = None
    if not isinstance(args, dict):
        # Not JSON, or JSON that is no object ("[1, 2]"): keep the text, LangChain needs a dict.
        args = {"__arguments__": c.arguments}
    extra = dict(c.extra) if c.extra else {}
    no_id = extra.pop(f"{NS}:no_id", None)
    call: dict[str, Any] = {"name": c.name, "args": args}
    call["id"] = None if no_id is True else (no_id if isinstance(no_id, str) else c.id)
    call["type"] = "tool_call"
    prefix = NS + "."
    call.update(
        {k[len(prefix) :]: copy.deepcopy(v) for k, v in extra.items() if k.startswith(prefix)}
    )
    return call
