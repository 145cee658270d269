"""The shared skeleton of the strategies that fit a token budget and fold into a summary.

* :class:`BudgetedStrategy` implements ``plan()`` once: the tool schemas and reserve are
  taken from ``max_tokens``, the rest goes to ``_plan``, and the notes say what they took.
* :class:`SummarizingStrategy` opens every summarizing plan the same way and leaves only
  ``_fold`` (what makes a strategy different) to the subclass.
* :func:`open_plan` validates the history, applies the checkpoint rule and returns a frozen
  :class:`PlanState`, whose methods build the results the strategies share: the unchanged
  view, the sliding-window fallback, the summarizer call and the checkpoint record.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from contextfold.checkpoints import CheckpointRecord
from contextfold.framing import SummaryPlacement, span_summary_id, summary_message_tokens
from contextfold.messages import Message, TextPart
from contextfold.strategies._assembly import (
    Assembly,
    assemble,
    require_fit,
    summary_room,
    trim_view,
)
from contextfold.strategies._common import (
    LoopGuard,
    add_usage,
    build_result,
    check_summary,
    prepare_from,
    with_overhead_notes,
)
from contextfold.strategies._config import (
    DEFAULT_COMPACT_TO,
    FrozenConfig,
    ToolBudget,
    check_compact_to,
    check_mode,
    check_option,
    low_mark,
)
from contextfold.strategies._window import cut_points
from contextfold.strategies.base import (
    PlanGenerator,
    StrategyResult,
    StrategyState,
    SummaryCall,
)
from contextfold.summarizers.base import (
    AsyncSummarizer,
    RequestMode,
    SummarizationResult,
    Summarizer,
    SummaryRequest,
    Usage,
)
from contextfold.tokens.base import TokenCounter

__all__ = [
    "BudgetedStrategy",
    "PlanState",
    "Problem",
    "SummarizingStrategy",
    "open_plan",
]

#: Why a summary cannot be used, as ``(reason, code)``; None when it can (see check_summary).
Problem: TypeAlias = tuple[str, str] | None


class BudgetedStrategy(ToolBudget, FrozenConfig, ABC):
    """Base of the strategies that fit a token budget shared with tool schemas and reserve.

    It implements :meth:`plan` once: the budget left after the tool schemas and
    ``reserve_tokens`` goes to :meth:`_plan`, and the result's notes say what they took.
    Subclasses set ``max_tokens`` and implement :meth:`_plan`; those that compact set
    ``compact_to``, the lower mark a compaction brings the request down to (a fraction of
    ``max_tokens`` or a token count; ``1.0`` compacts only as far as the budget needs).
    """

    max_tokens: int
    compact_to: float | int = 1.0

    def _target(self, budget: int) -> int:
        """Tokens of messages a compaction aims for: ``budget`` less what the mark frees."""
        return max(0, budget - (self.max_tokens - low_mark(self.max_tokens, self.compact_to)))

    def plan(
        self,
        messages: Sequence[Message],
        /,
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None = None,
        state: StrategyState | None = None,
    ) -> PlanGenerator:
        """Build the context; yields the summary calls it needs (see the class docstring).

        Raises:
            PairingError: the history breaks the tool-pair invariant (before any call).
            BudgetError: the tool schemas and reserve alone, or with the system prefix and
                the newest message, exceed ``max_tokens``.
        """
        budget, tools = self._budget(self.max_tokens, counter)
        result = yield from self._plan(
            messages,
            counter=counter,
            checkpoint=checkpoint,
            state=state if state is not None else StrategyState(),
            budget=budget,
        )
        return with_overhead_notes(result, tools, self.reserve_tokens)

    @abstractmethod
    def _plan(
        self,
        messages: Sequence[Message],
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None,
        state: StrategyState,
        budget: int,
    ) -> PlanGenerator:
        """The plan, with ``budget`` the tokens left for the messages."""


class SummarizingStrategy(BudgetedStrategy):
    """Base of the strategies that fold older messages into a summary within a token budget.

    It opens every plan the same way (:func:`open_plan`: pairing checked, the checkpoint
    rule applied, the prefix and newest unit checked against the budget before any call)
    and hands the :class:`PlanState` to :meth:`_fold`, where each strategy does what makes
    it different. Subclasses set ``placement``, ``summarizer`` and
    ``max_failed_compactions``; the plan's :class:`LoopGuard` starts from the conversation's
    state.
    """

    placement: SummaryPlacement
    summarizer: Summarizer | AsyncSummarizer
    max_failed_compactions: int
    mode: RequestMode = "isolated"

    @property
    @abstractmethod
    def name(self) -> str:
        """The strategy's name; it reuses the checkpoints made under it."""

    def _init_summarizing(
        self,
        max_tokens: int,
        *,
        keep_recent: int,
        summarizer: Summarizer | AsyncSummarizer,
        placement: SummaryPlacement | None,
        max_output_tokens: int | None,
        instructions: str | None,
        deadline_s: float | None,
        max_failed_compactions: int,
        tools: Sequence[Mapping[str, Any]] | None,
        reserve_tokens: int,
        options: Sequence[tuple[str, object]] = (),
        compact_to: float | int = DEFAULT_COMPACT_TO,
        mode: RequestMode = "isolated",
    ) -> None:
        """Check and set the options :class:`Summarization` and ``Hybrid`` share.

        ``options`` are the strategy's own integer options of at least 1, checked after
        ``keep_recent`` (the attributes are the caller's to set).

        Raises:
            ConfigError: an option is out of range or of the wrong type.
        """
        check_option("max_tokens", max_tokens, 1)
        check_option("keep_recent", keep_recent, 1)
        for option, value in options:
            check_option(option, value, 1)
        check_option("max_failed_compactions", max_failed_compactions, 0)
        check_compact_to(compact_to, max_tokens)
        check_mode(mode)
        self.mode = mode
        self.max_tokens = max_tokens
        self.compact_to = compact_to
        self.keep_recent = keep_recent
        self.summarizer = summarizer
        self.placement = placement if placement is not None else SummaryPlacement()
        self.max_output_tokens = max_output_tokens
        self.instructions = instructions
        self.deadline_s = deadline_s
        self.max_failed_compactions = max_failed_compactions
        self._init_tools(tools, reserve_tokens)

    def _plan(
        self,
        messages: Sequence[Message],
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None,
        state: StrategyState,
        budget: int,
    ) -> PlanGenerator:
        st = open_plan(
            messages,
            checkpoint,
            name=self.name,
            counter=counter,
            placement=self.placement,
            max_tokens=self.max_tokens,
            budget=budget,
            guard=LoopGuard(self.max_failed_compactions, state.failed_compactions),
        )
        return (yield from self._fold(st, budget))

    @abstractmethod
    def _fold(self, st: PlanState, budget: int) -> PlanGenerator:
        """The plan once opened, with ``budget`` the tokens left for the messages."""

    def _output_room(self, st: PlanState, budget: int) -> int:
        """Most tokens a summary may take: what the budget leaves beside the prefix and the
        newest unit, or, below a lower mark, what the mark leaves, so that the next turns
        can append to the compacted context instead of compacting again."""
        room = summary_room(st.history, st.prefix_len, st.cuts, st.counter, budget, st.placement)
        low = room - (budget - self._target(budget))  # the room shrinks as the budget does
        return low if low > 0 else room

    def _summary_request(
        self,
        st: PlanState,
        span: Sequence[Message],
        *,
        previous: str | None,
        previous_sid: str,
        max_output: int | None,
        deadline: float | None,
    ) -> SummaryRequest:
        """The summary request for ``span``, merged into ``previous`` when there is one.

        In ``cache_aligned`` mode the request also carries what the conversation's context
        starts with (its system prefix, the previous summary, the tool schemas), so a
        summarizer that replays them reuses the provider's cached prefix instead of paying
        for the span again.
        """
        aligned: dict[str, Any] = {}
        if self.mode == "cache_aligned":
            prefix: tuple[Message, ...] = ()
            if previous is not None:
                framed = TextPart(st.placement.frame(previous))
                prefix = (Message(st.placement.role, (framed,), id=previous_sid),)
            system = tuple(st.history[: st.prefix_len])
            aligned = {"mode": self.mode, "system": system, "prefix": prefix, "tools": self.tools}
        return SummaryRequest(
            tuple(span),
            previous_summary=previous,
            kind="update" if previous is not None else "summary",
            instructions=self.instructions,
            max_output_tokens=max_output,
            deadline=deadline,
            **aligned,
        )


