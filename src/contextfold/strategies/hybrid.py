"""Hybrid: a running summary grown chunk by chunk, plus the recent messages verbatim.

When the context is over budget, the oldest ``chunk_size`` messages not yet covered by the
running summary (the chunk extended to a safe cut point, so no tool pair is split) are
merged into it with one summarizer call (``kind="update"``, the previous summary passed as
``previous_summary``: facts that are still true are kept, stale ones dropped). Calls repeat,
one per chunk, until the context fits or the recent ``keep_recent`` messages are reached: a
first build over a long history folds the whole older span, in as many calls as it needs,
each bounded by ``chunk_size``. A caller who bounds the calls of one build (``max_chunks``)
gets the rest trimmed by the sliding window, and the result says so in
:attr:`~contextfold.strategies.base.StrategyResult.limit_reached` as well as in its notes
(the memory's stats and the CLI's table and ``--json`` carry it on), so nothing is dropped
without a word.

Nothing is ever re-summarized from scratch: the cost of a compaction is proportional to the
new chunk, not to the conversation. The running summary travels in the
:class:`~contextfold.checkpoints.CheckpointRecord` the strategy returns; handed back through
``checkpoint=``, it is reused without a call while the context fits.
"""

from __future__ import annotations

import bisect
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.framing import SummaryPlacement, span_summary_id, summary_message_tokens
from contextfold.strategies._assembly import recent_start, summary_room, trim_view
from contextfold.strategies._common import (
    add_usage,
    cap_output,
    check_summary,
    deadline_from,
    reported_prompt_hash,
)
from contextfold.strategies._config import DEFAULT_COMPACT_TO
from contextfold.strategies._plan import PlanState, SummarizingStrategy
from contextfold.strategies.base import (
    PlanGenerator,
    StrategyResult,
    SummaryCall,
)
from contextfold.summarizers.base import (
    AsyncSummarizer,
    RequestMode,
    SummarizationResult,
    Summarizer,
    Usage,
)

__all__ = ["Hybrid"]


