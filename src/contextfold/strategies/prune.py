"""PruneToolOutputs: clear old tool outputs, model-free, before anything is summarized.

In agent conversations most tokens are tool outputs (file reads, test logs, search hits) that
mattered when they were read and rarely later. This strategy replaces the content of old tool
results with a short marker that keeps the call id (so the pair stays valid) and says which
tool ran and how much was cleared, for example ``[tool output cleared: read_file, 2,345
tokens]``. The newest results, and every result of a protected tool, are left alone.

It only shapes the context: the messages in the caller's list and in the store are never
changed, so a pruned output can always be restored. Pruning happens only when it saves at
least ``min_savings`` tokens, so a request never pays for a cache-breaking edit that buys
almost nothing. Put it first in a :class:`~contextfold.strategies.Pipeline`, before a
summarizing strategy: when pruning relieves the pressure, no summarizer is called.

Cache-stable in batches: given the conversation's state, the outputs cleared once stay
cleared and newer ones stay intact until clearing them is needed (the context would exceed
``max_tokens``) or, without a budget, until they are worth ``min_savings`` together. Then
they are cleared in one step (with a budget, down to ``compact_to``), so the requests in
between send the same prefix and the provider's prompt cache keeps hitting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConfigError
from contextfold.messages import Message, Part, ToolResultPart
from contextfold.strategies._assembly import require_fit
from contextfold.strategies._common import prepare_view, with_overhead_notes
from contextfold.strategies._config import (
    DEFAULT_COMPACT_TO,
    FrozenConfig,
    ToolBudget,
    check_compact_to,
    check_option,
    low_mark,
)
from contextfold.strategies._window import cut_points, fit_window
from contextfold.strategies.base import PlanGenerator, StrategyResult, StrategyState
from contextfold.tokens.base import TokenCounter
from contextfold.turns import group_turns

__all__ = ["DEFAULT_MARKER", "PruneToolOutputs"]

DEFAULT_MARKER = "[tool output cleared: {name}, {tokens:,} tokens]"


class PruneToolOutputs(ToolBudget, FrozenConfig):
    """Replace old tool outputs with a marker; no model involved.

    Args:
        keep_recent: the newest tool results (counted one per result) that stay intact.
        keep_recent_turns: results inside the newest this-many turns also stay intact. A
            long agent run is a single turn, so the default protects none by turn.
        protect: names of tools whose results are never cleared (instructions, skills).
        min_savings: prune only when at least this many tokens are saved in total.
        marker: the text that replaces a cleared output. Placeholders: ``{name}`` (the
            tool's name, or ``tool``), ``{tokens}``, ``{chars}`` and ``{call_id}``.
        max_tokens: with a budget, prune only when over it, oldest outputs first, stopping
            once the context fits (and ``min_savings`` is reached); if pruning everything
            eligible is not enough, the sliding window trims the rest. Without one, every
            eligible output is cleared.
        tools: the tool schemas sent with each request. With ``max_tokens`` they count
            against it (pruning and trimming aim at what is left); without one they are only
            carried (a :class:`~contextfold.strategies.Pipeline` hands its own to a stage
            that has none).
        reserve_tokens: tokens kept free besides the messages and tools (with ``max_tokens``).
        compact_to: with ``max_tokens``, the request size a batch of clearing aims for (a
            fraction of ``max_tokens``, or a token count); ``1.0`` clears only as far as the
            budget needs.

    Raises:
        ConfigError: an option is out of range or the marker has an unknown placeholder.
    """

    def __init__(
        self,
        *,
        keep_recent: int = 3,
        keep_recent_turns: int = 0,
        protect: Iterable[str] = (),
        min_savings: int = 1000,
        marker: str = DEFAULT_MARKER,
        max_tokens: int | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        reserve_tokens: int = 0,
        compact_to: float | int = DEFAULT_COMPACT_TO,
    ) -> None:
        check_option("keep_recent", keep_recent, 0)
        check_option("keep_recent_turns", keep_recent_turns, 0)
        check_option("min_savings", min_savings, 0)
        if max_tokens is not None:
            check_option("max_tokens", max_tokens, 1)
            check_compact_to(compact_to, max_tokens)
        elif not isinstance(compact_to, (int, float)) or isinstance(compact_to, bool):
            raise ConfigError(
                f"compact_to must be a number, got {compact_to!r}", argument="compact_to"
            )
        try:
            marker.format(name="tool", tokens=1, chars=1, call_id="call")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(f"bad marker {marker!r}: {exc}", argument="marker") from exc
        self.keep_recent = keep_recent
        self.keep_recent_turns = keep_recent_turns
        self.protect = frozenset(protect)
        self.min_savings = min_savings
        self.marker = marker
        self.max_tokens = max_tokens
        self.compact_to = compact_to
        self._init_tools(tools, reserve_tokens)
        self._freeze()

    @property
    def name(self) -> str:
        """``"prune"``."""
        return "prune"

    def __repr__(self) -> str:
        return (
            f"PruneToolOutputs(keep_recent={self.keep_recent}, protect={sorted(self.protect)}, "
            f"min_savings={self.min_savings}, max_tokens={self.max_tokens})"
        )

    def plan(
        self,
        messages: Sequence[Message],
        /,
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None = None,
        state: StrategyState | None = None,
    ) -> PlanGenerator:
        """Return the pruned context; never yields. ``checkpoint`` is not used.

        ``state`` carries which outputs are already cleared (see the module docstring).

        Raises:
            PairingError: the history breaks the tool-pair invariant.
            BudgetError: with ``max_tokens``, the prefix and the newest message cannot fit.
        """
        return self.prune(messages, counter=counter, state=state)
        yield  # pragma: no cover - makes this a generator

    def prune(
        self,
        messages: Sequence[Message],
        *,
        counter: TokenCounter,
        state: StrategyState | None = None,
    ) -> StrategyResult:
        """Build the pruned context directly (what :meth:`plan` returns).

        Raises:
            PairingError: the history breaks the tool-pair invariant.
            BudgetError: with ``max_tokens``, the tool schemas and reserve alone, or with the
                prefix and the newest message, exceed it.
        """
        state = state if state is not None else StrategyState()
        if self.max_tokens is None:
            return self._prune(messages, counter, None, state)
        budget, tools = self._budget(self.max_tokens, counter)
        result = self._prune(messages, counter, budget, state)
        return with_overhead_notes(result, tools, self.reserve_tokens)

    def _prune(
        self,
        messages: Sequence[Message],
        counter: TokenCounter,
        budget: int | None,
        state: StrategyState,
    ) -> StrategyResult:
        history = messages
        p = prepare_view(history)
        cuts = cut_points(history, p)
        if budget is not None:
            assert self.max_tokens is not None
            require_fit(
                history, p, cuts, counter, self.max_tokens, reserved=self.max_tokens - budget
            )
        total = counter.count_messages(history)
        through = _index_of(history, state.pruned_through, p)
        if budget is not None and total <= budget and through < p:
            return self._result(
                history, list(history), total, (), (), ["the history fits"], counter, state
            )
        names = _call_names(history)
        out = list(history)
        pruned: list[int] = []
        kept = saved = 0  # what the outputs cleared before save
        for i in range(p, through + 1):
            kept += self._clear(history, i, out, pruned, names, counter)
        if budget is not None and total - kept <= budget:
            note = f"kept the {len(pruned)} tool output messages cleared before"
            return self._trim(history, out, tuple(pruned), [note], counter, budget, state)
        target = budget if budget is None else budget - (self.max_tokens or 0) + self._low()
        protected_from = self._protected_from(history, p)
        batch: list[int] = []
        for i in range(through + 1, protected_from):
            if target is not None and total - kept - saved <= target and saved >= self.min_savings:
                break
            saved += self._clear(history, i, out, batch, names, counter)
        if not batch or saved < self.min_savings:
            note = (
                "no tool output old enough to clear"
                if not batch
                else f"clearing would save {saved} tokens, under min_savings={self.min_savings}"
            )
            for i in batch:
                out[i] = history[i]
            return self._trim(history, out, tuple(pruned), [note], counter, budget, state)
        note = f"cleared {len(batch)} old tool output messages, saving {saved} tokens"
        state = dataclasses.replace(state, pruned_through=history[batch[-1]].id)
        return self._trim(history, out, (*pruned, *batch), [note], counter, budget, state)

    def _low(self) -> int:
        assert self.max_tokens is not None
        return low_mark(self.max_tokens, self.compact_to)

    def _clear(
        self,
        history: Sequence[Message],
        i: int,
        out: list[Message],
        pruned: list[int],
        names: dict[str, str],
        counter: TokenCounter,
    ) -> int:
        """Clear message ``i``'s eligible outputs into ``out``; the tokens saved (0: none)."""
        m = history[i]
        if not m.tool_results:
            return 0
        new = self._prune_message(m, names, counter)
        if new is None:
            return 0
        gain = counter.count_message(m) - counter.count_message(new)
        if gain <= 0:
            return 0
        out[i] = new
        pruned.append(i)
        return gain

    # -- internals ----------------------------------------------------------------------

    def _protected_from(self, history: Sequence[Message], prefix_len: int) -> int:
        """Index from which tool results are protected by recency."""
        start = len(history)
        remaining = self.keep_recent
        i = len(history) - 1
        while remaining > 0 and i >= prefix_len:
            results = len(history[i].tool_results)
            if results:
                remaining -= results
                start = i
            i -= 1
        if self.keep_recent_turns:
            turns = group_turns(history)
            if turns:
                first = turns[max(0, len(turns) - self.keep_recent_turns)].start
                start = min(start, first)
        return start

    def _prune_message(
        self, message: Message, names: dict[str, str], counter: TokenCounter
    ) -> Message | None:
        """``message`` with its eligible results cleared, or None when none is eligible."""
        parts: list[Part] = []
        changed = False
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                tool = part.name or names.get(part.call_id)
                if tool not in self.protect:
                    text = self.marker.format(
                        name=tool or "tool",
                        tokens=_content_tokens(part, counter),
                        chars=len(part.text),
                        call_id=part.call_id,
                    )
                    parts.append(
                        ToolResultPart(
                            part.call_id,
                            text,
                            is_error=part.is_error,
                            name=part.name,
                            extra=part.extra,
                        )
                    )
                    changed = True
                    continue
            parts.append(part)
        return message.replace(parts=tuple(parts)) if changed else None

    def _trim(
        self,
        history: Sequence[Message],
        out: list[Message],
        pruned: tuple[int, ...],
        notes: list[str],
        counter: TokenCounter,
        budget: int | None,
        state: StrategyState,
    ) -> StrategyResult:
        tokens = counter.count_messages(out)
        dropped: tuple[tuple[int, int], ...] = ()
        if budget is not None and tokens > budget:
            fit = fit_window(out, budget, counter, check_pairing=False)
            dropped = fit.dropped_ranges  # two ranges when the window kept the request
            if dropped:
                gone = sum(b - a for a, b in dropped)
                notes.append(
                    f"still over budget after pruning: dropped {gone} "
                    "older messages with the sliding window"
                )
            out = fit.messages(out)
            tokens = fit.tokens
            pruned = tuple(i for i in pruned if not any(a <= i < b for a, b in dropped))
        return self._result(history, out, tokens, pruned, dropped, notes, counter, state)

    def _result(
        self,
        history: Sequence[Message],
        out: list[Message],
        tokens: int,
        pruned: tuple[int, ...],
        dropped: tuple[tuple[int, int], ...],
        notes: list[str],
        counter: TokenCounter,
        state: StrategyState,
    ) -> StrategyResult:
        gone = set(pruned).union(*(range(a, b) for a, b in dropped))
        kept = tuple(history[i].id for i in range(len(history)) if i not in gone)
        return StrategyResult(
            messages=tuple(out),
            strategy=self.name,
            tokens=tokens,
            history=history,
            counter=counter,
            kept=kept,
            dropped_ranges=dropped,
            pruned=tuple(history[i].id for i in pruned),
            notes=tuple(notes),
            state=state,
        )


def _index_of(history: Sequence[Message], message_id: str | None, floor: int) -> int:
    """Index of the newest message ``message_id`` at or after ``floor``; ``floor - 1`` if none."""
    if message_id is not None:
        for i in range(len(history) - 1, floor - 1, -1):
            if history[i].id == message_id:
                return i
    return floor - 1


def _call_names(history: Sequence[Message]) -> dict[str, str]:
    """Tool name of every call id in ``history``."""
    return {c.id: c.name for m in history for c in m.tool_calls}


def _content_tokens(part: ToolResultPart, counter: TokenCounter) -> int:
    """Tokens of a result's content (text and images)."""
    if isinstance(part.content, str):
        return counter.count_text(part.content)
    probe = Message("tool", (part,), id="probe")
    return max(0, counter.count_message(probe) - counter.count_message(Message("tool", id="p")))
