"""Character budgets: the measure of the ``SummaryCompactor`` seed, a free proxy for tokens.

:func:`message_chars` measures a message, :class:`CharFit` fits ``prefix + [summary] + tail``
under a character budget the way the sliding window fits a token budget: whole turns first,
then whole units, never a split tool pair.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from contextfold.strategies._assembly import Assembly, assemble
from contextfold.strategies._plan import PlanState
from contextfold.strategies.base import StrategyResult
from contextfold.turns import is_turn_start
from contextfold.usage import Usage

__all__ = ["CharFit", "char_size", "message_chars", "turn_starts"]


def message_chars(message: Message) -> int:
    """Characters a message carries: text, thinking, tool arguments and results, names.

    The character measure of the ``SummaryCompactor`` seed: a free proxy for tokens.
    """
    total = len(message.name or "")
    for part in message.parts:
        if isinstance(part, TextPart):
            total += len(part.text)
        elif isinstance(part, ThinkingPart):
            total += len(part.text) + len(part.data or "")
        elif isinstance(part, ToolCallPart):
            total += len(part.name) + len(part.arguments)
        elif isinstance(part, ToolResultPart):
            total += len(part.text) + len(part.call_id)
    return total


def char_size(messages: Sequence[Message]) -> int:
    """Sum of :func:`message_chars` over ``messages``."""
    return sum(message_chars(m) for m in messages)


def turn_starts(history: Sequence[Message], base_from: int) -> list[int]:
    """Start indices of the turns at or after ``base_from`` (``base_from`` counts as one)."""
    starts = [i for i in range(base_from + 1, len(history)) if is_turn_start(history[i])]
    return [base_from, *starts] if base_from < len(history) else starts


@dataclass(frozen=True)
class CharFit:
    """Fits ``prefix + [summary] + tail`` under a character budget (the compactor's measure)."""

    plan: PlanState
    budget_chars: int | None
    prefix_chars: int
    recent: int  # where the newest ``keep_recent_turns`` turns start

    def fallback(
        self, reason: str, code: str | None, usage: Usage | None = None, calls: int = 0
    ) -> StrategyResult:
        """Old turns dropped without a summary (the prior one kept when it fits), saying why."""
        st = self.plan
        asm, with_summary = self.fit(st.prior_text, st.prior_sid, st.base_from, self.recent)
        return st.trimmed_result(
            asm,
            with_summary,
            fallback=reason,
            failure_code=code,
            usage=usage if usage is not None else Usage(),
            calls=calls,
            notes=[f"fell back: {reason}; dropped old turns without a summary"],
        )

    def fit(
        self, summary: str | None, sid: str, tail_from: int, preferred: int
    ) -> tuple[Assembly, bool]:
        """``prefix + [summary] + tail`` within the character budget.

        The tail starts at ``preferred`` when it fits; otherwise whole turns, then units,
        are dropped from its old end. When even the newest unit does not fit next to the
        summary, the summary is left out (the second value is False).
        """
        st = self.plan
        p = st.prefix_len
        chosen: tuple[str | None, int] | None = None
        for text in (summary, None) if summary is not None else (None,):
            floor = tail_from if text is not None else p
            wanted = max(preferred, floor) if text is not None else preferred
            fixed = self.prefix_chars
            if text is not None:
                fixed += len(st.placement.frame(text))
            start = self._fit_start(wanted, floor, fixed)
            if start is not None:
                chosen = (text, start)
                break
        if chosen is None:
            # ``_plan`` checked that the prefix and the newest unit fit.
            cuts = st.cuts
            last = cuts[bisect.bisect_left(cuts, len(st.history)) - 1] if len(cuts) > 1 else p
            chosen = (None, last)
        text, start = chosen
        asm = assemble(
            st.history,
            p,
            summary=text,
            placement=st.placement,
            summary_msg_id=sid,
            tail_from=start,
            cuts=st.cuts,
            counter=st.counter,
            max_tokens=None,
        )
        assert asm is not None
        return asm, text is not None

    def _fit_start(self, start: int, floor: int, fixed: int) -> int | None:
        """Earliest tail start ``>= start`` (turn starts first, then units) within budget."""
        history = self.plan.history
        n = len(history)
        budget = self.budget_chars
        if budget is None:
            return start
        room = budget - fixed
        if room < 0:
            return None
        if char_size(history[start:]) <= room:
            return start
        # Walk back from the newest message, remembering the earliest turn start and the
        # earliest unit cut whose suffix fits.
        starts = set(turn_starts(history, floor))
        cut_set = set(self.plan.cuts)
        total = 0
        best_turn: int | None = None
        best_unit: int | None = None
        for i in range(n - 1, max(start, floor) - 1, -1):
            total += message_chars(history[i])
            if total > room:
                break
            if i in cut_set:
                best_unit = i
                if i in starts:
                    best_turn = i
        if best_turn is not None:
            return best_turn
        return best_unit
