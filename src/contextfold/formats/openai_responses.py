"""OpenAI Responses API input items.

The Responses API flattens a conversation into items: ``message`` items (user, system,
developer, assistant), ``function_call`` and ``function_call_output`` items, ``reasoning``
items and a few tool-specific ones. :func:`load` maps them onto messages this way:

* a user, system or developer message item is one message;
* the items the model produced between two inputs (its reasoning, assistant messages and
  function calls) are grouped into one assistant message, so a turn with parallel calls looks
  the same as in Chat or Anthropic form;
* each ``function_call_output`` (or ``custom_tool_call_output``) is one ``tool`` message;
* items of other types (``item_reference``, ``web_search_call`` ...) are kept opaque inside
  the assistant group they appear in (or a new one), so they come back on dump.

Each message records in ``extra["openai_responses:items"]`` the items it came from (their ids,
statuses and other fields, and how many parts each produced), so ``dump(load(x)) == x``. A
message from another format has no such record, and an edited message no longer matches its
record; both are converted: text to message items, tool calls to ``function_call`` items,
tool results to ``function_call_output`` items. Reasoning is
only dumped for items that came from the Responses API, because the API needs the original item
id and encrypted content; ``is_error`` has no Responses field and is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextfold.formats._common import (
    NO_EXTRA,
    IdMaker,
    check_json_text,
    copy_json,
    data_url,
    fail,
    hint,
    keep_unknown,
    opaque,
    opaque_raw,
    put_unknown,
    split_data_url,
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

__all__ = ["NAME", "dump", "load"]

NAME = "openai_responses"
NS = NAME
ITEMS = f"{NS}:items"

_INPUT_ROLES = frozenset({"user", "system", "developer"})
_CALL_TYPES = {"function_call": "arguments", "custom_tool_call": "input"}
_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
_K_TEXT = frozenset({"type", "text"})
_K_REFUSAL = frozenset({"type", "refusal"})
_K_IMAGE = frozenset({"type", "image_url", "detail"})


def _default_text_type(role: str) -> str:
    return "output_text" if role == "assistant" else "input_text"


# -- load ------------------------------------------------------------------------------------


class _Group:
    """The assistant items collected since the last input item."""

    __slots__ = ("envelopes", "first", "parts", "raws")

    def __init__(self, first: int) -> None:
        self.first = first
        self.parts: list[Part] = []
        self.envelopes: list[dict[str, Any]] = []
        self.raws: list[Any] = []


def load(payload: Any, *, strict: bool = False) -> list[Message]:
    """Load a list of Responses API input items.

    Args:
        payload: the ``input`` list (also what ``response.output`` items look like).
        strict: also reject function-call arguments that are not JSON and item or content
            types we do not model (kept opaque by default).

    Returns:
        Messages grouped as described in the module docs, with the provider item ids as
        message ids when present (else deterministic ids).

    Raises:
        FormatError: the payload is malformed; the error names the item index and field.
    """
    if not isinstance(payload, list):
        fail(f"expected a list of input items, got {type_name(payload)}")
    ids = IdMaker()
    out: list[Message] = []
    group: _Group | None = None
    try:
        for i, raw in enumerate(payload):
            if not isinstance(raw, dict):
                fail(f"an item must be an object, got {type_name(raw)}", index=i)
            kind = raw.get("type")
            if kind is None and "type" not in raw and "role" in raw:
                kind = "message"
            if not isinstance(kind, str):
                fail(f"item type must be a string, not {type_name(kind)}", index=i, field="type")
            role = raw.get("role")
            if kind == "message" and role != "assistant":
                if not isinstance(role, str) or role not in _INPUT_ROLES:
                    fail(f"unknown role {role!r}", index=i, field="role")
                _flush(group, out, ids)
                group = None
                parts, env = _load_message_item(raw, i, role, strict)
                out.append(_single(role, parts, env, raw, i, ids))
            elif kind in _OUTPUT_TYPES:
                _flush(group, out, ids)
                group = None
                part, env = _load_output(raw, i, strict)
                out.append(_single("tool", [part], env, raw, i, ids))
            else:
                if group is None:
                    group = _Group(i)
                if kind == "message":
                    parts, env = _load_message_item(raw, i, "assistant", strict)
                elif kind in _CALL_TYPES:
                    parts, env = [_load_call(raw, i, kind, strict)], _envelope(raw, kind)
                elif kind == "reasoning":
                    parts, env = [_load_reasoning(raw, i)], _envelope(raw, kind)
                else:
                    if strict:
                        fail(f"item type {kind!r} is not supported", index=i, field="type")
                    parts, env = [], {"n": 0, "item": copy_json(raw)}
                group.parts.extend(parts)
                group.envelopes.append(env)
                group.raws.append(raw)
        _flush(group, out, ids)
    except RecursionError:
        fail("payload is nested too deeply")
    return out


def _single(
    role: str, parts: list[Part], env: dict[str, Any], raw: Any, i: int, ids: IdMaker
) -> Message:
    msg_id = ids.make(i, role, parts, provider_id=raw.get("id"))
    return Message(role, tuple(parts), id=msg_id, extra={ITEMS: [env]})  # type: ignore[arg-type]


def _flush(group: _Group | None, out: list[Message], ids: IdMaker) -> None:
    if group is not None:
        first = group.raws[0]
        msg_id = ids.make(group.first, "assistant", group.parts, provider_id=first.get("id"))
        extra = {ITEMS: group.envelopes}
        out.append(Message("assistant", tuple(group.parts), id=msg_id, extra=extra))


_KNOWN_BY_TYPE: dict[str, frozenset[str]] = {
    "function_call": frozenset({"call_id", "name", "arguments"}),
    "custom_tool_call": frozenset({"call_id", "name", "input"}),
    "reasoning": frozenset({"summary", "encrypted_content"}),
    "function_call_output": frozenset({"call_id", "output"}),
    "custom_tool_call_output": frozenset({"call_id", "output"}),
}


def _envelope(raw: dict[str, Any], kind: str, n: int = 1) -> dict[str, Any]:
    known = _KNOWN_BY_TYPE[kind]
    item = {k: copy_json(v) for k, v in raw.items() if k not in known}
    if kind == "reasoning" and raw.get("encrypted_content") is None and "encrypted_content" in raw:
        item["encrypted_content"] = None
    return {"n": n, "item": item}


def _load_message_item(
    raw: dict[str, Any], i: int, role: str, strict: bool
) -> tuple[list[Part], dict[str, Any]]:
    content = raw.get("content")
    env: dict[str, Any] = {"item": {k: copy_json(v) for k, v in raw.items() if k != "content"}}
    parts: list[Part]
    if isinstance(content, str):
        parts = [TextPart(content)] if content else []
        env["content"] = "str"
    elif isinstance(content, list):
        parts = [_load_part(p, i, f"content[{j}]", role, strict) for j, p in enumerate(content)]
    else:
        fail(
            f"content must be a string or a list, not {type_name(content)}",
            index=i,
            field="content",
        )
    env["n"] = len(parts)
    return parts, env


def _load_part(raw: Any, i: int, where: str, role: str, strict: bool) -> Part:
    if not isinstance(raw, dict):
        fail(f"a content part must be an object, got {type_name(raw)}", index=i, field=where)
    kind = raw.get("type")
    extra: dict[str, Any] = {}
    if kind in ("input_text", "output_text"):
        text = raw.get("text")
        if not isinstance(text, str):
            fail("text must be a string", index=i, field=f"{where}.text")
        if kind != _default_text_type(role):
            extra[f"{NS}:type"] = kind
        keep_unknown(raw, _K_TEXT, NS, extra)
        return TextPart(text, extra=extra or NO_EXTRA)
    if kind == "refusal":
        text = raw.get("refusal")
        if not isinstance(text, str):
            fail("refusal must be a string", index=i, field=f"{where}.refusal")
        extra[f"{NS}:type"] = "refusal"
        keep_unknown(raw, _K_REFUSAL, NS, extra)
        return TextPart(text, extra=extra)
    if kind == "input_image":
        url = raw.get("image_url")
        detail = raw.get("detail")
        if url is not None and not isinstance(url, str):
            fail("image_url must be a string", index=i, field=f"{where}.image_url")
        if detail is not None and not isinstance(detail, str):
            fail("detail must be a string", index=i, field=f"{where}.detail")
        if "detail" not in raw:
            extra[f"{NS}:detail"] = "absent"
        for key, value in (("image_url", url), ("detail", detail)):
            if value is None and key in raw:
                extra[f"{NS}.{key}"] = None
        keep_unknown(raw, _K_IMAGE, NS, extra)
        inline = split_data_url(url) if url is not None else None
        if inline is not None:
            return ImagePart(data=inline[1], mime=inline[0], detail=detail, extra=extra or NO_EXTRA)
        return ImagePart(url=url, detail=detail, extra=extra or NO_EXTRA)
    if strict:
        fail(f"content part type {kind!r} is not supported", index=i, field=f"{where}.type")
    return opaque(raw, NS)


def _str(raw: dict[str, Any], key: str, i: int) -> str:
    value = raw.get(key)
    if not isinstance(value, str):
        fail(f"{key} must be a string, not {type_name(value)}", index=i, field=key)
    return value


def _load_call(raw: dict[str, Any], i: int, kind: str, strict: bool) -> ToolCallPart:
    call_id = _str(raw, "call_id", i)
    name = _str(raw, "name", i)
    text_key = _CALL_TYPES[kind]
    text = _str(raw, text_key, i)
    if strict and kind == "function_call":
        check_json_text(text, index=i, field="arguments")
    return ToolCallPart(call_id, name, text)


def _load_reasoning(raw: dict[str, Any], i: int) -> ThinkingPart:
    summary = raw.get("summary", [])
    if not isinstance(summary, list):
        fail(f"summary must be a list, not {type_name(summary)}", index=i, field="summary")
    texts: list[str] = []
    for j, s in enumerate(summary):
        text = s.get("text") if isinstance(s, dict) else None
        if not isinstance(text, str):
            fail("a summary entry needs a text string", index=i, field=f"summary[{j}].text")
        texts.append(text)
    joined = "\n\n".join(texts)
    extra: dict[str, Any] = {}
    if "summary" not in raw:
        extra[f"{NS}:summary"] = None
    elif summary != _summary_for(joined):
        extra[f"{NS}:summary"] = copy_json(summary)
    encrypted = raw.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        fail("encrypted_content must be a string", index=i, field="encrypted_content")
    return ThinkingPart(joined, data=encrypted, extra=extra or NO_EXTRA)


def _summary_for(text: str) -> list[dict[str, Any]]:
    return [{"type": "summary_text", "text": text}] if text else []


def _load_output(raw: dict[str, Any], i: int, strict: bool) -> tuple[Part, dict[str, Any]]:
    call_id = raw.get("call_id")
    if not isinstance(call_id, str):
        fail("tool result without a call_id string", index=i, field="call_id")
    output = raw.get("output")
    body: str | tuple[Part, ...]
    if isinstance(output, str):
        body = output
    elif isinstance(output, list):
        body = tuple(_load_part(p, i, f"output[{j}]", "tool", strict) for j, p in enumerate(output))
    else:
        fail(f"output must be a string or a list, not {type_name(output)}", index=i, field="output")
    return ToolResultPart(call_id, body), _envelope(raw, raw["type"])


# -- dump ------------------------------------------------------------------------------------


def dump(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Dump messages as a list of Responses API input items."""
    out: list[dict[str, Any]] = []
    for m in messages:
        envelopes = m.extra.get(ITEMS) if m.extra else None
        if envelopes is not None and _fits(envelopes, m.parts):
            _dump_recorded(m, envelopes, out)
        else:
            _dump_converted(m, out)
    return out


