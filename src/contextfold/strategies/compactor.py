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

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import BudgetError, CancelledError
from contextfold.framing import SummaryPlacement, span_summary_id
from contextfold.messages import Message
from contextfold.strategies._chars import CharFit, char_size, turn_starts
from contextfold.strategies._common import LoopGuard, deadline_from, reported_prompt_hash
from contextfold.strategies._config import FrozenConfig, check_option
from contextfold.strategies._plan import PlanState, open_plan
from contextfold.strategies.base import PlanGenerator, StrategyResult, StrategyState
from contextfold.strategies.run import arun, run
from contextfold.summarizers.base import (
    AsyncSummarizer,
    CancelToken,
    SummarizationResult,
    Summarizer,
    SummaryRequest,
    Usage,
)
from contextfold.tokens.base import TokenCounter

__all__ = ["COMPACTOR_PLACEMENT", "SummaryCompactor"]

COMPACTOR_PLACEMENT = SummaryPlacement(
    role="user",
    style="label",
    label="[Condensed summary of the earlier conversation]",
)


class SummaryCompactor(FrozenConfig):
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
        ConfigError: an option is out of range or of the wrong type.
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
            check_option("budget_chars", budget_chars, 1)
        check_option("max_failed_compactions", max_failed_compactions, 0)
        self.summarizer = summarizer
        self.keep_recent_turns = keep_recent_turns
        self.system_prompt = system_prompt
        self.budget_chars = budget_chars
        self.deadline_s = deadline_s
        self.placement = placement if placement is not None else COMPACTOR_PLACEMENT
        self.max_failed_compactions = max_failed_compactions
        self._freeze()

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
        state: StrategyState | None = None,
    ) -> PlanGenerator:
        """Build the context with the instance's settings; yields at most one call.

        Raises:
            PairingError: the history breaks the tool-pair invariant (before any call).
            BudgetError: with ``budget_chars``, the prefix and the newest message exceed it.
        """
        bound = _Bound(self, None, None, None)  # the instance's own limits
        return (
            yield from bound.plan(messages, counter=counter, checkpoint=checkpoint, state=state)
        )

    def compact(
        self,
        messages: Sequence[Message],
        *,
        budget_chars: int | None = None,
        cancel: CancelToken | None = None,
        deadline_s: float | None = None,
        counter: TokenCounter | None = None,
        checkpoint: CheckpointRecord | None = None,
        state: StrategyState | None = None,
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
        return run(bound, messages, counter=counter, checkpoint=checkpoint, state=state)

    async def acompact(
        self,
        messages: Sequence[Message],
        *,
        budget_chars: int | None = None,
        cancel: CancelToken | None = None,
        deadline_s: float | None = None,
        counter: TokenCounter | None = None,
        checkpoint: CheckpointRecord | None = None,
        state: StrategyState | None = None,
    ) -> StrategyResult:
        """Async form of :meth:`compact`."""
        bound = _Bound(self, budget_chars, cancel, deadline_s)
        return await arun(bound, messages, counter=counter, checkpoint=checkpoint, state=state)

    # -- the planner ----------------------------------------------------------------------

    def _plan(
        self,
        messages: Sequence[Message],
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None,
        state: StrategyState | None,
        budget_chars: int | None,
        cancel: CancelToken | None,
        deadline_s: float | None,
    ) -> PlanGenerator:
        failures = state.failed_compactions if state is not None else 0
        st = open_plan(
            messages,
            checkpoint,
            name=self.name,
            counter=counter,
            placement=self.placement,
            guard=LoopGuard(self.max_failed_compactions, failures),
        )
        history, base_from = messages, st.base_from
        prefix_chars = char_size(history[: st.prefix_len])
        _require_fit(st, budget_chars, prefix_chars)
        view = st.view()
        bounds = turn_starts(history, base_from)
        nturns = len(bounds)
        fits = budget_chars is None or char_size(view.messages) <= budget_chars
        if (budget_chars is None and nturns <= self.keep_recent_turns) or (
            budget_chars is not None and fits
        ):
            st.guard.succeeded()
            return st.unchanged(
                view, "reused the checkpoint" if st.prior is not None else "nothing to compact"
            )
        recent = bounds[max(0, nturns - self.keep_recent_turns)] if nturns else base_from
        ctx = CharFit(st, budget_chars, prefix_chars, recent)
        keep = min(self.keep_recent_turns, nturns - 1)
        if keep < 1:
            # A single turn over the character budget: nothing older to fold.
            return ctx.fallback("a single turn is over the budget: nothing older to fold", None)
        keep, k = _recent_cut(ctx, bounds, keep)
        if st.guard.tripped:
            return ctx.fallback(st.guard.describe(), None)
        _check_cancel(cancel)
        request = SummaryRequest(
            tuple(history[base_from:k]),
            previous_summary=st.prior_text,
            kind="update" if st.prior_text is not None else "summary",
            instructions=self.system_prompt,
            deadline=deadline_from(deadline_s),
            cancel=cancel,
        )
        result, usage, problem = yield from st.summarize(self.summarizer, request, end=k)
        _check_cancel(cancel)
        if problem is not None:
            st.guard.failed()
            return ctx.fallback(problem[0], problem[1], usage, 1)
        return _fitted(ctx, result, usage, k, nturns - keep, view.tokens)


def _require_fit(st: PlanState, budget_chars: int | None, prefix_chars: int) -> None:
    """Raise :class:`BudgetError` when the prefix and the newest unit exceed the budget."""
    history, p, cuts, n = st.history, st.prefix_len, st.cuts, len(st.history)
    if budget_chars is None or p >= n:
        return
    newest = cuts[bisect.bisect_left(cuts, n) - 1] if len(cuts) > 1 else p
    need = prefix_chars + char_size(history[newest:])
    if need > budget_chars:
        raise BudgetError(
            f"the system prefix and the newest message need {need} characters, "
            f"over the budget of {budget_chars}",
            budget=budget_chars,
            required=need,
        )


def _recent_cut(ctx: CharFit, bounds: Sequence[int], keep: int) -> tuple[int, int]:
    """How many recent turns stay verbatim, and where they start.

    Fewer recent turns are kept when they alone are over the budget: better summarized than
    dropped.
    """
    history, budget = ctx.plan.history, ctx.budget_chars
    k = bounds[len(bounds) - keep]
    while budget is not None and keep > 1 and ctx.prefix_chars + char_size(history[k:]) > budget:
        keep -= 1
        k = bounds[len(bounds) - keep]
    return keep, k


def _check_cancel(cancel: CancelToken | None) -> None:
    if cancel is not None and cancel.cancelled:
        raise CancelledError(cancel.reason or "cancelled")


def _fitted(
    ctx: CharFit, result: SummarizationResult, usage: Usage, k: int, turns: int, before: int
) -> StrategyResult:
    """The result for a written summary of ``turns`` turns, up to ``k``: fitted, recorded."""
    st = ctx.plan
    p = st.prefix_len
    text = result.text.strip()
    sid = span_summary_id(st.history, p, k, st.name)
    asm, with_summary = ctx.fit(text, sid, k, k)
    if not with_summary:
        st.guard.failed()
        reason = "the summary does not fit the character budget next to the newest turn"
        return st.result(
            asm,
            fallback=reason,
            covered_end=None,
            usage=usage,
            calls=1,
            notes=[f"fell back: {reason}"],
        )
    notes = [f"folded {turns} turns ({k - st.base_from} messages) into one summary"]
    if asm.tail_start > k:
        st.guard.failed()
        notes.append(
            f"over the character budget: dropped {asm.tail_start - k} more messages "
            "from the oldest kept turns"
        )
    else:
        st.guard.succeeded()
    record = st.record(
        text,
        k,
        asm,
        model=result.model,
        prompt_hash=reported_prompt_hash(result.details),
        tokens_before=before,
        usage=result.usage,
        details={
            "turns": turns,
            "covered_messages": k - p,
            "chars_after": char_size(asm.messages),
        },
    )
    return st.result(asm, covered_end=k, checkpoint=record, usage=usage, calls=1, notes=notes)


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
        state: StrategyState | None = None,
    ) -> PlanGenerator:
        return (
            yield from self.compactor._plan(
                messages,
                counter=counter,
                checkpoint=checkpoint,
                state=state,
                budget_chars=self.budget_chars,
                cancel=self.cancel,
                deadline_s=self.deadline_s,
            )
        )
