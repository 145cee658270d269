"""The sliding window: keep the system prefix and the newest whole turns that fit.

This is the strategy every other one falls back to, so it has to be cheap, exact and never
wrong about tool pairs:

* The leading system and developer messages are always kept, in order.
* After them come the newest *whole turns* that fit the budget. When even the newest turn is
  too big, its opening user message (the request) is kept, followed by the newest whole
  units of the turn that fit; the middle is dropped and the result says so (a note, and two
  dropped ranges). A tool call is never separated from its results (parallel calls and
  Anthropic's results-in-a-user-message included), and the window never starts on a tool
  result or, when the history has a user message after the prefix, on an assistant message.
* When the prefix, the request and the newest unit cannot fit together,
  :class:`BudgetError` says so; its ``required`` is a budget at which the window fits.

Cache-stable by default: with the conversation's :class:`StrategyState`, the window keeps
starting where the previous context started, so each context is the previous one with the
new messages appended and the provider's prompt cache keeps hitting. Only when that would
exceed ``max_tokens`` does the window move, and then in one step, down to ``compact_to``
(a share of ``max_tokens``, 0.6 by default), so that the next requests can append again.
``compact_to=1.0`` moves the window on every request that would not fit (the classic
per-turn window).

The cost of a build does not grow with the length of the history: the window is found by
walking back from the newest message and stops as soon as the budget is spent. The part that
is left out is never scanned, counted or validated; it is recorded as an index range
(``StrategyResult.dropped_ranges``) and ``tokens_before`` stays lazy. With the per-message count
cache, a steady-state build over a million messages costs what it costs over a thousand.

:func:`fit_window` (defined in :mod:`contextfold.strategies._window`, re-exported here) is the
one window walker: summarizing strategies call it to fit the recent tail after a summary, and
for their fallback.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import BudgetError
from contextfold.messages import Message
from contextfold.strategies._assembly import window_result
from contextfold.strategies._config import (
    DEFAULT_COMPACT_TO,
    FrozenConfig,
    ToolBudget,
    check_compact_to,
    check_option,
    low_mark,
)
from contextfold.strategies._window import (
    WindowFit,
    anchor_of,
    fit_anchored,
    fit_tail,
    fit_window,
)
from contextfold.strategies.base import PlanGenerator, StrategyResult, StrategyState
from contextfold.tokens.base import TokenCounter

__all__ = [
    "SlidingWindow",
    "WindowFit",
    "fit_tail",
    "fit_window",
    "window_result",
]


class SlidingWindow(ToolBudget, FrozenConfig):
    """Keep the system prefix and the newest whole turns that fit ``max_tokens``.

    A sans-I/O strategy whose :meth:`plan` never yields: it needs no summarizer. It drops
    old turns and never summarizes them, so a prior checkpoint passed to :meth:`plan` is
    ignored (the window is always built from the messages it is given). Given the
    conversation's state, it only appends until the budget is reached, then moves the
    window once, down to ``compact_to`` (see the module docstring).

    Args:
        max_tokens: the budget for everything sent: messages, tool schemas and the reserve.
        compact_to: the request size a move brings the window down to: a fraction of
            ``max_tokens`` (float in (0, 1]) or a token count (int). ``1.0`` moves the
            window every time it would not fit.
        tools: the tool schemas sent with each request; they count against the budget.
        reserve_tokens: tokens kept free, for example for the model's answer.

    Raises:
        ConfigError: an option is out of range or of the wrong type.

    Example:
        >>> from contextfold.strategies.run import run
        >>> ctx = run(SlidingWindow(8000), history)  # doctest: +SKIP
    """

    def __init__(
        self,
        max_tokens: int,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        reserve_tokens: int = 0,
        compact_to: float | int = DEFAULT_COMPACT_TO,
    ) -> None:
        check_option("max_tokens", max_tokens, 1)
        check_compact_to(compact_to, max_tokens)
        self.max_tokens = max_tokens
        self.compact_to = compact_to
        self._init_tools(tools, reserve_tokens)
        self._freeze()

    @property
    def name(self) -> str:
        """``"sliding"``."""
        return "sliding"

    def __repr__(self) -> str:
        return (
            f"SlidingWindow(max_tokens={self.max_tokens}, tools={len(self.tools)}, "
            f"reserve_tokens={self.reserve_tokens}, compact_to={self.compact_to!r})"
        )

    def window_budget(self, counter: TokenCounter, /) -> int:
        """Tokens of messages a window can hold: ``max_tokens`` less schemas and reserve."""
        return self.max_tokens - self.tool_tokens(counter) - self.reserve_tokens

    def fit(
        self,
        messages: Sequence[Message],
        *,
        counter: TokenCounter,
        state: StrategyState | None = None,
    ) -> StrategyResult:
        """Build the window directly (what :meth:`plan` returns, without a driver).

        Raises:
            BudgetError: the prefix, the request and the newest unit cannot fit.
            PairingError: the part that would be sent breaks the tool-pair invariant.
        """
        state = state if state is not None else StrategyState()
        tools = self.tool_tokens(counter)
        reserved = tools + self.reserve_tokens
        fit = None
        if state.window is not None:
            fit = fit_anchored(messages, state.window, self.max_tokens, counter, reserved=reserved)
        note = "appended to the previous window"
        # A cold cache makes a move free: take it now rather than at the budget.
        low = low_mark(self.max_tokens, self.compact_to)
        cold = fit is not None and state.cache_cold and fit.tokens + reserved > low
        if cold:
            fit = None
        if fit is None:
            fit, note = self._compact(messages, counter, reserved)
            if cold:
                note = f"the prompt cache had expired: {note}"
        result = window_result(messages, fit, strategy=self.name, counter=counter, tools=tools)
        return dataclasses.replace(
            result,
            notes=(*result.notes, note),
            state=dataclasses.replace(state, window=anchor_of(messages, fit), cache_cold=False),
        )

    def _compact(
        self, messages: Sequence[Message], counter: TokenCounter, reserved: int
    ) -> tuple[WindowFit, str]:
        """The window refitted from scratch: to the lower mark once anything must go."""
        full = fit_window(messages, self.max_tokens, counter, reserved=reserved)
        low = low_mark(self.max_tokens, self.compact_to)
        if not full.dropped_ranges:
            return full, "the history fits the budget"
        if low >= self.max_tokens:
            return full, "moved the window (no lower mark)"
        try:
            fit = fit_window(messages, low, counter, reserved=reserved)
        except BudgetError:
            return full, f"moved the window; the lower mark ({low} tokens) is too small for it"
        return fit, f"moved the window down to the lower mark ({low} of {self.max_tokens} tokens)"

    def plan(
        self,
        messages: Sequence[Message],
        /,
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None = None,
        state: StrategyState | None = None,
    ) -> PlanGenerator:
        """Return the window; never yields. ``checkpoint`` is ignored (see the class doc).

        ``state`` carries where the previous window began (see :meth:`fit`).
        """
        return self.fit(messages, counter=counter, state=state)
        yield  # pragma: no cover - makes this a generator