_PART_KIND_FOR_TYPE = {
    "function_call": ToolCallPart,
    "custom_tool_call": ToolCallPart,
    "reasoning": ThinkingPart,
    "function_call_output": ToolResultPart,
    "custom_tool_call_output": ToolResultPart,
}


def _fits(envelopes: Any, parts: Sequence[Part]) -> bool:
    """True when the recorded items still describe ``parts`` (the message was not edited)."""
    if not isinstance(envelopes, list):
        return False
    at = 0
    for env in envelopes:
        if not isinstance(env, Mapping) or not isinstance(env.get("item"), Mapping):
            return False
        n = env.get("n")
        if not isinstance(n, int) or n < 0 or at + n > len(parts):
            return False
        kind = env["item"].get("type", "message")
        if not isinstance(kind, str):
            return False
        wanted = _PART_KIND_FOR_TYPE.get(kind)
        chunk = parts[at : at + n]
        if kind == "message":
            if any(not isinstance(p, (TextPart, ImagePart)) for p in chunk):
                return False
        elif wanted is not None:
            if n != 1 or not isinstance(chunk[0], wanted):
                return False
        elif n:
            return False
        at += n
    return at == len(parts)


def _dump_recorded(m: Message, envelopes: list[Any], out: list[dict[str, Any]]) -> None:
    at = 0
    for env in envelopes:
        n = env["n"]
        chunk = m.parts[at : at + n]
        at += n
        item = copy_json(dict(env["item"]))
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role", m.role)
            if env.get("content") == "str" and n <= 1 and all(_is_plain(p) for p in chunk):
                item["content"] = chunk[0].text if chunk else ""  # type: ignore[union-attr]
            else:
                item["content"] = _dump_parts(chunk, role)
        else:
            # _fits checked that each item type still has its one part of the right kind.
            part = chunk[0] if chunk else None
            if isinstance(part, ToolCallPart):
                item.update(call_id=part.id, name=part.name)
                item[_CALL_TYPES.get(kind, "arguments")] = part.arguments
            elif isinstance(part, ThinkingPart):
                _fill_reasoning(item, part)
            elif isinstance(part, ToolResultPart):
                item["call_id"] = part.call_id
                item["output"] = _dump_output(part)
        out.append(item)


