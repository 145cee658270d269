"""Anthropic Messages API requests: ``{"system": ..., "messages": [...]}``.

:func:`load` accepts the request shape (or a bare ``messages`` list) and :func:`dump` returns the
request shape, with ``system`` only when there are leading system or developer messages.
``dump(load(x)) == x`` for well-formed payloads (ones the API accepts): block fields we do not model
(``cache_control``, ``citations``, ``caller`` ...) are kept in ``extra`` as ``anthropic.<key>``,
shape details as ``anthropic:<hint>``, and blocks of types we do not model (documents, server
tool blocks ...) ride along opaquely. Other request options (``model``, ``tools``,
``max_tokens`` ...) are not part of the conversation: load ignores them and the caller adds them
to the dumped payload.

Conversion from other formats follows the API's rules:

* leading system/developer messages become the top-level ``system`` (a string when there is a
  single plain text, text blocks otherwise);
* a system or developer message later in the conversation, which the API cannot carry, becomes
  a user message whose text starts with ``[system]`` on its own line;
* consecutive ``role: "tool"`` messages become one user message of ``tool_result`` blocks,
  and in a user message that mixes results with other content the results come first, as the
  API requires;
* tool-call ids the API would refuse are rewritten, with their results: an id used again after
  its call was answered (OpenAI accepts that, Anthropic wants ids unique in a request) gets a
  ``_2``, ``_3`` ... suffix, and characters other than letters, digits, ``_`` and ``-`` become
  ``_``;
* tool-call arguments are parsed into ``input``; arguments that are not JSON are passed as
  ``{"arguments": "<the text>"}`` so nothing is lost;
* reasoning from another provider (OpenAI encrypted reasoning) is left out, since Anthropic
  only accepts its own signed thinking blocks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from contextfold.formats._common import (
    DEFAULT_IMAGE_MIME,
    NO_EXTRA,
    IdMaker,
    copy_json,
    fail,
    hint,
    keep_unknown,
    opaque,
    opaque_raw,
    put_unknown,
    split_data_url,
    thinking_is_foreign,
    type_name,
)
from contextfold.messages import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.turns import prefix_length

__all__ = ["NAME", "SYSTEM_PREFIX", "dump", "load"]

NAME = "anthropic"
NS = NAME

SYSTEM_PREFIX = "[system]\n"

_ROLES = frozenset({"user", "assistant"})
_VALID_ID = re.compile(r"[A-Za-z0-9_-]+")
_INVALID_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_K_MESSAGE = frozenset({"role", "content"})
_K_TEXT = frozenset({"type", "text"})
_K_IMAGE = frozenset({"type", "source"})
_K_TOOL_USE = frozenset({"type", "id", "name", "input"})
_K_TOOL_RESULT = frozenset({"type", "tool_use_id", "content", "is_error"})
_K_THINKING = frozenset({"type", "thinking", "signature"})
_K_REDACTED = frozenset({"type", "data"})


# -- load ------------------------------------------------------------------------------------


def load(payload: Any, *, strict: bool = False) -> list[Message]:
    """Load an Anthropic Messages request (``system`` + ``messages``) or a bare messages list.

    Args:
        payload: ``{"system": str | [blocks], "messages": [...]}`` or the list alone.
        strict: also reject blocks of types we do not model (kept opaque by default) and
            ``tool_use`` inputs that are not JSON objects.

    Returns:
        The top-level system prompt (when present) as one system message, then one message per
        API message. Tool results stay in user messages, as the API carries them. Ids are
        deterministic (a message's own string ``id`` field when it has one).

    Raises:
        FormatError: the payload is malformed; the error names the message index and field.
    """
    system: Any = None
    has_system = False
    if isinstance(payload, dict):
        if "messages" not in payload:
            fail("expected an object with a 'messages' list", field="messages")
        has_system = "system" in payload
        system = payload.get("system")
        payload = payload["messages"]
    if not isinstance(payload, list):
        fail(f"expected a list of messages, got {type_name(payload)}", field="messages")
    ids = IdMaker()
    out: list[Message] = []
    try:
        if has_system:
            out.append(_load_system(system, ids, strict))
        out.extend(_load_message(raw, i, ids, strict) for i, raw in enumerate(payload))
    except RecursionError:
        fail("payload is nested too deeply")
    return out


def _load_system(system: Any, ids: IdMaker, strict: bool) -> Message:
    extra: dict[str, Any] = {}
    parts: list[Part]
    if isinstance(system, str):
        parts = [TextPart(system)]
    elif isinstance(system, list):
        parts = []
        for j, block in enumerate(system):
            part = _load_block(block, None, f"system[{j}]", strict)
            if isinstance(part, (ToolCallPart, ToolResultPart, ThinkingPart)):
                fail("the system prompt takes text blocks only", field=f"system[{j}].type")
            parts.append(part)
        if not parts or (len(parts) == 1 and _is_plain_text(parts[0])):
            extra[f"{NS}:system"] = "list"
    elif system is None:
        parts = []
        extra[f"{NS}:system"] = "null"
    else:
        fail(
            f"system must be a string or a list of blocks, not {type_name(system)}", field="system"
        )
    return Message(
        "system", tuple(parts), id=ids.make("system", "system", parts), extra=extra or NO_EXTRA
    )


def _load_message(raw: Any, i: int, ids: IdMaker, strict: bool) -> Message:
    if not isinstance(raw, dict):
        fail(f"a message must be an object, got {type_name(raw)}", index=i)
    role = raw.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        fail(f"unknown role {role!r} (expected 'user' or 'assistant')", index=i, field="role")
    extra: dict[str, Any] = {}
    content = raw.get("content")
    parts: list[Part]
    if isinstance(content, str):
        if content:
            parts = [TextPart(content)]
        else:
            parts = []
            extra[f"{NS}.content"] = ""
    elif isinstance(content, list):
        parts = [_load_block(b, i, f"content[{j}]", strict) for j, b in enumerate(content)]
        if len(parts) == 1 and _is_plain_text(parts[0]):
            extra[f"{NS}:content"] = "list"
    elif "content" not in raw:
        fail("message has no content", index=i, field="content")
    else:
        fail(
            f"content must be a string or a list of blocks, not {type_name(content)}",
            index=i,
            field="content",
        )
    keep_unknown(raw, _K_MESSAGE, NS, extra)
    msg_id = ids.make(i, role, parts, provider_id=raw.get("id"))
    return Message(role, tuple(parts), id=msg_id, extra=extra or NO_EXTRA)  # type: ignore[arg-type]


def _str(raw: dict[str, Any], key: str, i: int | None, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str):
        fail(f"{key} must be a string, not {type_name(value)}", index=i, field=f"{where}.{key}")
    return value


def _load_block(raw: Any, i: int | None, where: str, strict: bool, *, nested: bool = False) -> Part:
    if not isinstance(raw, dict):
        fail(f"a content block must be an object, got {type_name(raw)}", index=i, field=where)
    kind = raw.get("type")
    extra: dict[str, Any] = {}
    if kind == "text":
        text = _str(raw, "text", i, where)
        keep_unknown(raw, _K_TEXT, NS, extra)
        return TextPart(text, extra=extra or NO_EXTRA)
    if kind == "image":
        return _load_image(raw, i, where)
    if kind == "tool_use" and not nested:
        call_id = _str(raw, "id", i, where)
        name = _str(raw, "name", i, where)
        if "input" not in raw:
            fail("tool_use has no input", index=i, field=f"{where}.input")
        value = raw["input"]
        if strict and not isinstance(value, dict):
            fail(
                f"input must be an object, not {type_name(value)}", index=i, field=f"{where}.input"
            )
        try:
            arguments = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            fail(f"input is not JSON data: {exc}", index=i, field=f"{where}.input")
        keep_unknown(raw, _K_TOOL_USE, NS, extra)
        return ToolCallPart(call_id, name, arguments, extra=extra or NO_EXTRA)
    if kind == "tool_result" and not nested:
        use_id = raw.get("tool_use_id")
        if not isinstance(use_id, str):
            fail("tool result without a tool_use_id string", index=i, field=f"{where}.tool_use_id")
        body: str | tuple[Part, ...] = ""
        if "content" not in raw:
            extra[f"{NS}:content"] = "absent"
        else:
            content = raw["content"]
            if isinstance(content, str):
                body = content
            elif isinstance(content, list):
                body = tuple(
                    _load_block(b, i, f"{where}.content[{j}]", strict, nested=True)
                    for j, b in enumerate(content)
                )
            elif content is None:
                extra[f"{NS}.content"] = None
            else:
                fail(
                    f"content must be a string or a list, not {type_name(content)}",
                    index=i,
                    field=f"{where}.content",
                )
        is_error = raw.get("is_error")
        if isinstance(is_error, bool):
            if not is_error:
                extra[f"{NS}.is_error"] = False
        elif "is_error" in raw:
            if is_error is not None:
                fail(
                    f"is_error must be a boolean, not {type_name(is_error)}",
                    index=i,
                    field=f"{where}.is_error",
                )
            extra[f"{NS}.is_error"] = None
        keep_unknown(raw, _K_TOOL_RESULT, NS, extra)
        return ToolResultPart(use_id, body, is_error=is_error is True, extra=extra or NO_EXTRA)
    if kind == "thinking" and not nested:
        text = _str(raw, "thinking", i, where)
        signature = raw.get("signature")
        if signature is not None and not isinstance(signature, str):
            fail(
                f"signature must be a string, not {type_name(signature)}",
                index=i,
                field=f"{where}.signature",
            )
        if signature is None and "signature" in raw:
            extra[f"{NS}.signature"] = None
        keep_unknown(raw, _K_THINKING, NS, extra)
        return ThinkingPart(text, signature=signature, extra=extra or NO_EXTRA)
    if kind == "redacted_thinking" and not nested:
        data = _str(raw, "data", i, where)
        keep_unknown(raw, _K_REDACTED, NS, extra)
        return ThinkingPart(redacted=True, data=data, extra=extra or NO_EXTRA)
    if strict:
        fail(f"content block type {kind!r} is not supported here", index=i, field=f"{where}.type")
    return opaque(raw, NS)


def _load_image(raw: dict[str, Any], i: int | None, where: str) -> ImagePart:
    source = raw.get("source")
    if not isinstance(source, dict):
        fail("image source must be an object", index=i, field=f"{where}.source")
    extra: dict[str, Any] = {}
    keep_unknown(raw, _K_IMAGE, NS, extra)
    kind = source.get("type")
    data, mime, media = source.get("data"), source.get("media_type"), source.get("url")
    if kind == "base64" and isinstance(data, str) and isinstance(mime, str):
        rest = {
            k: copy_json(v) for k, v in source.items() if k not in ("type", "data", "media_type")
        }
        if rest:
            extra[f"{NS}:source"] = rest
        return ImagePart(data=data, mime=mime, extra=extra or NO_EXTRA)
    if kind == "url" and isinstance(media, str):
        rest = {k: copy_json(v) for k, v in source.items() if k not in ("type", "url")}
        if rest:
            extra[f"{NS}:source"] = rest
        return ImagePart(url=media, extra=extra or NO_EXTRA)
    # Files and other sources: nothing another format could use, kept whole for the round trip.
    extra[f"{NS}:source"] = copy_json(source)
    return ImagePart(extra=extra)


def _is_plain_text(part: Part) -> bool:
    return isinstance(part, TextPart) and not any(k.startswith(NS) for k in part.extra)


# -- dump ------------------------------------------------------------------------------------


def dump(messages: Sequence[Message]) -> dict[str, Any]:
    """Dump messages as an Anthropic Messages request body (``system`` + ``messages``)."""
    n = prefix_length(messages)
    out: dict[str, Any] = {}
    if n:
        out["system"] = _dump_system(messages[:n])
    ids = _ToolIds()
    rows: list[dict[str, Any]] = []
    pending_results: list[dict[str, Any]] | None = None
    for m in messages[n:]:
        if m.role == "tool":
            blocks = _dump_blocks(m, m.parts, ids)
            if pending_results is None:
                pending_results = blocks
                rows.append({"role": "user", "content": pending_results})
            else:
                pending_results.extend(blocks)
            continue
        pending_results = None
        if m.role in ("system", "developer"):
            text = "\n".join(p.text for p in m.parts if isinstance(p, TextPart))
            rows.append({"role": "user", "content": SYSTEM_PREFIX + text})
            continue
        rows.append(_dump_message(m, ids))
    out["messages"] = rows
    return out


class _ToolIds:
    """Tool-use ids as the API accepts them: unique in a request, letters, digits, _ and -.

    Ids that already qualify are kept. Others are rewritten, and each result follows its call:
    OpenAI Chat allows an id to be reused once its call was answered (tau-bench does it) and
    other providers use ids such as ``functions.search:0``, which Anthropic rejects.
    """

    __slots__ = ("_current", "_next", "_used")

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._current: dict[str, str] = {}
        self._next: dict[str, int] = {}  # next suffix to try, so reuse stays linear

    def call(self, original: str) -> str:
        new = _clean_id(original)
        if new in self._used:
            base = new
            n = self._next.get(base, 2)
            while f"{base}_{n}" in self._used:
                n += 1
            self._next[base] = n + 1
            new = f"{base}_{n}"
        self._used.add(new)
        self._current[original] = new
        return new

    def result(self, original: str) -> str:
        found = self._current.get(original)
        return found if found is not None else _clean_id(original)


def _clean_id(value: str) -> str:
    if _VALID_ID.fullmatch(value):
        return value
    return _INVALID_ID_CHARS.sub("_", value) or "toolu"


def _dump_system(prefix: Sequence[Message]) -> Any:
    if len(prefix) == 1:
        m = prefix[0]
        shape = hint(m.extra, NS, "system")
        if shape == "null" and not m.parts:
            return None
        if shape != "list" and len(m.parts) == 1 and _is_plain_text(m.parts[0]):
            return m.parts[0].text  # type: ignore[union-attr]
    blocks: list[dict[str, Any]] = []
    for m in prefix:
        blocks.extend(_dump_blocks(m, m.parts, _ToolIds()))
    if not blocks and not any(hint(m.extra, NS, "system") == "list" for m in prefix):
        return ""
    return blocks


def _dump_message(m: Message, ids: _ToolIds) -> dict[str, Any]:
    item: dict[str, Any] = {"role": "assistant" if m.role == "assistant" else "user"}
    if m.parts or f"{NS}.content" not in m.extra:
        parts = m.parts
        if item["role"] == "user" and m.tool_results and not m.is_tool_result_only:
            # The API wants tool results first in their user message, any other content after.
            parts = (
                *(p for p in parts if isinstance(p, ToolResultPart)),
                *(p for p in parts if not isinstance(p, ToolResultPart)),
            )
        blocks = _dump_blocks(m, parts, ids)
        if (
            len(blocks) == 1
            and blocks[0].keys() == {"type", "text"}
            and blocks[0]["type"] == "text"
            and hint(m.extra, NS, "content") != "list"
        ):
            item["content"] = blocks[0]["text"]
        else:
            item["content"] = blocks
    return put_unknown(item, m.extra, NS)


def _dump_blocks(m: Message, parts: Sequence[Part], ids: _ToolIds) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        block = _dump_part(p, m, ids)
        if block is not None:
            out.append(block)
    return out


def _dump_part(p: Part, m: Message, ids: _ToolIds) -> dict[str, Any] | None:
    is_opaque, raw = opaque_raw(p, NS)
    if is_opaque:
        return raw  # type: ignore[no-any-return]
    if isinstance(p, TextPart):
        return put_unknown({"type": "text", "text": p.text}, p.extra, NS)
    if isinstance(p, ImagePart):
        return _dump_image(p)
    if isinstance(p, ToolCallPart):
        try:
            value = json.loads(p.arguments) if p.arguments.strip() else {}
        except (ValueError, RecursionError):
            value = {"arguments": p.arguments}
        block = {"type": "tool_use", "id": ids.call(p.id), "name": p.name, "input": value}
        return put_unknown(block, p.extra, NS)
    if isinstance(p, ToolResultPart):
        block = {"type": "tool_result", "tool_use_id": ids.result(p.call_id)}
        if not isinstance(p.content, str):
            nested = [_dump_part(x, m, ids) for x in p.content]
            block["content"] = [x for x in nested if x is not None]
        elif p.content or (
            hint(p.extra, NS, "content") != "absent" and f"{NS}.content" not in p.extra
        ):
            block["content"] = p.content
        if p.is_error:
            block["is_error"] = True
        return put_unknown(block, p.extra, NS)
    if thinking_is_foreign(p, m.extra, NS):
        return None
    if p.redacted:
        block = {"type": "redacted_thinking", "data": p.data or ""}
    else:
        block = {"type": "thinking", "thinking": p.text}
        if p.signature is not None:
            block["signature"] = p.signature
    return put_unknown(block, p.extra, NS)


def _dump_image(p: ImagePart) -> dict[str, Any] | None:
    source: dict[str, Any]
    if p.data is not None:
        source = {"type": "base64", "media_type": p.mime or DEFAULT_IMAGE_MIME, "data": p.data}
    elif p.url is not None:
        inline = split_data_url(p.url)
        if inline is not None:
            source = {"type": "base64", "media_type": inline[0], "data": inline[1]}
        else:
            source = {"type": "url", "url": p.url}
    else:
        kept = hint(p.extra, NS, "source")
        if not isinstance(kept, dict):
            return None
        return put_unknown({"type": "image", "source": copy_json(kept)}, p.extra, NS)
    kept = hint(p.extra, NS, "source")
    if isinstance(kept, dict):
        for k, v in kept.items():
            source.setdefault(k, copy_json(v))
    return put_unknown({"type": "image", "source": source}, p.extra, NS)
