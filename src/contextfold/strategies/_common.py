"""Private helpers shared by the summarizing strategies, pruning and the pipeline.

Everything here works on index positions into the caller's history, so a strategy never
copies or mutates the input; it only decides where to cut. The pieces:

* :func:`prepare` validates pairing and measures the prefix.
* :func:`locate_checkpoint` applies the shared checkpoint rule.
* :func:`check_summary` turns an unusable answer (failure, empty, not smaller) into a reason.
* :class:`LoopGuard` stops calling a summarizer after repeated compactions that fail to get
  under budget.
* :class:`ToolBudget` counts a request's tool schemas and reserve against ``max_tokens``.

The window walker and the context assembly (``cut_points``, ``fit_tail``, ``assemble``,
``require_fit``, ``trim_view``, ``summary_room``, ``recent_start``) live in
:mod:`contextfold.strategies._window`; the base classes of the budgeted and summarizing
strategies in :mod:`contextfold.strategies._plan`.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
import time
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import BudgetError, FormatError, PairingError
from contextfold.framing import SummaryPlacement, summary_message_tokens
from contextfold.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from contextfold.strategies._assembly import Assembly
from contextfold.strategies.base import StrategyResult
from contextfold.summarizers.base import SummarizationResult
from contextfold.tokens.base import TokenCounter
from contextfold.turns import prefix_length, validate
from contextfold.usage import Usage

__all__ = [
    "LoopGuard",
    "ToolBudget",
    "add_usage",
    "build_result",
    "cap_output",
    "char_size",
    "check_messages",
    "check_option",
    "check_summary",
    "deadline_from",
    "locate_checkpoint",
    "message_chars",
    "prepare",
    "prepare_from",
    "ranges_of",
    "with_overhead_notes",
    "with_tools",
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
    """Counts consecutive compactions that failed to get under budget.

    After ``limit`` such failures the strategy stops calling its summarizer (a compaction
    loop burns money and changes nothing) and falls back until a compaction succeeds or
    :meth:`reset` is called. ``limit=0`` disables the guard.
    """

    __slots__ = ("_lock", "failures", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.failures = 0
        self._lock = threading.Lock()

    @property
    def tripped(self) -> bool:
        """True when the summarizer should not be called."""
        return self.limit > 0 and self.failures >= self.limit

    def failed(self) -> None:
        """Record a compaction that did not get under budget."""
        with self._lock:
            self.failures += 1

    def succeeded(self) -> None:
        """Record a compaction that got under budget; the count starts over."""
        with self._lock:
            self.failures = 0

    def reset(self) -> None:
        """Forget past failures."""
        self.succeeded()

    def describe(self) -> str:
        """The reason given when the guard is tripped."""
        return (
            f"loop guard: {self.failures} consecutive compactions failed to get under "
            f"budget; the summarizer is not called again until one succeeds or the guard "
            f"is reset"
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


def message_chars(message: Message) -> int:
    """Characters a message carries: text, thinking, tool arguments and results, names.

    The character measure of the ``SummaryCompactor`` seed: a free proxy for tokens.
    """
    total = len(message.name or "")
    for part in message.parts:
        if isinstance(part, TextPart):
            total += len(part.text)
        elif isinstance(part, ThinkingPart):
            total += len(part.text) + len(part.data or "")
        elif isinstance(part, ToolCallPart):
            total += len(part.name) + len(part.arguments)
        elif isinstance(part, ToolResultPart):
            total += len(part.text) + len(part.call_id)
    return total


def char_size(messages: Sequence[Message]) -> int:
    """Sum of :func:`message_chars` over ``messages``."""
    return sum(message_chars(m) for m in messages)


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
        known_tokens_before=known_tokens_before,
    )


def cap_output(configured: int | None, room: int) -> int | None:
    """``configured`` capped by ``room`` (left alone when the room is not positive)."""
    if room <= 0:
        return configured
    return room if configured is None else min(configured, room)


def check_option(name: str, value: object, minimum: int, *, budget: bool = False) -> None:
    """Reject an integer option that is missing, of the wrong type or below ``minimum``.

    Budgets raise :class:`BudgetError` (as :class:`~contextfold.strategies.SlidingWindow`
    does); other options raise :class:`ValueError`. Both are ``ValueError``s.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        error = BudgetError if budget else ValueError
        raise error(f"{name} must be an integer of at least {minimum}, got {value!r}")


