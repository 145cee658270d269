"""OpenAI Responses API input items.

The Responses API flattens a conversation into items: ``message`` items (user, system,
developer, assistant), ``function_call`` and ``function_call_output`` items, ``reasoning``
items and a few tool-specific ones. :func:`load` maps them onto messages this way:

* a user, system or developer message item is one message;
* the items the model produced between two inputs (its reasoning, assistant messages and
  function calls) are grouped into one assistant message, so a turn with parallel calls looks
  the same as in Chat or Anthropic form;
* each ``function_call_output`` (or ``custom_tool_call_output``) is one ``tool`` message;
* the built-in tools' calls and outputs (``computer_call``, ``shell_call``,
  ``local_shell_call``, ``apply_patch_call`` and their ``_output`` items) are tool calls and
  ``tool`` messages too (see :mod:`contextfold.formats._responses_tools`), so they pair;
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
    check_messages,
    check_strict,
    copy_json,
    depth_guard,
    fail,
    is_plain_text,
    opaque_raw,
    require_str,
    type_name,
)
from contextfold.formats._responses_parts import NS, dump_output, dump_parts, load_part
from contextfold.formats._responses_tools import (
    HOSTED_CALLS,
    HOSTED_OUTPUTS,
    fill_hosted,
    hosted_fits,
    load_hosted_call,
    load_hosted_output,
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

NAME = NS
ITEMS = f"{NS}:items"

_INPUT_ROLES = frozenset({"user", "system", "developer"})
_CALL_TYPES = {"function_call": "arguments", "custom_tool_call": "input"}
_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})


# -- load ------------------------------------------------------------------------------------


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
        ConfigError: ``strict`` is not a boolean.
    """
    check_strict(strict)
    if not isinstance(payload, list):
        fail(f"expected a list of input items, got {type_name(payload)}")
    loader = _Loader(strict)
    with depth_guard():
        for i, raw in enumerate(payload):
            loader.add(raw, i)
        loader.flush()
    return loader.out


class _Group:
    """The assistant items collected since the last input item."""

    __slots__ = ("envelopes", "first", "parts", "raws")

    def __init__(self, first: int) -> None:
        self.first = first
        self.parts: list[Part] = []
        self.envelopes: list[dict[str, Any]] = []
        self.raws: list[Any] = []


class _Loader:
    """The messages of one payload, built item by item.

    Input items (user, system and developer messages, tool outputs) are one message each; the
    model's items in between are collected in a :class:`_Group` that becomes one assistant
    message when the next input item (or the end) arrives.
    """

    __slots__ = ("group", "ids", "out", "strict")

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.ids = IdMaker()
        self.out: list[Message] = []
        self.group: _Group | None = None

    def add(self, raw: Any, i: int) -> None:
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
            self.flush()
            parts, env = _load_message_item(raw, i, role, self.strict)
            self.out.append(_single(role, parts, env, raw, i, self.ids))
        elif kind in _OUTPUT_TYPES or kind in HOSTED_OUTPUTS:
            self.flush()
            hosted = kind in HOSTED_OUTPUTS
            part, env = (
                load_hosted_output(raw, i, kind) if hosted else _load_output(raw, i, self.strict)
            )
            self.out.append(_single("tool", [part], env, raw, i, self.ids))
        else:
            self._add_model_item(raw, i, kind)

    def _add_model_item(self, raw: dict[str, Any], i: int, kind: str) -> None:
        if self.group is None:
            self.group = _Group(i)
        if kind == "message":
            parts, env = _load_message_item(raw, i, "assistant", self.strict)
        elif kind in _CALL_TYPES:
            parts, env = [_load_call(raw, i, kind, self.strict)], _envelope(raw, kind)
        elif kind == "reasoning":
            parts, env = [_load_reasoning(raw, i)], _envelope(raw, kind)
        elif kind in HOSTED_CALLS:
            call, env = load_hosted_call(raw, i, kind)
            parts = [call]
        else:
            if self.strict:
                fail(f"item type {kind!r} is not supported", index=i, field="type")
            parts, env = [], {"n": 0, "item": copy_json(raw)}
        self.group.parts.extend(parts)
        self.group.envelopes.append(env)
        self.group.raws.append(raw)

    def flush(self) -> None:
        """Close the current assistant group, if any, as one message."""
        group, self.group = self.group, None
        if group is not None:
            first = group.raws[0]
            msg_id = self.ids.make(
                group.first, "assistant", group.parts, provider_id=first.get("id")
            )
            extra = {ITEMS: group.envelopes}
            self.out.append(Message("assistant", tuple(group.parts), id=msg_id, extra=extra))