class Hybrid(SummarizingStrategy):
    """A running summary extended one overflow chunk at a time, plus the recent messages.

    Args:
        max_tokens: the token budget of the request: messages, tool schemas and reserve.
        keep_recent: how many of the newest messages are never summarized (at least 1).
        chunk_size: messages folded into the summary per call (extended to a safe cut).
        summarizer: writes and updates the summary (sync or async).
        placement: the role and framing of the summary message.
        max_output_tokens: cap passed to the summarizer.
        instructions: extra focus appended to the summarizer's prompt.
        deadline_s: seconds all summarizer calls of one plan may take together.
        max_chunks: most summarizer calls in one plan, or None (the default) for as many
            as the over-budget span needs. A bound caps the cost of a build that is far over
            budget: the rest is trimmed now (reported in ``limit_reached``) and summarized
            by later builds.
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
        chunk_size: int,
        summarizer: Summarizer | AsyncSummarizer,
        placement: SummaryPlacement | None = None,
        max_output_tokens: int | None = None,
        instructions: str | None = None,
        deadline_s: float | None = None,
        max_chunks: int | None = None,
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
            options=(("chunk_size", chunk_size),)
            + ((("max_chunks", max_chunks),) if max_chunks is not None else ()),
        )
        self.chunk_size = chunk_size
        self.max_chunks = max_chunks
        self._freeze()

    @property
    def name(self) -> str:
        """``"hybrid"``."""
        return "hybrid"

    def __repr__(self) -> str:
        return (
            f"Hybrid(max_tokens={self.max_tokens}, keep_recent={self.keep_recent}, "
            f"chunk_size={self.chunk_size})"
        )

    def _fold(self, st: PlanState, budget: int) -> PlanGenerator:
        """The plan (one summary call per chunk), with ``budget`` the tokens left for messages."""
        run = _Run.start(st)
        before = run.view_tokens()
        if before <= budget:
            st.guard.succeeded()  # no pressure: a tripped guard may try again next time
            return st.unchanged(
                st.view(),
                "reused the running summary: it and the newer messages fit the budget"
                if st.prior is not None
                else "the history fits the budget",
            )
        limit = recent_start(st.cuts, st.base_from, len(st.history), self.keep_recent)
        if st.guard.tripped and limit > st.base_from:
            run.fallback = st.guard.describe()
        yield from self._fold_chunks(st, run, budget, limit)
        return self._finish(st, run, budget, before, limit)

    def _fold_chunks(
        self, st: PlanState, run: _Run, budget: int, limit: int
    ) -> Generator[SummaryCall, SummarizationResult, None]:
        """Fold chunk after chunk into the running summary until the view fits."""
        history, counter, placement = st.history, st.counter, st.placement
        room = summary_room(history, st.prefix_len, st.cuts, counter, budget, placement)
        max_output = cap_output(self.max_output_tokens, self._output_room(st, budget))
        deadline = deadline_from(self.deadline_s)
        target = self._target(budget)  # fold down to the lower mark, so later turns append
        while run.fallback is None and run.covered_end < limit:
            if run.view_tokens() <= target:
                break
            if self.max_chunks is not None and run.chunks >= self.max_chunks:
                run.bounded = True
                break
            end = _chunk_end(st.cuts, run.covered_end + self.chunk_size, limit)
            chunk = tuple(history[run.covered_end : end])
            request = self._summary_request(
                st,
                chunk,
                previous=run.running,
                previous_sid=st.prior_sid,
                max_output=max_output,
                deadline=deadline,
            )
            chunk_tokens = counter.count_messages(chunk)
            replaced = chunk_tokens + run.summary_tokens()
            result = yield SummaryCall(self.summarizer, request)
            run.calls += 1
            run.usage = add_usage(run.usage, result)
            problem = check_summary(
                result, replaced_tokens=replaced, placement=placement, counter=counter
            )
            if problem is not None:
                run.fallback, run.failure_code = problem
                break
            cost = summary_message_tokens(result.text.strip(), placement, counter)
            if cost - summary_message_tokens("", placement, counter) > room:
                run.fallback = (
                    f"the running summary ({cost} tokens) outgrew the budget: it cannot be "
                    "sent next to the newest message"
                )
                break
            run.fold(result.text.strip(), end, chunk_tokens, result.model, result.details)

    def _finish(
        self, st: PlanState, run: _Run, budget: int, before: int, limit: int
    ) -> StrategyResult:
        """Trim what still does not fit, update the guard, record the new summary."""
        covered_end, chunks, calls = run.covered_end, run.chunks, run.calls
        sid = span_summary_id(
            st.history, st.prefix_len, covered_end, st.salt if not chunks else st.name
        )
        asm, with_summary = trim_view(
            st.history,
            st.prefix_len,
            summary=run.running,
            placement=st.placement,
            summary_msg_id=sid,
            tail_from=covered_end,
            cuts=st.cuts,
            counter=st.counter,
            max_tokens=budget,
        )
        trimmed = asm.tail_start > covered_end or not with_summary
        bounded = run.bounded and trimmed
        summarized = with_summary and run.running is not None
        dropped = asm.dropped_ranges(covered_end if summarized else st.prefix_len)
        # What max_chunks left unsummarized lies before the newest keep_recent messages;
        # a drop among those is the budget's doing, as it would be without the limit.
        older = sum(max(0, min(b, limit) - a) for a, b in dropped)
        recent = any(b > limit for _, b in dropped)
        notes = _notes(run, st.base_from, trimmed=trimmed, bounded=bounded, recent=recent)
        if not (run.fallback is not None and calls == 0):  # a tripped guard stays as it is
            if run.fallback is not None or (trimmed and not bounded and calls):
                st.guard.failed()
            elif calls:
                st.guard.succeeded()
        record: CheckpointRecord | None = None
        if chunks and with_summary and run.running is not None:
            details: dict[str, object] = {
                "chunks": chunks,
                "covered_messages": covered_end - st.prefix_len,
                "chunk_size": self.chunk_size,
            }
            if run.last_details:
                details["summarizer"] = run.last_details
            record = st.record(
                run.running,
                covered_end,
                asm,
                model=run.last_model,
                prompt_hash=reported_prompt_hash(run.last_details),
                tokens_before=before,
                usage=run.usage,
                details=details,
            )
        return st.result(
            asm,
            covered_end=covered_end if summarized else None,
            checkpoint=record,
            reused=st.prior if (with_summary and not chunks) else None,
            fallback=run.fallback,
            failure_code=run.failure_code,
            usage=run.usage,
            calls=calls,
            notes=notes,
            limit_reached=self._limit_reached(older) if bounded else None,
        )

    def _limit_reached(self, left: int) -> str:
        """What ``max_chunks`` cost this build: the older messages it left unsummarized."""
        plural = "s" if left != 1 else ""
        return (
            f"max_chunks={self.max_chunks}: {left} older message{plural} trimmed without a summary"
        )


@dataclass
class _Run:
    """One plan's running summary as chunks are folded into it (never shared)."""

    st: PlanState
    running: str | None
    covered_end: int
    prefix_tokens: int
    tail_tokens: int  # tokens of ``history[covered_end:]``
    chunks: int = 0
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    fallback: str | None = None
    failure_code: str | None = None
    bounded: bool = False  # stopped by max_chunks with older messages still unfolded
    last_model: str | None = None
    last_details: dict[str, object] = field(default_factory=dict)

    @classmethod
    def start(cls, st: PlanState) -> _Run:
        history, counter = st.history, st.counter
        return cls(
            st=st,
            running=st.prior_text,
            covered_end=st.base_from,
            prefix_tokens=counter.count_messages(history[: st.prefix_len]),
            tail_tokens=counter.count_messages(history[st.base_from :]),
        )

    def summary_tokens(self) -> int:
        if self.running is None:
            return 0
        return summary_message_tokens(self.running, self.st.placement, self.st.counter)

    def view_tokens(self) -> int:
        return self.prefix_tokens + self.tail_tokens + self.summary_tokens()

    def fold(
        self,
        text: str,
        end: int,
        chunk_tokens: int,
        model: str | None,
        details: Mapping[str, object],
    ) -> None:
        self.running = text
        self.covered_end = end
        self.tail_tokens -= chunk_tokens
        self.chunks += 1
        self.last_model = model or self.last_model
        self.last_details = dict(details)


