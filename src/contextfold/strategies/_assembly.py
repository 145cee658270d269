"""Contexts and results built around the window walker.

:mod:`contextfold.strategies._window` says where a window falls; this module turns that into
what a strategy returns: ``prefix + [summary] + tail`` inside a budget (:func:`assemble`,
:func:`trim_view`), the plain window's :class:`StrategyResult` (:func:`window_result`), the
check made before any summarizer call (:func:`require_fit`) and the room a summary may take
(:func:`summary_room`). Everything works on index positions into the caller's history, so
the input is never copied or mutated.

A summary placed as a user message is the user turn the context opens with: after it, the
tail may start on any unit (an assistant message then follows the summary), though the
newest turn's request is still kept when it lies after the summary's coverage and its turn
does not fit whole. A system-role summary opens nothing, so the tail after it keeps whole
turns, as without a summary.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.errors import BudgetError
from contextfold.framing import SummaryPlacement, place_summary, summary_message_tokens
from contextfold.messages import Message
from contextfold.strategies._window import (
    WindowFit,
    budget_error,
    fit_window,
    gap_ranges,
    kept_items,
    request_tokens,
)
from contextfold.strategies.base import StrategyResult
from contextfold.tokens.base import TokenCounter

__all__ = [
    "Assembly",
    "assemble",
    "past_leading_results",
    "recent_start",
    "require_fit",
    "summary_room",
    "trim_view",
    "window_result",
]


def window_result(
    history: Sequence[Message],
    fit: WindowFit,
    *,
    strategy: str = "sliding",
    counter: TokenCounter | None = None,
    tools: int = 0,
    fallback: str | None = None,
    failure_code: str | None = None,
    notes: Sequence[str] = (),
) -> StrategyResult:
    """A :class:`StrategyResult` for a plain window (no summary) over ``history``.

    Summarizing strategies use it for their fallback, passing ``fallback`` (why) and
    ``failure_code``. Cost is proportional to what is kept, not to ``history``.
    """
    kept = fit.messages(history)
    dropped = fit.dropped_ranges
    all_notes = list(notes)
    if dropped:
        older = dropped[0][1] - dropped[0][0] if dropped[0][0] == fit.prefix_end else 0
        if older:
            all_notes.append(f"dropped {older} older messages to fit the budget")
    if fit.request is not None:
        middle = fit.start - fit.request - 1
        all_notes.append(
            f"the newest turn alone is over budget: kept its opening user message "
            f"(message {fit.request}) and its newest whole units, dropped the {middle} "
            "messages between them"
        )
    elif fit.split_turn:
        all_notes.append("the newest turn alone is over budget: kept its newest whole units")
    if tools:
        all_notes.append(f"tool schemas cost {tools} tokens of the budget")
    return StrategyResult(
        messages=tuple(kept),
        strategy=strategy,
        tokens=fit.tokens,
        history=history,
        counter=counter,
        kept=tuple(m.id for m in kept),
        dropped_ranges=dropped,
        fallback=fallback,
        failure_code=failure_code,
        notes=tuple(all_notes),
    )


def recent_start(cuts: Sequence[int], base_from: int, n: int, keep_recent: int) -> int:
    """Where the verbatim tail of the newest ``keep_recent`` messages starts.

    The cut moves back to the nearest safe point (keeping a little more) so no tool pair is
    split; when there is none after ``base_from`` it moves forward instead, but never so far
    that the tail is empty. Returns ``base_from`` when nothing older can be summarized.
    """
    target = max(base_from, n - keep_recent)
    if target <= base_from:
        return base_from
    i = bisect.bisect_right(cuts, target) - 1
    if i >= 0 and cuts[i] > base_from:
        return cuts[i]
    j = bisect.bisect_left(cuts, target)
    if j < len(cuts) and cuts[j] < n:
        return cuts[j]
    return base_from


def _newest_cut(history: Sequence[Message], prefix_len: int, cuts: Sequence[int]) -> int:
    """Where the newest unit starts, by ``cuts``."""
    k = bisect.bisect_left(cuts, len(history)) - 1
    return cuts[k] if k >= 0 else prefix_len


def _request_and_unit(
    history: Sequence[Message], prefix_len: int, cuts: Sequence[int], counter: TokenCounter
) -> int:
    """Tokens every window must hold after the prefix: the newest unit and its request."""
    if prefix_len >= len(history):
        return 0
    last = _newest_cut(history, prefix_len, cuts)
    return counter.count_messages(history[last:]) + request_tokens(
        history, prefix_len, last, counter
    )


def require_fit(
    history: Sequence[Message],
    prefix_len: int,
    cuts: Sequence[int],
    counter: TokenCounter,
    max_tokens: int,
    *,
    reserved: int = 0,
) -> None:
    """Raise :class:`BudgetError` when the prefix, the request and the newest unit cannot fit.

    Checked before any summarizer call: if this fails, no strategy can build a context (the
    sliding-window fallback needs exactly these). ``reserved`` (tool schemas, the answer's
    reserve) counts against ``max_tokens`` too, and the error's ``required`` includes it, so
    a retry at ``required`` fits.
    """
    prefix_tokens = counter.count_messages(history[:prefix_len])
    need = _request_and_unit(history, prefix_len, cuts, counter)
    if prefix_tokens + need + reserved > max_tokens:
        raise budget_error(max_tokens, prefix_tokens, need, reserved)


def summary_room(
    history: Sequence[Message],
    prefix_len: int,
    cuts: Sequence[int],
    counter: TokenCounter,
    max_tokens: int,
    placement: SummaryPlacement,
) -> int:
    """Most tokens a summary's text may take and still fit beside the prefix and newest unit.

    The newest turn's request counts too: the window keeps it next to the newest unit. Used
    to cap ``max_output_tokens`` and to reject a summary that could never be sent.
    """
    fixed = counter.count_messages(history[:prefix_len])
    fixed += _request_and_unit(history, prefix_len, cuts, counter)
    framing = summary_message_tokens("", placement, counter)
    return max_tokens - fixed - framing


@dataclass(frozen=True, slots=True)
class Assembly:
    """A built context and where its verbatim tail starts in the history.

    ``request`` is the index of the newest turn's opening user message when the window
    kept it apart from the tail (see :class:`WindowFit`); None otherwise.
    """

    messages: list[Message]
    tokens: int
    tail_start: int
    request: int | None = None

    def dropped_ranges(self, drop_from: int) -> tuple[tuple[int, int], ...]:
        """The ranges left out between ``drop_from`` (prefix or summary end) and the tail."""
        return gap_ranges(drop_from, self.request, self.tail_start)

    def kept_ids(self, history: Sequence[Message], prefix_len: int) -> tuple[str, ...]:
        """Ids of the history messages sent verbatim: prefix, request and tail."""
        return tuple(m.id for m in kept_items(history, prefix_len, self.request, self.tail_start))


def _tail_fit(
    history: Sequence[Message],
    *,
    summary: str | None,
    placement: SummaryPlacement,
    tail_from: int,
    counter: TokenCounter,
    max_tokens: int,
) -> WindowFit | None:
    """The window after the summary (or the prefix), or None when even the newest unit fails."""
    reserved = 0
    if summary is not None:
        reserved = summary_message_tokens(summary, placement, counter)
    try:
        fit = fit_window(
            history,
            max_tokens,
            counter,
            min_start=tail_from,
            reserved=reserved,
            # After a user-role summary the tail may start on any unit (the summary is the
            # user turn the context opens with), which uses the budget fully. Without one,
            # or after a system-role summary, keep whole turns so the first message after
            # the prefix stays a user message.
            whole_turns=summary is None or placement.role != "user",
            check_pairing=False,
        )
    except BudgetError:
        return None
    if fit.start >= len(history) and tail_from < len(history):
        return None
    return fit


def assemble(
    history: Sequence[Message],
    prefix_len: int,
    *,
    summary: str | None,
    placement: SummaryPlacement,
    summary_msg_id: str,
    tail_from: int,
    cuts: Sequence[int],
    counter: TokenCounter,
    max_tokens: int | None,
) -> Assembly | None:
    """``prefix + [summary] + history[tail_start:]`` with ``tail_start >= tail_from``.

    The tail is trimmed by :func:`fit_window` until the whole fits ``max_tokens``: by whole
    turns without a summary, by whole units after a user-role one, keeping the newest turn's
    request when the turn does not fit whole. Returns None when even the newest unit does
    not fit next to the prefix and the summary. With ``max_tokens=None`` nothing is trimmed.
    """
    n = len(history)
    prefix = list(history[:prefix_len])
    start, request = tail_from, None
    if max_tokens is not None:
        fit = _tail_fit(
            history,
            summary=summary,
            placement=placement,
            tail_from=tail_from,
            counter=counter,
            max_tokens=max_tokens,
        )
        if fit is None:
            return None
        start, request = fit.start, fit.request
    while True:
        tail = kept_items(history, 0, request, start)
        if summary is None:
            messages = prefix + tail
        else:
            messages = place_summary(
                prefix, summary, tail, placement=placement, message_id=summary_msg_id
            )
        tokens = counter.count_messages(messages)
        if max_tokens is None or tokens <= max_tokens:
            return Assembly(messages, tokens, start, request)
        # A counter that is not additive under merging: give up one more unit.
        k = bisect.bisect_right(cuts, start)
        if k >= len(cuts) or cuts[k] >= n:
            return None
        start = cuts[k]


def past_leading_results(history: Sequence[Message], start: int) -> int:
    """The first index from ``start`` on that is not a tool result: the results a view
    opens with answer calls before it (a memory reads from the message its checkpoint
    covers, which may be one), so no window may begin with them."""
    while start < len(history) and history[start].is_tool_result_only:
        start += 1
    return start


def trim_view(
    history: Sequence[Message],
    prefix_len: int,
    *,
    summary: str | None,
    placement: SummaryPlacement,
    summary_msg_id: str,
    tail_from: int,
    cuts: Sequence[int],
    counter: TokenCounter,
    max_tokens: int,
) -> tuple[Assembly, bool]:
    """The sliding-window fallback, on top of ``summary`` when it still fits.

    Returns the assembly and whether the summary was kept. Without room for the summary next
    to the newest unit, the summary is left out and the window runs over the whole history.
    :func:`require_fit` must have passed, so the plain window always fits.
    """
    attempts: list[tuple[str | None, int]] = [(summary, tail_from)] if summary is not None else []
    attempts.append((None, past_leading_results(history, prefix_len)))
    for text, floor in attempts:
        asm = assemble(
            history,
            prefix_len,
            summary=text,
            placement=placement,
            summary_msg_id=summary_msg_id,
            tail_from=floor,
            cuts=cuts,
            counter=counter,
            max_tokens=max_tokens,
        )
        if asm is not None:
            return asm, text is not None
    raise BudgetError(  # pragma: no cover - excluded by require_fit
        "the newest message does not fit the budget", budget=max_tokens
    )
