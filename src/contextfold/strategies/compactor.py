"""SummaryCompactor: the oldest turns past ``keep_recent_turns`` become one summary turn.

A turn is what :mod:`contextfold.turns` calls one: a user message that is not only tool
results, and everything up to the next one. The older turns, tool calls and results
included, go to the summarizer in one request; the context becomes the system prefix, one
user-voiced summary (``[Condensed summary of the earlier conversation]`` then the text),
and the recent turns verbatim. Dropped turns take their tool pairs with them, so no call or
result is orphaned.

Compared with the compactor this reproduces, it also:

* respects ``budget_chars`` (a character budget, the seed's free proxy for tokens): when the
  result is still over it, more old turns are dropped, then units of the newest turn, and if
  the summary itself does not fit it is left out (a fallback, reported);
* keeps the system prompt, and never returns an empty history: when not even the newest unit
  fits the budget, it raises :class:`~contextfold.errors.BudgetError` instead;
* checks pairing first: malformed input raises :class:`~contextfold.errors.PairingError`
  before any summarizer call;
* falls back instead of failing when the summarizer fails, and honours a cancel token
  (:class:`~contextfold.errors.CancelledError`) and a deadline (``timeout`` fallback);
* merges the summary into the next user message (provider-safe), so no two user messages
  stand in a row;
* reuses its own checkpoint: an earlier summary is updated, not re-summarized as a turn.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import BudgetError, CancelledError
from contextfold.framing import SummaryPlacement, span_summary_id
from contextfold.messages import Message
from contextfold.strategies._assembly import Assembly, assemble
from contextfold.strategies._common import (
    LoopGuard,
    char_size,
    check_option,
    deadline_from,
    message_chars,
)
from contextfold.strategies._plan import PlanState, open_plan
from contextfold.strategies.base import (
    PlanGenerator,
    StrategyResult,
    arun,
    run,
)
from contextfold.summarizers.base import (
    AsyncSummarizer,
    CancelToken,
    Summarizer,
    SummaryRequest,
    Usage,
)
from contextfold.tokens.base import TokenCounter
from contextfold.turns import is_turn_start

__all__ = ["COMPACTOR_PLACEMENT", "SummaryCompactor"]

COMPACTOR_PLACEMENT = SummaryPlacement(
    role="user",
    style="label",
    label="[Condensed summary of the earlier conversation]",
)


class SummaryCompactor:
    """Fold the turns older than the newest ``keep_recent_turns`` into one summary turn.

    Args:
        summarizer: writes the summary (sync or async).
        keep_recent_turns: turns kept verbatim (at least 1).
        system_prompt: the instruction given to the summarizer (passed as the request's
            ``instructions``); the summarizer's default prompt applies when None.
        budget_chars: the character budget of the result. Without one the compactor folds
            whenever there are more than ``keep_recent_turns`` turns; with one, only when the
            history is over it.
        deadline_s: seconds the summarizer may take; past it the strategy falls back.
        placement: the role and framing of the summary (a labelled user message by default).
        max_failed_compactions: after this many consecutive failed compactions, stop calling
            the summarizer and fall back (0 disables the guard).

    Raises:
        ValueError: a numeric option is out of range.
    """

    def __init__(
        self,
        summarizer: Summarizer | AsyncSummarizer,
        *,
        keep_recent_turns: int = 4,
        system_prompt: str | None = None,
        budget_chars: int | None = None,
        deadline_s: float | None = None,
        placement: SummaryPlacement | None = None,
        max_failed_compactions: int = 3,
    ) -> None:
        check_option("keep_recent_turns", keep_recent_turns, 1)
        if budget_chars is not None:
            check_option("budget_chars", budget_chars, 1, budget=True)
        check_option("max_failed_compactions", max_failed_compactions, 0)
        self.summarizer = summarizer
        self.keep_recent_turns = keep_recent_turns
        self.system_prompt = system_prompt
        self.budget_chars = budget_chars
        self.deadline_s = deadline_s
        self.placement = placement if placement is not None else COMPACTOR_PLACEMENT
        self.guard = LoopGuard(max_failed_compactions)

    @property
    def name(self) -> str:
        """``"compactor"``."""
        return "compactor"

    def __repr__(self) -> str:
        return (
            f"SummaryCompactor(keep_recent_turns={self.keep_recent_turns}, "
            f"budget_chars={self.budget_chars})"
        )

    def plan(
        self,
        messages: Sequence[Message],
        /,
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None = None,
    ) -> PlanGenerator:
        """Build the context with the instance's settings; yields at most one call.

        Raises:
            PairingError: the history breaks the tool-pair invariant (before any call).
            BudgetError: with ``budget_chars``, the prefix and the newest message exceed it.
        """
        bound = _Bound(self, None, None, None)  # the instance's own limits
        return (yield from bound.plan(messages, counter=counter, checkpoint=checkpoint))

    def compact(
        self,
        messages: Sequence[Message],
        *,
        budget_chars: int | None = None,
        cancel: CancelToken | None = None,
        deadline_s: float | None = None,
        counter: TokenCounter | None = None,
        checkpoint: CheckpointRecord | None = None,
    ) -> StrategyResult:
        """Compact synchronously with per-call limits (the seed's ``compact``).

        Args:
            budget_chars: overrides the instance's character budget for this call.
            cancel: a token; when cancelled, :class:`CancelledError` is raised and nothing
                is returned or stored.
            deadline_s: overrides the instance's deadline for this call.

        Raises:
            CancelledError: ``cancel`` was triggered before or during the summary call.
        """
        bound = _Bound(self, budget_chars, cancel, deadline_s)
        return run(bound, messages, counter=counter, checkpoint=checkpoint)

    async def acompact(
        self,
        messages: Sequence[Message],
        *,
        budget_chars: int | None = None,
        cancel: CancelToken | None = None,
        deadline_s: float | None = None,
        counter: TokenCounter | None = None,
        checkpoint: CheckpointRecord | None = None,
    ) -> StrategyResult:
        """Async form of :meth:`compact`."""
        bound = _Bound(self, budget_chars, cancel, deadline_s)
        return await arun(bound, messages, counter=counter, checkpoint=checkpoint)

    # -- the planner ----------------------------------------------------------------------

    def _plan(
        self,
        messages: Sequence[Message],
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None,
        budget_chars: int | None,
        cancel: CancelToken | None,
        deadline_s: float | None,
    ) -> PlanGenerator:
        st = open_plan(
            messages, checkpoint, name=self.name, counter=counter, placement=self.placement
        )
        history, p, n, cuts = messages, st.prefix_len, len(messages), st.cuts
        prior, base_from, prior_text = st.prior, st.base_from, st.prior_text
        prefix_chars = char_size(history[:p])

        if budget_chars is not None and p < n:
            newest = cuts[bisect.bisect_left(cuts, n) - 1] if len(cuts) > 1 else p
            need = prefix_chars + char_size(history[newest:])
            if need > budget_chars:
                raise BudgetError(
                    f"the system prefix and the newest message need {need} characters, "
                    f"over the budget of {budget_chars}",
                    budget=budget_chars,
                    required=need,
                )

        view = st.view()
        bounds = _turn_starts(history, base_from)
        nturns = len(bounds)
        fits = budget_chars is None or char_size(view.messages) <= budget_chars
        if (budget_chars is None and nturns <= self.keep_recent_turns) or (
            budget_chars is not None and fits
        ):
            self.guard.succeeded()
            return st.unchanged(
                view, "reused the checkpoint" if prior is not None else "nothing to compact"
            )

        ctx = _Ctx(st, budget_chars, prefix_chars)

        def fallback(reason: str, code: str | None, usage: Usage, calls: int) -> StrategyResult:
            recent = bounds[max(0, nturns - self.keep_recent_turns)] if nturns else base_from
            asm, with_summary = ctx.fit(prior_text, st.prior_sid, base_from, recent)
            return st.trimmed_result(
                asm,
                with_summary,
                fallback=reason,
                failure_code=code,
                usage=usage,
                calls=calls,
                notes=[f"fell back: {reason}; dropped old turns without a summary"],
            )

        keep = min(self.keep_recent_turns, nturns - 1)
        if keep < 1:
            # A single turn over the character budget: nothing older to fold.
            return fallback(
                "a single turn is over the budget: nothing older to fold", None, Usage(), 0
            )
        k = bounds[nturns - keep]
        if budget_chars is not None:
            # Keep fewer recent turns when they alone are over the budget: better summarized
            # than dropped.
            while keep > 1 and prefix_chars + char_size(history[k:]) > budget_chars:
                keep -= 1
                k = bounds[nturns - keep]
        if self.guard.tripped:
            return fallback(self.guard.describe(), None, Usage(), 0)
        if cancel is not None and cancel.cancelled:
            raise CancelledError(cancel.reason or "cancelled")

        request = SummaryRequest(
            tuple(history[base_from:k]),
            previous_summary=prior_text,
            kind="update" if prior_text is not None else "summary",
            instructions=self.system_prompt,
            deadline=deadline_from(deadline_s),
            cancel=cancel,
        )
        result, usage, problem = yield from st.summarize(self.summarizer, request, end=k)
        if cancel is not None and cancel.cancelled:
            raise CancelledError(cancel.reason or "cancelled")
        if problem is not None:
            self.guard.failed()
            return fallback(problem[0], problem[1], usage, 1)

        text = result.text.strip()
        sid = span_summary_id(history, p, k, st.name)
        asm, with_summary = ctx.fit(text, sid, k, k)
        if not with_summary:
            self.guard.failed()
            reason = "the summary does not fit the character budget next to the newest turn"
            return st.result(
                asm,
                fallback=reason,
                covered_end=None,
                usage=usage,
                calls=1,
                notes=[f"fell back: {reason}"],
            )
        notes = [f"folded {nturns - keep} turns ({k - base_from} messages) into one summary"]
        if asm.tail_start > k:
            self.guard.failed()
            notes.append(
                f"over the character budget: dropped {asm.tail_start - k} more messages "
                "from the oldest kept turns"
            )
        else:
            self.guard.succeeded()
        record = st.record(
            text,
            k,
            asm,
            model=result.model,
            prompt_hash=_str_or_none(result.details.get("prompt_hash")),
            tokens_before=view.tokens,
            usage=result.usage,
            details={
                "turns": nturns - keep,
                "covered_messages": k - p,
                "chars_after": char_size(asm.messages),
            },
        )
        return st.result(
            asm,
            covered_end=k,
            checkpoint=record,
            usage=usage,
            calls=1,
            notes=notes,
        )


@dataclass(frozen=True)
class _Ctx:
    """What fitting under the character budget needs."""

    plan: PlanState
    budget_chars: int | None
    prefix_chars: int

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
        turn_starts = set(_turn_starts(history, floor))
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
                if i in turn_starts:
                    best_turn = i
        if best_turn is not None:
            return best_turn
        return best_unit


def _turn_starts(history: Sequence[Message], base_from: int) -> list[int]:
    """Start indices of the turns at or after ``base_from`` (``base_from`` counts as one)."""
    starts = [i for i in range(base_from + 1, len(history)) if is_turn_start(history[i])]
    return [base_from, *starts] if base_from < len(history) else starts


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


class _Bound:
    """The compactor with per-call limits, shaped as a strategy for the drivers."""

    def __init__(
        self,
        compactor: SummaryCompactor,
        budget_chars: int | None,
        cancel: CancelToken | None,
        deadline_s: float | None,
    ) -> None:
        self.compactor = compactor
        self.budget_chars = budget_chars if budget_chars is not None else compactor.budget_chars
        self.cancel = cancel
        self.deadline_s = deadline_s if deadline_s is not None else compactor.deadline_s

    @property
    def name(self) -> str:
        return self.compactor.name

    def plan(
        self,
        messages: Sequence[Message],
        /,
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None = None,
    ) -> PlanGenerator:
        return (
            yield from self.compactor._plan(
                messages,
                counter=counter,
                checkpoint=checkpoint,
                budget_chars=self.budget_chars,
                cancel=self.cancel,
                deadline_s=self.deadline_s,
            )
        )
