"""The sliding window: keep the system prefix and the newest whole turns that fit.

This is the strategy every other one falls back to, so it has to be cheap, exact and never
wrong about tool pairs:

* The leading system and developer messages are always kept, in order.
* After them come the newest *whole turns* that fit the budget. When even the newest turn is
  too big, the longest suffix of it made of whole units is kept instead: a tool call is never
  separated from its results (parallel calls and Anthropic's results-in-a-user-message
  included), and the window never starts on a tool result.
* When the prefix alone, or the prefix plus the newest unit, cannot fit, :class:`BudgetError`
  says so, with the budget and the tokens that would be needed.

The cost of a build does not grow with the length of the history: the window is found by
walking back from the newest message and stops as soon as the budget is spent. The part that
is left out is never scanned, counted or validated; it is recorded as an index range
(``StrategyResult.dropped_ranges``) and ``tokens_before`` stays lazy. With the per-message count
cache, a steady-state build over a million messages costs what it costs over a thousand.

:func:`fit_window` is the reusable core: summarizing strategies call it to fit the recent tail
after a summary, and for their fallback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import BudgetError, PairingError
from contextfold.messages import Message
from contextfold.strategies._config import FrozenConfig, ToolBudget, check_option
from contextfold.strategies.base import PlanGenerator, StrategyResult, StrategyState
from contextfold.tokens.base import BaseCounter, TokenCounter
from contextfold.turns import prefix_length

__all__ = ["SlidingWindow", "WindowFit", "fit_window", "window_result"]


@dataclass(frozen=True, slots=True)
class WindowFit:
    """Where the window falls in a history: keep ``history[:prefix_end] + history[start:]``.

    Attributes:
        prefix_end: number of leading system/developer messages (always kept).
        start: index of the first message of the kept tail (``len(history)`` when the tail is
            empty). Everything in ``history[prefix_end:start]`` is left out.
        prefix_tokens: tokens of the prefix.
        tail_tokens: tokens of the kept tail.
        reserved: the tokens the caller set aside (tool schemas, a summary, the answer).
        split_turn: True when the newest turn did not fit whole and only a suffix of it made
            of whole units was kept.
    """

    prefix_end: int
    start: int
    prefix_tokens: int
    tail_tokens: int
    reserved: int = 0
    split_turn: bool = False

    @property
    def tokens(self) -> int:
        """Tokens of the kept messages (prefix and tail; ``reserved`` not included)."""
        return self.prefix_tokens + self.tail_tokens

    def messages(self, history: Sequence[Message]) -> list[Message]:
        """The kept messages of ``history``: prefix then tail."""
        return [*history[: self.prefix_end], *history[self.start :]]


# Roles whose message, carrying no tool result, must not stand between a call and its result.
_BREAKS_PAIRS = frozenset({"user", "system", "developer"})


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
    """Find the newest pair-safe tail of ``messages`` that fits ``budget`` with the prefix.

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
            False, keep as many whole units as fit, which may start the tail on an assistant
            message (what :func:`contextfold.transforms.trim_to_token_budget` does).
        check_pairing: validate the tool pairing of the kept tail (only the kept part is
            checked, so the cost stays bounded by the budget).

    Returns:
        Where the window falls; see :class:`WindowFit`.

    Raises:
        BudgetError: the prefix (plus ``reserved``) alone exceeds the budget, or the prefix
            plus the newest indivisible unit does. ``required`` is the smallest budget that
            would work.
        PairingError: the part that would be sent has an orphaned tool result, a call without
            its result, or a duplicated id; the error names the message's index in
            ``messages``.
    """
    n = len(messages)
    prefix_end = prefix_length(messages)
    floor = prefix_end if min_start is None else max(prefix_end, min(min_start, n))
    prefix_tokens = counter.count_messages(messages[:prefix_end])
    fixed = prefix_tokens + reserved
    if fixed > budget:
        extra = f" plus {reserved} reserved" if reserved else ""
        raise BudgetError(
            f"the leading system/developer messages need {prefix_tokens} tokens{extra}, "
            f"over the budget of {budget}",
            budget=budget,
            required=fixed,
        )

    count = counter.count_message
    # With a BaseCounter the count sits in the message's own cache: read it inline, and call
    # the counter only on a miss (this loop is the whole cost of a steady build).
    inline = type(counter).count_message is BaseCounter.count_message
    cache_key = counter.cache_key if inline else None
    room = budget - fixed
    tail = 0
    # Results seen in the tail whose call has not been seen yet (walking backwards), with
    # the index of the message carrying them: while this is non-empty, cutting is unsafe.
    pending: dict[str, int] = {}
    best_turn = n
    best_turn_tokens = 0
    best_unit = n
    best_unit_tokens = 0
    over = False
    # The first pairing fault met on the way back (the newest one), checked against the
    # final start below: only faults inside the part that is sent matter. Folding the check
    # into this walk saves a second pass over the window on every build.
    fault: tuple[int, str, str] | None = None
    i = n - 1
    while i >= floor:
        m = messages[i]
        cost = m._token_cache.get(cache_key) if cache_key is not None else None
        if cost is None:
            cost = count(m)
        if tail + cost > room:
            over = True
            break
        tail += cost
        # Inlined _walk and is_turn_start: this loop is the whole cost of a build.
        results_only = bool(m.parts)
        has_results = False
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
                    cid = part.id  # type: ignore[union-attr]
                    if pending.pop(cid, None) is None and fault is None:
                        fault = (i, cid, f"tool call {cid!r} (message {i}) has no result")
        if pending:
            if fault is None and not has_results and m.role in _BREAKS_PAIRS:
                cid, at = max(pending.items(), key=lambda kv: kv[1])
                fault = (
                    i,
                    cid,
                    f"tool result for {cid!r} (message {at}) is cut off from its "
                    f"call by message {i}",
                )
        else:
            best_unit, best_unit_tokens = i, tail
            if i == floor or (m.role == "user" and not results_only):
                best_turn, best_turn_tokens = i, tail
        i -= 1

    if not over and pending:
        # The walk reached the floor with a result still unmatched: that result would be
        # sent without its call.
        call_id, at = max(pending.items(), key=lambda kv: kv[1])
        raise PairingError(
            f"tool result for {call_id!r} at message {at} has no matching call",
            index=at,
            call_id=call_id,
        )

    if best_turn < n and whole_turns:
        start, tail_tokens, split = best_turn, best_turn_tokens, False
    elif best_unit < n:
        start, tail_tokens, split = best_unit, best_unit_tokens, best_unit != best_turn
    elif n == floor:
        start, tail_tokens, split = n, 0, False
    else:
        needed = _newest_unit_tokens(messages, floor, counter)
        raise BudgetError(
            f"the leading system/developer messages ({prefix_tokens} tokens"
            + (f", plus {reserved} reserved" if reserved else "")
            + f") and the newest message{'s' if needed[1] > 1 else ''} that must be sent "
            f"together ({needed[0]} tokens) do not fit the budget of {budget}",
            budget=budget,
            required=fixed + needed[0],
        )

    if check_pairing and fault is not None and fault[0] >= start:
        at, call_id, what = fault
        raise PairingError(
            f"in the window starting at message {start}: {what}",
            index=at,
            call_id=call_id,
        )
    return WindowFit(prefix_end, start, prefix_tokens, tail_tokens, reserved, split)


def _walk(message: Message, pending: dict[str, int], index: int = -1) -> None:
    """Update the unmatched-results map with one message, walking backwards."""
    for part in message.parts:
        kind = part.kind
        if kind == "tool_call":
            pending.pop(part.id, None)  # type: ignore[union-attr]
        elif kind == "tool_result":
            pending[part.call_id] = index  # type: ignore[union-attr]


def _newest_unit_tokens(
    messages: Sequence[Message], floor: int, counter: TokenCounter
) -> tuple[int, int]:
    """Tokens and length of the newest indivisible unit (for the error message)."""
    pending: dict[str, int] = {}
    tokens = 0
    i = len(messages) - 1
    while i >= floor:
        m = messages[i]
        tokens += counter.count_message(m)
        _walk(m, pending, i)
        if not pending:
            break
        i -= 1
    if pending:
        call_id, at = max(pending.items(), key=lambda kv: kv[1])
        raise PairingError(
            f"tool result for {call_id!r} at message {at} has no matching call",
            index=at,
            call_id=call_id,
        )
    return tokens, len(messages) - i


class SlidingWindow(ToolBudget, FrozenConfig):
    """Keep the system prefix and the newest whole turns that fit ``max_tokens``.

    A sans-I/O strategy whose :meth:`plan` never yields: it needs no summarizer. It drops
    old turns and never summarizes them, so a prior checkpoint passed to :meth:`plan` is
    ignored (the window is always built from the messages it is given).

    Args:
        max_tokens: the budget for everything sent: messages, tool schemas and the reserve.
        tools: the tool schemas sent with each request; they count against the budget.
        reserve_tokens: tokens kept free, for example for the model's answer.

    Raises:
        ConfigError: an option is out of range or of the wrong type.

    Example:
        >>> from contextfold.strategies.base import run
        >>> ctx = run(SlidingWindow(8000), history)  # doctest: +SKIP
    """

    def __init__(
        self,
        max_tokens: int,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        reserve_tokens: int = 0,
    ) -> None:
        check_option("max_tokens", max_tokens, 1)
        self.max_tokens = max_tokens
        self._init_tools(tools, reserve_tokens)
        self._freeze()

    @property
    def name(self) -> str:
        """``"sliding"``."""
        return "sliding"

    def __repr__(self) -> str:
        return (
            f"SlidingWindow(max_tokens={self.max_tokens}, tools={len(self.tools)}, "
            f"reserve_tokens={self.reserve_tokens})"
        )

    def window_budget(self, counter: TokenCounter, /) -> int:
        """Tokens of messages a window can hold: ``max_tokens`` less schemas and reserve."""
        return self.max_tokens - self.tool_tokens(counter) - self.reserve_tokens

    def fit(self, messages: Sequence[Message], *, counter: TokenCounter) -> StrategyResult:
        """Build the window directly (what :meth:`plan` returns, without a driver)."""
        tools = self.tool_tokens(counter)
        fit = fit_window(messages, self.max_tokens, counter, reserved=tools + self.reserve_tokens)
        return window_result(messages, fit, strategy=self.name, counter=counter, tools=tools)

    def plan(
        self,
        messages: Sequence[Message],
        /,
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None = None,
        state: StrategyState | None = None,
    ) -> PlanGenerator:
        """Return the window; never yields. ``checkpoint`` is ignored (see the class doc).

        The window keeps no per-conversation state, so ``state`` is not used either.
        """
        return self.fit(messages, counter=counter)
        yield  # pragma: no cover - makes this a generator


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
    dropped = ((fit.prefix_end, fit.start),) if fit.start > fit.prefix_end else ()
    all_notes = list(notes)
    if dropped:
        all_notes.append(f"dropped {fit.start - fit.prefix_end} older messages to fit the budget")
    if fit.split_turn:
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
