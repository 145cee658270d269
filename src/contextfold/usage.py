"""What a summarizer call cost, in tokens.

It lives apart from :mod:`contextfold.summarizers` because checkpoint records and stores carry
it too, and neither should depend on the summarizer package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a summarizer call cost, as reported by the provider.

    ``input_tokens`` counts every prompt token, cache reads and writes included (OpenAI's
    ``prompt_tokens``; Anthropic's uncached input plus its two cache figures), so the
    uncached input is ``input_tokens - cache_read_tokens - cache_write_tokens``.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def uncached_input_tokens(self) -> int:
        """The prompt tokens read neither from nor into the cache."""
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        """A JSON-ready dict."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """Inverse of :meth:`to_dict`."""
        return cls(
            int(data.get("input_tokens", 0)),
            int(data.get("output_tokens", 0)),
            int(data.get("cache_read_tokens", 0)),
            int(data.get("cache_write_tokens", 0)),
        )
