"""OpenAI Chat Completions ``messages``.

:func:`load` turns a ``messages`` list into :class:`~contextfold.messages.Message` objects and
:func:`dump` turns them back. ``dump(load(x)) == x`` for any well-formed list: fields we do not
model (``refusal``, ``audio``, ``function_call`` ...) and shape details (content given as a list
or as ``null``, a missing key) are kept in ``extra`` under ``openai_chat.`` / ``openai_chat:``.

Messages from other formats are converted as the Chat API expects them: a user message that
carries Anthropic-style tool results becomes one ``role: "tool"`` message per result (then a user
message for any remaining content), reasoning is left out (it is bound to the provider that
produced it), and ``is_error`` has no Chat field, so it is dropped. Tool calls keep their
arguments text as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextfold.formats._common import (
    NO_EXTRA,
    UNCARRIED_RESULT,
    IdMaker,
    check_json_text,
    check_messages,
    check_strict,
    copy_json,
    data_url,
    depth_guard,
    fail,
    hint,
    is_plain_text,
    keep_unknown,
    load_refusal,
    load_text,
    opaque_raw,
    put_unknown,
    split_data_url,
    type_name,
    unmodeled_part,
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

__all__ = ["NAME", "dump", "load"]

NAME = "openai_chat"
NS = NAME

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_KNOWN_MESSAGE = frozenset({"role", "content", "name"})
_KNOWN_TOOL = _KNOWN_MESSAGE | {"tool_call_id"}
_KNOWN_ASSISTANT = _KNOWN_MESSAGE | {"tool_calls"}
_KNOWN_CALL = frozenset({"id", "type", "function", "custom"})
_KNOWN_FUNCTION = frozenset({"name", "arguments"})
_KNOWN_CUSTOM = frozenset({"name", "input"})
_KNOWN_IMAGE_URL = frozenset({"url", "detail"})
_KNOWN_IMAGE = frozenset({"type", "image_url"})


# -- load ------------------------------------------------------------------------------------


def load(payload: Any, *, strict: bool = False) -> list[Message]:
    """Load a Chat Completions ``messages`` list (or a request body holding one).

    Args:
        payload: the list of message objects, or a dict with a ``messages`` list (other keys of
            a request body, such as ``model``, are not part of the conversation and are
            ignored).
        strict: also reject tool-call arguments that are not JSON and content parts of a type
            we do not model (by default those are kept opaque for the round trip).

    Returns:
        One message per Chat message. A message's ``id`` field, when it has a string one (some
        frameworks add it), becomes the message id; otherwise the id is a hash of the position
        and the content, so the same payload always gives the same ids.

    Raises:
        FormatError: the payload is malformed; the error names the message index and field.
        ConfigError: ``strict`` is not a boolean.
    """
    check_strict(strict)
    if isinstance(payload, dict) and "messages" in payload:
        payload = payload["messages"]
    if not isinstance(payload, list):
        fail(f"expected a list of messages, got {type_name(payload)}")
    ids = IdMaker()
    with depth_guard():
        return [_load_message(raw, i, ids, strict) for i, raw in enumerate(payload)]


def _load_message(raw: Any, i: int, ids: IdMaker, strict: bool) -> Message:
    if not isinstance(raw, dict):
        fail(f"a message must be an object, got {type_name(raw)}", index=i)
    role = raw.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        fail(f"unknown role {role!r}", index=i, field="role")
    extra: dict[str, Any] = {}
    content = _content_of(raw, i, extra)
    name: str | None = None
    parts: list[Part]
    known = _KNOWN_MESSAGE
    if role == "tool":
        parts = [_load_tool_result(raw, content, i, strict, extra)]
        known = _KNOWN_TOOL
    else:
        parts = _load_content(content, i, strict, extra)
        name = _name_of(raw, i, extra)
        if role == "assistant":
            known = _KNOWN_ASSISTANT
            parts.extend(_load_calls(raw, i, strict, extra))
    keep_unknown(raw, known, NS, extra)
    msg_id = ids.make(i, role, parts, provider_id=raw.get("id"))
    return Message(role, tuple(parts), id=msg_id, name=name, extra=extra or NO_EXTRA)  # type: ignore[arg-type]


def _content_of(raw: dict[str, Any], i: int, extra: dict[str, Any]) -> Any:
    """The ``content`` value, recording in ``extra`` whether it was absent, null or a list."""
    if "content" not in raw:
        extra[f"{NS}:content"] = "absent"
        return None
    content = raw["content"]
    if content is None:
        extra[f"{NS}.content"] = None
    elif isinstance(content, list):
        extra[f"{NS}:content"] = "list"
    elif not isinstance(content, str):
        fail(
            f"content must be a string, a list or null, not {type_name(content)}",
            index=i,
            field="content",
        )
    return content


def _name_of(raw: dict[str, Any], i: int, extra: dict[str, Any]) -> str | None:
    """The optional ``name`` field; a ``null`` one is kept in ``extra`` for the round trip."""
    value = raw.get("name")
    if value is not None and not isinstance(value, str):
        fail(f"name must be a string, not {type_name(value)}", index=i, field="name")
    if value is None and "name" in raw:
        extra[f"{NS}.name"] = None
    return value


def _load_content(content: Any, i: int, strict: bool, extra: dict[str, Any]) -> list[Part]:
    """The parts of a non-tool message; an empty string is kept as a field, not as a part."""
    if isinstance(content, str):
        if content:
            return [TextPart(content)]
        extra[f"{NS}.content"] = ""
        return []
    if isinstance(content, list):
        return _load_parts(content, i, strict)
    return []


def _load_tool_result(
    raw: dict[str, Any], content: Any, i: int, strict: bool, extra: dict[str, Any]
) -> ToolResultPart:
    call_id = raw.get("tool_call_id")
    if not isinstance(call_id, str):
        fail("tool result without a tool_call_id string", index=i, field="tool_call_id")
    body: str | tuple[Part, ...] = ""
    if isinstance(content, str):
        body = content
    elif isinstance(content, list):
        body = tuple(_load_parts(content, i, strict))
    return ToolResultPart(call_id, body, name=_name_of(raw, i, extra))


def _load_calls(
    raw: dict[str, Any], i: int, strict: bool, extra: dict[str, Any]
) -> list[ToolCallPart]:
    calls = raw.get("tool_calls")
    if isinstance(calls, list):
        if not calls:
            extra[f"{NS}.tool_calls"] = []
        return [_load_call(c, i, j, strict) for j, c in enumerate(calls)]
    if calls is not None:
        fail(f"tool_calls must be a list, not {type_name(calls)}", index=i, field="tool_calls")
    if "tool_calls" in raw:
        extra[f"{NS}.tool_calls"] = None
    return []


def _load_parts(items: list[Any], i: int, strict: bool) -> list[Part]:
    return [_load_part(p, i, f"content[{j}]", strict) for j, p in enumerate(items)]


def _load_part(raw: Any, i: int, where: str, strict: bool) -> Part:
    if not isinstance(raw, dict):
        fail(f"a content part must be an object, got {type_name(raw)}", index=i, field=where)
    kind = raw.get("type")
    if kind == "text":
        return load_text(raw, i, where, NS, {})
    if kind == "refusal":
        return load_refusal(raw, i, where, NS)
    if kind == "image_url":
        return _load_image(raw, i, where)
    return unmodeled_part(raw, i, where, NS, strict)


def _load_image(raw: dict[str, Any], i: int, where: str) -> ImagePart:
    spec = raw.get("image_url")
    if not isinstance(spec, dict):
        fail("image_url must be an object", index=i, field=f"{where}.image_url")
    url = spec.get("url")
    if not isinstance(url, str):
        fail("image url must be a string", index=i, field=f"{where}.image_url.url")
    detail = spec.get("detail")
    if detail is not None and not isinstance(detail, str):
        fail("detail must be a string", index=i, field=f"{where}.image_url.detail")
    extra: dict[str, Any] = {}
    inner = {k: copy_json(v) for k, v in spec.items() if k not in _KNOWN_IMAGE_URL}
    if detail is None and "detail" in spec:
        inner["detail"] = None
    if inner:
        extra[f"{NS}:image_url"] = inner
    keep_unknown(raw, _KNOWN_IMAGE, NS, extra)
    inline = split_data_url(url)
    if inline is not None:
        return ImagePart(data=inline[1], mime=inline[0], detail=detail, extra=extra)
    return ImagePart(url=url, detail=detail, extra=extra)


def _load_call(raw: Any, i: int, j: int, strict: bool) -> ToolCallPart:
    where = f"tool_calls[{j}]"
    if not isinstance(raw, dict):
        fail(f"a tool call must be an object, got {type_name(raw)}", index=i, field=where)
    call_id = raw.get("id")
    if not isinstance(call_id, str):
        fail("tool call id must be a string", index=i, field=f"{where}.id")
    kind = raw.get("type", "function")
    extra: dict[str, Any] = {}
    if "type" not in raw:
        extra[f"{NS}:type"] = "absent"
    if kind == "function":
        spec_key, known_inner, text_key = "function", _KNOWN_FUNCTION, "arguments"
    elif kind == "custom":
        spec_key, known_inner, text_key = "custom", _KNOWN_CUSTOM, "input"
        extra[f"{NS}:type"] = "custom"
    else:
        fail(f"tool call type {kind!r} is not supported", index=i, field=f"{where}.type")
    spec = raw.get(spec_key)
    if not isinstance(spec, dict):
        fail(f"{spec_key} must be an object", index=i, field=f"{where}.{spec_key}")
    name = spec.get("name")
    if not isinstance(name, str):
        fail("tool name must be a string", index=i, field=f"{where}.{spec_key}.name")
    text = spec.get(text_key)
    if not isinstance(text, str):
        fail(f"{text_key} must be a string", index=i, field=f"{where}.{spec_key}.{text_key}")
    if strict and kind == "function":
        check_json_text(text, index=i, field=f"{where}.function.arguments")
    inner = {k: copy_json(v) for k, v in spec.items() if k not in known_inner}
    if inner:
        extra[f"{NS}:inner"] = inner
    keep_unknown(raw, _KNOWN_CALL - {"function" if kind == "custom" else "custom"}, NS, extra)
    return ToolCallPart(call_id, name, text, extra=extra or NO_EXTRA)


# -- dump ------------------------------------------------------------------------------------


def dump(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Dump messages as a Chat Completions ``messages`` list.

    Messages loaded from Chat come back exactly as they were. Others are converted: tool
    results in user messages become ``role: "tool"`` messages placed first, reasoning and
    blocks of other formats are left out, and an assistant message without text gets
    ``content: null`` as the API returns it. Chat tool messages take text only, so images in
    a converted tool result move to a user message right after the run of tool messages,
    introduced by a line naming the call. Parallel calls sent one per assistant message (as
    Anthropic allows) become one assistant message with all the calls: Chat wants a call's
    results right after the message that made it.

    Raises:
        ConfigError: ``messages`` is not a sequence of :class:`Message`.
    """
    check_messages(messages)
    out: list[dict[str, Any]] = []
    lifted: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool" or m.tool_results:
            _dump_results(m, out, lifted)
        else:
            _flush_lifted(lifted, out)
            dumped = _dump_plain(m, m.parts, m.role)
            if dumped.get("tool_calls") and out and _calls_open(out[-1]):
                _merge_calls(out[-1], dumped)
            else:
                out.append(dumped)
    _flush_lifted(lifted, out)
    return out