def _fill_reasoning(item: dict[str, Any], think: ThinkingPart) -> None:
    key = f"{NS}:summary"
    kept = think.extra.get(key) if think.extra else None
    if kept is None and key in think.extra and not think.text:
        pass  # the item had no summary field
    elif isinstance(kept, list) and _summary_text(kept) == think.text:
        item["summary"] = copy_json(kept)
    else:
        item["summary"] = _summary_for(think.text)
    if think.data is not None:
        item["encrypted_content"] = think.data


def _summary_text(summary: list[Any]) -> str | None:
    texts = [s.get("text") if isinstance(s, dict) else None for s in summary]
    if not all(isinstance(t, str) for t in texts):
        return None
    return "\n\n".join(texts)  # type: ignore[arg-type]


def _is_plain(part: Part) -> bool:
    return isinstance(part, TextPart) and not any(k.startswith(NS) for k in part.extra)


def _dump_parts(parts: Sequence[Part], role: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        is_opaque, raw = opaque_raw(p, NS)
        if is_opaque:
            if raw is not None:
                out.append(raw)
        elif isinstance(p, TextPart):
            kind = hint(p.extra, NS, "type") or _default_text_type(role)
            key = "refusal" if kind == "refusal" else "text"
            out.append(put_unknown({"type": kind, key: p.text}, p.extra, NS))
        elif isinstance(p, ImagePart):
            image = _dump_image(p)
            if image is not None:
                out.append(image)
        elif isinstance(p, ToolResultPart):
            out.append({"type": _default_text_type(role), "text": p.text})
    return out


def _dump_image(p: ImagePart) -> dict[str, Any] | None:
    item: dict[str, Any] = {"type": "input_image"}
    if p.url is not None:
        item["image_url"] = p.url
    elif p.data is not None:
        item["image_url"] = data_url(p.mime, p.data)
    elif f"{NS}.image_url" not in p.extra and f"{NS}.file_id" not in p.extra:
        return None
    if p.detail is not None:
        item["detail"] = p.detail
    elif hint(p.extra, NS, "detail") != "absent":
        item["detail"] = "auto"
    return put_unknown(item, p.extra, NS)


def _dump_output(result: ToolResultPart) -> Any:
    if isinstance(result.content, str):
        return result.content
    return _dump_parts(result.content, "tool")


def _dump_converted(m: Message, out: list[dict[str, Any]]) -> None:
    """Items for a message that did not come from the Responses API (or was edited)."""
    if m.role == "assistant":
        pending: list[Part] = []
        for p in m.parts:
            if isinstance(p, (TextPart, ImagePart)):
                pending.append(p)
                continue
            _flush_text(pending, "assistant", out)
            pending = []
            if isinstance(p, ToolCallPart):
                kind = "function_call"
                out.append(
                    {"type": kind, "call_id": p.id, "name": p.name, "arguments": p.arguments}
                )
            elif isinstance(p, ToolResultPart):
                out.append(_output_item(p))
            # Reasoning needs its original item id and encrypted content: left out.
        _flush_text(pending, "assistant", out)
        return
    rest: list[Part] = []
    for p in m.parts:
        if isinstance(p, ToolResultPart):
            out.append(_output_item(p))
        elif isinstance(p, (TextPart, ImagePart)):
            rest.append(p)
    role = "user" if m.role == "tool" else m.role
    if rest or m.role != "tool":
        _flush_text(rest, role, out, keep_empty=not m.tool_results)


def _output_item(p: ToolResultPart) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": p.call_id, "output": _dump_output(p)}


def _flush_text(
    parts: list[Part], role: str, out: list[dict[str, Any]], *, keep_empty: bool = False
) -> None:
    kept = [p for p in parts if not opaque_raw(p, NS)[0] or opaque_raw(p, NS)[1] is not None]
    if not kept and not keep_empty:
        return
    content: Any
    if len(kept) == 1 and _is_plain(kept[0]):
        content = kept[0].text  # type: ignore[union-attr]
    elif not kept:
        content = ""
    else:
        content = _dump_parts(kept, role)
    out.append({"type": "message", "role": role, "content": content})
