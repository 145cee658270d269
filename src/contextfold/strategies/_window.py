"""The one window walker: where a budgeted window falls in a history.

Every strategy that fits a token budget ends in the same question: which newest messages fit
after the system prefix (and a summary, when there is one)? :func:`fit_window` answers it by
walking back from the newest message, so the cost is bounded by what is kept, never by the
length of the history. The sliding window, the fallbacks of the summarizing strategies,
pruning, the pipeline and the transforms all go through it; what they build around it lives
in :mod:`contextfold.strategies._assembly`.

The rules a window keeps:

* The leading system and developer messages are always kept, in order.
* A tool call is never separated from its results (parallel calls and Anthropic's
  results-in-a-user-message included), and the window never starts on a tool result.
* The user's request is never dropped. When the newest turn does not fit whole, the window
  keeps the turn's opening user message plus the newest whole units that fit after it and
  drops the middle (two dropped ranges then). So the kept part after the prefix starts on a
  user message unless the walked span has none: a history that is all assistant work after
  the prefix, or the span after a summary's coverage when the turn began inside that span.
  In that last case the summary stands for the request: a user-role summary is the user
  turn the context opens with, and the tail after it may start on any unit.
* When the prefix, the request and the newest unit cannot fit together, :class:`BudgetError`
  says so, and its ``required`` is a budget that works: prefix + request + newest unit +
  ``reserved``.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from contextfold.errors import BudgetError, PairingError
from contextfold.messages import Message
from contextfold.strategies.base import WindowAnchor
from contextfold.tokens.base import TokenCounter
from contextfold.turns import is_request, newest_request, prefix_length, units

__all__ = [
    "WindowFit",
    "anchor_of",
    "budget_error",
    "cut_points",
    "fit_anchored",
    "fit_tail",
    "fit_window",
    "gap_ranges",
    "kept_items",
    "next_cut",
    "request_tokens",
]

_T = TypeVar("_T")

# Roles whose message, carrying no tool result, must not stand between a call and its result.
_BREAKS_PAIRS = frozenset({"user", "system", "developer"})


def kept_items(seq: Sequence[_T], prefix_end: int, request: int | None, start: int) -> list[_T]:
    """``seq[:prefix_end] + [seq[request]] + seq[start:]`` (no request when None)."""
    if request is None:
        return [*seq[:prefix_end], *seq[start:]]
    return [*seq[:prefix_end], seq[request], *seq[start:]]


def gap_ranges(lo: int, request: int | None, start: int) -> tuple[tuple[int, int], ...]:
    """The ranges left out between ``lo`` and ``start`` around a kept ``request``."""
    if request is None:
        return ((lo, start),) if start > lo else ()
    spans = ((lo, request), (request + 1, start))
    return tuple((a, b) for a, b in spans if b > a)


@dataclass(frozen=True, slots=True)
class WindowFit:
    """Where the window falls in a history: ``history[:prefix_end]``, the request, the tail.

    Attributes:
        prefix_end: number of leading system/developer messages (always kept).
        start: index of the first message of the kept tail (``len(history)`` when the tail is
            empty).
        prefix_tokens: tokens of the prefix.
        tail_tokens: tokens of the kept messages after the prefix (the request included).
        reserved: the tokens the caller set aside (tool schemas, a summary, the answer).
        split_turn: True when the newest turn did not fit whole.
        request: index of the newest turn's opening user message when it is kept apart from
            the tail (the turn did not fit whole); None otherwise. Everything between the
            prefix and the request, and between the request and ``start``, is left out.
    """

    prefix_end: int
    start: int
    prefix_tokens: int
    tail_tokens: int
    reserved: int = 0
    split_turn: bool = False
    request: int | None = None

    @property
    def tokens(self) -> int:
        """Tokens of the kept messages (prefix and tail; ``reserved`` not included)."""
        return self.prefix_tokens + self.tail_tokens

    @property
    def dropped_ranges(self) -> tuple[tuple[int, int], ...]:
        """The index ranges left out: one, or two around a kept request."""
        return gap_ranges(self.prefix_end, self.request, self.start)

    def messages(self, history: Sequence[_T]) -> list[_T]:
        """The kept items of ``history`` (messages, or anything indexed like them)."""
        return kept_items(history, self.prefix_end, self.request, self.start)


@dataclass(slots=True)
class _Walk:
    """What one walk back from the newest message found (see :func:`_walk`)."""

    stop: int  # the first index that did not fit; ``floor - 1`` when every message did
    best_unit: int  # earliest safe cut that fits (``len`` when none)
    unit_tokens: int
    best_turn: int  # earliest turn start (or the floor) that fits (``len`` when none)
    turn_tokens: int
    pending: dict[str, int]  # results whose call was not reached, with their index
    fault: tuple[int, str, str] | None  # the newest pairing fault: (index, call id, what)


def _walk(messages: Sequence[Message], floor: int, room: int, counter: TokenCounter) -> _Walk:
    """Walk back from the newest message while the messages fit ``room``.

    The hot loop of every build: one count (a cache hit in steady state) and one look at
    the parts per message. Pairing faults are noted on the way, not raised: only those in
    the part finally sent matter, and folding the check in saves a second pass.
    """
    n = len(messages)
    count = counter.count_message
    tail = 0
    pending: dict[str, int] = {}
    best_unit = best_turn = n
    unit_tokens = turn_tokens = 0
    fault: tuple[int, str, str] | None = None
    i = n - 1
    while i >= floor:
        m = messages[i]
        cost = count(m)
        if tail + cost > room:
            break
        tail += cost
        results_only = bool(m.parts)
        has_results = has_calls = False
        for part in m.parts:
            kind = part.kind
            if kind == "tool_result":
                has_results = True
                cid = part.call_id  # type: ignore[union-attr]
                if cid in pending and fault is None:
                    fault = (i, cid, f"tool result for {cid!r} at message {i} answered twice")
                pending[cid] = i
            else:
                results_only = False
                if kind == "tool_call":
                    has_calls = True
                    cid = part.id  # type: ignore[union-attr]
                    if pending.pop(cid, None) is None and fault is None:
                        fault = (i, cid, f"tool call {cid!r} (message {i}) has no result")
        if pending:
            # Only results and further calls may sit between calls and their results.
            breaks = m.role in _BREAKS_PAIRS or not has_calls
            if fault is None and not has_results and breaks:
                cid, at = max(pending.items(), key=lambda kv: kv[1])
                what = f"tool result for {cid!r} (message {at}) is cut off from its call"
                fault = (i, cid, f"{what} by message {i}")
        else:
            best_unit, unit_tokens = i, tail
            if i == floor or (m.role == "user" and not results_only):
                best_turn, turn_tokens = i, tail
        i -= 1
    return _Walk(i, best_unit, unit_tokens, best_turn, turn_tokens, pending, fault)


def _orphan(pending: dict[str, int]) -> PairingError:
    call_id, at = max(pending.items(), key=lambda kv: kv[1])
    return PairingError(
        f"tool result for {call_id!r} at message {at} has no matching call",
        index=at,
        call_id=call_id,
    )


def _newest_unit_tokens(
    messages: Sequence[Message], floor: int, counter: TokenCounter
) -> tuple[int, int]:
    """Tokens and length of the newest indivisible unit at or after ``floor``."""
    pending: dict[str, int] = {}
    tokens = 0
    i = len(messages) - 1
    while i >= floor:
        m = messages[i]
        tokens += counter.count_message(m)
        for part in m.parts:
            if part.kind == "tool_call":
                pending.pop(part.id, None)
            elif part.kind == "tool_result":
                pending[part.call_id] = i
        if not pending:
            return tokens, len(messages) - i
        i -= 1
    if pending:
        raise _orphan(pending)
    return 0, 0


def _least_need(messages: Sequence[Message], floor: int, counter: TokenCounter) -> int:
    """Tokens of what any window after ``floor`` must hold: the request and newest unit."""
    unit, length = _newest_unit_tokens(messages, floor, counter)
    return unit + request_tokens(messages, floor, len(messages) - length, counter)


def request_tokens(
    messages: Sequence[Message], floor: int, unit_start: int, counter: TokenCounter
) -> int:
    """Tokens of the request a window must keep besides the newest unit (0 when none).

    None is needed when the newest unit opens with a request itself.
    """
    if unit_start < len(messages) and is_request(messages[unit_start]):
        return 0
    request = newest_request(messages, floor, unit_start)
    return counter.count_message(messages[request]) if request is not None else 0


def _over_budget(
    messages: Sequence[Message],
    floor: int,
    counter: TokenCounter,
    budget: int,
    prefix_tokens: int,
    reserved: int,
) -> BudgetError:
    """The error for a window that cannot fit, with a ``required`` that would work."""
    return budget_error(budget, prefix_tokens, _least_need(messages, floor, counter), reserved)


def budget_error(budget: int, prefix_tokens: int, need: int, reserved: int) -> BudgetError:
    """Say what a window needs (``required``: a budget that works) and what it has."""
    required = prefix_tokens + reserved + need
    extra = f", plus {reserved} reserved for tool schemas and the answer" if reserved else ""
    what = f" and the user's request with the newest unit ({need} tokens)" if need else ""
    return BudgetError(
        f"the leading system/developer messages ({prefix_tokens} tokens{extra}){what} "
        f"need {required} tokens, over the budget of {budget}",
        budget=budget,
        required=required,
    )


def fit_window(
    messages: Sequence[Message],
    budget: int,
    counter: TokenCounter,
    *,
    min_start: int | None = None,
    reserved: int = 0,
    whole_turns: bool = True,
    check_pairing: bool = True,
) -> WindowFit:
    """Find the newest pair-safe window of ``messages`` that fits ``budget`` with the prefix.

    Args:
        messages: the history (not modified, not copied).
        budget: tokens available for the prefix, ``reserved`` and the tail together.
        counter: counts each message (its per-message cache makes repeated builds cheap).
        min_start: the earliest index the tail may start at. Defaults to the end of the
            prefix. A summarizing strategy passes the index after the span its summary covers,
            so the tail never repeats summarized messages; that boundary counts as a turn
            boundary.
        reserved: tokens already committed besides the messages (tool schemas, a summary
            message, room for the answer). They count against ``budget``.
        whole_turns: keep whole turns while the newest one fits (the sliding window). When
            False, keep as many whole units as fit (the request of their turn included).
        check_pairing: validate the tool pairing of the kept part (only that part).

    Returns:
        Where the window falls; see :class:`WindowFit`.

    Raises:
        BudgetError: the prefix, the newest turn's request and the newest indivisible unit
            (plus ``reserved``) exceed the budget. ``required`` is the smallest budget a
            window fits in.
        PairingError: the part that would be sent has an orphaned tool result, a call without
            its result, or a duplicated id; the error names the message's index in
            ``messages``.
    """
    n = len(messages)
    prefix_end = prefix_length(messages)
    floor = prefix_end if min_start is None else max(prefix_end, min(min_start, n))
    prefix_tokens = counter.count_messages(messages[:prefix_end])
    room = budget - prefix_tokens - reserved
    if room < 0:
        raise _over_budget(messages, floor, counter, budget, prefix_tokens, reserved)
    walk = _walk(messages, floor, room, counter)
    if walk.stop < floor and walk.pending:
        raise _orphan(walk.pending)  # a result sent without its call
    fit = WindowFit(prefix_end, n, prefix_tokens, 0, reserved)
    if walk.best_turn < n:
        start = walk.best_turn if whole_turns else walk.best_unit
        tokens = walk.turn_tokens if whole_turns else walk.unit_tokens
        fit = WindowFit(prefix_end, start, prefix_tokens, tokens, reserved, start != walk.best_turn)
    elif n > floor:
        fit = _split_turn(messages, floor, walk, counter, budget, fit)
    if check_pairing and walk.fault is not None and walk.fault[0] >= fit.start:
        at, call_id, what = walk.fault
        raise PairingError(
            f"in the window starting at message {fit.start}: {what}", index=at, call_id=call_id
        )
    return fit


def _locate(
    messages: Sequence[Message], message_id: str, floor: int, room: int, counter: TokenCounter
) -> int | None:
    """Index of the newest message ``message_id`` at or after ``floor``, within ``room``.

    Walks back from the newest message and gives up once the messages passed exceed
    ``room`` tokens, so finding (or not finding) an anchor costs what the window holds.
    """
    tokens = 0
    i = len(messages) - 1
    while i >= floor:
        m = messages[i]
        if m.id == message_id:
            return i
        tokens += counter.count_message(m)
        if tokens > room:
            return None
        i -= 1
    return None


def fit_anchored(
    messages: Sequence[Message],
    anchor: WindowAnchor,
    budget: int,
    counter: TokenCounter,
    *,
    reserved: int = 0,
) -> WindowFit | None:
    """The window that starts where the previous one did, when it still fits ``budget``.

    This is what keeps a context cache-stable: between two compactions the next context is
    the previous one with the new messages appended. None when the anchor's messages are
    no longer in ``messages`` (within the budget's reach), the window from there no longer
    fits or would not be whole; the caller then compacts.
    """
    prefix_end = prefix_length(messages)
    prefix_tokens = counter.count_messages(messages[:prefix_end])
    room = budget - prefix_tokens - reserved
    if room < 0:
        return None
    start = _locate(messages, anchor.start_id, prefix_end, room, counter)
    if start is None:
        return None
    request: int | None = None
    request_cost = 0
    if anchor.request_id is not None:
        request = _locate(messages, anchor.request_id, prefix_end, budget, counter)
        if request is None or request >= start or not is_request(messages[request]):
            return None  # gone, or an id repeated by a message that is no request
        request_cost = counter.count_message(messages[request])
    try:
        fit = fit_window(
            messages, budget, counter, min_start=start, reserved=reserved + request_cost
        )
    except (BudgetError, PairingError):
        # No longer fits; or the anchor's id now names another message (ids may repeat),
        # one a window cannot start at: the caller fits afresh, and a pairing error of the
        # history itself surfaces there.
        return None
    if fit.start != start or fit.request is not None:
        return None
    return WindowFit(
        prefix_end,
        start,
        prefix_tokens,
        fit.tail_tokens + request_cost,
        reserved,
        request is not None,
        request,
    )


def anchor_of(messages: Sequence[Message], fit: WindowFit) -> WindowAnchor | None:
    """The anchor a later build starts from to extend ``fit`` (None for an empty tail)."""
    if fit.start >= len(messages):
        return None
    request = messages[fit.request].id if fit.request is not None else None
    return WindowAnchor(messages[fit.start].id, request)


def _split_turn(
    messages: Sequence[Message],
    floor: int,
    walk: _Walk,
    counter: TokenCounter,
    budget: int,
    empty: WindowFit,
) -> WindowFit:
    """The window when the newest turn does not fit whole: its request and newest units.

    Without a request in the span (no user message after ``floor``), the newest whole units
    that fit, as before. ``empty`` is the fit with no tail, carrying the prefix figures.
    """
    n = len(messages)
    prefix_tokens, reserved = empty.prefix_tokens, empty.reserved
    request = newest_request(messages, floor, walk.stop + 1)
    if request is None:
        if walk.best_unit < n:
            return WindowFit(
                empty.prefix_end, walk.best_unit, prefix_tokens, walk.unit_tokens, reserved, True
            )
        raise _over_budget(messages, floor, counter, budget, prefix_tokens, reserved)
    cost = counter.count_message(messages[request])
    room = budget - prefix_tokens - reserved - cost
    if room >= 0:
        units_walk = _walk(messages, request + 1, room, counter)
        if units_walk.stop <= request and units_walk.pending:
            raise _orphan(units_walk.pending)  # a result whose call is before the request
        if units_walk.best_unit < n:
            tokens = cost + units_walk.unit_tokens
            start = units_walk.best_unit
            return WindowFit(
                empty.prefix_end, start, prefix_tokens, tokens, reserved, True, request
            )
    raise _over_budget(messages, floor, counter, budget, prefix_tokens, reserved)


# -- cut points and tails --------------------------------------------------------------------


def cut_points(history: Sequence[Message], start: int) -> list[int]:
    """Sorted indices ``>= start`` where a cut splits no tool pair; ends with ``len(history)``.

    An unanswered call at the end makes its unit run to the end, so ``len(history)`` is
    always a valid end of the tail.
    """
    points = [a for a, _ in units(history, start)]
    points.append(len(history))
    return points


def fit_tail(
    history: Sequence[Message],
    cuts: Sequence[int],
    budget: int,
    counter: TokenCounter,
    *,
    floor: int = 0,
) -> int:
    """The earliest safe cut ``c >= floor`` with ``history[c:]`` within ``budget``.

    The window walker with no prefix and no request: whole units from the newest back, so
    the cost is proportional to what is kept. ``cuts`` (from :func:`cut_points`) bounds the
    walk at its first cut at or after ``floor``. Returns ``len(history)`` when not even the
    newest unit fits.

    The walker takes calls still waiting for their results for units of their own: where
    the span before the answer is summarized, :func:`next_cut` moves it to a safe cut.
    """
    lo = bisect.bisect_left(cuts, floor)
    first = cuts[lo] if lo < len(cuts) else len(history)
    return _walk(history, first, budget, counter).best_unit


def next_cut(cuts: Sequence[int], at: int) -> int:
    """The first of ``cuts`` (from :func:`cut_points`) at or after ``at``.

    Between two calls still waiting for their results there is no safe cut: a span that
    ended there would summarize a call whose result comes later, unanswered in the context.
    """
    k = bisect.bisect_left(cuts, at)
    return cuts[k] if k < len(cuts) else cuts[-1]
