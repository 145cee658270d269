"""Checkpoint: structured compaction for long agent sessions.

When the history is over budget, everything between the system prefix and a recent tail
(about ``keep_recent_tokens``, cut where no tool pair is split) becomes one structured
checkpoint: the sections of :data:`contextfold.summarizers.prompts.CHECKPOINT_SECTIONS`, framed as
established background inside ``<compacted-summary>`` tags and placed right after the prefix.

* **Reuse before work.** A prior :class:`~contextfold.checkpoints.CheckpointRecord` handed to
  :meth:`Checkpoint.plan` is reused without any summarizer call while ``prefix + checkpoint +
  newer messages`` fits. When more must be folded, the new span starts right after what the
  prior checkpoint covered (nothing between the two is ever lost) and the prior text is merged
  through ``request.previous_summary``, not copied.
* **Split turns.** When the newest turn alone is bigger than the tail budget, the tail starts
  inside it at a safe cut; the turn's first part is summarized separately
  (``kind="turn_prefix"``) so the kept suffix still makes sense.
* **Two request modes.** ``isolated`` sends a serialized transcript with our own prompt;
  ``cache_aligned`` fills ``request.system``/``prefix``/``tools`` so the summarizer can replay
  the conversation's own request and append the instruction last (see
  :func:`contextfold.summarizers.prompts.build_cache_aligned_messages`), reusing the
  provider's cache for the system prompt and tool schemas, usually the bulk of an agent's
  prefix. A prior checkpoint is replayed as a message of its own in ``request.prefix`` (and
  passed as ``previous_summary``), so the span to condense stays exactly the conversation's
  messages.
* **Files.** Paths read and modified by tool calls are accumulated across checkpoints in
  ``CheckpointRecord.details`` (``files_read``, ``files_modified``) and listed after the
  summary when the summary does not mention them.
* **Fail closed.** A summarizer failure, a truncated or empty answer, or a checkpoint that is
  not smaller than what it replaces changes nothing: the strategy falls back to the sliding
  window (on top of the prior checkpoint when it still fits) and says why in
  ``StrategyResult.fallback`` / ``failure_code``. After ``max_failed_compactions``
  consecutive compactions that do not get under budget, the summarizer is not called again.

The tool schemas (``tools``) and ``reserve_tokens`` count against ``max_tokens``: the
messages built (checkpoint, tail, fallback window) fit what they leave, and the notes say
how many tokens the schemas took.

By default only checkpoints whose ``strategy`` is ``"checkpoint"`` are reused.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from contextfold.framing import (
    SummaryPlacement,
    span_summary_id,
)
from contextfold.messages import Message, TextPart
from contextfold.strategies._assembly import Assembly
from contextfold.strategies._common import (
    add_usage,
    check_summary,
    deadline_from,
    summarizer_fingerprint,
)
from contextfold.strategies._config import (
    DEFAULT_COMPACT_TO,
    check_compact_to,
    check_mode,
    check_option,
)
from contextfold.strategies._files import FileTrail
from contextfold.strategies._plan import PlanState, SummarizingStrategy
from contextfold.strategies._split_turn import SplitSpan, joined_text, split_span
from contextfold.strategies._window import fit_tail, next_cut
from contextfold.strategies.base import (
    PlanGenerator,
    StrategyResult,
    SummaryCall,
)
from contextfold.summarizers.base import (
    AsyncSummarizer,
    SummarizationResult,
    Summarizer,
    SummaryKind,
    SummaryRequest,
    Usage,
)
from contextfold.tokens.base import TokenCounter
from contextfold.turns import is_turn_start

__all__ = ["CHECKPOINT_PLACEMENT", "Checkpoint"]

#: The default framing: a user message holding the checkpoint in ``<compacted-summary>`` tags.
CHECKPOINT_PLACEMENT = SummaryPlacement(
    role="user",
    style="tags",
    tag="compacted-summary",
    preamble=(
        "The work so far was condensed into the checkpoint below. Treat what it records as "
        "established background, carry on from the messages that follow, and do not "
        "mention the checkpoint itself."
    ),
)


class Checkpoint(SummarizingStrategy):
    """Fold older messages into one structured, reusable checkpoint when over budget.

    Args:
        summarizer: writes the checkpoint (sync or async). With
            :class:`~contextfold.summarizers.ExtractiveSummarizer` it works offline.
        max_tokens: the token budget of the request: messages, tool schemas and reserve.
        keep_recent_tokens: tokens of the newest messages kept verbatim after the checkpoint
            (a quarter of ``max_tokens`` by default). The cut moves forward to a turn start
            when one is in reach and never splits a tool pair.
        mode: ``"isolated"`` or ``"cache_aligned"`` (see the module docstring).
        placement: how the checkpoint is framed and placed.
        max_output_tokens: cap on the checkpoint length. The strategy also caps it by the
            room left next to the prefix and the tail, so a successful checkpoint fits.
        instructions: extra focus appended to the summarizer's prompt.
        system_prompt: the conversation's system prompt when it is not part of the history
            (Anthropic's separate ``system``); replayed in cache-aligned mode.
        tools: the tool schemas sent with each request. They count against ``max_tokens``
            (the checkpoint and the tail are fitted to what they leave), and cache-aligned
            mode replays them in the summary request.
        reserve_tokens: tokens kept free besides the messages and tools, for example for the
            model's answer.
        deadline_s: seconds the summarizer calls of one plan may take in all.
        max_failed_compactions: consecutive compactions that fail to get under budget before
            the summarizer is no longer called (0 disables the guard).
        compact_to: the lower mark: a compaction keeps the verbatim tail within what this
            request size (a fraction of ``max_tokens``, or a token count) leaves, so that the
            next turns append to the compacted context instead of compacting again.

    Raises:
        ConfigError: an option is out of range or of the wrong type.
    """

    def __init__(
        self,
        summarizer: Summarizer | AsyncSummarizer,
        *,
        max_tokens: int,
        keep_recent_tokens: int | None = None,
        mode: Literal["isolated", "cache_aligned"] = "isolated",
        placement: SummaryPlacement = CHECKPOINT_PLACEMENT,
        max_output_tokens: int | None = None,
        instructions: str | None = None,
        system_prompt: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        deadline_s: float | None = None,
        max_failed_compactions: int = 3,
        reserve_tokens: int = 0,
        compact_to: float | int = DEFAULT_COMPACT_TO,
    ) -> None:
        check_option("max_tokens", max_tokens, 1)
        if keep_recent_tokens is None:
            keep_recent_tokens = max_tokens // 4
        check_option("keep_recent_tokens", keep_recent_tokens, 0)
        check_mode(mode)
        if max_output_tokens is not None:
            check_option("max_output_tokens", max_output_tokens, 1)
        check_option("max_failed_compactions", max_failed_compactions, 0)
        check_compact_to(compact_to, max_tokens)
        self.compact_to = compact_to
        self.summarizer = summarizer
        self.max_tokens = max_tokens
        self.keep_recent_tokens = keep_recent_tokens
        self.mode: Literal["isolated", "cache_aligned"] = mode
        self.placement = placement
        self.max_output_tokens = max_output_tokens
        self.instructions = instructions
        self.system_prompt = system_prompt
        self._init_tools(tools, reserve_tokens)
        self.deadline_s = deadline_s
        self.max_failed_compactions = max_failed_compactions
        self._freeze()

    @property
    def name(self) -> str:
        """``"checkpoint"``."""
        return "checkpoint"

    def __repr__(self) -> str:
        return (
            f"Checkpoint(max_tokens={self.max_tokens}, "
            f"keep_recent_tokens={self.keep_recent_tokens}, mode={self.mode!r})"
        )

    # -- planning -------------------------------------------------------------------------------

    def _tail_start(
        self,
        history: Sequence[Message],
        cuts: Sequence[int],
        base_from: int,
        counter: TokenCounter,
        prefix_tokens: int,
        budget: int,
    ) -> int:
        """Where the verbatim tail starts: within the tail budget, at a turn start if any.

        The tail never takes more than three quarters of what the prefix leaves, so a
        ``keep_recent_tokens`` larger than the budget still leaves room for the checkpoint.
        """
        n = len(history)
        keep = min(self.keep_recent_tokens, max(0, (budget - prefix_tokens) * 3 // 4))
        k = next_cut(cuts, fit_tail(history, cuts, keep, counter, floor=base_from))
        if k >= n:
            # Not even the newest unit fits the tail budget: keep the newest unit anyway.
            j = bisect.bisect_left(cuts, n) - 1
            k = cuts[j] if j >= 0 and cuts[j] >= base_from else base_from
        if k < n and not is_turn_start(history[k]):
            # Prefer whole turns: move to the next turn start inside the tail, if any.
            for c in cuts[bisect.bisect_left(cuts, k) :]:
                if c < n and is_turn_start(history[c]):
                    return c
        return k

    def _request(
        self,
        span: Sequence[Message],
        *,
        kind: SummaryKind,
        previous: str | None,
        cap: int,
        deadline: float | None,
        details: Mapping[str, Any],
        system: Sequence[Message],
        prefix: Sequence[Message],
    ) -> SummaryRequest:
        cache = self.mode == "cache_aligned"
        return SummaryRequest(
            tuple(span),
            previous_summary=previous,
            kind=kind,
            instructions=self.instructions,
            max_output_tokens=cap,
            deadline=deadline,
            mode=self.mode,
            system=tuple(system) if cache else (),
            prefix=tuple(prefix) if cache else (),
            tools=self.tools if cache else (),
            details=dict(details),
        )

    def _fold(self, st: PlanState, budget: int) -> PlanGenerator:
        """The plan (up to two summary calls: checkpoint, split-turn prefix).

        ``budget`` is the tokens left for the messages. Only the prefix and what follows
        the checkpoint are validated and cut: the covered part was checked when the
        checkpoint was made.
        """
        view = st.view()
        if view.tokens <= budget:
            return st.unchanged(
                view,
                "reused the checkpoint: it and the newer messages fit the budget"
                if st.prior is not None
                else "the history fits the budget",
                known_tokens_before=None if st.prior is not None else view.tokens,
            )
        prefix_tokens = st.counter.count_messages(st.history[: st.prefix_len])
        target = self._target(budget)  # the verbatim tail keeps to the lower mark
        k = self._tail_start(st.history, st.cuts, st.base_from, st.counter, prefix_tokens, target)
        if k <= st.base_from:
            return st.fallback(
                "nothing older than the recent tail is left to fold", None, kept="checkpoint"
            )
        if st.guard.tripped:
            return st.fallback(st.guard.describe(), None, kept="checkpoint")

        # The checkpoint and the tail together keep to the lower mark, so turns can append.
        span = split_span(st, k, target, prefix_tokens, self.max_output_tokens)
        files = FileTrail.of(st.prior)
        usage = Usage()
        results: list[SummarizationResult] = []
        texts: dict[str, str] = {}
        for part, request in self._requests(st, span, files):
            result = yield SummaryCall(self.summarizer, request)
            usage = add_usage(usage, result)
            results.append(result)
            if not result.ok or not result.text.strip():
                return self._fail(st, result, usage, len(results))
            texts[part] = result.text.strip()
        files = files.after(results, st.history[st.base_from : k])
        text = files.listed_in(joined_text(texts.get("main", st.prior_text), texts.get("turn")))
        return self._fitted(st, view, span, text, files, results, usage)

    def _requests(
        self, st: PlanState, span: SplitSpan, files: FileTrail
    ) -> list[tuple[str, SummaryRequest]]:
        """The checkpoint request for the older span, and one for a split turn's first part."""
        history, p, placement = st.history, st.prefix_len, st.placement
        deadline = deadline_from(self.deadline_s)
        details = files.details()
        system = list(history[:p])
        if self.system_prompt and not system:
            system = [Message.system(self.system_prompt, id="system_prompt")]
        prior_msgs: list[Message] = []
        if st.prior_text is not None:
            framed = TextPart(placement.frame(st.prior_text))
            prior_msgs = [Message(placement.role, (framed,), id=st.prior_sid)]
        main_span = history[st.base_from : span.turn_start]
        requests: list[tuple[str, SummaryRequest]] = []
        if main_span:
            request = self._request(
                main_span,
                kind="checkpoint",
                previous=st.prior_text,
                cap=span.main_cap,
                deadline=deadline,
                details=details,
                system=system,
                prefix=prior_msgs,
            )
            requests.append(("main", request))
        if span.split:
            request = self._request(
                history[span.turn_start : span.end],
                kind="turn_prefix",
                previous=None,
                cap=span.turn_cap,
                deadline=deadline,
                details=details,
                system=system,
                prefix=[*prior_msgs, *main_span],
            )
            requests.append(("turn", request))
        return requests

    def _fitted(
        self,
        st: PlanState,
        view: Assembly,
        span: SplitSpan,
        text: str,
        files: FileTrail,
        results: Sequence[SummarizationResult],
        usage: Usage,
    ) -> StrategyResult:
        """The result for a written checkpoint: checked, fitted, recorded (or a fallback)."""
        k, calls = span.end, len(results)
        combined = SummarizationResult.success(text)
        problem = check_summary(
            combined,
            replaced_tokens=st.replaced_tokens(k),
            placement=st.placement,
            counter=st.counter,
        )
        sid = span_summary_id(st.history, st.prefix_len, k, st.salt)
        built = st.within_budget(text, sid, k) if problem is None else None
        if built is None:
            st.guard.failed()
            reason, code = problem or (
                "the checkpoint and the newest message do not fit the budget together",
                None,
            )
            return st.fallback(reason, code, usage=usage, calls=calls, kept="checkpoint")
        notes = _notes(st, span, text, built)
        if built.tail_start > k:
            st.guard.failed()
        else:
            st.guard.succeeded()
        record = st.record(
            text,
            k,
            built,
            id="ckpt_"
            + hashlib.sha256((sid + text).encode("utf-8", "surrogatepass")).hexdigest()[:24],
            model=next((r.model for r in results if r.model), None),
            prompt_hash=summarizer_fingerprint(self.summarizer),
            tokens_before=view.tokens,
            usage=usage,
            details={
                **files.details(),
                "covered_messages": k - st.base_from,
                "split_turn": span.split,
                "mode": self.mode,
            },
        )
        return st.result(
            built,
            covered_end=k,
            checkpoint=record,
            usage=usage,
            calls=calls,
            notes=notes,
            known_tokens_before=view.tokens if st.prior is None else None,
        )

    def _fail(
        self,
        st: PlanState,
        result: SummarizationResult,
        usage: Usage,
        calls: int,
    ) -> StrategyResult:
        st.guard.failed()
        if result.ok:
            reason, code = "the summarizer returned an empty checkpoint", "empty"
        else:
            reason, code = result.reason or "the summarizer failed", result.code or "error"
        return st.fallback(reason, code, usage=usage, calls=calls, kept="checkpoint")


def _notes(st: PlanState, span: SplitSpan, text: str, built: Assembly) -> list[str]:
    k = span.end
    notes = [f"folded {k - st.base_from} messages into a checkpoint ({len(text)} characters)"]
    if st.prior is not None:
        notes.append(f"merged the previous checkpoint {st.prior.id}")
    if span.split:
        notes.append(
            f"split turn: condensed the first {k - span.turn_start} messages of the newest turn"
        )
    if built.tail_start > k:
        notes.append(
            f"the checkpoint and the recent tail were still over budget; dropped "
            f"{built.tail_start - k} more messages with the sliding window"
        )
    return notes
