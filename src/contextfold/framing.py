"""How a summary is framed inside a context, and why transcript text cannot forge the frame.

Invariant 8 of the design lives here, in one place: the frame a summary is wrapped in
(:class:`SummaryPlacement`), the escaping of transcript text so it cannot open or close a
frame (:func:`escape_framing` for the context, :func:`escape_text` for the transcripts sent
to a summarizer), and the deterministic ids summary messages get.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from contextfold.messages import Message, TextPart
from contextfold.tokens.base import TokenCounter

__all__ = [
    "FRAMING_TAGS",
    "SummaryPlacement",
    "SummaryRole",
    "escape_framing",
    "escape_text",
    "place_summary",
    "span_summary_id",
    "summary_id",
    "summary_message_tokens",
]

#: Tag names our prompts and summary framings use; transcript text may not open or close them.
FRAMING_TAGS: tuple[str, ...] = (
    "conversation",
    "previous-summary",
    "conversation-summary",
    "compacted-summary",
    "checkpoint",
    "instructions",
    "read-files",
    "modified-files",
    "turn-context",
)

_LABEL_LINE = re.compile(
    r"^(\s*)(\\*)(\[(?:System|Developer|User|Assistant|Assistant tool calls|Tool result|Tool error)"
    r"(?:[^\]\n]*)\])",
    re.MULTILINE | re.IGNORECASE,
)


SummaryRole: TypeAlias = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class SummaryPlacement:
    """How an injected summary is shaped and placed.

    Attributes:
        role: role of the summary message. ``user`` is accepted by every provider;
            ``system`` matches the ``keep_last_with_summary`` seed.
        style: ``tags`` wraps the text in ``<tag>...</tag>`` after ``preamble``; ``label``
            puts ``label`` on its own line before the text.
        tag: the tag name for the ``tags`` style.
        label: the first line for the ``label`` style.
        preamble: text before the tags, framing the summary as established background.
        provider_safe: merge the summary into a following message of the same role, and
            make sure the first message after the prefix is a user message, as Anthropic
            and Gemini require.
    """

    role: SummaryRole = "user"
    style: Literal["tags", "label"] = "tags"
    tag: str = "conversation-summary"
    label: str = "Summary of earlier conversation:"
    preamble: str = (
        "Earlier turns of this conversation were condensed into the summary below. "
        "Treat it as established background and continue from the messages that follow."
    )
    provider_safe: bool = True

    def frame(self, summary: str) -> str:
        """The summary text as it appears in the context, framing escaped inside it."""
        if self.style == "label":
            body = summary.strip()
            if self.label and body.startswith(self.label):
                body = "\u200b" + body  # cannot pose as a second label line
            return f"{self.label}\n{body}" if self.label else body
        body = escape_framing(summary.strip(), (self.tag,))
        head = f"{self.preamble}\n\n" if self.preamble else ""
        return f"{head}<{self.tag}>\n{body}\n</{self.tag}>"


def escape_framing(text: str, tags: Sequence[str]) -> str:
    """Neutralize ``<tag`` and ``</tag`` (any case) so text cannot open or close a frame."""
    if "<" not in text:
        return text
    lowered = text.lower()
    out = text
    for tag in tags:
        for opener in (f"</{tag.lower()}", f"<{tag.lower()}"):
            start = lowered.find(opener)
            while start != -1:
                out = out[:start] + "&lt;" + out[start + 1 :]
                lowered = lowered[:start] + "&lt;" + lowered[start + 1 :]
                start = lowered.find(opener, start + 4)
    return out


def summary_id(covered: Sequence[Message], salt: str = "") -> str:
    """A deterministic id for a summary message, derived from what it covers."""
    h = hashlib.sha256(salt.encode())
    for m in covered:
        h.update(m.id.encode())
        h.update(b"\0")
    return "summary_" + h.hexdigest()[:24]


def place_summary(
    prefix: Sequence[Message],
    summary: str,
    kept: Sequence[Message],
    *,
    placement: SummaryPlacement,
    message_id: str,
) -> list[Message]:
    """``prefix + [summary message] + kept``, shaped per ``placement``.

    With ``provider_safe`` a user-role summary followed by a user message is merged into
    that message (as its first text part) so no two user messages stand in a row.
    """
    text = placement.frame(summary)
    if placement.role == "user" and placement.provider_safe and kept and kept[0].role == "user":
        first = kept[0]
        merged = first.replace(parts=(TextPart(text), *first.parts))
        return [*prefix, merged, *kept[1:]]
    msg = Message(
        placement.role, (TextPart(text),), id=message_id, extra={"contextfold": "summary"}
    )
    return [*prefix, msg, *kept]


def escape_text(text: str, tags: Sequence[str] = FRAMING_TAGS) -> str:
    """Make untrusted text inert inside a serialized transcript.

    Framing tags lose their opening ``<`` and lines that start like a speaker label get a
    leading backslash (one more than they had, so an already escaped label cannot be
    unescaped by a crafted input).
    """
    out = escape_framing(text, tags)
    if "[" in out:
        out = _LABEL_LINE.sub(lambda m: f"{m.group(1)}\\{m.group(2)}{m.group(3)}", out)
    return out


def summary_message_tokens(summary: str, placement: SummaryPlacement, counter: TokenCounter) -> int:
    """Tokens the framed summary costs as a message of its own (an upper bound when merged)."""
    msg = Message(placement.role, (TextPart(placement.frame(summary)),), id="summary")
    return counter.count_message(msg)


def span_summary_id(history: Sequence[Message], start: int, end: int, salt: str) -> str:
    """A deterministic id for a summary covering ``history[start:end]``.

    Derived from the span's ends and length rather than every id in it, so it costs the
    same for a span of ten messages or a million.
    """
    ends = (history[start], history[end - 1]) if end > start else ()
    return summary_id(ends, f"{salt}:{end - start}")
