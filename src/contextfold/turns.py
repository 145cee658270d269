"""Turns, indivisible units and the tool-pair invariant.

Vocabulary used across the package:

* The **prefix** is the run of system and developer messages at the very start; it is always
  kept.
* A **turn** starts at a user message that is not only tool results and runs to the next one.
  Its opening message, when it carries no tool call or result, is the turn's **request**:
  what the user asked. A window never drops it (see :func:`newest_request`).
* A **unit** is the smallest span that can be kept or dropped on its own: a single message,
  or an assistant message that calls tools together with everything up to the message that
  answers its last call (parallel calls and Anthropic's results-in-a-user-message included).
  Cutting between units never orphans a tool call or result.

:func:`validate` raises :class:`~contextfold.errors.PairingError` for broken pairing;
:func:`repair` is the explicit, opt-in fix.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from contextfold.errors import PairingError
from contextfold.messages import Message, Part, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "Turn",
    "group_turns",
    "is_request",
    "is_turn_start",
    "newest_request",
    "prefix_length",
    "repair",
    "safe_cut_points",
    "split_prefix",
    "units",
    "validate",
]

_PREFIX_ROLES = frozenset({"system", "developer"})


@dataclass(frozen=True, slots=True)
class Turn:
    """A turn: ``messages[start:end]`` of the list it was grouped from."""

    start: int
    end: int
    messages: tuple[Message, ...]


def prefix_length(messages: Sequence[Message]) -> int:
    """Number of leading system/developer messages."""
    n = 0
    for m in messages:
        if m.role not in _PREFIX_ROLES:
            break
        n += 1
    return n


def split_prefix(messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """Split into (leading system/developer messages, the rest)."""
    n = prefix_length(messages)
    return list(messages[:n]), list(messages[n:])


def is_turn_start(message: Message) -> bool:
    """True for a user message that is not only tool results."""
    return message.role == "user" and not message.is_tool_result_only


def is_request(message: Message) -> bool:
    """True for a user message carrying no tool call or result: what the user asked.

    Results in a user message (Anthropic's shape) answer the assistant; they ask nothing,
    and a message mixing results with text cannot open a window (its results belong to the
    calls before it).
    """
    return message.role == "user" and not any(
        p.kind == "tool_result" or p.kind == "tool_call" for p in message.parts
    )


def newest_request(messages: Sequence[Message], lo: int, hi: int) -> int | None:
    """Index of the newest request (see :func:`is_request`) in ``messages[lo:hi]``, or None.

    Walks back from ``hi``, so finding the request of the newest turn costs that turn only.
    """
    for i in range(hi - 1, lo - 1, -1):
        if is_request(messages[i]):
            return i
    return None


def group_turns(messages: Sequence[Message]) -> list[Turn]:
    """Group the messages after the prefix into turns.

    Messages before the first user message (after the prefix) form a turn of their own.
    """
    start = prefix_length(messages)
    turns: list[Turn] = []
    begin = start
    for i in range(start, len(messages)):
        if i > begin and is_turn_start(messages[i]):
            turns.append(Turn(begin, i, tuple(messages[begin:i])))
            begin = i
    if begin < len(messages):
        turns.append(Turn(begin, len(messages), tuple(messages[begin:])))
    return turns


def validate(messages: Sequence[Message], *, allow_pending_tail: bool = False) -> None:
    """Check the tool-pair invariant; raise :class:`PairingError` naming the culprit.

    Rules: every tool result answers an earlier call that is still open; a call id is not
    reused while a call with that id still waits for its result; every call is answered
    before the next user turn or system message. While calls wait, only their results and
    assistant messages making further calls (parallel calls sent one per message) may come
    in between: an assistant message that only speaks there has no valid Chat form (a
    ``tool`` message must follow the calls it answers). Reusing an id once its call was
    answered is accepted: OpenAI models do it in long runs and the API pairs by position.

    Args:
        allow_pending_tail: accept calls still unanswered at the very end (an agent in the
            middle of running its tools).
    """
    open_calls: dict[str, int] = {}
    seen: set[str] = set()
    for i, m in enumerate(messages):
        # Plain text messages are the common case: look at the parts once, build nothing.
        results: list[ToolResultPart] | None = None
        calls: list[ToolCallPart] | None = None
        for part in m.parts:
            if isinstance(part, ToolResultPart):
                results = [part] if results is None else [*results, part]
            elif isinstance(part, ToolCallPart):
                calls = [part] if calls is None else [*calls, part]
        if open_calls and results is None and (calls is None or m.role != "assistant"):
            call_id, at = next(iter(open_calls.items()))
            raise PairingError(
                f"tool call {call_id!r} (message {at}) has no result before message {i}",
                index=at,
                call_id=call_id,
            )
        for r in results or ():
            if r.call_id not in open_calls:
                what = "answered twice" if r.call_id in seen else "has no matching call"
                raise PairingError(
                    f"tool result for {r.call_id!r} at message {i} {what}",
                    index=i,
                    call_id=r.call_id,
                )
            del open_calls[r.call_id]
        for c in calls or ():
            if c.id in open_calls:
                raise PairingError(
                    f"duplicate tool call id {c.id!r} at message {i} (the call at message "
                    f"{open_calls[c.id]} is still unanswered)",
                    index=i,
                    call_id=c.id,
                )
            seen.add(c.id)
            open_calls[c.id] = i
    if open_calls and not allow_pending_tail:
        call_id, at = next(iter(open_calls.items()))
        raise PairingError(
            f"tool call {call_id!r} (message {at}) has no result", index=at, call_id=call_id
        )


def safe_cut_points(messages: Sequence[Message]) -> list[int]:
    """Indices ``i`` (0..len) where cutting ``messages[:i] | messages[i:]`` splits no pair.

    Assumes the list is valid (see :func:`validate`); an unanswered call simply makes the
    cut points after it unsafe.
    """
    points = [0]
    open_ids: set[str] = set()
    for i, m in enumerate(messages):
        # One pass over the parts: results close calls before the message's own calls open.
        calls: list[str] = []
        for p in m.parts:
            if isinstance(p, ToolResultPart):
                open_ids.discard(p.call_id)
            elif isinstance(p, ToolCallPart):
                calls.append(p.id)
        open_ids.update(calls)
        if not open_ids:
            points.append(i + 1)
    return points


def units(messages: Sequence[Message], start: int = 0) -> list[tuple[int, int]]:
    """Indivisible ``(begin, end)`` spans covering ``messages[start:]``."""
    cuts = [p + start for p in safe_cut_points(messages[start:])]
    out = [(a, b) for a, b in itertools.pairwise(cuts)]
    if cuts[-1] < len(messages):  # an unanswered call runs to the end
        out.append((cuts[-1], len(messages)))
    return out


def repair(messages: Sequence[Message], *, mode: Literal["drop", "text"] = "drop") -> list[Message]:
    """Return a copy with broken pairing fixed; the input is not modified.

    A message that only speaks while calls wait for their results (see :func:`validate`),
    including one left with text only by ``mode="text"``, moves to just after those results.

    Args:
        mode: ``"drop"`` removes orphaned results and unanswered calls; ``"text"`` turns them
            into plain text parts so nothing the model said or saw is lost.
    """
    answered, good_results = _answered(messages)
    out: list[Message] = []
    waiting: list[Message] = []  # text-only messages held until the open calls are answered
    open_out: set[str] = set()  # calls in ``out`` still waiting for their results
    for i, m in enumerate(messages):
        new = _repaired(m, i, answered, good_results, mode)
        if new is None:
            continue
        if open_out and not new.tool_results and not new.tool_calls:
            waiting.append(new)
            continue
        out.append(new)
        for r in new.tool_results:
            open_out.discard(r.call_id)
        for c in new.tool_calls:
            open_out.add(c.id)
        if not open_out and waiting:
            out.extend(waiting)
            waiting = []
    out.extend(waiting)
    return out


def _repaired(
    m: Message,
    i: int,
    answered: set[tuple[int, int]],
    good_results: set[tuple[int, int]],
    mode: Literal["drop", "text"],
) -> Message | None:
    """Message ``i`` without its broken calls and results (as text in ``"text"`` mode);
    None when nothing is left of it."""
    new_parts: list[Part] = []
    changed = False
    for j, p in enumerate(m.parts):
        if isinstance(p, ToolResultPart):
            kept = (i, j) in good_results
        elif isinstance(p, ToolCallPart):
            kept = (i, j) in answered
        else:
            kept = True
        if kept:
            new_parts.append(p)
            continue
        changed = True
        if mode == "text":
            new_parts.append(TextPart(_as_text(p)))
    if not changed:
        return m
    if not new_parts:
        return None
    role = m.role
    if role == "tool" and not any(isinstance(p, ToolResultPart) for p in new_parts):
        role = "user"  # a tool message left with text only
    return m.replace(role=role, parts=tuple(new_parts))


def _as_text(part: Part) -> str:
    """What ``repair(mode="text")`` says in place of a broken call or result."""
    if isinstance(part, ToolResultPart):
        return f"[tool result for {part.call_id}]: {part.text}"
    assert isinstance(part, ToolCallPart)  # only calls and results are ever broken
    return f"[tool call {part.name}({part.arguments})]"


def _answered(
    messages: Sequence[Message],
) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """The calls that are answered and the results that answer one, by (message, part).

    By occurrence: a call counts as answered only by a result that follows it before the
    next user turn; an id reused while its first call is still open is a duplicate and is
    not kept.
    """
    answered: set[tuple[int, int]] = set()
    good_results: set[tuple[int, int]] = set()
    open_calls: dict[str, tuple[int, int]] = {}
    for i, m in enumerate(messages):
        if open_calls and not m.tool_results and m.role in ("user", "system", "developer"):
            open_calls.clear()
        for j, part in enumerate(m.parts):
            if isinstance(part, ToolResultPart):
                at = open_calls.pop(part.call_id, None)
                if at is not None:
                    answered.add(at)
                    good_results.add((i, j))
        for j, part in enumerate(m.parts):
            if isinstance(part, ToolCallPart) and part.id not in open_calls:
                open_calls[part.id] = (i, j)
    return answered, good_results
