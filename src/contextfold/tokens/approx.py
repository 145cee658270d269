"""The default counter: characters per token, no dependencies."""

from __future__ import annotations

from collections.abc import Hashable

from contextfold.tokens.base import BaseCounter

__all__ = ["ApproxCounter"]


class ApproxCounter(BaseCounter):
    """Estimate tokens as ``ceil(len(text) / chars_per_token)``.

    Four characters per token is close for English text with OpenAI and Anthropic
    tokenizers; use about 3.3 for Anthropic on code, or calibrate with
    :class:`~contextfold.tokens.CalibratedCounter`.

    Args:
        chars_per_token: characters that make one token on average.
        **overheads: see :class:`~contextfold.tokens.base.BaseCounter`.
    """

    def __init__(self, chars_per_token: float = 4.0, **overheads: int) -> None:
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be positive")
        self.chars_per_token = float(chars_per_token)
        super().__init__(**overheads)

    def _config_key(self) -> Hashable:
        return self.chars_per_token

    def count_text(self, text: str, /) -> int:
        if not text:
            return 0
        n = len(text) / self.chars_per_token
        whole = int(n)
        return whole if whole == n else whole + 1