def _notes(
    run: _Run, base_from: int, *, trimmed: bool, bounded: bool, recent: bool = False
) -> list[str]:
    """What the build did; ``recent``: some of the newest ``keep_recent`` messages were
    trimmed too (the budget's doing, reported apart from a ``max_chunks`` stop)."""
    notes: list[str] = []
    if run.chunks:
        notes.append(
            f"folded {run.chunks} chunk{'s' if run.chunks > 1 else ''} "
            f"({run.covered_end - base_from} messages) "
            "into the running summary"
        )
    if run.fallback is not None:
        notes.append(f"fell back: {run.fallback}")
    if bounded:
        notes.append(
            f"stopped after {run.chunks} chunks (max_chunks); the rest was trimmed with the "
            "sliding window and will be summarized by later builds"
        )
        if recent:
            notes.append("still over budget: trimmed some of the newest messages as well")
    elif trimmed:
        notes.append("still over budget: trimmed the newer messages with the sliding window")
    return notes


def _chunk_end(cuts: Sequence[int], target: int, limit: int) -> int:
    """The first safe cut at or after ``target``, never past ``limit`` (itself a safe cut)."""
    if target >= limit:
        return limit
    j = bisect.bisect_left(cuts, target)
    return min(cuts[j], limit) if j < len(cuts) else limit
