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
that counts tools itself but has none of its own (or no reserve of its own) runs as a shallow
copy carrying the pipeline's, so every stage leaves room for the schemas the request will
carry; ``Pipeline.stages`` holds the stages as they run (the copies share the original's
summarizer and loop guard). A stage with schemas of its own keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.framing import SummaryPlacement, span_summary_id
from contextfold.messages import Message
from contextfold.strategies._assembly import assemble, require_fit
from contextfold.strategies._common import (
    check_option,
    locate_checkpoint,
    prepare_from,
    ranges_of,
    with_tools,
)
from contextfold.strategies._plan import BudgetedStrategy
from contextfold.strategies._window import cut_points, fit_window
from contextfold.strategies.base import (
    PlanGenerator,
    Strategy,
    StrategyResult,
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
        ValueError: no stages, a stage that is not a strategy, or a non-positive budget.
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
            raise ValueError("a pipeline needs at least one stage")
        for stage in stages:
            if not isinstance(stage, Strategy):
                raise ValueError(f"{stage!r} is not a strategy (it needs name and plan())")
        check_option("max_tokens", max_tokens, 1, budget=True)
        self.max_tokens = max_tokens
        self._init_tools(tools, reserve_tokens)
        self._given_stages = stages
        self.stages: tuple[Strategy, ...] = ()
        self._tools_changed()

    def _tools_changed(self) -> None:
        """Hand the pipeline's tools and reserve to the stages that have none of their own.

        Called again when a copy of the pipeline is given other tools (see ``with_tools``).
        """
        self.stages = tuple(
            with_tools(stage, self.tools, self.reserve_tokens) for stage in self._given_stages
        )

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
        budget: int,
    ) -> PlanGenerator:
        """Run the stages (yielding their summary calls) within ``budget`` tokens."""
        history = messages
        n = len(history)
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
            owner = next((s for s in self.stages if s.name == checkpoint.strategy), None)
        pending = checkpoint if owner is not None else None

        current: list[Message] = list(history)
        origin: list[int | None] = list(range(n))
        summarized: set[int] = set()
        dropped: set[int] = set()
        summary_outside = False  # a summary of messages the caller did not pass in
        pruned_ids: set[str] = set()
        notes: list[str] = []
        usage = Usage()
        calls = 0
        new_checkpoint: CheckpointRecord | None = None
        reused: CheckpointRecord | None = None
        fallback: str | None = None
        failure_code: str | None = None

        def effective() -> tuple[list[Message], list[int | None], set[int], bool]:
            """``current`` with the pending checkpoint applied (as its owner would)."""
            if pending is None or owner is None:
                return current, origin, set(), False
            covered = locate_checkpoint(current, p, pending, pending.strategy)
            if covered is None:  # an empty summary: nothing to apply
                return current, origin, set(), False
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
                counter=counter,
                max_tokens=None,
            )
            assert view is not None
            by_id = {m.id: origin[i] for i, m in enumerate(current)}
            view_origin = [by_id.get(m.id) for m in view.messages]
            covered_orig = {o for o in origin[p:covered] if o is not None}
            return view.messages, view_origin, covered_orig, covered == p

        stopped_early = False
        for stage in self.stages:
            view, _, view_summarized, outside = effective()
            if counter.count_messages(view) <= budget:
                stopped_early = True
                notes.append(f"fits the budget before {stage.name}: remaining stages skipped")
                break
            sub = yield from stage.plan(
                current, counter=counter, checkpoint=pending if stage is owner else None
            )
            # Map the stage's ranges (indices into ``current``) back to the original history.
            for a, b in sub.summarized_ranges:
                mapped = {o for o in origin[a:b] if o is not None}
                summarized |= mapped
                if a == b:
                    summary_outside = True
            for a, b in sub.dropped_ranges:
                dropped |= {o for o in origin[a:b] if o is not None}
            pruned_ids |= set(sub.pruned)
            notes.extend(f"{stage.name}: {note}" for note in sub.notes)
            usage = usage + sub.usage
            calls += sub.summary_calls
            if sub.checkpoint is not None:
                new_checkpoint = sub.checkpoint
            if sub.reused_checkpoint is not None and reused is None:
                reused = sub.reused_checkpoint
            if sub.fallback is not None:
                fallback, failure_code = f"{stage.name}: {sub.fallback}", sub.failure_code
            by_id = {m.id: origin[i] for i, m in enumerate(current)}
            current = list(sub.messages)
            origin = [by_id.get(m.id) for m in current]
            if stage is owner:
                pending = None

        final, final_origin, view_summarized, outside = effective()
        if pending is not None and (view_summarized or outside):
            summarized |= view_summarized
            summary_outside = summary_outside or outside
            reused = reused or pending
        tokens = counter.count_messages(final)
        if tokens > budget:
            fit = fit_window(final, budget, counter, check_pairing=False)
            gone = [o for a, b in fit.dropped_ranges for o in final_origin[a:b]]
            dropped |= {o for o in gone if o is not None}
            if any(o is None for o in gone):
                notes.append("the summary itself had to be dropped to fit the budget")
            final = fit.messages(final)
            final_origin = fit.messages(final_origin)
            tokens = fit.tokens
            notes.append(
                f"still over budget after the last stage: dropped {len(gone)} "
                "more messages with the sliding window"
            )
        elif not stopped_early and not notes:
            notes.append("all stages ran")

        present = {m.id for m in final}
        dropped -= summarized
        kept = tuple(
            m.id
            for m, o in zip(final, final_origin, strict=True)
            if o is not None and history[o] is m
        )
        summarized_ranges = ranges_of(sorted(summarized))
        if summary_outside and not summarized_ranges:
            summarized_ranges = ((p, p),)
        return StrategyResult(
            messages=tuple(final),
            strategy=self.name,
            tokens=tokens,
            history=history,
            counter=counter,
            kept=kept,
            dropped_ranges=ranges_of(sorted(dropped)),
            summarized_ranges=summarized_ranges,
            pruned=tuple(m.id for m in history if m.id in pruned_ids and m.id in present),
            checkpoint=new_checkpoint,
            reused_checkpoint=reused,
            fallback=fallback,
            failure_code=failure_code,
            usage=usage,
            summary_calls=calls,
            notes=tuple(notes),
        )
