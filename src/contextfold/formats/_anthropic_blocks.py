"""Anthropic content blocks, both ways: text, image, tool use, tool result and thinking.

A block is the unit of Anthropic content, in user and assistant messages, in the system prompt
and nested in tool results; :mod:`contextfold.formats.anthropic` handles the messages and the
request around them. Tool-use ids are rewritten here, on the way out, so that each result keeps
following its call (:class:`ToolIds`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from contextfold.errors import FormatError
from contextfold.formats._common import (
    DEFAULT_IMAGE_MIME,
    NO_EXTRA,
    copy_json,
    fail,
    hint,
    keep_unknown,
    opaque,
    opaque_raw,
    put_unknown,
    require_str,
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

NS = "anthropic"

_VALID_ID = re.compile(r"[A-Za-z0-9_-]+")
_INVALID_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_K_TEXT = frozenset({"type", "text"})
_K_IMAGE = frozenset({"type", "source"})
_K_TOOL_USE = frozenset({"type", "id", "name", "input"})
_K_TOOL_RESULT = frozenset({"type", "tool_use_id", "content", "is_error"})
_K_THINKING = frozenset({"type", "thinking", "signature"})
_K_REDACTED = frozenset({"type", "data"})


# -- load ------------------------------------------------------------------------------------


def load_block(raw: Any, i: int | None, where: str, strict: bool, *, nested: bool = False) -> Part:
    """One content block of message ``i`` (``None`` for the system prompt).

    ``where`` names the block in errors (``content[2]``, ``system[0]`` ...). ``nested`` blocks
    sit inside a tool result, where only text and images are allowed.
    """
    if not isinstance(raw, dict):
        fail(f"a content block must be an object, got {type_name(raw)}", index=i, field=where)
    kind = raw.get("type")
    if kind == "text":
        text = _str(raw, "text", i, where)
        extra: dict[str, Any] = {}
        keep_unknown(raw, _K_TEXT, NS, extra)
        return TextPart(text, extra=extra or NO_EXTRA)
    if kind == "image":
        return _load_image(raw, i, where)
    if not nested:
        if kind == "tool_use":
            return _load_tool_use(raw, i, where, strict)
        if kind == "tool_result":
            return _load_tool_result(raw, i, where, strict)
        if kind == "thinking":
            return _load_thinking(raw, i, where)
        if kind == "redacted_thinking":
            data = _str(raw, "data", i, where)
            extra = {}
            keep_unknown(raw, _K_REDACTED, NS, extra)
            return ThinkingPart(redacted=True, data=data, extra=extra or NO_EXTRA)
    if strict:
        fail(f"content block type {kind!r} is not supported here", index=i, field=f"{where}.type")
    return opaque(raw, NS)


def _str(raw: dict[str, Any], key: str, i: int | None, where: str) -> str:
    return require_str(raw, key, index=i, field=f"{where}.{key}")


def _load_tool_use(raw: dict[str, Any], i: int | None, where: str, strict: bool) -> ToolCallPart:
    call_id = _str(raw, "id", i, where)
    name = _str(raw, "name", i, where)
    if "input" not in raw:
        fail("tool_use has no input", index=i, field=f"{where}.input")
    value = raw["input"]
    if strict and not isinstance(value, dict):
        fail(f"input must be an object, not {type_name(value)}", index=i, field=f"{where}.input")
    try:
        arguments = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        fail(f"input is not JSON data: {exc}", index=i, field=f"{where}.input")
    extra: dict[str, Any] = {}
    keep_unknown(raw, _K_TOOL_USE, NS, extra)
    if not isinstance(value, dict):
        extra[f"{NS}:input"] = "as_sent"  # lenient load: dump gives back what came in
    return ToolCallPart(call_id, name, arguments, extra=extra or NO_EXTRA)


def _load_tool_result(
    raw: dict[str, Any], i: int | None, where: str, strict: bool
) -> ToolResultPart:
    use_id = raw.get("tool_use_id")
    if not isinstance(use_id, str):
        fail("tool result without a tool_use_id string", index=i, field=f"{where}.tool_use_id")
    extra: dict[str, Any] = {}
    body: str | tuple[Part, ...] = ""
    if "content" not in raw:
        extra[f"{NS}:content"] = "absent"
    else:
        content = raw["content"]
        if isinstance(content, str):
            body = content
        elif isinstance(content, list):
            body = tuple(
                load_block(b, i, f"{where}.content[{j}]", strict, nested=True)
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


def _load_thinking(raw: dict[str, Any], i: int | None, where: str) -> ThinkingPart:
    text = _str(raw, "thinking", i, where)
    signature = raw.get("signature")
    if signature is not None and not isinstance(signature, str):
        fail(
            f"signature must be a string, not {type_name(signature)}",
            index=i,
            field=f"{where}.signature",
        )
    extra: dict[str, Any] = {}
    if signature is None and "signature" in raw:
        extra[f"{NS}.signature"] = None
    keep_unknown(raw, _K_THINKING, NS, extra)
    return ThinkingPart(text, signature=signature, extra=extra or NO_EXTRA)


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


# -- dump ------------------------------------------------------------------------------------


class ToolIds:
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


def dump_blocks(m: Message, parts: Sequence[Part], ids: ToolIds) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        block = dump_part(p, m, ids)
        if block is not None:
            out.append(block)
    return out


def dump_part(p: Part, m: Message, ids: ToolIds) -> dict[str, Any] | None:
    """The block for ``p`` of message ``m``, or ``None`` when Anthropic cannot take it."""
    is_opaque, raw = opaque_raw(p, NS)
    if is_opaque:
        return raw  # type: ignore[no-any-return]
    if isinstance(p, TextPart):
        return put_unknown({"type": "text", "text": p.text}, p.extra, NS)
    if isinstance(p, ImagePart):
        return _dump_image(p)
    if isinstance(p, ToolCallPart):
        block = {"type": "tool_use", "id": ids.call(p.id), "name": p.name, "input": _input(p)}
        return put_unknown(block, p.extra, NS)
    if isinstance(p, ToolResultPart):
        block = {"type": "tool_result", "tool_use_id": ids.result(p.call_id)}
        if not isinstance(p.content, str):
            nested = [dump_part(x, m, ids) for x in p.content]
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


def _input(p: ToolCallPart) -> Any:
    """The ``tool_use.input`` for ``p``: always an object, as the API requires.

    Arguments that are not JSON, or JSON that is not an object (``[1, 2]``, ``null``,
    ``123``), are passed as ``{"arguments": "<the text>"}`` so nothing is lost. Only an input
    that was loaded from an Anthropic payload as a non-object (lenient mode) goes back as it
    came, so that such a payload still round trips.
    """
    try:
        value = p.parsed_arguments()
    except FormatError:
        return {"arguments": p.arguments}
    if isinstance(value, dict) or hint(p.extra, NS, "input") == "as_sent":
        return value
    return {"arguments": p.arguments}


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
