"""Pipeline: run strategies in order, cheapest first, until the context fits.

``Pipeline([PruneToolOutputs(), Hybrid(...)], max_tokens=8000)`` first clears old tool
outputs; it measures the result and calls the summarizing stage only if the context is still
over budget. Each stage works on the previous stage's output. The result is reported
against the *original* history: dropped and summarized ranges are mapped back to the
caller's indices (pruning keeps positions, so this is exact), notes are prefixed with the
stage name, usage and call counts are added up, and the newest checkpoint is returned.

A checkpoint handed to the pipeline belongs to the stage whose name matches its
``strategy``. Until that stage runs, the pipeline measures (and, if it stops early, sends)
``prefix + that summary + newer messages``, so a summary is never lost because an earlier
stage already made the rest fit.

The pipeline's ``tools`` and ``reserve_tokens`` count against its ``max_tokens``. A stage
that counts tools itself but has none of its own (or no reserve of its own) runs as a copy
carrying the pipeline's (strategies are immutable, so a copy shares nothing that changes), so
every stage leaves room for the schemas the request will carry; ``Pipeline.stages`` holds the
stages as they run. A stage with schemas of its own keeps them.

Each stage keeps its own per-conversation state: the pipeline's
:class:`~contextfold.strategies.StrategyState` holds one per stage, in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConfigError
from contextfold.framing import SummaryPlacement, span_summary_id
from contextfold.messages import Message
from contextfold.strategies._assembly import assemble, require_fit
from contextfold.strategies._common import locate_checkpoint, prepare_from, ranges_of
from contextfold.strategies._config import ToolBudget, check_option
from contextfold.strategies._plan import BudgetedStrategy
from contextfold.strategies._window import cut_points, fit_window
from contextfold.strategies.base import (
    PlanGenerator,
    Strategy,
    StrategyResult,
    StrategyState,
    checkpoint_applies,
    with_tools,
)
from contextfold.summarizers.base import Usage
from contextfold.tokens.base import TokenCounter

__all__ = ["Pipeline"]


class Pipeline(BudgetedStrategy):
    """Run ``stages`` in order on each other's output; stop as soon as the context fits.

    Args:
        stages: the strategies to try, cheapest first (typically
            :class:`~contextfold.strategies.PruneToolOutputs` then a summarizing strategy).
        max_tokens: the budget checked before each stage. If the last stage leaves the
            context over it, the sliding window trims the rest (pair-safe) and says so.
        tools: the tool schemas sent with each request; they count against ``max_tokens``
            and are handed to stages that have none (see the module docstring).
        reserve_tokens: tokens kept free, for example for the model's answer; handed to
            stages that reserve nothing themselves.

    Raises:
        ConfigError: no stages, a stage that is not a strategy, or a bad budget.
    """

    def __init__(
        self,
        stages: Sequence[Strategy],
        *,
        max_tokens: int,
        tools: Sequence[Mapping[str, Any]] | None = None,
        reserve_tokens: int = 0,
    ) -> None:
        stages = tuple(stages)
        if not stages:
            raise ConfigError("a pipeline needs at least one stage", argument="stages")
        for stage in stages:
            if not isinstance(stage, Strategy):
                raise ConfigError(
                    f"{stage!r} is not a strategy (it needs name and plan())", argument="stages"
                )
        check_option("max_tokens", max_tokens, 1)
        self.max_tokens = max_tokens
        self._init_tools(tools, reserve_tokens)
        self._given_stages = stages
        self.stages: tuple[Strategy, ...] = ()
        self._tools_changed()
        self._freeze()

    def _tools_changed(self) -> None:
        """Hand the pipeline's tools and reserve to the stages that have none of their own.

        Called again on a copy of the pipeline given other tools (see ``with_tools``).
        """
        stages = tuple(self._stage_with_overhead(stage) for stage in self._given_stages)
        object.__setattr__(self, "stages", stages)

    def _stage_with_overhead(self, stage: Strategy) -> Strategy:
        if isinstance(stage, ToolBudget):
            return stage.with_overhead(self.tools, self.reserve_tokens)
        return with_tools(stage, self.tools)

    def accepts_checkpoint(self, checkpoint: CheckpointRecord, /) -> bool:
        """A checkpoint applies when one of the stages builds on it."""
        return any(checkpoint_applies(stage, checkpoint) for stage in self.stages)

    @property
    def name(self) -> str:
        """``"pipeline"``."""
        return "pipeline"

    def __repr__(self) -> str:
        inner = ", ".join(repr(s) for s in self.stages)
        return f"Pipeline([{inner}], max_tokens={self.max_tokens})"

    def _plan(
        self,
        messages: Sequence[Message],
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None,
        state: StrategyState,
        budget: int,
    ) -> PlanGenerator:
        """Run the stages (yielding their summary calls) within ``budget`` tokens."""
        history = messages
        p, covered = prepare_from(history, checkpoint, checkpoint.strategy if checkpoint else "")
        start = p if covered is None else covered
        require_fit(
            history,
            p,
            cut_points(history, start),
            counter,
            self.max_tokens,
            reserved=self.max_tokens - budget,
        )
        owner: Strategy | None = None
        if checkpoint is not None:
            owner = next((s for s in self.stages if checkpoint_applies(s, checkpoint)), None)
        run = _Run(history, p, counter, owner, checkpoint if owner is not None else None)
        stopped_early = False
        states = [state.stage(i) for i in range(len(self.stages))]
        for i, stage in enumerate(self.stages):
            view = run.effective()[0]
            if counter.count_messages(view) <= budget:
                stopped_early = True
                run.notes.append(f"fits the budget before {stage.name}: remaining stages skipped")
                break
            sub = yield from stage.plan(
                run.current,
                counter=counter,
                checkpoint=run.pending if stage is owner else None,
                state=states[i],
            )
            states[i] = sub.state
            run.absorb(stage, sub)
        return run.result(self.name, budget, stopped_early, StrategyState(stages=tuple(states)))


class _Run:
    """One plan's progress through the stages, mapped back to the caller's history."""

    def __init__(
        self,
        history: Sequence[Message],
        prefix_len: int,
        counter: TokenCounter,
        owner: Strategy | None,
        pending: CheckpointRecord | None,
    ) -> None:
        self.history = history
        self.p = prefix_len
        self.counter = counter
        self.owner = owner
        self.pending = pending  # the checkpoint handed in, until its stage has run
        self.current: list[Message] = list(history)
        self.origin: list[int | None] = list(range(len(history)))
        self.summarized: set[int] = set()
        self.dropped: set[int] = set()
        self.summary_outside = False  # a summary of messages the caller did not pass in
        self.pruned_ids: set[str] = set()
        self.notes: list[str] = []
        self.usage = Usage()
        self.calls = 0
        self.new_checkpoint: CheckpointRecord | None = None
        self.reused: CheckpointRecord | None = None
        self.fallback: str | None = None
        self.failure_code: str | None = None
        self.limit_reached: str | None = None

    def effective(self) -> tuple[list[Message], list[int | None], set[int], bool]:
        """``current`` with the pending checkpoint applied (as its owner would)."""
        pending, owner, current, p = self.pending, self.owner, self.current, self.p
        if pending is None or owner is None:
            return current, self.origin, set(), False
        covered = locate_checkpoint(current, p, pending, pending.strategy)
        if covered is None:  # an empty summary: nothing to apply
            return current, self.origin, set(), False
        placement = getattr(owner, "placement", None)
        if not isinstance(placement, SummaryPlacement):
            placement = SummaryPlacement()
        view = assemble(
            current,
            p,
            summary=pending.summary.strip(),
            placement=placement,
            summary_msg_id=span_summary_id(current, p, covered, pending.strategy + pending.id),
            tail_from=covered,
            cuts=(),
            counter=self.counter,
            max_tokens=None,
        )
        assert view is not None
        by_id = {m.id: self.origin[i] for i, m in enumerate(current)}
        view_origin = [by_id.get(m.id) for m in view.messages]
        covered_orig = {o for o in self.origin[p:covered] if o is not None}
        return view.messages, view_origin, covered_orig, covered == p

    def absorb(self, stage: Strategy, sub: StrategyResult) -> None:
        """Take in one stage's result: its ranges mapped back, its costs added up."""
        origin = self.origin
        for a, b in sub.summarized_ranges:
            self.summarized |= {o for o in origin[a:b] if o is not None}
            if a == b:
                self.summary_outside = True
        for a, b in sub.dropped_ranges:
            self.dropped |= {o for o in origin[a:b] if o is not None}
        self.pruned_ids |= set(sub.pruned)
        self.notes.extend(f"{stage.name}: {note}" for note in sub.notes)
        self.usage = self.usage + sub.usage
        self.calls += sub.summary_calls
        if sub.checkpoint is not None:
            self.new_checkpoint = sub.checkpoint
        if sub.reused_checkpoint is not None and self.reused is None:
            self.reused = sub.reused_checkpoint
        if sub.fallback is not None:
            self.fallback, self.failure_code = f"{stage.name}: {sub.fallback}", sub.failure_code
        if sub.limit_reached is not None:
            self.limit_reached = f"{stage.name}: {sub.limit_reached}"
        by_id = {m.id: origin[i] for i, m in enumerate(self.current)}
        self.current = list(sub.messages)
        self.origin = [by_id.get(m.id) for m in self.current]
        if stage is self.owner:
            self.pending = None

    def result(
        self, name: str, budget: int, stopped_early: bool, state: StrategyState
    ) -> StrategyResult:
        """The pipeline's result: the last view, trimmed by the sliding window if need be."""
        final, final_origin, view_summarized, outside = self.effective()
        if self.pending is not None and (view_summarized or outside):
            self.summarized |= view_summarized
            self.summary_outside = self.summary_outside or outside
            self.reused = self.reused or self.pending
        tokens = self.counter.count_messages(final)
        if tokens > budget:
            final, final_origin, tokens = self._trimmed(final, final_origin, budget)
        elif not stopped_early and not self.notes:
            self.notes.append("all stages ran")
        history = self.history
        present = {m.id for m in final}
        dropped = self.dropped - self.summarized
        # Sent as given, or with a summary merged in front (a new object, the same id); a
        # message a stage shortened is reported as pruned instead.
        kept = tuple(
            m.id
            for m, o in zip(final, final_origin, strict=True)
            if o is not None and (history[o] is m or m.id not in self.pruned_ids)
        )
        summarized_ranges = ranges_of(sorted(self.summarized))
        if self.summary_outside and not summarized_ranges:
            summarized_ranges = ((self.p, self.p),)
        return StrategyResult(
            messages=tuple(final),
            strategy=name,
            tokens=tokens,
            history=history,
            counter=self.counter,
            kept=kept,
            dropped_ranges=ranges_of(sorted(dropped)),
            summarized_ranges=summarized_ranges,
            pruned=tuple(m.id for m in history if m.id in self.pruned_ids and m.id in present),
            checkpoint=self.new_checkpoint,
            reused_checkpoint=self.reused,
            fallback=self.fallback,
            failure_code=self.failure_code,
            usage=self.usage,
            summary_calls=self.calls,
            notes=tuple(self.notes),
            state=state,
            limit_reached=self.limit_reached,
        )

    def _trimmed(
        self, final: list[Message], final_origin: list[int | None], budget: int
    ) -> tuple[list[Message], list[int | None], int]:
        """The sliding window over the last view, when the last stage left it over budget."""
        fit = fit_window(final, budget, self.counter, check_pairing=False)
        gone = [o for a, b in fit.dropped_ranges for o in final_origin[a:b]]
        self.dropped |= {o for o in gone if o is not None}
        if any(o is None for o in gone):
            self.notes.append("the summary itself had to be dropped to fit the budget")
        self.notes.append(
            f"still over budget after the last stage: dropped {len(gone)} "
            "more messages with the sliding window"
        )
        return fit.messages(final), fit.messages(final_origin), fit.tokens