@dataclass(frozen=True, slots=True)
class PlanState:
    """What every summarizing plan starts from: the history read against its checkpoint.

    Attributes:
        history: the caller's messages (never copied).
        name: the strategy's name (checkpoints of other names are not reused).
        counter: the token counter of the build.
        placement: how the strategy frames its summary.
        budget: tokens left for the messages (None when the strategy has no token budget).
        prefix_len: length of the system prefix.
        covered: where the reused checkpoint's coverage ends (None without one).
        cuts: the safe cut points from ``base_from`` on.
        prior: the checkpoint that applies, if any.
        base_from: where the messages not yet summarized start.
        prior_text: the prior checkpoint's summary, stripped.
        salt: what summary ids are derived with (the name and the prior checkpoint's id).
        prior_sid: the message id of the prior summary in the current view.
        guard: the conversation's failure streak, for this plan; every result built here
            carries its :meth:`LoopGuard.state`.
    """

    history: Sequence[Message]
    name: str
    counter: TokenCounter
    placement: SummaryPlacement
    budget: int | None
    prefix_len: int
    covered: int | None
    cuts: list[int]
    prior: CheckpointRecord | None
    base_from: int
    prior_text: str | None
    salt: str
    prior_sid: str
    guard: LoopGuard

    def view(self) -> Assembly:
        """``prefix + [prior summary] + every message after it``, untrimmed."""
        view = assemble(
            self.history,
            self.prefix_len,
            summary=self.prior_text,
            placement=self.placement,
            summary_msg_id=self.prior_sid,
            tail_from=self.base_from,
            cuts=self.cuts,
            counter=self.counter,
            max_tokens=None,
        )
        assert view is not None  # no budget given: never trimmed
        return view

    def within_budget(self, summary: str, sid: str, tail_from: int) -> Assembly | None:
        """``prefix + [summary] + history[tail_from:]``, the tail trimmed to fit ``budget``.

        None when the summary and the newest unit do not fit together (see :func:`assemble`).
        """
        assert self.budget is not None  # only strategies with a token budget trim
        return assemble(
            self.history,
            self.prefix_len,
            summary=summary,
            placement=self.placement,
            summary_msg_id=sid,
            tail_from=tail_from,
            cuts=self.cuts,
            counter=self.counter,
            max_tokens=self.budget,
        )

    def result(self, asm: Assembly, **fields: Any) -> StrategyResult:
        """:func:`build_result` for this plan; ``fields`` are its keyword arguments."""
        fields.setdefault("state", self.guard.state())
        return build_result(
            self.name, self.history, self.counter, asm, prefix_len=self.prefix_len, **fields
        )

    def unchanged(
        self, view: Assembly, note: str, *, known_tokens_before: int | None = None
    ) -> StrategyResult:
        """The result when ``view`` is sent as it is (the prior checkpoint, if any, reused)."""
        return self.result(
            view,
            covered_end=self.covered,
            reused=self.prior,
            notes=[note],
            known_tokens_before=known_tokens_before,
        )

    def trimmed(self) -> tuple[Assembly, bool]:
        """The sliding window within ``budget``, on top of the prior summary when it fits.

        Returns the assembly and whether the prior summary was kept (see :func:`trim_view`).
        """
        assert self.budget is not None  # only strategies with a token budget trim
        return trim_view(
            self.history,
            self.prefix_len,
            summary=self.prior_text,
            placement=self.placement,
            summary_msg_id=self.prior_sid,
            tail_from=self.base_from,
            cuts=self.cuts,
            counter=self.counter,
            max_tokens=self.budget,
        )

    def trimmed_result(self, asm: Assembly, with_prior: bool, **fields: Any) -> StrategyResult:
        """The result for ``asm``, which carries the prior summary when ``with_prior``."""
        return self.result(
            asm,
            covered_end=self.covered if with_prior else None,
            reused=self.prior if with_prior else None,
            **fields,
        )

    def fallback(
        self,
        reason: str,
        code: str | None,
        *,
        usage: Usage | None = None,
        calls: int = 0,
        notes: Sequence[str] = (),
        kept: str = "summary",
    ) -> StrategyResult:
        """The sliding-window fallback, saying why; ``kept`` names what the prior summary is."""
        asm, with_prior = self.trimmed()
        how = (
            f"kept the previous {kept} and trimmed the newer messages with the sliding window"
            if with_prior
            else "trimmed with the sliding window"
        )
        return self.trimmed_result(
            asm,
            with_prior,
            fallback=reason,
            failure_code=code,
            usage=usage,
            calls=calls,
            notes=[*notes, f"fell back: {reason}; {how}"],
        )

    def replaced_tokens(self, end: int) -> int:
        """Tokens a summary covering up to ``end`` replaces: the new span and prior summary."""
        replaced = self.counter.count_messages(self.history[self.base_from : end])
        if self.prior_text is not None:
            replaced += summary_message_tokens(self.prior_text, self.placement, self.counter)
        return replaced

    def summarize(
        self, summarizer: Summarizer | AsyncSummarizer, request: SummaryRequest, *, end: int
    ) -> Generator[SummaryCall, SummarizationResult, tuple[SummarizationResult, Usage, Problem]]:
        """Ask for one summary covering up to ``end``; returns it, its usage and any problem.

        The problem (see :func:`check_summary`) is None when the summary can be used.
        """
        replaced = self.replaced_tokens(end)
        result = yield SummaryCall(summarizer, request)
        usage = add_usage(Usage(), result)
        problem = check_summary(
            result, replaced_tokens=replaced, placement=self.placement, counter=self.counter
        )
        return result, usage, problem

    def record(self, summary: str, end: int, asm: Assembly, **fields: Any) -> CheckpointRecord:
        """The checkpoint for ``summary`` covering up to ``end``, built into ``asm``."""
        history = self.history
        tail = asm.tail_start if asm.request is None else asm.request  # first message sent
        return CheckpointRecord(
            summary=summary,
            last_covered_id=history[end - 1].id,
            first_kept_id=history[tail].id if tail < len(history) else None,
            strategy=self.name,
            previous_id=self.prior.id if self.prior is not None else None,
            tokens_after=asm.tokens,
            **fields,
        )


