"""Hybrid: a running summary grown chunk by chunk, plus the recent messages verbatim.

When the context is over budget, the oldest ``chunk_size`` messages not yet covered by the
running summary (the chunk extended to a safe cut point, so no tool pair is split) are
merged into it with one summarizer call (``kind="update"``, the previous summary passed as
``previous_summary``: facts that are still true are kept, stale ones dropped). Calls repeat,
one per chunk, until the context fits, the recent ``keep_recent`` messages are reached, or
``max_chunks`` calls were made in this plan. What is still over budget after that is trimmed
by the sliding window and the notes say so.

Nothing is ever re-summarized from scratch: the cost of a compaction is proportional to the
new chunk, not to the conversation. The running summary travels in the
:class:`~contextfold.checkpoints.CheckpointRecord` the strategy returns; handed back through
``checkpoint=``, it is reused without a call while the context fits.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.framing import SummaryPlacement, span_summary_id, summary_message_tokens
from contextfold.strategies._assembly import recent_start, summary_room, trim_view
from contextfold.strategies._common import add_usage, cap_output, check_summary, deadline_from
from contextfold.strategies._plan import PlanState, SummarizingStrategy
from contextfold.strategies.base import (
    PlanGenerator,
    SummaryCall,
)
from contextfold.summarizers.base import AsyncSummarizer, Summarizer, SummaryRequest, Usage

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
        max_chunks: most summarizer calls in one plan; bounds the cost of a build that is
            far over budget (the rest is trimmed now and summarized by later builds).
        max_failed_compactions: after this many consecutive compactions that fail to get
            under budget, stop calling the summarizer and fall back (0 disables the guard).
        tools: the tool schemas sent with each request; they count against ``max_tokens``
            (the summary, the recent messages and the fallback window fit what is left).
        reserve_tokens: tokens kept free, for example for the model's answer.

    Raises:
        ValueError: a numeric option is out of range.
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
        max_chunks: int = 8,
        max_failed_compactions: int = 3,
        tools: Sequence[Mapping[str, Any]] | None = None,
        reserve_tokens: int = 0,
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
            options=(("chunk_size", chunk_size), ("max_chunks", max_chunks)),
        )
        self.chunk_size = chunk_size
        self.max_chunks = max_chunks

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
        history, p, n, cuts = st.history, st.prefix_len, len(st.history), st.cuts
        counter = st.counter
        name, placement, prior = st.name, st.placement, st.prior
        covered_end = st.base_from
        running = st.prior_text
        salt = st.salt

        prefix_tokens = counter.count_messages(history[:p])
        # Tokens of ``history[covered_end:]``, kept up to date as chunks are folded.
        tail_tokens = counter.count_messages(history[covered_end:])

        def view_tokens(summary: str | None) -> int:
            total = prefix_tokens + tail_tokens
            if summary is not None:
                total += summary_message_tokens(summary, placement, counter)
            return total

        before = view_tokens(running)
        if before <= budget:
            self.guard.succeeded()  # no pressure: a tripped guard may try again next time
            return st.unchanged(
                st.view(),
                "reused the running summary: it and the newer messages fit the budget"
                if prior is not None
                else "the history fits the budget",
            )

        limit = recent_start(cuts, covered_end, n, self.keep_recent)
        room = summary_room(history, p, cuts, counter, budget, placement)
        max_output = cap_output(self.max_output_tokens, room)
        usage = Usage()
        calls = 0
        chunks = 0
        notes: list[str] = []
        fallback: str | None = None
        failure_code: str | None = None
        last_model: str | None = None
        last_details: dict[str, object] = {}
        deadline = deadline_from(self.deadline_s)
        if self.guard.tripped and limit > covered_end:
            fallback = self.guard.describe()
        while fallback is None and covered_end < limit and chunks < self.max_chunks:
            if view_tokens(running) <= budget:
                break
            end = _chunk_end(cuts, covered_end + self.chunk_size, limit)
            chunk = tuple(history[covered_end:end])
            request = SummaryRequest(
                chunk,
                previous_summary=running,
                kind="update" if running is not None else "summary",
                instructions=self.instructions,
                max_output_tokens=max_output,
                deadline=deadline,
            )
            chunk_tokens = counter.count_messages(chunk)
            replaced = chunk_tokens
            if running is not None:
                replaced += summary_message_tokens(running, placement, counter)
            result = yield SummaryCall(self.summarizer, request)
            calls += 1
            usage = add_usage(usage, result)
            problem = check_summary(
                result, replaced_tokens=replaced, placement=placement, counter=counter
            )
            if problem is not None:
                fallback, failure_code = problem
                break
            cost = summary_message_tokens(result.text.strip(), placement, counter)
            if cost - summary_message_tokens("", placement, counter) > room:
                fallback = (
                    f"the running summary ({cost} tokens) outgrew the budget: it cannot be "
                    "sent next to the newest message"
                )
                break
            running = result.text.strip()
            covered_end = end
            tail_tokens -= chunk_tokens
            chunks += 1
            last_model = result.model or last_model
            last_details = dict(result.details)
        if chunks:
            notes.append(
                f"folded {chunks} chunk{'s' if chunks > 1 else ''} "
                f"({covered_end - st.base_from} messages) "
                "into the running summary"
            )
        if fallback is not None:
            notes.append(f"fell back: {fallback}")

        sid = span_summary_id(history, p, covered_end, salt if not chunks else name)
        asm, with_summary = trim_view(
            history,
            p,
            summary=running,
            placement=placement,
            summary_msg_id=sid,
            tail_from=covered_end,
            cuts=cuts,
            counter=counter,
            max_tokens=budget,
        )
        guard_stop = fallback is not None and calls == 0
        trimmed = asm.tail_start > covered_end or not with_summary
        bounded = fallback is None and chunks >= self.max_chunks and covered_end < limit
        if trimmed and bounded:
            notes.append(
                f"stopped after {chunks} chunks (max_chunks); the rest was trimmed with the "
                "sliding window and will be summarized by later builds"
            )
        elif trimmed:
            notes.append("still over budget: trimmed the newer messages with the sliding window")
        if not guard_stop:
            if fallback is not None or (trimmed and not bounded and calls):
                self.guard.failed()
            elif calls:
                self.guard.succeeded()

        record: CheckpointRecord | None = None
        if chunks and with_summary and running is not None:
            details: dict[str, object] = {
                "chunks": chunks,
                "covered_messages": covered_end - p,
                "chunk_size": self.chunk_size,
            }
            if last_details:
                details["summarizer"] = last_details
            prompt_hash = last_details.get("prompt_hash")
            record = st.record(
                running,
                covered_end,
                asm,
                model=last_model,
                prompt_hash=prompt_hash if isinstance(prompt_hash, str) else None,
                tokens_before=before,
                usage=usage,
                details=details,
            )
        covered_out: int | None = None
        if with_summary and running is not None:
            covered_out = covered_end
        return st.result(
            asm,
            covered_end=covered_out,
            checkpoint=record,
            reused=prior if (with_summary and not chunks) else None,
            fallback=fallback,
            failure_code=failure_code,
            usage=usage,
            calls=calls,
            notes=notes,
        )


def _chunk_end(cuts: Sequence[int], target: int, limit: int) -> int:
    """The first safe cut at or after ``target``, never past ``limit`` (itself a safe cut)."""
    if target >= limit:
        return limit
    j = bisect.bisect_left(cuts, target)
    return min(cuts[j], limit) if j < len(cuts) else limit
