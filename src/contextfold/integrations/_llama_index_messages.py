"""Conversion between LlamaIndex ``ChatMessage`` and our :class:`~contextfold.messages.Message`.

A chat message maps onto parts this way:

* ``TextBlock`` → :class:`TextPart`; ``ImageBlock`` → :class:`ImagePart` (URL, or base64
  data with its MIME type); ``ThinkingBlock`` → :class:`ThinkingPart`; ``ToolCallBlock`` →
  :class:`ToolCallPart`;
* tool calls in ``additional_kwargs["tool_calls"]`` (as LlamaIndex's OpenAI LLM stores them:
  SDK objects or dicts with ``id`` and ``function.name`` / ``function.arguments``) →
  :class:`ToolCallPart`;
* a ``tool`` message (``additional_kwargs["tool_call_id"]``) → a ``tool`` message with one
  :class:`ToolResultPart` holding the text (and images) of its blocks;
* roles ``chatbot`` / ``model`` → ``assistant``, ``function`` → ``tool``.

Blocks we do not model (audio, video, documents, citations, cache points) have no part, so
strategies do not count them; a message a strategy changed without emptying it (a summary
merged in front of its text) keeps them and its ``additional_kwargs``, from the record.

For an exact round trip every message also records, in ``extra["llama_index:message"]``,
the chat message's JSON form and, in
``extra["llama_index:parts"]``, a hash of the parts it produced. :func:`to_chat_message`
gives back that recorded message when role, name and parts still match the record (SDK
objects in ``additional_kwargs`` come back as their JSON dicts, which LlamaIndex's LLMs
accept); a message a strategy made or changed (a summary, a pruned tool output) is built
from its parts, with tool calls in ``additional_kwargs`` as the OpenAI LLM expects them.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from contextfold.errors import FormatError
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

__all__ = ["RECORD", "from_chat_messages", "to_chat_message", "to_message"]

RECORD = "llama_index:message"
PARTS_HASH = "llama_index:parts"
#: Block types that have a part of ours (the others are kept only in the record).
_MODELLED = frozenset({"text", "image", "thinking", "tool_call"})
_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "assistant": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


def _role_value(chat: Any) -> str:
    role = chat.role
    return str(getattr(role, "value", role))


def _block_part(block: Any) -> Part | None:
    kind = getattr(block, "block_type", None)
    if kind == "text":
        return TextPart(block.text)
    if kind == "image":
        if block.url is not None:
            return ImagePart(url=str(block.url), mime=block.image_mimetype, detail=block.detail)
        if isinstance(block.image, bytes):
            data = block.image.decode("ascii")  # LlamaIndex keeps image bytes base64-encoded
            return ImagePart(data=data, mime=block.image_mimetype, detail=block.detail)
        return None
    if kind == "thinking":
        signature = block.additional_information.get("signature")
        return ThinkingPart(block.content or "", signature=signature)
    if kind == "tool_call":
        args = block.tool_kwargs
        arguments = args if isinstance(args, str) else json.dumps(args)
        return ToolCallPart(block.tool_call_id or "", block.tool_name, arguments)
    return None


def _kwarg_calls(additional: Mapping[str, Any]) -> list[ToolCallPart]:
    calls = []
    for raw in additional.get("tool_calls") or ():
        call = raw.model_dump() if hasattr(raw, "model_dump") else raw
        if not isinstance(call, Mapping):
            continue
        function = call.get("function") or {}
        if not isinstance(function, Mapping):
            raise FormatError(
                f"a tool call's function must be an object with name and arguments, got "
                f"{type(function).__name__}",
                field="additional_kwargs.tool_calls",
            )
        calls.append(
            ToolCallPart(
                str(call.get("id") or ""),
                str(function.get("name") or ""),
                str(function.get("arguments") or "{}"),
            )
        )
    return calls


def _parts_hash(role: str, name: str | None, parts: Iterable[Part]) -> str:
    probe = Message(role, tuple(parts), id="probe", name=name)  # type: ignore[arg-type]
    body = json.dumps([probe.role, probe.name, probe.to_dict()["parts"]], sort_keys=True)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def to_message(chat: Any, *, id: str | None = None) -> Message:
    """Our message for a LlamaIndex ``ChatMessage`` (see the module docs for the mapping).

    Raises:
        FormatError: ``chat`` is not a ``ChatMessage``, or its ``additional_kwargs`` hold
            what JSON cannot carry (the message could not be stored).
    """
    from llama_index.core.base.llms.types import ChatMessage

    if not isinstance(chat, ChatMessage):
        raise FormatError(f"expected a LlamaIndex ChatMessage, got {type(chat).__name__}")
    role = _ROLES.get(_role_value(chat), "user")
    additional: Mapping[str, Any] = chat.additional_kwargs or {}
    block_parts = [p for p in (_block_part(b) for b in chat.blocks) if p is not None]
    parts: list[Part]
    if role == "tool":
        call_id = str(additional.get("tool_call_id") or additional.get("name") or "")
        texts = [p for p in block_parts if isinstance(p, TextPart)]
        content: str | tuple[Part, ...] = (
            "\n".join(p.text for p in texts)
            if len(texts) == len(block_parts)
            else tuple(block_parts)
        )
        name = additional.get("name")
        parts = [ToolResultPart(call_id, content, name=name if isinstance(name, str) else None)]
    else:
        block_calls = {p.id for p in block_parts if isinstance(p, ToolCallPart)}
        extra_calls = [c for c in _kwarg_calls(additional) if c.id not in block_calls]
        parts = [*block_parts, *extra_calls]
    try:
        dumped = chat.model_dump(mode="json")
    except ValueError as exc:  # pydantic's serialization errors are ValueErrors
        raise FormatError(f"the chat message cannot be stored as JSON: {exc}") from exc
    record = {RECORD: dumped, PARTS_HASH: _parts_hash(role, None, parts)}
    if id is None:
        return Message(role, tuple(parts), extra=record)
    return Message(role, tuple(parts), id=id, extra=record)


def to_chat_message(message: Message) -> Any:
    """The LlamaIndex ``ChatMessage`` for one of our messages (the recorded one if unchanged)."""
    from llama_index.core.base.llms.types import ChatMessage

    record = message.extra.get(RECORD)
    if not isinstance(record, Mapping):
        return _build(message)
    if message.extra.get(PARTS_HASH) == _parts_hash(message.role, message.name, message.parts):
        return ChatMessage.model_validate(record)
    built = _build(message)
    if message.role == "tool":
        return built  # a pruned or edited result: what it held is gone on purpose
    # Changed without being emptied (a summary merged into it): the blocks we have no part
    # for (a document, audio) and the extra fields come back from the record, not lost.
    recorded = ChatMessage.model_validate(record)
    kept = [b for b in recorded.blocks if getattr(b, "block_type", None) not in _MODELLED]
    additional = {
        k: v
        for k, v in (recorded.additional_kwargs or {}).items()
        if k not in ("tool_calls", "tool_call_id")
    }
    return built.model_copy(
        update={
            "blocks": [*built.blocks, *kept],
            "additional_kwargs": {**additional, **built.additional_kwargs},
        }
    )


def _build(message: Message) -> Any:
    from llama_index.core.base.llms.types import (
        ChatMessage,
        ImageBlock,
        TextBlock,
        ThinkingBlock,
    )

    blocks: list[Any] = []
    additional: dict[str, Any] = {}
    calls = []
    for part in message.parts:
        if isinstance(part, TextPart):
            blocks.append(TextBlock(text=part.text))
        elif isinstance(part, ImagePart):
            blocks.append(_image_block(ImageBlock, part))
        elif isinstance(part, ThinkingPart):
            info = {"signature": part.signature} if part.signature else {}
            blocks.append(ThinkingBlock(content=part.text, additional_information=info))
        elif isinstance(part, ToolCallPart):
            function = {"name": part.name, "arguments": part.arguments}
            calls.append({"id": part.id, "type": "function", "function": function})
        elif isinstance(part, ToolResultPart):
            additional["tool_call_id"] = part.call_id
            if part.name:
                additional["name"] = part.name
            if isinstance(part.content, str):
                blocks.append(TextBlock(text=part.content))
            else:
                blocks.extend(_build(Message("user", part.content)).blocks)
    if calls:
        additional["tool_calls"] = calls
    return ChatMessage(role=message.role, blocks=blocks, additional_kwargs=additional)


def _image_block(cls: Any, part: ImagePart) -> Any:
    if part.url is not None:
        return cls(url=part.url, image_mimetype=part.mime, detail=part.detail)
    raw = base64.b64decode(part.data or "")
    return cls(image=raw, image_mimetype=part.mime, detail=part.detail)


def from_chat_messages(messages: Iterable[Message]) -> list[Any]:
    """:func:`to_chat_message` for each message; a message answering several tool calls
    (an Anthropic-style user turn) becomes one ``tool`` message per result, since a
    LlamaIndex message names a single ``tool_call_id``."""
    out: list[Any] = []
    for m in messages:
        results = [p for p in m.parts if isinstance(p, ToolResultPart)]
        if len(results) < 2 and (not results or m.role == "tool"):
            out.append(to_chat_message(m))
            continue
        out.extend(_build(Message("tool", (r,), id=m.id)) for r in results)
        rest = tuple(p for p in m.parts if not isinstance(p, ToolResultPart))
        if rest:
            out.append(_build(Message(m.role, rest, id=m.id, name=m.name)))
    return out
