"""Summarization: everything older than the recent tail becomes one summary message.

When the history is over budget, the messages between the system prefix and the newest
``keep_recent`` messages are condensed into a single summary, placed right after the prefix.
The cut moves to a safe point so no tool call is separated from its results.

A summary is made only when needed. The strategy returns a
:class:`~contextfold.checkpoints.CheckpointRecord`; handed back through ``checkpoint=`` on the
next request, it is reused as long as ``prefix + summary + newer messages`` fits, so a span
is not summarized again on every request. When it no longer fits, the older span is
summarized afresh in one call (this is what distinguishes the strategy from
:class:`~contextfold.strategies.Hybrid`, which grows its summary chunk by chunk). If the
covered messages were not passed in (a memory that loads only what follows the checkpoint),
the prior summary is merged instead (``kind="update"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextfold.framing import SummaryPlacement, span_summary_id
from contextfold.strategies._assembly import recent_start
from contextfold.strategies._common import cap_output, deadline_from, reported_prompt_hash
from contextfold.strategies._config import DEFAULT_COMPACT_TO
from contextfold.strategies._plan import PlanState, SummarizingStrategy
from contextfold.strategies._window import fit_tail, next_cut
from contextfold.strategies.base import PlanGenerator, StrategyResult
from contextfold.summarizers.base import (
    AsyncSummarizer,
    RequestMode,
    SummarizationResult,
    Summarizer,
    SummaryRequest,
)
from contextfold.usage import Usage

__all__ = ["Summarization"]


class Summarization(SummarizingStrategy):
    """Summarize everything older than the newest ``keep_recent`` messages, once needed.

    Args:
        max_tokens: the token budget of the request: messages, tool schemas and reserve.
        keep_recent: how many of the newest messages stay verbatim (at least 1). The cut is
            moved back to a safe point, so a few more may stay to keep tool pairs whole.
        summarizer: writes the summary (sync or async; see :mod:`contextfold.summarizers`).
        placement: the role and framing of the summary message.
        max_output_tokens: cap passed to the summarizer.
        instructions: extra focus appended to the summarizer's prompt.
        deadline_s: seconds the summarizer may take per plan; past it the call fails with
            ``timeout`` and the strategy falls back.
        max_failed_compactions: after this many consecutive compactions that fail to get
            under budget, stop calling the summarizer and fall back (0 disables the guard).
        tools: the tool schemas sent with each request; they count against ``max_tokens``
            (the summary, the recent messages and the fallback window fit what is left).
        mode: ``"isolated"`` (a serialized transcript under our own prompt) or
            ``"cache_aligned"`` (the request carries the conversation's system prefix,
            previous summary and tool schemas, so the summarizer can replay them and reuse
            the provider's cached prefix; see :class:`~contextfold.summarizers.SummaryRequest`).
        compact_to: the lower mark a compaction brings the request down to (a fraction of
            ``max_tokens``, or a token count), so the next turns append instead of compacting
            again; ``1.0`` compacts only as far as the budget needs.
        reserve_tokens: tokens kept free, for example for the model's answer.

    Raises:
        ConfigError: an option is out of range or of the wrong type.
    """

    def __init__(
        self,
        max_tokens: int,
        *,
        keep_recent: int,
        summarizer: Summarizer | AsyncSummarizer,
        placement: SummaryPlacement | None = None,
        max_output_tokens: int | None = None,
        instructions: str | None = None,
        deadline_s: float | None = None,
        max_failed_compactions: int = 3,
        tools: Sequence[Mapping[str, Any]] | None = None,
        reserve_tokens: int = 0,
        compact_to: float | int = DEFAULT_COMPACT_TO,
        mode: RequestMode = "isolated",
    ) -> None:
        self._init_summarizing(
            max_tokens,
            keep_recent=keep_recent,
            summarizer=summarizer,
            placement=placement,
            max_output_tokens=max_output_tokens,
            instructions=instructions,
            deadline_s=deadline_s,
            max_failed_compactions=max_failed_compactions,
            tools=tools,
            reserve_tokens=reserve_tokens,
            compact_to=compact_to,
            mode=mode,
        )
        self._freeze()

    @property
    def name(self) -> str:
        """``"summary"``."""
        return "summary"

    def __repr__(self) -> str:
        return f"Summarization(max_tokens={self.max_tokens}, keep_recent={self.keep_recent})"

    def _fold(self, st: PlanState, budget: int) -> PlanGenerator:
        """The plan (at most one summary call), with ``budget`` the tokens left for messages."""
        history, p = st.history, st.prefix_len
        prior, base_from = st.prior, st.base_from
        view = st.view()
        if view.tokens <= budget:
            st.guard.succeeded()  # no pressure: a tripped guard may try again next time
            return st.unchanged(
                view,
                "reused the checkpoint: summary and newer messages fit the budget"
                if prior is not None
                else "the history fits the budget",
            )

        k = self._fold_point(st, budget)
        if k <= base_from:
            asm, with_summary = st.trimmed()
            return st.trimmed_result(
                asm,
                with_summary,
                notes=[
                    "nothing older than the recent messages to summarize; "
                    "trimmed with the sliding window"
                ],
            )
        if st.guard.tripped:
            return st.fallback(st.guard.describe(), None)

        max_output = cap_output(
            self.max_output_tokens,
            self._output_room(st, budget),
        )
        span = tuple(history[p:k])
        found = st.covered is not None and st.covered > p
        # The covered messages were not passed in: merge the prior summary instead.
        update = prior is not None and not found
        request = self._summary_request(
            st,
            span,
            previous=st.prior_text if update else None,
            previous_sid=st.prior_sid,
            max_output=max_output,
            deadline=deadline_from(self.deadline_s),
        )
        result, usage, problem = yield from st.summarize(self.summarizer, request, end=k)
        if problem is not None:
            st.guard.failed()
            reason, code = problem
            return st.fallback(reason, code, usage=usage, calls=1)

        return self._fitted(st, view.tokens, request, result, usage, k)

    def _fold_point(self, st: PlanState, budget: int) -> int:
        """Where the verbatim tail starts after a fold: the ``keep_recent`` newest messages.

        Below a lower mark, the tail also keeps to half of the room the mark leaves after the
        prefix (what it cannot keep is summarized, not dropped), so that with the summary the
        context lands near the mark and the next turns append to it.
        """
        n = len(st.history)
        k = recent_start(st.cuts, st.base_from, n, self.keep_recent)
        target = self._target(budget)
        if target < budget:
            prefix_tokens = st.counter.count_messages(st.history[: st.prefix_len])
            room = max(0, target - prefix_tokens) // 2
            low = next_cut(
                st.cuts, fit_tail(st.history, st.cuts, room, st.counter, floor=st.base_from)
            )
            if k < low < n:
                k = low
        return k

    def _fitted(
        self,
        st: PlanState,
        before: int,
        request: SummaryRequest,
        result: SummarizationResult,
        usage: Usage,
        k: int,
    ) -> StrategyResult:
        """The result for a written summary covering up to ``k``: fitted and recorded."""
        history, p, n = st.history, st.prefix_len, len(st.history)
        text = result.text.strip()
        asm = st.within_budget(text, span_summary_id(history, p, k, st.name), k)
        if asm is None:
            st.guard.failed()
            return st.fallback(
                "the new summary and the newest message do not fit the budget together",
                None,
                usage=usage,
                calls=1,
            )
        notes = [f"summarized {k - p} messages into one summary ({len(text)} characters)"]
        if asm.tail_start > k:
            st.guard.failed()
            notes.append(
                f"the summary and the newest {n - k} messages were still over budget; "
                f"dropped {asm.tail_start - k} more with the sliding window"
            )
        else:
            st.guard.succeeded()
        details: dict[str, object] = {"covered_messages": k - p, "mode": request.kind}
        if result.details:
            details["summarizer"] = dict(result.details)
        record = st.record(
            text,
            k,
            asm,
            model=result.model,
            prompt_hash=reported_prompt_hash(result.details),
            tokens_before=before,
            usage=result.usage,
            details=details,
        )
        return st.result(asm, covered_end=k, checkpoint=record, usage=usage, calls=1, notes=notes)
