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

from collections.abc import Mapping, Sequence
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.messages import Message
from contextfold.strategies._assembly import window_result
from contextfold.strategies._config import FrozenConfig, ToolBudget, check_option
from contextfold.strategies._window import WindowFit, fit_tail, fit_window
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
    ignored (the window is always built from the messages it is given).

    Args:
        max_tokens: the budget for everything sent: messages, tool schemas and the reserve.
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
    ) -> None:
        check_option("max_tokens", max_tokens, 1)
        self.max_tokens = max_tokens
        self._init_tools(tools, reserve_tokens)
        self._freeze()

    @property
    def name(self) -> str:
        """``"sliding"``."""
        return "sliding"

    def __repr__(self) -> str:
        return (
            f"SlidingWindow(max_tokens={self.max_tokens}, tools={len(self.tools)}, "
            f"reserve_tokens={self.reserve_tokens})"
        )

    def window_budget(self, counter: TokenCounter, /) -> int:
        """Tokens of messages a window can hold: ``max_tokens`` less schemas and reserve."""
        return self.max_tokens - self.tool_tokens(counter) - self.reserve_tokens

    def fit(self, messages: Sequence[Message], *, counter: TokenCounter) -> StrategyResult:
        """Build the window directly (what :meth:`plan` returns, without a driver)."""
        tools = self.tool_tokens(counter)
        fit = fit_window(messages, self.max_tokens, counter, reserved=tools + self.reserve_tokens)
        return window_result(messages, fit, strategy=self.name, counter=counter, tools=tools)

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

        The window keeps no per-conversation state, so ``state`` is not used either.
        """
        return self.fit(messages, counter=counter)
        yield  # pragma: no cover - makes this a generator
