"""Private helpers shared by the summarizing strategies, pruning and the pipeline.

Everything here works on index positions into the caller's history, so a strategy never
copies or mutates the input; it only decides where to cut. The pieces:

* :func:`prepare` validates pairing and measures the prefix.
* :func:`cut_points` lists the safe cut points after the prefix (no tool pair split).
* :func:`fit_tail` walks units from the newest back while they fit a budget: the sliding
  window every summarizing strategy falls back to.
* :func:`assemble` builds ``prefix + [summary] + tail`` inside the budget, trimming the tail
  pair-safely when the summary alone does not make room.
* :func:`locate_checkpoint` applies the shared checkpoint rule.
* :func:`check_summary` turns an unusable answer (failure, empty, not smaller) into a reason.
* :class:`LoopGuard` is one plan's view of the conversation's failure streak: it stops
  calling a summarizer after repeated compactions that fail to get under budget.
* :class:`ToolBudget` counts a request's tool schemas and reserve against ``max_tokens``.

The base classes of the budgeted and summarizing strategies live in
:mod:`contextfold.strategies._plan`.
"""

from __future__ import annotations

import bisect
import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import BudgetError, FormatError, PairingError
from contextfold.framing import SummaryPlacement, place_summary, summary_message_tokens
from contextfold.messages import Message
from contextfold.strategies.base import StrategyResult, StrategyState
from contextfold.strategies.sliding import fit_window
from contextfold.summarizers.base import SummarizationResult
from contextfold.tokens.base import TokenCounter
from contextfold.turns import prefix_length, units, validate
from contextfold.usage import Usage

__all__ = [
    "Assembly",
    "LoopGuard",
    "add_usage",
    "assemble",
    "build_result",
    "cap_output",
    "check_messages",
    "check_summary",
    "cut_points",
    "deadline_from",
    "fit_tail",
    "locate_checkpoint",
    "prepare",
    "prepare_from",
    "ranges_of",
    "recent_start",
    "reported_prompt_hash",
    "require_fit",
    "summarizer_fingerprint",
    "summary_room",
    "trim_view",
    "with_overhead_notes",
]

_S = TypeVar("_S")


def prepare(history: Sequence[Message]) -> int:
    """Validate the tool-pair invariant and return the prefix length.

    Calls still unanswered at the very end are accepted: an agent may be in the middle of
    running its tools, and the unit holding them is kept or dropped whole.

    Raises:
        PairingError: the history breaks the pairing invariant.
    """
    if not isinstance(history, Sequence):
        raise FormatError(f"expected a sequence of messages, got {type(history).__name__}")
    check_messages(history)
    validate(history, allow_pending_tail=True)
    return prefix_length(history)


def prepare_from(
    history: Sequence[Message],
    checkpoint: CheckpointRecord | None,
    name: str,
) -> tuple[int, int | None]:
    """Prefix length and where the checkpoint's coverage ends (see :func:`locate_checkpoint`).

    Validates the prefix and the messages after the checkpoint: those are what the context
    and the next summary request are built from. The covered part was checked when the
    checkpoint was made, so a steady-state build costs what follows the checkpoint, not the
    whole history.

    Raises:
        PairingError: the checked part breaks the pairing invariant; ``index`` is the
            position in ``history``.
    """
    if not isinstance(history, Sequence):
        raise FormatError(f"expected a sequence of messages, got {type(history).__name__}")
    for i, m in enumerate(history):  # the prefix scan reads roles: fail clearly on junk
        if not isinstance(m, Message):
            raise FormatError(f"expected a Message, got {type(m).__name__}", index=i)
        if m.role not in ("system", "developer"):
            break
    p = prefix_length(history)
    covered = locate_checkpoint(history, p, checkpoint, name)
    start = p if covered is None else covered
    check_messages(history, start)
    validate(history[:p])
    if start == 0:
        validate(history, allow_pending_tail=True)
    else:
        try:
            validate(history[start:], allow_pending_tail=True)
        except PairingError as exc:
            where = None if exc.index is None else exc.index + start
            raise PairingError(
                f"{exc} (message {where} of the history)", index=where, call_id=exc.call_id
            ) from exc
    return p, covered


def cut_points(history: Sequence[Message], start: int) -> list[int]:
    """Sorted indices ``>= start`` where a cut splits no tool pair; ends with ``len(history)``.

    An unanswered call at the end makes its unit run to the end, so ``len(history)`` is
    always a valid end of the tail.
    """
    points = [a for a, _ in units(history, start)]
    points.append(len(history))
    return points