def open_plan(
    history: Sequence[Message],
    checkpoint: CheckpointRecord | None,
    *,
    name: str,
    counter: TokenCounter,
    placement: SummaryPlacement,
    max_tokens: int | None = None,
    budget: int | None = None,
    guard: LoopGuard | None = None,
) -> PlanState:
    """Validate ``history``, apply the checkpoint rule and gather what a plan starts from.

    ``guard`` is the conversation's failure streak (a disabled one when not given).
    With ``max_tokens``, :func:`require_fit` checks before any summarizer call that the
    prefix and the newest unit fit next to what ``max_tokens - budget`` reserves.

    Raises:
        PairingError: the checked part of the history breaks the pairing invariant.
        BudgetError: the prefix and the newest unit cannot fit.
    """
    p, covered = prepare_from(history, checkpoint, name)
    cuts = cut_points(history, p if covered is None else covered)
    if max_tokens is not None:
        reserved = max_tokens - (budget if budget is not None else max_tokens)
        require_fit(history, p, cuts, counter, max_tokens, reserved=reserved)
    prior = checkpoint if covered is not None else None
    base_from = covered if covered is not None else p
    salt = name + (prior.id if prior is not None else "")
    return PlanState(
        history=history,
        name=name,
        counter=counter,
        placement=placement,
        budget=budget,
        prefix_len=p,
        covered=covered,
        cuts=cuts,
        prior=prior,
        base_from=base_from,
        prior_text=prior.summary.strip() if prior is not None else None,
        salt=salt,
        prior_sid=span_summary_id(history, p, base_from, salt),
        guard=guard if guard is not None else LoopGuard(0),
    )
