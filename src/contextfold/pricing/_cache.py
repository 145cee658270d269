"""A prompt-cache simulator: what each request of one conversation is billed.

Providers match cached prompts by exact prefix. Fed the requests of a conversation one by
one (each a list of per-message token counts, a stable hash per message and a time), the
simulator tracks which prefixes are cached, when they expire, and bills each request's input
as uncached, cache writes and cache reads under a :class:`~contextfold.pricing.ModelPrices`.
It works at message granularity: a message whose hash changed breaks the prefix from there
on, as an edited message does for the provider.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from contextfold.errors import ConfigError
from contextfold.pricing._prices import ModelPrices

__all__ = ["Bill", "CacheSimulator"]


@dataclass(frozen=True, slots=True)
class Bill:
    """What one request was billed, in tokens and US dollars.

    Attributes:
        input_tokens: every input token of the request.
        cache_read_tokens: tokens served from the cache.
        cache_write_tokens: tokens written to the cache (billed at the write price).
        uncached_tokens: tokens billed at the plain input price (a prompt under the minimum
            cacheable prefix is not cached at all).
        output_tokens: tokens the model wrote.
        cost: dollars for all of the above.
        floor_cost: dollars had every message sent in an earlier request (same hash) been
            read from the cache and only new messages paid for (at the cheaper of the input
            and write prices): no TTL, no minimum prefix, no broken prefix. A lower bound on
            what any cache could bill this request.
        matched_messages: how many leading messages the cache hit covered.
        prefix_break: True when this request does not start with every message of the
            previous one, in order (an edit, a drop or a summary rewrote the prefix).
    """

    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    uncached_tokens: int
    output_tokens: int
    cost: float
    floor_cost: float
    matched_messages: int
    prefix_break: bool


@dataclass(slots=True)
class _Node:
    """One message position of the cache trie; ``expires`` marks a live cache entry there."""

    children: dict[Hashable, _Node] = field(default_factory=dict)
    expires: float = -math.inf


class CacheSimulator:
    """Bills the requests of one conversation as a provider's prompt cache would.

    One simulator follows one conversation (it holds that conversation's cache state); make
    one per conversation and per price model. The rules, from ``prices``:

    * a request shorter than ``min_cacheable_tokens`` is billed at the input price and
      caches nothing;
    * otherwise the longest live cached prefix is read (``"breakpoint"`` matching: only
      where an earlier request ended, within ``lookback_messages`` of this one's end;
      ``"longest"``: any common prefix, rounded down to ``cache_step_tokens``), and the rest
      is written at the write price, making the whole request a cache entry;
    * an entry lives ``cache_ttl_s`` seconds (the long TTL with ``long_ttl=True``) after it
      was written or, with ``refresh_on_read``, last read.

    Args:
        prices: the model's prices and cache rules.
        long_ttl: write with the long TTL (Anthropic's 1-hour cache) at its write price.

    Raises:
        ConfigError: ``prices`` is not a ModelPrices, or ``long_ttl`` is asked of a family
            without a long TTL.
    """

    def __init__(self, prices: ModelPrices, *, long_ttl: bool = False) -> None:
        if not isinstance(prices, ModelPrices):
            raise ConfigError(
                f"prices must be a ModelPrices, got {type(prices).__name__}", argument="prices"
            )
        if not isinstance(long_ttl, bool):
            raise ConfigError(f"long_ttl must be a bool, got {long_ttl!r}", argument="long_ttl")
        self.prices = prices
        self.long_ttl = long_ttl
        self._ttl = prices.ttl_s(long_ttl=long_ttl)
        self._root = _Node()
        self._previous: tuple[Hashable, ...] = ()
        self._seen: set[Hashable] = set()
        self._now = -math.inf

    def bill(
        self,
        tokens: Sequence[int],
        hashes: Sequence[Hashable],
        *,
        at: float,
        output_tokens: int = 0,
    ) -> Bill:
        """Bill one request and update the cache.

        Args:
            tokens: the token count of each message, in order (a system prompt or the tool
                schemas can be given as a first "message" of their own).
            hashes: a stable hash of each message: equal when the message is unchanged.
            at: when the request is sent, in seconds (any origin; never decreasing).
            output_tokens: tokens the model wrote, billed at the output price.

        Raises:
            ConfigError: the lists differ in length, a count is negative, ``at`` is earlier
                than the previous request's time, or ``output_tokens`` is negative.
        """
        counts = _check_request(tokens, hashes, at, output_tokens, self._now)
        keys = tuple(hashes)
        self._now = at
        total = sum(counts)
        matched, hit = self._match(keys, counts, at)
        read = self.prices.cacheable(hit) if total >= self.prices.min_cacheable_tokens else 0
        if total >= self.prices.min_cacheable_tokens:
            write, uncached = total - read, 0
            self._mark(keys, at, after=matched)
        else:
            write, uncached = 0, total
        cost = self.prices.cost(
            uncached_tokens=uncached,
            cache_read_tokens=read,
            cache_write_tokens=write,
            output_tokens=output_tokens,
            long_ttl=self.long_ttl,
        )
        seen = sum(c for k, c in zip(keys, counts, strict=True) if k in self._seen)
        floor = self.prices.cost(cache_read_tokens=seen, output_tokens=output_tokens) + min(
            self.prices.cost(uncached_tokens=total - seen),
            self.prices.cost(cache_write_tokens=total - seen, long_ttl=self.long_ttl),
        )
        self._seen.update(keys)
        broke = bool(self._previous) and keys[: len(self._previous)] != self._previous
        self._previous = keys
        return Bill(total, read, write, uncached, output_tokens, cost, floor, matched, broke)

    def _match(self, keys: tuple[Hashable, ...], counts: list[int], at: float) -> tuple[int, int]:
        """(messages, tokens) of the longest live cached prefix of ``keys``; refreshes it."""
        node = self._root
        depth = tokens = 0
        best: tuple[int, int, _Node | None] = (0, 0, None)
        longest = self.prices.prefix_match == "longest"
        lookback = self.prices.lookback_messages
        for key, count in zip(keys, counts, strict=True):
            child = node.children.get(key)
            if child is None:
                break
            node, depth, tokens = child, depth + 1, tokens + count
            in_reach = longest or lookback is None or len(keys) - depth <= lookback
            if node.expires >= at and in_reach:
                best = (depth, tokens, node)
        if best[2] is not None and self.prices.refresh_on_read:
            self._mark(keys[: best[0]], at)
        return best[0], best[1]

    def _mark(self, keys: tuple[Hashable, ...], at: float, *, after: int = 0) -> None:
        """Keep ``keys`` cached until ``at`` plus the TTL: a write, or a read that refreshes.

        Only positions deeper than ``after`` are touched (a write leaves the part it read
        alone, so an entry that is not refreshed on reads still expires on time). With
        ``"longest"`` matching every prefix becomes a live entry; otherwise only the end.
        """
        node = self._root
        longest = self.prices.prefix_match == "longest"
        for depth, key in enumerate(keys, 1):
            node = node.children.setdefault(key, _Node())
            if depth > after and (longest or depth == len(keys)):
                node.expires = max(node.expires, at + self._ttl)


def _check_request(
    tokens: Sequence[int],
    hashes: Sequence[Hashable],
    at: float,
    output_tokens: int,
    previous: float,
) -> list[int]:
    """The token counts of a valid request, or ConfigError naming what is wrong."""
    counts = list(tokens)
    if len(counts) != len(hashes):
        raise ConfigError(
            f"tokens and hashes must have one entry per message, got {len(counts)} and "
            f"{len(hashes)}",
            argument="hashes",
        )
    for c in counts:
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            raise ConfigError(
                f"tokens must be integers of at least 0, got {c!r}", argument="tokens"
            )
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at):
        raise ConfigError(f"at must be a finite time in seconds, got {at!r}", argument="at")
    if at < previous:
        raise ConfigError(
            f"at must not go back in time: {at!r} is before the previous request ({previous!r})",
            argument="at",
        )
    if isinstance(output_tokens, bool) or not isinstance(output_tokens, int) or output_tokens < 0:
        raise ConfigError(
            f"output_tokens must be an integer of at least 0, got {output_tokens!r}",
            argument="output_tokens",
        )
    return counts