def fit_tail(
    history: Sequence[Message],
    cuts: Sequence[int],
    budget: int,
    counter: TokenCounter,
    *,
    floor: int = 0,
) -> int:
    """The earliest cut ``c >= floor`` in ``cuts`` with ``history[c:]`` within ``budget``.

    Walks units from the newest back, so the cost is proportional to what is kept, not to
    the length of the history. Returns ``len(history)`` when not even the newest unit fits.
    """
    n = len(history)
    total = 0
    best = n
    count = counter.count_message
    lo = bisect.bisect_left(cuts, floor)
    for j in range(len(cuts) - 1, lo - 1, -1):
        c = cuts[j]
        if c >= n:
            continue
        end = cuts[j + 1] if j + 1 < len(cuts) else n
        total += sum(count(history[i]) for i in range(c, end))
        if total > budget:
            break
        best = c
    return best


@dataclass(frozen=True, slots=True)
class Assembly:
    """A built context and where its verbatim tail starts in the history."""

    messages: list[Message]
    tokens: int
    tail_start: int


def assemble(
    history: Sequence[Message],
    prefix_len: int,
    *,
    summary: str | None,
    placement: SummaryPlacement,
    summary_msg_id: str,
    tail_from: int,
    cuts: Sequence[int],
    counter: TokenCounter,
    max_tokens: int | None,
) -> Assembly | None:
    """``prefix + [summary] + history[tail_start:]`` with ``tail_start >= tail_from``.

    The tail is trimmed by ``sliding.fit_window`` until the whole fits ``max_tokens``: by
    whole turns (the sliding window) without a summary, by whole units after a user-role
    one. Returns
    None when even the newest unit does not fit next to the prefix and the summary. With
    ``max_tokens=None`` nothing is trimmed.
    """
    n = len(history)
    prefix = list(history[:prefix_len])
    if max_tokens is None:
        start = tail_from
    else:
        reserved = 0
        if summary is not None:
            reserved = summary_message_tokens(summary, placement, counter)
        try:
            fit = fit_window(
                history,
                max_tokens,
                counter,
                min_start=tail_from,
                reserved=reserved,
                # After a user-role summary the tail may start on any unit (an assistant
                # message then follows the summary), which uses the budget fully. Without
                # one, or after a system-role summary, keep the sliding window's whole turns
                # so the first message after the prefix stays a user message.
                whole_turns=summary is None or placement.role != "user",
                check_pairing=False,
            )
        except BudgetError:
            return None
        start = fit.start
        if start >= n and tail_from < n:
            return None
    while True:
        tail = list(history[start:])
        if summary is None:
            messages = prefix + tail
        else:
            messages = place_summary(
                prefix, summary, tail, placement=placement, message_id=summary_msg_id
            )
        tokens = counter.count_messages(messages)
        if max_tokens is None or tokens <= max_tokens:
            return Assembly(messages, tokens, start)
        # A counter that is not additive under merging: give up one more unit.
        k = bisect.bisect_right(cuts, start)
        if k >= len(cuts) or cuts[k] >= n:
            return None
        start = cuts[k]


def require_fit(
    history: Sequence[Message],
    prefix_len: int,
    cuts: Sequence[int],
    counter: TokenCounter,
    max_tokens: int,
    *,
    reserved: int = 0,
) -> None:
    """Raise :class:`BudgetError` when the prefix and the newest unit cannot fit together.

    Checked before any summarizer call: if this fails, no strategy can build a context.
    ``reserved`` (tool schemas, the answer's reserve) counts against ``max_tokens`` too, and
    the error's ``required`` includes it.
    """
    prefix_tokens = counter.count_messages(history[:prefix_len])
    n = len(history)
    newest = 0
    if prefix_len < n:
        k = bisect.bisect_left(cuts, n) - 1
        last = cuts[k] if k >= 0 else prefix_len
        newest = counter.count_messages(history[last:])
    required = prefix_tokens + newest + reserved
    if required > max_tokens:
        what = "the system prefix" if newest == 0 else "the system prefix and the newest message"
        extra = f" (plus {reserved} for tool schemas and reserve)" if reserved else ""
        raise BudgetError(
            f"{what}{extra} need {required} tokens, over the budget of {max_tokens}",
            budget=max_tokens,
            required=required,
        )


def locate_checkpoint(
    history: Sequence[Message],
    prefix_len: int,
    checkpoint: CheckpointRecord | None,
    name: str,
) -> int | None:
    """Where the messages after ``checkpoint`` start, or None when it does not apply.

    A checkpoint applies when its strategy is ``name``. If its ``last_covered_id`` is in the
    history, the messages after the prefix up to it are covered; if not, the caller passed
    only what follows the checkpoint, so everything after the prefix is new.
    """
    if checkpoint is None or checkpoint.strategy != name or not checkpoint.summary.strip():
        return None
    target = checkpoint.last_covered_id
    for i in range(len(history) - 1, prefix_len - 1, -1):
        if getattr(history[i], "id", None) == target:
            return i + 1
    return prefix_len


