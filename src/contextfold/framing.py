"""How a summary is framed inside a context, and why transcript text cannot forge the frame.

Invariant 8 of the design lives here, in one place: the frame a summary is wrapped in
(:class:`SummaryPlacement`), the escaping of transcript text so it cannot open or close a
frame (:func:`escape_framing` for the context, :func:`escape_text` for the transcripts sent
to a summarizer), and the deterministic ids summary messages get.

What a model sees, and why it cannot be fooled by the transcript:

* **A marked frame.** The ``tags`` style wraps a summary in ``<tag-MARK>`` ... ``</tag-MARK>``
  where ``MARK`` (:func:`frame_marker`) is eight hex digits of a hash of the (escaped) summary
  text and a fixed, public salt. It is deterministic (the same summary gets the same frame on every
  build, so a provider's prefix cache keeps hitting) and it is checked against everything
  else in the context: when the summary, the system prefix or a kept message contains the
  mark, the next candidate is taken. The marked tags therefore occur exactly once each in a
  context, and a kept tool result that carries a fake ``<conversation-summary>`` block (or
  any other block) is plainly not the frame. Users' messages are never rewritten.
* **An escaped body.** Inside the frame, any ``<tag`` or ``</tag`` of the frame's tag (the
  marked forms included) loses its ``<``, so the summary cannot close its frame early. The
  match is made on how the text *reads*: case folded (``İ``, the Kelvin sign ...),
  compatibility forms folded (fullwidth ``＜``, ligatures) and invisible characters
  (zero-width spaces, combining marks) skipped. The edit is made at the position found in
  the original text, never at an index of a case-folded copy, whose length can differ.
* **Label lines.** The ``label`` style has no closing delimiter; every line of the body that
  starts like the label gets a zero-width space in front, so only the first line is one.
* **Summarizer prompts** use the same escape for every framing tag (:data:`FRAMING_TAGS`)
  and backslash-escape lines that start like a speaker label (:func:`escape_text`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from contextfold.errors import ConfigError
from contextfold.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from contextfold.tokens.base import TokenCounter

__all__ = [
    "FRAMING_TAGS",
    "LINE_BLANK",
    "LINE_BREAK",
    "SummaryPlacement",
    "SummaryRole",
    "escape_framing",
    "escape_text",
    "folded",
    "frame_marker",
    "message_texts",
    "place_summary",
    "reads_as_tag",
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

#: Regex classes: every character a reader may take for a line break, and the blanks and
#: invisible characters it reads past at the start of a line.
LINE_BREAK = r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]"
LINE_BLANK = r"[\s\u00ad\u034f\u200b-\u200f\u2060-\u2064\ufeff]"
#: A line that starts like a speaker label: at the start of the text or after a line break,
#: past blanks and invisible characters.
_LABEL_LINE = re.compile(
    rf"(^|{LINE_BREAK})({LINE_BLANK}*)"
    r"(\\*)([\[\uff3b](?:System|Developer|User|Assistant|Assistant tool calls|Tool result|"
    r"Tool error)(?:[^\]\uff3d\n]*)[\]\uff3d])",
    re.IGNORECASE,
)

#: Characters a reader takes for ``<``: ASCII, fullwidth and small form.
_OPENERS = re.compile("[<\uff1c\ufe64]")
#: Characters read past when matching a tag name (invisible, or marks on the previous letter).
_SKIPPED_CATEGORIES = frozenset({"Mn", "Me", "Cf"})
#: How many characters after a ``<`` are looked at, invisible ones included.
_SCAN_LIMIT = 256
_MARK_SALT = b"contextfold.frame.v1\0"
_TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
# Invisible characters a fold removes, as one character class (a regex deletes them many
# times faster than str.translate with a mapping).
_INVISIBLE_CODES = (
    *(c for c in range(0x2000, 0x2070) if unicodedata.category(chr(c)) == "Cf"),
    0xAD,
    0x34F,
    0xFEFF,
)
_INVISIBLE = re.compile("[" + "".join(re.escape(chr(c)) for c in _INVISIBLE_CODES) + "]")


SummaryRole: TypeAlias = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class SummaryPlacement:
    """How an injected summary is shaped and placed.

    Attributes:
        role: role of the summary message. ``user`` is accepted by every provider;
            ``system`` matches the ``keep_last_with_summary`` seed.
        style: ``tags`` wraps the text in ``<tag-MARK>...</tag-MARK>`` after ``preamble``
            (see the module docstring for the mark); ``label`` puts ``label`` on its own
            line before the text.
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

    def __post_init__(self) -> None:
        if self.role not in ("system", "user", "assistant"):
            raise ConfigError(
                f"role must be 'system', 'user' or 'assistant', not {self.role!r}", argument="role"
            )
        if self.style not in ("tags", "label"):
            raise ConfigError(
                f"style must be 'tags' or 'label', not {self.style!r}", argument="style"
            )
        if not isinstance(self.tag, str) or not _TAG_NAME.fullmatch(self.tag):
            raise ConfigError(
                f"tag must be a tag name (a letter, then letters, digits, '-', '_' or '.'), "
                f"not {self.tag!r}",
                argument="tag",
            )
        for name in ("label", "preamble"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(
                    f"{name} must be a string, not {getattr(self, name)!r}", argument=name
                )

    def frame(self, summary: str, *, avoid: Iterable[str] = ()) -> str:
        """The summary text as it appears in the context, framing escaped inside it.

        Args:
            summary: the summary text.
            avoid: the rest of the context (see :func:`message_texts`); the frame's mark is
                chosen so that none of it contains the mark.
        """
        if self.style == "label":
            body = _neutralize_label(summary.strip(), self.label)
            return f"{self.label}\n{body}" if self.label else body
        body = escape_framing(summary.strip(), (self.tag,))
        tag = f"{self.tag}-{frame_marker(body, avoid)}"
        head = f"{self.preamble}\n\n" if self.preamble else ""
        return f"{head}<{tag}>\n{body}\n</{tag}>"


def _neutralize_label(body: str, label: str) -> str:
    """Put a zero-width space before every line of ``body`` that starts like ``label``."""
    wanted = label.strip().casefold()
    if not wanted or wanted[:1] not in body.casefold():
        return body
    lines = body.split("\n")
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped[: len(wanted) * 2].casefold().startswith(wanted):
            cut = len(line) - len(stripped)
            lines[i] = f"{line[:cut]}\u200b{stripped}"
    return "\n".join(lines)


def _reading(text: str, start: int, need: int) -> str:
    """Up to ``need`` characters of how ``text[start:]`` reads: folded, invisibles skipped."""
    out: list[str] = []
    size = 0
    for ch in text[start : start + _SCAN_LIMIT]:
        if ch.isascii():
            folded = ch.lower()
        elif unicodedata.category(ch) in _SKIPPED_CATEGORIES:
            continue
        else:
            folded = unicodedata.normalize("NFKC", ch).casefold()
        out.append(folded)
        size += len(folded)
        if size >= need:
            break
    return "".join(out)


def reads_as_tag(text: str, tags: Sequence[str]) -> Iterator[int]:
    """Positions of the ``<`` of every ``<tag`` or ``</tag`` in ``text``, as a reader sees it.

    A reader (a model) takes ``</CONVERSATION``, ``＜/conversation`` and ``</conversa\u200btion``
    for the same tag, so the match folds case and compatibility forms and skips invisible
    characters; the positions are those of the original text.
    """
    wanted = [t.lower() for t in tags if t]
    if not wanted:
        return
    need = 1 + max(len(t) for t in wanted)
    for match in _OPENERS.finditer(text):
        reading = _reading(text, match.end(), need)
        body = reading[1:] if reading.startswith("/") else reading
        if any(body.startswith(t) for t in wanted):
            yield match.start()


def escape_framing(text: str, tags: Sequence[str]) -> str:
    """Neutralize ``<tag`` and ``</tag`` (any case or form) so text cannot open or close a frame.

    The ``<`` (or its fullwidth form) becomes ``&lt;``; everything else is kept as it was.
    """
    if "<" not in text and "\uff1c" not in text and "\ufe64" not in text:
        return text
    pieces: list[str] = []
    last = 0
    for pos in reads_as_tag(text, tags):
        pieces.append(text[last:pos])
        pieces.append("&lt;")
        last = pos + 1
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def folded(text: str) -> str:
    """``text`` as framing compares it: NFKC-normalized, casefolded, invisibles dropped."""
    if text.isascii():
        return text.lower()
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text).casefold())