def check_messages(history: Sequence[Message], start: int = 0) -> None:
    """Raise :class:`FormatError` when an item of ``history[start:]`` is not a Message."""
    for i in range(start, len(history)):
        if not isinstance(history[i], Message):
            raise FormatError(f"expected a Message, got {type(history[i]).__name__}", index=i)


class ToolBudget:
    """Mixin: the tool schemas and reserve a request carries besides its messages.

    A provider bills the tool schemas of a request as input tokens, so a context that fits
    ``max_tokens`` on its own is over budget once they are added. Strategies with this mixin
    count ``tools`` (once per counter setup) plus ``reserve_tokens`` against ``max_tokens``,
    exactly as :class:`~contextfold.strategies.SlidingWindow` does, and build their messages
    (and their sliding-window fallback) inside what is left.
    """

    tools: tuple[Mapping[str, Any], ...]
    reserve_tokens: int
    _tool_cache: dict[Hashable, int]

    def _init_tools(self, tools: Sequence[Mapping[str, Any]] | None, reserve_tokens: int) -> None:
        if isinstance(reserve_tokens, bool) or not isinstance(reserve_tokens, int):
            raise BudgetError(f"reserve_tokens must be an integer, got {reserve_tokens!r}")
        if reserve_tokens < 0:
            raise BudgetError(f"reserve_tokens must not be negative, got {reserve_tokens}")
        if isinstance(tools, (str, bytes, Mapping)):
            raise FormatError("tools must be a sequence of tool schemas (mappings)")
        tool_list = tuple(tools or ())
        for i, tool in enumerate(tool_list):
            if not isinstance(tool, Mapping):
                raise FormatError(
                    f"tool schema {i} must be a mapping, got {type(tool).__name__}", index=i
                )
        self.tools = tool_list
        self.reserve_tokens = reserve_tokens
        self._tool_cache = {}

    def tool_tokens(self, counter: TokenCounter) -> int:
        """Tokens the tool schemas cost under ``counter`` (cached per counter setup)."""
        if not self.tools:
            return 0
        key = counter.cache_key
        cached = self._tool_cache.get(key)
        if cached is None:
            cached = counter.count_tools(self.tools)
            self._tool_cache[key] = cached
        return cached

    def _budget(self, max_tokens: int, counter: TokenCounter) -> tuple[int, int]:
        """``(budget for the messages, tool tokens)``.

        Raises:
            BudgetError: the tool schemas and reserve alone exceed ``max_tokens``.
        """
        tools = self.tool_tokens(counter)
        overhead = tools + self.reserve_tokens
        if overhead > max_tokens:
            raise BudgetError(
                f"the tool schemas ({tools} tokens) and reserve_tokens ({self.reserve_tokens}) "
                f"need {overhead} tokens, over the budget of {max_tokens}",
                budget=max_tokens,
                required=overhead,
            )
        return max_tokens - overhead, tools


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


def with_tools(stage: _S, tools: Sequence[Mapping[str, Any]], reserve_tokens: int) -> _S:
    """``stage`` carrying ``tools`` and ``reserve_tokens`` where it has none of its own.

    A stage that counts tools (it has ``tools`` and ``reserve_tokens`` attributes) and has
    no schemas (or no reserve) of its own gets a shallow copy with the given ones, so its
    budget leaves room for them; its summarizer and loop guard stay shared with the
    original. Anything else is returned unchanged.
    """
    own_tools = getattr(stage, "tools", None)
    own_reserve = getattr(stage, "reserve_tokens", None)
    if not isinstance(own_tools, tuple) or not isinstance(own_reserve, int):
        return stage
    give_tools = bool(tools) and not own_tools
    give_reserve = reserve_tokens > 0 and own_reserve == 0
    if not give_tools and not give_reserve:
        return stage
    clone = copy.copy(stage)
    if give_tools:
        clone.tools = tuple(tools)  # type: ignore[attr-defined]
    if give_reserve:
        clone.reserve_tokens = reserve_tokens  # type: ignore[attr-defined]
    # The tool-token caches were filled for the old schemas: start fresh.
    for cache in ("_tool_cache", "_tool_tokens"):
        if isinstance(getattr(clone, cache, None), dict):
            setattr(clone, cache, {})
    # A strategy that passes its tools on (a pipeline to its stages) does so again.
    changed = getattr(clone, "_tools_changed", None)
    if callable(changed):
        changed()
    return clone