def check_summary(
    result: SummarizationResult,
    *,
    replaced_tokens: int,
    placement: SummaryPlacement,
    counter: TokenCounter,
) -> tuple[str, str] | None:
    """``(reason, code)`` when ``result`` cannot be used, else None.

    Fail closed: any failure code, an empty text, or a summary that costs at least as many
    tokens as what it replaces.
    """
    if not result.ok:
        return (result.reason or "the summarizer failed", result.code or "error")
    if not result.text.strip():
        return ("the summarizer returned an empty summary", "empty")
    cost = summary_message_tokens(result.text, placement, counter)
    if cost >= replaced_tokens:
        return (
            f"the summary ({cost} tokens) is not smaller than what it replaces "
            f"({replaced_tokens} tokens)",
            "not_smaller",
        )
    return None


class LoopGuard:
    """One plan's view of a conversation's failure streak.

    Counts consecutive compactions that failed to get under budget. After ``limit`` such
    failures the strategy stops calling its summarizer (a compaction loop burns money and
    changes nothing) and falls back until a build needs no compaction or one succeeds.
    ``limit=0`` disables the guard.

    A guard lives for one plan only: it starts from the conversation's
    :class:`~contextfold.strategies.StrategyState` and :meth:`state` is what the plan hands
    back, so nothing is shared between conversations or requests.
    """

    __slots__ = ("failures", "limit")

    def __init__(self, limit: int, failures: int = 0) -> None:
        self.limit = limit
        self.failures = failures

    @property
    def tripped(self) -> bool:
        """True when the summarizer should not be called."""
        return self.limit > 0 and self.failures >= self.limit

    def failed(self) -> None:
        """Record a compaction that did not get under budget."""
        self.failures += 1

    def succeeded(self) -> None:
        """Record a compaction that got under budget (or none needed); the count starts over."""
        self.failures = 0

    def state(self) -> StrategyState:
        """The conversation's state after this plan."""
        return StrategyState(failed_compactions=self.failures)

    def describe(self) -> str:
        """The reason given when the guard is tripped."""
        return (
            f"loop guard: {self.failures} consecutive compactions failed to get under "
            f"budget; the summarizer is not called again until a build needs no compaction "
            f"or one succeeds"
        )


def deadline_from(seconds: float | None) -> float | None:
    """An absolute ``time.monotonic()`` deadline ``seconds`` from now (None passes through)."""
    return None if seconds is None else time.monotonic() + seconds


