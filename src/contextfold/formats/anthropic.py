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

from collections.abc import Sequence
from typing import Any

from contextfold.formats._anthropic_blocks import NS, ToolIds, dump_blocks, load_block
from contextfold.formats._common import (
    NO_EXTRA,
    IdMaker,
    check_messages,
    check_strict,
    depth_guard,
    fail,
    hint,
    is_plain_text,
    keep_unknown,
    put_unknown,
    type_name,
)
from contextfold.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.turns import prefix_length

__all__ = ["NAME", "SYSTEM_PREFIX", "dump", "load"]

NAME = NS

SYSTEM_PREFIX = "[system]\n"

_ROLES = frozenset({"user", "assistant"})
_K_MESSAGE = frozenset({"role", "content"})


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
        ConfigError: ``strict`` is not a boolean.
    """
    check_strict(strict)
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
    with depth_guard():
        if has_system:
            out.append(_load_system(system, ids, strict))
        out.extend(_load_message(raw, i, ids, strict) for i, raw in enumerate(payload))
    return out


def _load_system(system: Any, ids: IdMaker, strict: bool) -> Message:
    extra: dict[str, Any] = {}
    parts: list[Part]
    if isinstance(system, str):
        parts = [TextPart(system)]
    elif isinstance(system, list):
        parts = []
        for j, block in enumerate(system):
            part = load_block(block, None, f"system[{j}]", strict)
            if isinstance(part, (ToolCallPart, ToolResultPart, ThinkingPart)):
                fail("the system prompt takes text blocks only", field=f"system[{j}].type")
            parts.append(part)
        if not parts or (len(parts) == 1 and is_plain_text(parts[0], NS)):
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
        parts = [load_block(b, i, f"content[{j}]", strict) for j, b in enumerate(content)]
        if (len(parts) == 1 and is_plain_text(parts[0], NS)) or not parts:
            extra[f"{NS}:content"] = "list"  # an empty list too: it is this payload's own
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


# -- dump ------------------------------------------------------------------------------------


def dump(messages: Sequence[Message]) -> dict[str, Any]:
    """Dump messages as an Anthropic Messages request body (``system`` + ``messages``).

    Raises:
        ConfigError: ``messages`` is not a sequence of :class:`Message`.
    """
    check_messages(messages)
    n = prefix_length(messages)
    out: dict[str, Any] = {}
    if n:
        out["system"] = _dump_system(messages[:n])
    ids = ToolIds()
    rows: list[dict[str, Any]] = []
    pending_results: list[dict[str, Any]] | None = None
    for m in messages[n:]:
        if m.role == "tool":
            blocks = dump_blocks(m, m.parts, ids)
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
        row = _dump_message(m, ids)
        if row.get("content") in ([], "") and not any(k.startswith(NS) for k in m.extra):
            # A message of another format with nothing Anthropic can carry (an empty Chat
            # reply, a turn of foreign reasoning only): the API refuses empty content.
            continue
        rows.append(row)
    out["messages"] = rows
    return out


def _dump_system(prefix: Sequence[Message]) -> Any:
    if len(prefix) == 1:
        m = prefix[0]
        shape = hint(m.extra, NS, "system")
        if shape == "null" and not m.parts:
            return None
        if shape != "list" and len(m.parts) == 1 and is_plain_text(m.parts[0], NS):
            return m.parts[0].text  # type: ignore[union-attr]
    blocks: list[dict[str, Any]] = []
    for m in prefix:
        blocks.extend(dump_blocks(m, m.parts, ToolIds()))
    if not blocks and not any(hint(m.extra, NS, "system") == "list" for m in prefix):
        return ""
    return blocks


def _dump_message(m: Message, ids: ToolIds) -> dict[str, Any]:
    item: dict[str, Any] = {"role": "assistant" if m.role == "assistant" else "user"}
    if m.parts or f"{NS}.content" not in m.extra:
        parts = m.parts
        if item["role"] == "user" and m.tool_results and not m.is_tool_result_only:
            # The API wants tool results first in their user message, any other content after.
            parts = (
                *(p for p in parts if isinstance(p, ToolResultPart)),
                *(p for p in parts if not isinstance(p, ToolResultPart)),
            )
        blocks = dump_blocks(m, parts, ids)
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
