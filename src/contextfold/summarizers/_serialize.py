"""Transcript serialization for summarizers that send text to a model.

A transcript is untrusted input: a user or a tool can write anything, including text that looks
like our own framing (``</conversation>``, ``<previous-summary>``) or like a speaker label at
the start of a line. Everything here is built so that such text stays inert data:

* framing tags are escaped with :func:`contextfold.framing.escape_framing`;
* a line of message text that starts like one of our speaker labels is prefixed with a
  backslash, so it cannot pose as a new speaker;
* a tool name shown inside a label is reduced to one line without brackets, so it cannot
  end the label, start a new block or close a framing tag;
* tool results are cut to their head and tail with a marker (models need the start and the
  end of a log far more than its middle, and a 50 kB file dump would crowd out the rest);
* images become short placeholders and thinking is dropped (it is the model's scratchpad,
  not facts the conversation established).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from contextfold.errors import FormatError
from contextfold.framing import FRAMING_TAGS, escape_framing, escape_text
from contextfold.messages import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "SPEAKER_LABELS",
    "TOOL_RESULT_LIMIT",
    "image_placeholder",
    "label_name",
    "render_tool_call",
    "serialize_transcript",
    "truncate_middle",
]

#: Labels that start a speaker line in a serialized transcript.
SPEAKER_LABELS: tuple[str, ...] = (
    "[System]",
    "[Developer]",
    "[User]",
    "[Assistant]",
    "[Assistant tool calls]",
    "[Tool result]",
    "[Tool error]",
)

#: Default number of characters of one tool result kept in a serialized transcript.
TOOL_RESULT_LIMIT = 2000

_ROLE_LABEL = {
    "system": "[System]",
    "developer": "[Developer]",
    "user": "[User]",
    "assistant": "[Assistant]",
    "tool": "[Tool result]",
}


def truncate_middle(text: str, limit: int = TOOL_RESULT_LIMIT) -> str:
    """Keep the head and tail of ``text`` within about ``limit`` characters.

    The marker says how much was left out, so a reader (or a model) knows the text is not
    whole. Three quarters of the room goes to the head: the start of a log or file says what
    it is, the end says how it finished.
    """
    if limit <= 0 or len(text) <= limit:
        return text
    head = (limit * 3) // 4
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters truncated ...]\n{text[len(text) - tail :]}"


def image_placeholder(part: ImagePart) -> str:
    """A short stand-in for an image: its type and, for URLs, where it lives."""
    mime = part.mime or "image"
    if part.url and not part.url.startswith("data:"):
        return f"[Attached {mime}: {part.url[:200]}]"
    return f"[Attached {mime}]"


def render_tool_call(call: ToolCallPart, *, limit: int = 500) -> str:
    """``name(key=value, ...)`` with JSON values; unparsable arguments are shown raw."""
    try:
        args: Any = call.parsed_arguments()
    except FormatError:
        args = None
    inner = call.arguments
    if isinstance(args, dict):
        try:
            inner = ", ".join(
                f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in args.items()
            )
        except RecursionError:  # decodable, but too deep to encode again from here
            inner = call.arguments
    return f"{call.name}({truncate_middle(inner, limit)})"


_LABEL_BREAKERS = re.compile(r"[\s\[\]]+")


def label_name(name: str, tags: Sequence[str] = FRAMING_TAGS, *, limit: int = 200) -> str:
    """``name`` made safe inside a speaker label such as ``[Tool result NAME]``.

    A tool's name is as untrusted as its output: whitespace runs (newlines included) and
    brackets become one space, so the name cannot end the label or start a new block, and
    framing tags are escaped.
    """
    flat = _LABEL_BREAKERS.sub(" ", name).strip()
    return escape_framing(flat[:limit], tags)


def _part_lines(part: Part, *, tool_limit: int) -> list[str]:
    if isinstance(part, TextPart):
        return [part.text] if part.text.strip() else []
    if isinstance(part, ImagePart):
        return [image_placeholder(part)]
    if isinstance(part, ToolResultPart):
        if isinstance(part.content, str):
            body = part.content
        else:
            pieces = []
            for p in part.content:
                if isinstance(p, TextPart):
                    pieces.append(p.text)
                elif isinstance(p, ImagePart):
                    pieces.append(image_placeholder(p))
            body = "\n".join(pieces)
        return [truncate_middle(body, tool_limit)]
    return []  # thinking and tool calls are rendered elsewhere or dropped


def serialize_transcript(
    messages: Iterable[Message],
    *,
    tool_result_limit: int = TOOL_RESULT_LIMIT,
    tags: Sequence[str] = FRAMING_TAGS,
) -> str:
    """Render messages as a plain-text transcript for a summarization prompt.

    One block per message, each starting with a speaker label (``[User]:``,
    ``[Assistant]:``, ``[Assistant tool calls]:``, ``[Tool result]:`` ...). Text is escaped
    (see :func:`escape_text`), tool results are truncated head and tail, images become
    placeholders and thinking is left out.

    Args:
        messages: the span to render, oldest first.
        tool_result_limit: characters kept of each tool result.
        tags: framing tags the text may not forge.
    """
    blocks: list[str] = []
    for m in messages:
        texts: list[str] = []
        calls: list[str] = []
        results: list[str] = []
        for part in m.parts:
            if isinstance(part, ThinkingPart):
                continue
            if isinstance(part, ToolCallPart):
                calls.append(render_tool_call(part))
            elif isinstance(part, ToolResultPart):
                label = "[Tool error]" if part.is_error else "[Tool result]"
                name = label_name(part.name, tags) if part.name else ""
                if name:
                    label = f"{label[:-1]} {name}]"
                body = "\n".join(_part_lines(part, tool_limit=tool_result_limit))
                results.append(f"{label}: {escape_text(body, tags)}")
            else:
                texts.extend(_part_lines(part, tool_limit=tool_result_limit))
        if texts:
            label = _ROLE_LABEL[m.role]
            if m.role == "tool":
                label = "[Tool result]"
            body = escape_text("\n".join(texts), tags)
            blocks.append(f"{label}: {body}")
        if calls:
            blocks.append("[Assistant tool calls]: " + escape_text("; ".join(calls), tags))
        blocks.extend(results)
    return "\n\n".join(blocks)