def ranges_of(indices: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Compress sorted indices into half-open ``(start, end)`` runs."""
    out: list[tuple[int, int]] = []
    for i in indices:
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return tuple(out)


def add_usage(total: Usage, result: SummarizationResult) -> Usage:
    """``total`` plus the usage ``result`` reports, if any."""
    return total + result.usage if result.usage is not None else total


def build_result(
    name: str,
    history: Sequence[Message],
    counter: TokenCounter,
    asm: Assembly,
    *,
    prefix_len: int,
    covered_end: int | None,
    checkpoint: CheckpointRecord | None = None,
    reused: CheckpointRecord | None = None,
    fallback: str | None = None,
    failure_code: str | None = None,
    usage: Usage | None = None,
    calls: int = 0,
    notes: Sequence[str] = (),
    known_tokens_before: int | None = None,
    state: StrategyState | None = None,
) -> StrategyResult:
    """A :class:`StrategyResult` for ``prefix + [summary] + history[asm.tail_start:]``.

    ``covered_end`` is where the summary's coverage ends (None without a summary). A summary
    of messages the caller did not pass in (a checkpoint whose covered messages were left
    out) is recorded as the empty range ``(prefix_len, prefix_len)``, so the result still
    reports that it carries a summary.
    """
    summarized: tuple[tuple[int, int], ...] = ()
    drop_from = prefix_len
    if covered_end is not None:
        summarized = ((prefix_len, covered_end),)
        drop_from = covered_end
    dropped = ((drop_from, asm.tail_start),) if asm.tail_start > drop_from else ()
    kept = tuple(m.id for m in history[:prefix_len]) + tuple(
        m.id for m in history[asm.tail_start :]
    )
    return StrategyResult(
        messages=tuple(asm.messages),
        strategy=name,
        tokens=asm.tokens,
        history=history,
        counter=counter,
        kept=kept,
        dropped_ranges=dropped,
        summarized_ranges=summarized,
        checkpoint=checkpoint,
        reused_checkpoint=reused,
        fallback=fallback,
        failure_code=failure_code,
        usage=usage if usage is not None else Usage(),
        summary_calls=calls,
        notes=tuple(notes),
        state=state if state is not None else StrategyState(),
        known_tokens_before=known_tokens_before,
    )


def recent_start(cuts: Sequence[int], base_from: int, n: int, keep_recent: int) -> int:
    """Where the verbatim tail of the newest ``keep_recent`` messages starts.

    The cut moves back to the nearest safe point (keeping a little more) so no tool pair is
    split; when there is none after ``base_from`` it moves forward instead, but never so far
    that the tail is empty. Returns ``base_from`` when nothing older can be summarized.
    """
    target = max(base_from, n - keep_recent)
    if target <= base_from:
        return base_from
    i = bisect.bisect_right(cuts, target) - 1
    if i >= 0 and cuts[i] > base_from:
        return cuts[i]
    j = bisect.bisect_left(cuts, target)
    if j < len(cuts) and cuts[j] < n:
        return cuts[j]
    return base_from


def trim_view(
    history: Sequence[Message],
    prefix_len: int,
    *,
    summary: str | None,
    placement: SummaryPlacement,
    summary_msg_id: str,
    tail_from: int,
    cuts: Sequence[int],
    counter: TokenCounter,
    max_tokens: int,
) -> tuple[Assembly, bool]:
    """The sliding-window fallback, on top of ``summary`` when it still fits.

    Returns the assembly and whether the summary was kept. Without room for the summary next
    to the newest unit, the summary is left out and the window runs over the whole history.
    :func:`require_fit` must have passed, so the plain window always fits.
    """
    if summary is not None:
        asm = assemble(
            history,
            prefix_len,
            summary=summary,
            placement=placement,
            summary_msg_id=summary_msg_id,
            tail_from=tail_from,
            cuts=cuts,
            counter=counter,
            max_tokens=max_tokens,
        )
        if asm is not None:
            return asm, True
    asm = assemble(
        history,
        prefix_len,
        summary=None,
        placement=placement,
        summary_msg_id=summary_msg_id,
        tail_from=prefix_len,
        cuts=cuts,
        counter=counter,
        max_tokens=max_tokens,
    )
    if asm is None:  # pragma: no cover - excluded by require_fit
        raise BudgetError("the newest message does not fit the budget", budget=max_tokens)
    return asm, False


def summary_room(
    history: Sequence[Message],
    prefix_len: int,
    cuts: Sequence[int],
    counter: TokenCounter,
    max_tokens: int,
    placement: SummaryPlacement,
) -> int:
    """Most tokens a summary's text may take and still fit beside the prefix and newest unit.

    Used to cap ``max_output_tokens`` and to reject a summary that could never be sent.
    """
    n = len(history)
    k = bisect.bisect_left(cuts, n) - 1
    last = cuts[k] if k >= 0 else prefix_len
    fixed = counter.count_messages(history[:prefix_len]) + counter.count_messages(history[last:])
    framing = summary_message_tokens("", placement, counter)
    return max_tokens - fixed - framing


def cap_output(configured: int | None, room: int) -> int | None:
    """``configured`` capped by ``room`` (left alone when the room is not positive)."""
    if room <= 0:
        return configured
    return room if configured is None else min(configured, room)


def check_messages(history: Sequence[Message], start: int = 0) -> None:
    """Raise :class:`FormatError` when an item of ``history[start:]`` is not a Message."""
    for i in range(start, len(history)):
        if not isinstance(history[i], Message):
            raise FormatError(f"expected a Message, got {type(history[i]).__name__}", index=i)


def with_overhead_notes(result: StrategyResult, tools: int, reserve: int) -> StrategyResult:
    """``result`` with notes saying what the tool schemas and reserve took from the budget."""
    extra: list[str] = []
    if tools:
        extra.append(f"tool schemas cost {tools} tokens of the budget")
    if reserve:
        extra.append(f"reserved {reserve} tokens of the budget")
    if not extra:
        return result
    return dataclasses.replace(result, notes=(*result.notes, *extra))


def reported_prompt_hash(details: Mapping[str, Any]) -> str | None:
    """The prompt hash a summarizer reported in its result details, if any."""
    value = details.get("prompt_hash")
    return value if isinstance(value, str) else None


def summarizer_fingerprint(summarizer: object) -> str:
    """What produced the text: the summarizer's own fingerprint, else its prompt set's hash."""
    from contextfold.prompts import PromptSet, prompt_hash

    own = getattr(summarizer, "prompt_hash", None)
    if isinstance(own, str):
        return own
    prompts = getattr(summarizer, "prompts", None)
    return prompt_hash(prompts if isinstance(prompts, PromptSet) else None)
