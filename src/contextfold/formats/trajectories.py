"""Conversation files as they come: provider payloads, request bodies, agent trajectories, logs.

The format modules read one provider payload. Files found in practice wrap it, or are not
provider payloads at all: a request body with ``model`` and ``tools`` around the messages, a
tau-bench run (``{"traj": [...]}``), a SWE-agent trajectory (``{"history": [...]}``), a Claude
Code session log (JSON Lines, one content block per line). This module finds the
conversation in such data, loads it, and remembers how to write it back::

    from contextfold.formats import trajectories

    messages, shape = trajectories.read_file("run.json")       # format detected
    body = trajectories.write_conversation(messages[-20:], shape)  # same shape, same format

The rules, in order (:func:`find_conversation`):

* a list of Claude Code log records is merged into Anthropic messages
  (:func:`contextfold.formats.claude_code.merge_records`);
* another list is the conversation itself (a list of tau-bench runs is refused: pick one);
* an object with ``messages`` (an OpenAI or Anthropic request body) or ``input`` (a Responses
  request) is kept whole, and writing back replaces only those fields;
* an object with ``traj`` (a tau-bench run) or ``history`` (a SWE-agent trajectory) gives that
  list, and writing back gives the bare message list.

Data that fits none of these raises :class:`~contextfold.errors.FormatError`, like a malformed
payload; a bad argument (an unknown format name) raises :class:`~contextfold.errors.ConfigError`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contextfold import formats
from contextfold.errors import FormatError
from contextfold.formats._common import check_format_name, fail, type_name
from contextfold.formats.claude_code import merge_records
from contextfold.messages import Message

if TYPE_CHECKING:
    from contextfold.formats import FormatName

__all__ = [
    "Found",
    "Shape",
    "find_conversation",
    "is_claude_code_log",
    "parse_json_or_jsonl",
    "read_conversation",
    "read_file",
    "swe_agent_messages",
    "write_conversation",
]

# The fields of a request body that hold the conversation; writing back replaces them.
_CONVERSATION_FIELDS = ("messages", "input", "system")
_CLAUDE_CODE_NOTE = "merged a Claude Code session log"


@dataclass(frozen=True, slots=True)
class Shape:
    """How a conversation was read, and so how to write it back.

    Attributes:
        format: the provider format the messages were loaded from.
        envelope: the request body around the conversation (``model``, ``tools`` ...), kept
            so that writing back in the same format gives a body the provider accepts; ``None``
            when the data was the conversation alone (or a trajectory, written back bare).
        note: what was unwrapped, for people (``"read the 'traj' list (a tau-bench run)"``),
            or ``None`` when the data was a provider payload.
    """

    format: FormatName
    envelope: Mapping[str, Any] | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Found:
    """The conversation found inside some data, before it is loaded.

    Attributes:
        conversation: what was found: a message list, or the request body itself.
        envelope: the request body, when the data is one (see :class:`Shape`).
        format: the format the data's shape implies (a Claude Code log is Anthropic, a body
            with ``input`` alone is a Responses request), or ``None`` when only the messages
            can tell.
        note: see :class:`Shape`.
    """

    conversation: Any
    envelope: Mapping[str, Any] | None = None
    format: FormatName | None = None
    note: str | None = None

    def choose(self, format: str = "auto") -> FormatName:
        """The format to load with: ``format`` itself, or the one the data implies or shows.

        Raises:
            ConfigError: ``format`` is not ``"auto"`` or a known format name.
            FormatError: ``"auto"`` and the conversation fits no format, or mixes two.
        """
        if format != "auto":
            check_format_name(format)
            return format  # type: ignore[return-value]
        if self.format is not None:
            return self.format
        return formats.detect(self.conversation)

    def payload_for(self, format: FormatName) -> Any:
        """The part of the data that ``format``'s ``load`` reads."""
        body = self.envelope
        if body is None:
            return self.conversation
        if format == "openai_responses":
            return body.get("input", [])
        if format == "anthropic":
            return {k: body[k] for k in ("system", "messages") if k in body}
        return body.get("messages", [])


def parse_json_or_jsonl(text: str) -> Any:
    """Parse a JSON document, or JSON Lines (one object per line) when that fails.

    JSON Lines is tried only when the text looks like it (several lines, the first an
    object), so a broken JSON file is reported where its syntax error is.

    Raises:
        FormatError: naming the line and column of the first syntax error.
    """
    if not text.strip():
        fail("empty input, expected a JSON conversation")
    try:
        return json.loads(text)
    except RecursionError:
        fail("JSON nested too deeply to read (thousands of levels)")
    except json.JSONDecodeError as whole:
        lines = text.splitlines()
        first = next((ln for ln in lines if ln.strip()), "")
        looks_jsonl = first.lstrip().startswith("{") and sum(1 for ln in lines if ln.strip()) > 1
        if not looks_jsonl:
            fail(f"invalid JSON at line {whole.lineno}, column {whole.colno}: {whole.msg}")
        records = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except RecursionError:
                fail(f"JSON Lines record at line {number} nested too deeply to read")
            except json.JSONDecodeError as exc:
                fail(f"invalid JSON Lines record at line {number}, column {exc.colno}: {exc.msg}")
        return records


