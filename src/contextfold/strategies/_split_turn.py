"""The span a checkpoint folds, when the newest turn may have to be split.

When the newest turn alone is bigger than the tail budget, the verbatim tail starts inside
it at a safe cut; the turn's first part is then condensed by a call of its own
(``kind="turn_prefix"``) and joined after the main checkpoint, so the kept suffix still makes
sense. :func:`split_span` finds the span and shares the output room between the two calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from contextfold.framing import summary_message_tokens
from contextfold.strategies._plan import PlanState
from contextfold.turns import is_turn_start

__all__ = ["SplitSpan", "joined_text", "split_span"]

_TURN_HEADER = "Context of the current turn (its first part was condensed):"
_SPLIT_JOIN = f"\n\n---\n\n{_TURN_HEADER}\n\n"
_TURN_HEAD = f"{_TURN_HEADER}\n\n"
_MIN_OUTPUT = 64


@dataclass(frozen=True, slots=True)
class SplitSpan:
    """What one compaction folds: up to ``end``, a split turn's first part included."""

    end: int  # where the verbatim tail starts
    turn_start: int  # where the newest turn starts (== end unless the turn is split)
    main_cap: int  # output cap of the checkpoint call
    turn_cap: int  # output cap of the split-turn call

    @property
    def split(self) -> bool:
        return self.turn_start < self.end


def split_span(
    st: PlanState, k: int, budget: int, prefix_tokens: int, max_output: int | None
) -> SplitSpan:
    """The span to fold up to ``k``, and the output caps that leave room for the tail."""
    history, n = st.history, len(st.history)
    turn_start = k
    if k < n and not is_turn_start(history[k]):
        t = k - 1
        while t >= st.base_from and not is_turn_start(history[t]):
            t -= 1
        if t >= st.base_from:
            turn_start = t
    tail_tokens = st.counter.count_messages(history[k:])
    frame = summary_message_tokens("", st.placement, st.counter)
    cap = max(_MIN_OUTPUT, budget - prefix_tokens - tail_tokens - frame)
    if max_output is not None:
        cap = min(cap, max_output)
    main_cap, turn_cap = cap, 0
    # The joined text adds a header (and a separator): the caps leave room for it, so the
    # checkpoint is no longer than the room it was given.
    if turn_start < k and turn_start == st.base_from:
        # the whole span is the first part of the newest turn
        turn_cap = max(_MIN_OUTPUT // 2, cap - st.counter.count_text(_TURN_HEAD))
    elif turn_start < k:
        room = cap - st.counter.count_text(_SPLIT_JOIN)
        turn_cap = max(_MIN_OUTPUT // 2, room // 3)
        main_cap = max(_MIN_OUTPUT // 2, room - turn_cap)
    return SplitSpan(k, turn_start, main_cap, turn_cap)


def joined_text(main_text: str | None, turn_text: str | None) -> str:
    """The checkpoint text: the main summary, then a split turn's condensed first part."""
    if turn_text is None:
        return main_text or ""
    if main_text:
        return f"{main_text}{_SPLIT_JOIN}{turn_text}"
    return f"{_TURN_HEAD}{turn_text}"
