"""What :class:`~contextfold.Recall` puts back: choosing, rendering and placing excerpts.

Pure functions over the hits a driver returned for a
:class:`~contextfold.strategies.base.SearchCall`:

* :func:`choose` keeps whole units only (a tool call with all its results), skips a hit whose
  text the context already holds (the summary says it, or it is a kept message), adds the
  request before a short answer when there is room for both, and stays inside the room it
  is given.
* :func:`render` writes the chosen messages as lines that carry each message's position and
  time, escaped like summaries so no quoted text can pass for a line of the frame.
* :func:`insert` places the framed excerpts right before the newest request, after the
  stable prefix (system, summary, older kept messages), so a provider's prompt cache over
  that prefix keeps hitting.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from contextfold.framing import (
    FRAMING_TAGS,
    LINE_BLANK,
    LINE_BREAK,
    SummaryPlacement,
    escape_text,
    folded,
    message_texts,
)
from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart
from contextfold.search import tokenize
from contextfold.strategies.base import SearchHit
from contextfold.turns import is_request, units

__all__ = [
    "RECALL_PLACEMENT",
    "Choice",
    "choose",
    "insert",
    "line",
    "normalized",
    "passage",
    "render",
    "spans_text",
]

#: The frame recalled excerpts are sent in (a user-role block before the newest request).
RECALL_PLACEMENT = SummaryPlacement(
    tag="recalled-excerpts",
    preamble="Earlier messages of this conversation that match the newest one, quoted:",
)
_TIME_KEYS = ("timestamp", "created_at", "time", "date")
_SMALLEST_LINE = 8  # tokens: with less room left, no line can fit
_SHORT = 16  # tokens: an answer shorter than this comes with the request before it
_LONG_CHARS = 800  # a longer text (a tool output, say) is quoted by its matching sentences
_MAX_SENTENCES = 3
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_NONE: frozenset[str] = frozenset()
#: A line that opens with ``[`` or its fullwidth form, after a line break of any kind and any
#: blanks or invisible characters: it could pass for the head of an excerpt line.
_HEAD_LINE = re.compile(
    rf"({LINE_BREAK}{LINE_BLANK}*)"
    r"(\\*[\[\uff3b])"
)
#: First words of a speaker label or a role: a name starting with one is shown with its role.
_ROLE_WORDS = frozenset({"user", "assistant", "tool", "system", "developer", "function"})
_NAME_WORD = re.compile(r"[^\W_]+")


def normalized(text: str) -> str:
    """Lowercased with whitespace collapsed: how "the context already says it" is tested."""
    return " ".join(text.lower().split())


def holds(sent: str, text: str) -> bool:
    """Whether ``sent`` says ``text`` as whole words (both :func:`normalized`).

    ``"red."`` is not held by ``"i am so tired."``: a match must not start or end inside a
    word of ``sent``.
    """
    if not text:
        return False
    start, end = text[0].isalnum(), text[-1].isalnum()
    at = sent.find(text)
    while at >= 0:
        stop = at + len(text)
        if not (start and at and sent[at - 1].isalnum()) and not (
            end and stop < len(sent) and sent[stop].isalnum()
        ):
            return True
        at = sent.find(text, at + 1)
    return False


@dataclass
class Choice:
    """The excerpts chosen for one build, and why the other hits were not."""

    messages: dict[int, Message] = field(default_factory=dict)  # position -> message
    hits: list[int] = field(default_factory=list)  # positions of the matches used
    tokens: int = 0
    already_sent: int = 0  # hits whose text the context already holds
    broken: int = 0  # hits whose unit is not whole within the excerpt
    no_room: int = 0  # hits that did not fit the room left
    #: Normalized text of every chosen message: a message repeated elsewhere in the log
    #: (a greeting, a retried tool call) is quoted once.
    texts: set[str] = field(default_factory=set)


def _whole(messages: Sequence[Message]) -> bool:
    """Every tool call has its results here and every result its call."""
    calls = {c.id for m in messages for c in m.tool_calls}
    results = {r.call_id for m in messages for r in m.tool_results}
    return calls == results


def _text_at(hit: SearchHit, position: int) -> str:
    return normalized(" ".join(message_texts((hit.excerpt[position - hit.start],))))


def _unsent(hit: SearchHit, position: int, sent: str, chosen: set[str]) -> bool:
    """Whether the message at ``position`` is the match, part of a tool exchange (kept or
    dropped whole with its unit), or a neighbour the context lacks."""
    message = hit.excerpt[position - hit.start]
    if position == hit.position or any(
        isinstance(p, (ToolCallPart, ToolResultPart)) for p in message.parts
    ):
        return True
    text = _text_at(hit, position)
    return bool(text) and not holds(sent, text) and text not in chosen


def _is_short(
    hit: SearchHit, cost_of: Callable[[SearchHit, int], int], span: Sequence[int]
) -> bool:
    return sum(cost_of(hit, p) for p in span) < _SHORT


def _options(hit: SearchHit, short: Callable[[Sequence[int]], bool]) -> list[list[int]]:
    """The spans to try for ``hit``, best first: with the request before it, then alone.

    The request is brought along for a tool call (what it was called for) and when
    ``short(span)`` says an answer is too short to stand alone ("Yes, twice!" means little
    without the question).
    """
    excerpt = hit.excerpt
    spans = units(excerpt) if excerpt else []
    at = hit.position - hit.start
    k = next((j for j, (a, b) in enumerate(spans) if a <= at < b), None)
    if k is None:
        return []
    a, b = spans[k]
    if not _whole(excerpt[a:b]):
        return []  # a call or a result lies outside the excerpt
    own = list(range(hit.start + a, hit.start + b))
    tools = any(m.tool_calls for m in excerpt[a:b])
    if k > 0 and not is_request(excerpt[a]) and (tools or short(own)):
        pa, pb = spans[k - 1]
        if is_request(excerpt[pa]) and _whole(excerpt[pa:pb]):
            return [list(range(hit.start + pa, hit.start + b)), own]
    return [own]


def choose(
    hits: Iterable[SearchHit],
    *,
    sent: str,
    room: int,
    cost: Callable[[int, Message], int],
) -> Choice:
    """The excerpts to recall from ``hits`` (best first) inside ``room`` tokens.

    Args:
        hits: the driver's answer, best first.
        sent: :func:`normalized` text of everything the context already sends.
        room: tokens the excerpts' lines may take.
        cost: tokens of one message's rendered line, given its position.
    """
    out = Choice()
    costs: dict[int, int] = {}

    def cost_of(hit: SearchHit, position: int) -> int:
        known = costs.get(position)
        if known is None:
            known = costs[position] = cost(position, hit.excerpt[position - hit.start])
        return known

    for hit in hits:
        if room - out.tokens < _SMALLEST_LINE:
            out.no_room += 1
            continue
        text = normalized(" ".join(message_texts((hit.message,))))
        if not text or holds(sent, text) or text in out.texts or hit.position in out.messages:
            out.already_sent += 1
            continue
        options = _options(hit, partial(_is_short, hit, cost_of))
        if not options:
            out.broken += 1
            continue
        for span in options:
            new = [p for p in span if p not in out.messages and _unsent(hit, p, sent, out.texts)]
            extra = sum(cost_of(hit, p) for p in new)
            if out.tokens + extra <= room:
                out.messages.update((p, hit.excerpt[p - hit.start]) for p in new)
                out.texts.update(_text_at(hit, p) for p in new)
                out.hits.append(hit.position)
                out.tokens += extra
                break
        else:
            out.no_room += 1
    return out


def _time_of(message: Message) -> str | None:
    for key in _TIME_KEYS:
        value = message.extra.get(key)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and value != "":
            return str(value)
    return None


def _speaker(message: Message) -> str:
    if message.is_tool_result_only:
        return "Tool result"
    if message.tool_calls:
        return "Assistant tool calls"
    # A named speaker is quoted by name alone ("Caroline", not "User (Caroline)"): the name
    # says who spoke, and every token saved on a line is room for another excerpt. A name
    # that reads as a role or one of these labels keeps its role beside it, so a user named
    # "Assistant" cannot pass for the assistant.
    role = message.role.capitalize()
    name = message.name
    if not name:
        return role
    # Compared as a reader sees it: "\u200bAssistant" or "Assistant:" reads as "Assistant".
    words = _NAME_WORD.findall(folded(name))
    if not words or words[0] in _ROLE_WORDS:
        return f"{role} ({name})"
    return name


def passage(text: str, terms: frozenset[str]) -> str:
    """``text``, or for a long one only its sentences that hold a query term.

    A long tool output or message is quoted by what matched, the cut parts marked ``…``; a
    text with no matching sentence (it matched by a tool name, say) keeps its start.
    """
    text = text.strip()
    if len(text) <= _LONG_CHARS or not terms:
        return text
    sentences = _SENTENCE.split(text)
    matched = [i for i, sent in enumerate(sentences) if terms.intersection(tokenize(sent))]
    # A matching sentence and the one after it: the answer often follows what matched.
    keep = sorted({j for i in matched[:_MAX_SENTENCES] for j in (i, i + 1) if j < len(sentences)})
    if not keep:
        return text[:_LONG_CHARS].rstrip() + " …"
    out: list[str] = []
    last = -1
    for i in keep:
        if i > last + 1 or (i == keep[0] and i > 0):
            out.append("…")
        out.append(sentences[i][: _LONG_CHARS * 2])
        last = i
    if last < len(sentences) - 1:
        out.append("…")
    return " ".join(out)


def line(
    position: int, message: Message, *, when: str | None = None, terms: frozenset[str] = _NONE
) -> str:
    """One recalled message as it is quoted: ``[Speaker #N · time] text``.

    ``#N`` is the message's position; the time is given only where it changes (see
    :func:`render`), so a run of one session does not repeat it on every line. A long text
    is quoted by its sentences that hold one of ``terms`` (see :func:`passage`).
    """
    pieces: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.text.strip():
            pieces.append(passage(part.text, terms))
        elif isinstance(part, ToolCallPart):
            pieces.append(f"{part.name}({passage(part.arguments, terms)})")
        elif isinstance(part, ToolResultPart):
            pieces.append(passage(part.text, terms))
    head = f"{_speaker(message)} #{position}" + (f" · {when}" if when else "")
    body = escape_text("\n".join(pieces), (*FRAMING_TAGS, RECALL_PLACEMENT.tag))
    return f"[{escape_text(head)}] {_inert_heads(body)}"


def _inert_heads(body: str) -> str:
    """``body`` with a backslash before every line that opens with ``[`` (past blanks and
    invisible characters), so no quoted line reads as the head of another excerpt line.

    Every character a reader may take for a line break starts a line (a carriage return, a
    Unicode line separator ...), and the backslashes already there get one more, as in
    :func:`escape_text`.
    """
    if "[" not in body and "\uff3b" not in body:
        return body
    return _HEAD_LINE.sub(lambda m: f"{m.group(1)}\\{m.group(2)}", body)


def render(chosen: dict[int, Message], terms: frozenset[str] = _NONE) -> str:
    """The body of the frame: the chosen messages in conversation order, runs apart.

    A message's time (from its ``extra``) is shown on the first line that has it and
    wherever it changes.
    """
    out: list[str] = []
    last: int | None = None
    shown: str | None = None
    for position in sorted(chosen):
        if last is not None and position != last + 1:
            out.append("[…]")
        message = chosen[position]
        when = _time_of(message)
        out.append(line(position, message, when=when if when != shown else None, terms=terms))
        shown = when or shown
        last = position
    return "\n".join(out)


def spans_text(positions: Iterable[int]) -> str:
    """``12-13, 40, 77`` for positions 12, 13, 40 and 77."""
    runs: list[list[int]] = []
    for p in sorted(positions):
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def insert(
    context: Sequence[Message], at: int, own_parts: int, body: str, placement: SummaryPlacement
) -> list[Message]:
    """``context`` with the framed ``body`` placed before the newest request ``context[at]``.

    ``own_parts`` is how many of that message's parts are the request's own (a summary may
    have been merged in front of them): the excerpts go between the two. With a user-role,
    provider-safe placement they become a part of that message (no two user messages in a
    row), otherwise a message of their own.
    """
    avoid = message_texts(context)
    text = placement.frame(body, avoid=avoid)
    target = context[at]
    if placement.role == "user" and placement.provider_safe and target.role == "user":
        cut = len(target.parts) - own_parts
        parts = (*target.parts[:cut], TextPart(text), *target.parts[cut:])
        return [*context[:at], target.replace(parts=parts), *context[at + 1 :]]
    msg = Message(
        placement.role,
        (TextPart(text),),
        id=f"recall_{target.id}",
        extra={"contextfold": "recall"},
    )
    return [*context[:at], msg, *context[at:]]