def frame_marker(summary: str, avoid: Iterable[str] = ()) -> str:
    """The mark of a summary's frame: deterministic, and found nowhere in ``avoid``.

    ``summary`` is the body as framed (already escaped). The first candidate is a hash of a
    public salt and that body; a candidate that the body or any text in ``avoid`` contains
    (case and compatibility forms folded) is skipped for the next one. Nothing secret is
    involved: the mark is unforgeable because it is checked, not because it is hidden.
    """
    texts = [folded(summary), *(folded(t) for t in avoid if t)]
    h = hashlib.sha256(_MARK_SALT + summary.encode("utf-8", "surrogatepass"))
    while True:
        mark = h.hexdigest()[:8]
        if not any(mark in t for t in texts):
            return mark
        h.update(b"\0")


def message_texts(messages: Iterable[Message]) -> Iterator[str]:
    """Every string of ``messages`` a reader sees: text, tool names and arguments, thinking."""
    for m in messages:
        for p in m.parts:
            if isinstance(p, TextPart):
                yield p.text
            elif isinstance(p, ToolCallPart):
                yield p.name
                yield p.arguments
            elif isinstance(p, ToolResultPart):
                if p.name:
                    yield p.name
                yield p.text
            elif isinstance(p, ThinkingPart):
                yield p.text
        if m.name:
            yield m.name


def summary_id(covered: Sequence[Message], salt: str = "") -> str:
    """A deterministic id for a summary message, derived from what it covers."""
    h = hashlib.sha256(salt.encode("utf-8", "surrogatepass"))
    for m in covered:
        h.update(m.id.encode("utf-8", "surrogatepass"))
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
    that message (as its first text part) so no two user messages stand in a row. The
    frame's mark is checked against ``prefix`` and ``kept`` (see the module docstring).
    """
    avoid = message_texts([*prefix, *kept]) if placement.style == "tags" else ()
    text = placement.frame(summary, avoid=avoid)
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
    if "[" in out or "\uff3b" in out:
        out = _LABEL_LINE.sub(lambda m: f"{m.group(1)}{m.group(2)}\\{m.group(3)}{m.group(4)}", out)
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