def _calls_open(message: dict[str, Any]) -> bool:
    """Whether ``message`` is an assistant message whose calls still wait for results."""
    return message.get("role") == "assistant" and bool(message.get("tool_calls"))


def _merge_calls(into: dict[str, Any], more: dict[str, Any]) -> None:
    """Fold the assistant message ``more`` (with calls) into ``into``: calls, then text."""
    into["tool_calls"] = [*into["tool_calls"], *more["tool_calls"]]
    a, b = into.get("content"), more.get("content")
    if not b:
        return
    if not a:
        into["content"] = b
    elif isinstance(a, str) and isinstance(b, str):
        into["content"] = f"{a}\n\n{b}"
    else:
        into["content"] = [*_as_parts(a), *_as_parts(b)]


def _as_parts(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _flush_lifted(lifted: list[dict[str, Any]], out: list[dict[str, Any]]) -> None:
    if lifted:
        out.append({"role": "user", "content": list(lifted)})
        lifted.clear()


def _dump_results(m: Message, out: list[dict[str, Any]], lifted: list[dict[str, Any]]) -> None:
    rest: list[Part] = []
    own = m.role == "tool"
    # A Chat tool message with list content keeps its parts as they were (round trip).
    lift = hint(m.extra, NS, "content") != "list"
    for p in m.parts:
        if not isinstance(p, ToolResultPart):
            rest.append(p)
            continue
        item: dict[str, Any] = {"role": "tool", "tool_call_id": p.call_id}
        if not isinstance(p.content, str):
            parts: Sequence[Part] = p.content
            images = [x for x in parts if isinstance(x, ImagePart)] if lift else []
            if images:
                parts = [x for x in parts if not isinstance(x, ImagePart)]
                dumped = _dump_parts(images)
                if dumped:
                    note = f"[images returned by tool call {p.call_id}]"
                    lifted += [{"type": "text", "text": note}, *dumped]
            item["content"] = _dump_parts(parts)
            if images and not item["content"]:
                item["content"] = "[the result is an image; it follows in the next message]"
            elif parts and not item["content"]:
                item["content"] = UNCARRIED_RESULT  # a document, say: say so, not []
        elif p.content or not own:
            item["content"] = p.content
        elif hint(m.extra, NS, "content") != "absent" and f"{NS}.content" not in m.extra:
            item["content"] = ""
        if p.name is not None:
            item["name"] = p.name
        if own:
            put_unknown(item, m.extra, NS)
            own = False  # message-level fields belong to the first result only
        out.append(item)
    if any(_keeps(p) for p in rest):
        _flush_lifted(lifted, out)
        out.append(_dump_plain(m, rest, "user" if m.role == "tool" else m.role, own=False))


def _keeps(part: Part) -> bool:
    is_opaque, raw = opaque_raw(part, NS)
    if is_opaque:
        return raw is not None
    return not isinstance(part, ThinkingPart)


def _dump_plain(
    m: Message, parts: Sequence[Part], role: str, *, own: bool = True
) -> dict[str, Any]:
    item: dict[str, Any] = {"role": role}
    content_parts: list[Part] = []
    calls: list[ToolCallPart] = []
    for p in parts:
        if isinstance(p, ToolCallPart):
            calls.append(p)
        elif isinstance(p, (TextPart, ImagePart)) and _keeps(p):
            content_parts.append(p)
    shape = hint(m.extra, NS, "content") if own else None
    if shape == "list":
        item["content"] = _dump_parts(content_parts)
    elif not content_parts:
        if shape != "absent" and not (own and f"{NS}.content" in m.extra):
            # null content is for an assistant turn that calls tools; an assistant turn with
            # nothing Chat can carry (only thinking, say) gets "", which the API accepts
            item["content"] = None if role == "assistant" and calls else ""
    elif len(content_parts) == 1 and is_plain_text(content_parts[0], NS):
        item["content"] = content_parts[0].text  # type: ignore[union-attr]
    else:
        item["content"] = _dump_parts(content_parts)
    if m.name is not None:
        item["name"] = m.name
    if calls:
        item["tool_calls"] = [_dump_call(c) for c in calls]
    if own:
        put_unknown(item, m.extra, NS)
    return item


def _dump_parts(parts: Sequence[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        dumped = _dump_part(p)
        if dumped is not None:
            out.append(dumped)
    return out


def _dump_part(p: Part) -> dict[str, Any] | None:
    is_opaque, raw = opaque_raw(p, NS)
    if is_opaque:
        return raw  # type: ignore[no-any-return]
    if isinstance(p, TextPart):
        if hint(p.extra, NS, "type") == "refusal":
            return put_unknown({"type": "refusal", "refusal": p.text}, p.extra, NS)
        return put_unknown({"type": "text", "text": p.text}, p.extra, NS)
    if isinstance(p, ImagePart):
        if p.url is not None:
            url = p.url
        elif p.data is not None:
            url = data_url(p.mime, p.data)
        else:
            return None
        spec: dict[str, Any] = {"url": url}
        if p.detail is not None:
            spec["detail"] = p.detail
        inner = hint(p.extra, NS, "image_url")
        if isinstance(inner, dict):
            for k, v in inner.items():
                spec.setdefault(k, copy_json(v))
        return put_unknown({"type": "image_url", "image_url": spec}, p.extra, NS)
    if isinstance(p, ToolResultPart):
        return {"type": "text", "text": p.text}
    return None


def _dump_call(c: ToolCallPart) -> dict[str, Any]:
    kind = hint(c.extra, NS, "type")
    item: dict[str, Any] = {"id": c.id}
    if kind == "custom":
        item["type"] = "custom"
        spec: dict[str, Any] = {"name": c.name, "input": c.arguments}
        item["custom"] = spec
    else:
        if kind != "absent":
            item["type"] = "function"
        spec = {"name": c.name, "arguments": c.arguments}
        item["function"] = spec
    inner = hint(c.extra, NS, "inner")
    if isinstance(inner, dict):
        for k, v in inner.items():
            spec.setdefault(k, copy_json(v))
    return put_unknown(item, c.extra, NS)
