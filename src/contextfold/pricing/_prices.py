"""What one model family charges for input, cache writes, cache reads and output.

Prices are data: each :class:`ModelPrices` carries where its figures come from and the date
they were read, so a table can be checked against the provider's page and replaced when it
changes. The cache mechanics (minimum cacheable prefix, TTL, how a prefix is matched) sit
beside the prices because the bill of a request depends on both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from contextfold.errors import ConfigError

__all__ = ["PER_TOKENS", "ModelPrices", "PrefixMatch", "find_prices"]

PER_TOKENS = 1_000_000
"""Prices are quoted in US dollars per this many tokens (per million), as providers do."""

PrefixMatch = Literal["breakpoint", "longest"]
"""How a provider finds the cached part of a new request.

* ``"breakpoint"`` (Anthropic): a cache entry is written where a request ends (its cache
  breakpoint); a later request hits it only if that whole earlier request is a prefix of it,
  and only within ``lookback_messages`` of its own end.
* ``"longest"`` (OpenAI, Gemini implicit caching): any prefix of an earlier request can be
  hit, rounded down to ``cache_step_tokens`` above the minimum.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPrices:
    """Prices (US dollars per million tokens) and prompt-cache rules of one model family.

    Args:
        provider: ``"anthropic"``, ``"openai"``, ``"google"`` or a provider of your own.
        family: a short name for the family (``"claude-sonnet-4-5"``).
        input: uncached input tokens.
        output: output tokens.
        cache_read: input tokens read from the cache.
        cache_write: input tokens written to the cache with the default TTL. Where writes are
            free (OpenAI before GPT-5.6, Gemini implicit caching) this equals ``input``.
        cache_write_long: input tokens written with the long TTL (Anthropic's 1-hour cache),
            or None when the provider has no long TTL or it costs the same as the default.
        min_cacheable_tokens: a prompt shorter than this is never cached.
        cache_ttl_s: seconds an unused cache entry lives with the default TTL.
        long_cache_ttl_s: seconds with the long TTL, or None when there is none.
        cache_step_tokens: a cache hit covers the minimum plus a whole number of these
            (OpenAI: 128); 1 where the whole matched prefix is read.
        prefix_match: how a cached prefix is found (see :data:`PrefixMatch`).
        lookback_messages: with ``"breakpoint"`` matching, how far before a request's end an
            earlier entry is still found (Anthropic: 20 blocks); None for no limit.
        refresh_on_read: whether a cache hit restarts the entry's TTL.
        models: the model names this entry covers. A name also covers its dated snapshots
            (``"claude-sonnet-4-5"`` covers ``"claude-sonnet-4-5-20250929"`` and
            ``"claude-sonnet-4-5@20250929"``) but not other models that merely start with
            it (``"gpt-5"`` does not cover ``"gpt-5-mini"``).
        source: where the figures come from.
        as_of: the ISO date they were read.

    Raises:
        ConfigError: a price or count is negative or not a number, a TTL is not positive, or
            a long-TTL price is given without a long TTL (or the reverse).
    """

    provider: str
    family: str
    input: float
    output: float
    cache_read: float
    cache_write: float
    cache_write_long: float | None = None
    min_cacheable_tokens: int
    cache_ttl_s: float
    long_cache_ttl_s: float | None = None
    cache_step_tokens: int = 1
    prefix_match: PrefixMatch = "breakpoint"
    lookback_messages: int | None = None
    refresh_on_read: bool = True
    models: tuple[str, ...] = ()
    source: str = ""
    as_of: str = ""

    def __post_init__(self) -> None:
        for name in ("provider", "family"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ConfigError(
                    f"{name} must be a non-empty string, got {value!r}", argument=name
                )
        for name in ("input", "output", "cache_read", "cache_write"):
            _check_price(name, getattr(self, name))
        if self.cache_write_long is not None:
            _check_price("cache_write_long", self.cache_write_long)
        _check_count("min_cacheable_tokens", self.min_cacheable_tokens, 0)
        _check_count("cache_step_tokens", self.cache_step_tokens, 1)
        if self.lookback_messages is not None:
            _check_count("lookback_messages", self.lookback_messages, 1)
        _check_ttl("cache_ttl_s", self.cache_ttl_s)
        if self.long_cache_ttl_s is not None:
            _check_ttl("long_cache_ttl_s", self.long_cache_ttl_s)
        if (self.cache_write_long is None) != (self.long_cache_ttl_s is None):
            raise ConfigError(
                "cache_write_long and long_cache_ttl_s go together: give both or neither, got "
                f"{self.cache_write_long!r} and {self.long_cache_ttl_s!r}",
                argument="cache_write_long",
            )
        if self.prefix_match not in ("breakpoint", "longest"):
            raise ConfigError(
                f"prefix_match must be 'breakpoint' or 'longest', got {self.prefix_match!r}",
                argument="prefix_match",
            )
        if isinstance(self.models, str) or not all(isinstance(m, str) for m in self.models):
            raise ConfigError(
                f"models must be a tuple of strings, got {self.models!r}", argument="models"
            )

    def write_price(self, *, long_ttl: bool = False) -> float:
        """The price of a cache write with the default or the long TTL.

        Raises:
            ConfigError: ``long_ttl`` is asked of a family that has no long TTL.
        """
        if not long_ttl:
            return self.cache_write
        if self.cache_write_long is None:
            raise ConfigError(
                f"{self.family} has no long cache TTL; pass long_ttl=False", argument="long_ttl"
            )
        return self.cache_write_long

    def ttl_s(self, *, long_ttl: bool = False) -> float:
        """Seconds an unused cache entry lives with the default or the long TTL."""
        if long_ttl:
            self.write_price(long_ttl=True)  # the same check and error
            assert self.long_cache_ttl_s is not None
            return self.long_cache_ttl_s
        return self.cache_ttl_s

    def cost(
        self,
        *,
        uncached_tokens: int = 0,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        output_tokens: int = 0,
        long_ttl: bool = False,
    ) -> float:
        """US dollars for one request with these token counts.

        Raises:
            ConfigError: a count is negative or not an integer.
        """
        _check_count("uncached_tokens", uncached_tokens, 0)
        _check_count("cache_read_tokens", cache_read_tokens, 0)
        _check_count("cache_write_tokens", cache_write_tokens, 0)
        _check_count("output_tokens", output_tokens, 0)
        dollars = (
            uncached_tokens * self.input
            + cache_read_tokens * self.cache_read
            + cache_write_tokens * self.write_price(long_ttl=long_ttl)
            + output_tokens * self.output
        )
        return dollars / PER_TOKENS

    def cacheable(self, tokens: int) -> int:
        """How many of a matched prefix of ``tokens`` tokens a cache hit can cover.

        Zero under the minimum; above it, the minimum plus whole steps.
        """
        if tokens < self.min_cacheable_tokens or tokens <= 0:
            return 0
        over = tokens - self.min_cacheable_tokens
        return self.min_cacheable_tokens + over // self.cache_step_tokens * self.cache_step_tokens

    def covers(self, model: str) -> bool:
        """Whether ``model`` is one of this entry's names or a dated snapshot of one."""
        return _covering(model.lower(), self.models) is not None


def find_prices(
    model: str, table: Sequence[ModelPrices], *, provider: str | None = None
) -> ModelPrices:
    """The entry of ``table`` whose longest model-name prefix matches ``model``.

    Raises:
        ConfigError: no entry covers ``model`` (with ``provider``, when given).
    """
    if not isinstance(model, str) or not model:
        raise ConfigError(f"model must be a non-empty string, got {model!r}", argument="model")
    name = model.lower()
    best: tuple[int, ModelPrices] | None = None
    for entry in table:
        if provider is not None and entry.provider != provider:
            continue
        found = _covering(name, entry.models)
        if found is not None and (best is None or len(found) > best[0]):
            best = (len(found), entry)
    if best is None:
        where = f" from provider {provider!r}" if provider else ""
        raise ConfigError(f"no prices known for model {model!r}{where}", argument="model")
    return best[1]


_SNAPSHOT = re.compile(r"(?:-20\d\d|@|:)")


def _covering(name: str, models: Sequence[str]) -> str | None:
    """The longest of ``models`` that ``name`` is, or is a dated snapshot of."""
    best = None
    for model in models:
        snapshot = name.startswith(model) and _SNAPSHOT.match(name, len(model)) is not None
        if (name == model or snapshot) and (best is None or len(model) > len(best)):
            best = model
    return best


def _check_price(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ConfigError(
            f"{name} must be a finite price of at least 0 (dollars per million tokens), "
            f"got {value!r}",
            argument=name,
        )


def _check_ttl(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(
            f"{name} must be a positive number of seconds, got {value!r}", argument=name
        )


def _check_count(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(
            f"{name} must be an integer of at least {minimum}, got {value!r}", argument=name
        )