def is_claude_code_log(records: Sequence[Any]) -> bool:
    """True when ``records`` look like the lines of a Claude Code session log.

    Such a log has ``{"type": "user" | "assistant", "message": {...}}`` records; a provider
    payload never has a ``message`` object in its messages.
    """
    return any(
        isinstance(r, dict)
        and r.get("type") in ("user", "assistant")
        and isinstance(r.get("message"), dict)
        for r in records
    )


def swe_agent_messages(history: Sequence[Any]) -> list[dict[str, Any]]:
    """SWE-agent ``history`` entries as OpenAI Chat messages.

    SWE-agent records a tool result's call in a ``tool_call_ids`` list; Chat wants one
    ``tool_call_id``. Its own bookkeeping fields (``agent``, ``message_type`` ...) are left out.

    Raises:
        FormatError: an entry is not an object, or its ``tool_call_ids`` not a list.
    """
    out = []
    for i, m in enumerate(history):
        if not isinstance(m, dict):
            fail(f"a history entry must be an object, not {type_name(m)}", index=i, field="history")
        msg = {k: m[k] for k in ("role", "content", "tool_calls", "name") if m.get(k) is not None}
        ids = m.get("tool_call_ids")
        if ids:
            if not isinstance(ids, list):
                fail(
                    f"tool_call_ids must be a list, not {type_name(ids)}",
                    index=i,
                    field="tool_call_ids",
                )
            msg["tool_call_id"] = ids[0]
        out.append(msg)
    return out


def find_conversation(data: Any) -> Found:
    """Find the conversation in decoded JSON data (the rules are in the module docs).

    Raises:
        FormatError: the data holds no conversation this module knows, or several tau-bench
            runs (``field`` is ``"traj"``; pick one run and pass it).
    """
    if isinstance(data, list):
        if is_claude_code_log(data):
            return Found(merge_records(data), format="anthropic", note=_CLAUDE_CODE_NOTE)
        if data and all(isinstance(x, dict) and "traj" in x for x in data):
            fail(
                f"this file holds {len(data)} runs, each with a 'traj' conversation; pick one",
                field="traj",
            )
        return Found(data)
    if not isinstance(data, dict):
        fail(f"expected a JSON list or object, got {type(data).__name__}")
    if "messages" in data or "input" in data:
        responses = "messages" not in data
        return Found(data, envelope=data, format="openai_responses" if responses else None)
    if isinstance(data.get("traj"), list):
        return Found(data["traj"], note="read the 'traj' list (a tau-bench run)")
    if isinstance(data.get("history"), list):
        note = "read the 'history' list (a SWE-agent trajectory)"
        return Found(swe_agent_messages(data["history"]), note=note)
    keys = ", ".join(sorted(data)[:6])
    raise FormatError(
        "an object was given but it has none of 'messages', 'input', 'traj' or 'history' "
        f"(keys: {keys})"
    )


def read_conversation(
    data: Any, *, format: str = "auto", strict: bool = False
) -> tuple[list[Message], Shape]:
    """Load the conversation found in decoded JSON data.

    Args:
        data: what :func:`json.loads` (or :func:`parse_json_or_jsonl`) returned.
        format: ``"auto"`` (implied by the data's shape, else detected) or a format name.
        strict: passed to the format's ``load``.

    Returns:
        The messages, and the :class:`Shape` to give :func:`write_conversation`.

    Raises:
        FormatError: no conversation found, or a malformed one.
        ConfigError: an unknown format name, or ``strict`` is not a boolean.
    """
    found = find_conversation(data)
    name = found.choose(format)
    messages = formats.load(found.payload_for(name), name, strict=strict)
    return messages, Shape(name, found.envelope, found.note)


def read_file(
    path: str | os.PathLike[str], *, format: str = "auto", strict: bool = False
) -> tuple[list[Message], Shape]:
    """Read a JSON or JSON Lines conversation file (see :func:`read_conversation`).

    Raises:
        FormatError: the file is not UTF-8 JSON, or holds no valid conversation.
        OSError: the file cannot be read.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        fail(f"{os.fspath(path)}: not UTF-8 text (byte {exc.start})")
    return read_conversation(parse_json_or_jsonl(text), format=format, strict=strict)


def write_conversation(
    messages: Sequence[Message], shape: Shape, *, format: str | None = None
) -> Any:
    """The messages as a payload of the shape they were read from.

    Args:
        messages: the messages to write (typically a compacted context of the loaded ones).
        shape: what :func:`read_conversation` returned with them.
        format: another format to convert to (``None``: the one read). The request body is
            kept only in its own format: its other fields belong to that provider.

    Raises:
        ConfigError: an unknown format name, or ``messages`` are not messages.
    """
    name = shape.format if format is None else format
    dumped = formats.dump(messages, name)
    if shape.envelope is None or name != shape.format:
        return dumped
    out = {k: v for k, v in shape.envelope.items() if k not in _CONVERSATION_FIELDS}
    if isinstance(dumped, dict):
        out.update(dumped)
    else:
        out["input" if name == "openai_responses" else "messages"] = dumped
    return out
