"""Correct any counter with the input-token counts providers report.

Estimates drift from what a provider bills: chars/4 is 10-30% off on code, and even an exact
tokenizer misses the provider's hidden framing. Every response carries the true figure
(``usage.prompt_tokens`` for OpenAI Chat, ``usage.input_tokens`` for the Responses API and
Anthropic), so :class:`CalibratedCounter` learns, per model, the ratio between reported and
estimated input tokens and scales its counts by it.

The wrapped counter's per-message cache is kept: each message is still counted once in its
life; calibration is a multiplication on top.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from contextfold.errors import ContextfoldError
from contextfold.messages import Message
from contextfold.tokens.base import TokenCounter

__all__ = ["CalibratedCounter", "reported_input_tokens"]


def reported_input_tokens(usage: Any) -> int | None:
    """The input tokens a provider reported, from a usage object or dict; None if absent.

    Understands OpenAI Chat (``prompt_tokens``), the Responses API (``input_tokens``) and
    Anthropic (``input_tokens`` plus ``cache_creation_input_tokens`` and
    ``cache_read_input_tokens``, which Anthropic reports separately but which were sent).
    """
    if usage is None:
        return None

    def get(name: str) -> Any:
        if isinstance(usage, Mapping):
            return usage.get(name)
        return getattr(usage, name, None)

    prompt = get("prompt_tokens")
    if isinstance(prompt, int) and not isinstance(prompt, bool):
        return prompt
    total = get("input_tokens")
    if not isinstance(total, int) or isinstance(total, bool):
        return None
    for extra in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        value = get(extra)
        if isinstance(value, int) and not isinstance(value, bool):
            total += value
    return total


class CalibratedCounter:
    """A counter scaled by what the provider reported for each model.

    Args:
        base: the counter whose estimates are corrected (an exact tokenizer or the default
            :class:`~contextfold.tokens.ApproxCounter`).
        model: the model this counter counts for; :meth:`observe` records under it unless
            told otherwise, and :meth:`for_model` gives a view for another model.
        min_ratio: the smallest correction applied.
        max_ratio: the largest correction applied.
        reject_factor: observations whose raw ratio is beyond this factor either way are
            ignored as absurd (a report for the wrong request, a cached or partial figure).
        window: how many recent observations the ratio is computed over, so it follows a
            change of model version without being thrown by one odd reply.

    The ratio of a model is ``sum(reported) / sum(estimated)`` over its recent accepted
    observations, clamped to ``[min_ratio, max_ratio]``; with no observation it is 1.
    """

    def __init__(
        self,
        base: TokenCounter,
        *,
        model: str | None = None,
        min_ratio: float = 0.5,
        max_ratio: float = 2.0,
        reject_factor: float = 5.0,
        window: int = 16,
    ) -> None:
        if not 0 < min_ratio <= 1 <= max_ratio:
            raise ContextfoldError("need 0 < min_ratio <= 1 <= max_ratio")
        if reject_factor <= 1:
            raise ContextfoldError("reject_factor must be above 1")
        if window < 1:
            raise ContextfoldError("window must be at least 1")
        self.base = base
        self.model = model
        self.min_ratio = min_ratio
        self.max_ratio = max_ratio
        self.reject_factor = reject_factor
        self.window = window
        self._observations: dict[str | None, deque[tuple[int, int]]] = {}
        self._ratios: dict[str | None, float] = {}  # kept up to date by observe()

    # -- learning ------------------------------------------------------------------------

    def observe(
        self,
        messages: Sequence[Message],
        reported_input_tokens: int,
        *,
        model: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> float | None:
        """Learn from one request: what was sent and the input tokens the provider reported.

        Args:
            messages: exactly the messages sent.
            reported_input_tokens: ``prompt_tokens`` / ``input_tokens`` from the response
                (see :func:`reported_input_tokens`).
            model: the model that answered (default: this counter's model).
            tools: the tool schemas sent with the request.

        Returns:
            The model's ratio after this observation, or None when the report was ignored
            (zero, negative, or absurd compared with the estimate).
        """
        key = self.model if model is None else model
        if not isinstance(reported_input_tokens, int) or reported_input_tokens <= 0:
            return None
        estimate = self.base.count_messages(messages)
        if tools:
            estimate += self.base.count_tools(tools)
        if estimate <= 0:
            return None
        raw = reported_input_tokens / estimate
        if raw > self.reject_factor or raw < 1 / self.reject_factor:
            return None
        history = self._observations.setdefault(key, deque(maxlen=self.window))
        history.append((reported_input_tokens, estimate))
        reported = sum(r for r, _ in history)
        estimated = sum(e for _, e in history)
        ratio = min(self.max_ratio, max(self.min_ratio, reported / estimated))
        self._ratios[key] = ratio
        return ratio

    def ratio(self, model: str | None = None) -> float:
        """The correction applied for ``model`` (default: this counter's model)."""
        return self._ratios.get(self.model if model is None else model, 1.0)

    def observations(self, model: str | None = None) -> int:
        """How many accepted observations the ratio of ``model`` rests on."""
        key = self.model if model is None else model
        return len(self._observations.get(key, ()))

    def for_model(self, model: str | None) -> CalibratedCounter:
        """A counter for another model that shares what this one learned."""
        view = CalibratedCounter(
            self.base,
            model=model,
            min_ratio=self.min_ratio,
            max_ratio=self.max_ratio,
            reject_factor=self.reject_factor,
            window=self.window,
        )
        view._observations = self._observations
        view._ratios = self._ratios
        return view

    # -- TokenCounter ----------------------------------------------------------------------

    @property
    def cache_key(self) -> Hashable:
        """Changes whenever the ratio does, so results cached by key never go stale."""
        return ("calibrated", self.base.cache_key, self.model, self.ratio())

    def _scale(self, n: int) -> int:
        r = self.ratio()
        return n if r == 1.0 else math.ceil(n * r)

    def count_text(self, text: str, /) -> int:
        return self._scale(self.base.count_text(text))

    def count_message(self, message: Message, /) -> int:
        return self._scale(self.base.count_message(message))

    def count_messages(self, messages: Sequence[Message], /) -> int:
        r = self.ratio()
        count = self.base.count_message
        if r == 1.0:
            return sum(count(m) for m in messages)
        return sum(math.ceil(count(m) * r) for m in messages)

    def count_tools(self, tools: Sequence[Mapping[str, Any]], /) -> int:
        return self._scale(self.base.count_tools(tools))

    def __repr__(self) -> str:
        return f"CalibratedCounter({self.base!r}, model={self.model!r}, ratio={self.ratio():.3f})"
