"""Private helpers shared by the summarizing strategies, pruning and the pipeline.

Everything here works on index positions into the caller's history, so a strategy never
copies or mutates the input; it only decides where to cut. The pieces:

* :func:`prepare` validates pairing and measures the prefix.
* :func:`locate_checkpoint` applies the shared checkpoint rule.
* :func:`check_summary` turns an unusable answer (failure, empty, not smaller) into a reason.
* :class:`LoopGuard` is one plan's view of the conversation's failure streak: it stops
  calling a summarizer after repeated compactions that fail to get under budget.

The window walker lives in :mod:`contextfold.strategies._window`, the context assembly
around it (``assemble``, ``trim_view``, ``require_fit``, ``summary_room``, ``recent_start``)
in :mod:`contextfold.strategies._assembly`, the option checks and tool budget in
:mod:`contextfold.strategies._config`, and the base classes of the budgeted and summarizing
strategies in :mod:`contextfold.strategies._plan`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import FormatError, PairingError
from contextfold.framing import SummaryPlacement, summary_message_tokens
from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.strategies._assembly import Assembly, past_leading_results
from contextfold.strategies.base import StrategyResult, StrategyState
from contextfold.summarizers.base import SummarizationResult
from contextfold.tokens.base import TokenCounter
from contextfold.turns import prefix_length, validate
from contextfold.usage import Usage

__all__ = [
    "LoopGuard",
    "add_usage",
    "build_result",
    "cap_output",
    "check_messages",
    "check_summary",
    "deadline_from",
    "locate_checkpoint",
    "prepare",
    "prepare_from",
    "prepare_view",
    "ranges_of",
    "reported_prompt_hash",
    "summarizer_fingerprint",
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


def prepare_view(history: Sequence[Message]) -> int:
    """:func:`prepare` for a view that may open, after its prefix, with tool results whose
    calls came before it: a memory reads from the message its checkpoint covers, and a
    :class:`~contextfold.strategies.pipeline.Pipeline` hands that view to every stage.

    Raises:
        PairingError: the rest of the view breaks the pairing invariant.
    """
    if not isinstance(history, Sequence):
        raise FormatError(f"expected a sequence of messages, got {type(history).__name__}")
    check_messages(history)
    p = prefix_length(history)
    start = past_leading_results(history, p)
    _validate_from(history, p, start if start > p else 0)  # no leading results: all at once
    return p


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
    _validate_from(history, p, start)
    return p, covered


def _validate_from(history: Sequence[Message], prefix_len: int, start: int) -> None:
    """Validate the prefix and ``history[start:]``; an error's ``index`` is in ``history``.

    With ``start`` 0 the whole history is validated in one pass.
    """
    if start == 0:
        validate(history, allow_pending_tail=True)
        return
    validate(history[:prefix_len])
    try:
        validate(history[start:], allow_pending_tail=True)
    except PairingError as exc:
        where = None if exc.index is None else exc.index + start
        raise PairingError(
            f"{exc} (message {where} of the history)", index=where, call_id=exc.call_id
        ) from exc


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

    The search runs from the oldest message: when an id repeats (an app that loaded each
    turn on its own gives every identical "continue" the same id), taking the newest copy
    would treat every message before it as summarized when none of them was, while the
    oldest copy at worst summarizes a few messages again. The memory passes the covered
    message itself right after the prefix, so there the first copy is the right one. Only
    a copy after which no tool call waits for its result counts (a checkpoint always ends
    between whole units); one followed by the checkpoint's ``first_kept_id`` is preferred.
    With copies but none of them such an end, the checkpoint does not apply.
    """
    if checkpoint is None or checkpoint.strategy != name or not checkpoint.summary.strip():
        return None
    target, after = checkpoint.last_covered_id, checkpoint.first_kept_id
    found: int | None = None
    seen = False
    open_ids: set[str] = set()
    for i in range(prefix_len, len(history)):
        message = history[i]
        for part in getattr(message, "parts", ()):
            if isinstance(part, ToolResultPart):
                open_ids.discard(part.call_id)
            elif isinstance(part, ToolCallPart):
                open_ids.add(part.id)
        if getattr(message, "id", None) != target:
            continue
        seen = True
        if open_ids:
            continue  # inside a tool exchange: not where a checkpoint ends
        if after is None or (i + 1 < len(history) and history[i + 1].id == after):
            return i + 1
        if found is None:
            found = i + 1
    if found is not None:
        return found
    return None if seen else prefix_len


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
    limit_reached: str | None = None,
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
    dropped = asm.dropped_ranges(drop_from)  # two ranges when the window kept the request
    kept = asm.kept_ids(history, prefix_len)
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
        limit_reached=limit_reached,
    )


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
    """What produced the text: the summarizer's own fingerprint, else its prompt set's hash.

    The prompt set is the summarizer's own (``prompts``) or its settings' (the provider
    adapters keep it in ``settings.prompts``); the default set's hash otherwise.
    """
    from contextfold.summarizers.prompts import PromptSet, prompt_hash

    own = getattr(summarizer, "prompt_hash", None)
    if isinstance(own, str):
        return own
    prompts = getattr(summarizer, "prompts", None)
    if not isinstance(prompts, PromptSet):
        prompts = getattr(getattr(summarizer, "settings", None), "prompts", None)
    return prompt_hash(prompts if isinstance(prompts, PromptSet) else None)