def _single(
    role: str, parts: list[Part], env: dict[str, Any], raw: Any, i: int, ids: IdMaker
) -> Message:
    msg_id = ids.make(i, role, parts, provider_id=raw.get("id"))
    return Message(role, tuple(parts), id=msg_id, extra={ITEMS: [env]})  # type: ignore[arg-type]


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
        parts = [load_part(p, i, f"content[{j}]", role, strict) for j, p in enumerate(content)]
    else:
        fail(
            f"content must be a string or a list, not {type_name(content)}",
            index=i,
            field="content",
        )
    env["n"] = len(parts)
    return parts, env


def _load_call(raw: dict[str, Any], i: int, kind: str, strict: bool) -> ToolCallPart:
    call_id = require_str(raw, "call_id", index=i, field="call_id")
    name = require_str(raw, "name", index=i, field="name")
    text_key = _CALL_TYPES[kind]
    text = require_str(raw, text_key, index=i, field=text_key)
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
        body = tuple(load_part(p, i, f"output[{j}]", "tool", strict) for j, p in enumerate(output))
    else:
        fail(f"output must be a string or a list, not {type_name(output)}", index=i, field="output")
    return ToolResultPart(call_id, body), _envelope(raw, raw["type"])


# -- dump ------------------------------------------------------------------------------------


def dump(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Dump messages as a list of Responses API input items.

    Raises:
        ConfigError: ``messages`` is not a sequence of :class:`Message`.
    """
    check_messages(messages)
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
        if kind in HOSTED_CALLS or kind in HOSTED_OUTPUTS:
            if n != 1 or not hosted_fits(kind, chunk[0]):
                return False
        elif kind == "message":
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
            if env.get("content") == "str" and n <= 1 and all(is_plain_text(p, NS) for p in chunk):
                item["content"] = chunk[0].text if chunk else ""  # type: ignore[union-attr]
            else:
                item["content"] = dump_parts(chunk, role)
        else:
            # _fits checked that each item type still has its one part of the right kind.
            part = chunk[0] if chunk else None
            if kind in HOSTED_CALLS or kind in HOSTED_OUTPUTS:
                fill_hosted(item, env, chunk[0])
            elif isinstance(part, ToolCallPart):
                item.update(call_id=part.id, name=part.name)
                item[_CALL_TYPES.get(kind, "arguments")] = part.arguments
            elif isinstance(part, ThinkingPart):
                _fill_reasoning(item, part)
            elif isinstance(part, ToolResultPart):
                item["call_id"] = part.call_id
                item["output"] = dump_output(part)
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
    return {"type": "function_call_output", "call_id": p.call_id, "output": dump_output(p)}


def _is_text(part: Part) -> bool:
    """A text part with nothing but this format's own hints (annotations, say): not a
    block kept whole, of this format or another."""
    return (
        isinstance(part, TextPart)
        and not opaque_raw(part, NS)[0]
        and all(key.startswith(f"{NS}.") for key in part.extra)
    )


def _flush_text(
    parts: list[Part], role: str, out: list[dict[str, Any]], *, keep_empty: bool = False
) -> None:
    kept = [p for p in parts if not opaque_raw(p, NS)[0] or opaque_raw(p, NS)[1] is not None]
    if not kept and not keep_empty:
        return
    content: Any
    if role == "assistant" and kept and all(_is_text(p) for p in kept):
        # A list of output_text is only valid in an output message, with its id and status;
        # one easy message per part is valid input, and loads back as one assistant message.
        # What only an output message carries (annotations, logprobs) is left out.
        for p in kept:
            out.append({"type": "message", "role": role, "content": p.text})  # type: ignore[union-attr]
        return
    if len(kept) == 1 and is_plain_text(kept[0], NS):
        content = kept[0].text  # type: ignore[union-attr]
    elif not kept:
        content = ""
    else:
        content = dump_parts(kept, role)
    out.append({"type": "message", "role": role, "content": content})
