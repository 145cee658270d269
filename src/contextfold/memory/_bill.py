"""What each request of one conversation is billed with prompt caching, and what it would be.

A :class:`CacheTracker` follows the contexts one memory builds for its conversation. For
every build it reports ``stable_prefix_tokens``, the tokens at the start of the context that
are identical (as a provider receives them) to the previous context, and, when the memory has
prices, the estimated input cost of the request under those prices next to what resending the
full history would have cost. The full history only ever appends, so its bill needs no
simulation: the previous request's tokens are read from the cache while it is warm, the new
ones are written.

All of it is per conversation and in process: a restarted process starts with no previous
context (``stable_prefix_tokens`` is then None for its first build).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contextfold.messages import Message
from contextfold.pricing import CacheSimulator, ModelPrices
from contextfold.tokens.base import TokenCounter
from contextfold.usage import Usage

__all__ = ["CacheFigures", "CacheTracker", "sent_digest"]


def sent_digest(message: Message) -> bytes:
    """A stable hash of what a provider receives of ``message`` (its id is not sent)."""
    data = message.to_dict()
    data.pop("id", None)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class CacheFigures:
    """One build's cache figures (see :class:`~contextfold.memory.MemoryStats`)."""

    stable_prefix_tokens: int | None
    estimated_cost_usd: float | None
    full_history_cost_usd: float | None
    lifetime_cost_usd: float | None
    lifetime_full_history_cost_usd: float | None


class CacheTracker:
    """The cache figures of one conversation's builds (one tracker per memory).

    Args:
        prices: the model's prices and cache rules; without them only
            ``stable_prefix_tokens`` is reported.
        clock: seconds, for cache expiry (``time.time`` by default).
    """

    def __init__(
        self, prices: ModelPrices | None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.prices = prices
        self.clock = clock
        self.previous: tuple[Message, ...] | None = None
        self.previous_digests: list[bytes] = []
        self.sim = CacheSimulator(prices) if prices is not None else None
        self.full_tokens: int | None = None  # the full history of the previous request
        self.last_at: float | None = None
        self.lifetime = 0.0
        self.lifetime_full: float | None = 0.0

    def cold(self) -> bool:
        """Whether the provider's cache has surely expired since this memory's last request.

        False when unknown (no prices, or no request yet in this process): a compaction
        ahead of need is only free when the cache is known to be gone.
        """
        if self.last_at is None or self.prices is None:
            return False
        return self.clock() - self.last_at > self.prices.ttl_s()

    def record(
        self,
        messages: Sequence[Message],
        counter: TokenCounter,
        *,
        extra_tokens: int,
        total_tokens: int | None,
        summarizer_usage: Usage | None = None,
    ) -> CacheFigures:
        """Account for one request sending ``messages`` (plus ``extra_tokens`` of tools).

        ``summarizer_usage``, the summarizer calls the build made, is priced under the same
        prices (as the summarizer reported them: uncached input, cache reads and writes,
        output) and added to the request's cost: a compaction is paid for where it happens.
        Its ``input_tokens`` already count the cache reads and writes, so only the rest is
        priced as uncached input.
        """
        digests = self._digests(messages)
        counts = [counter.count_message(m) for m in messages]
        stable = None
        if self.previous is not None:
            stable = extra_tokens  # the tool schemas come first and do not change
            for k, (digest, old) in enumerate(zip(digests, self.previous_digests, strict=False)):
                if digest != old:
                    break
                stable += counts[k]
        self.previous, self.previous_digests = tuple(messages), digests
        if self.sim is None or self.prices is None:
            return CacheFigures(stable, None, None, None, None)
        at = max(self.clock(), self.last_at or -float("inf"))
        bill = self.sim.bill([extra_tokens, *counts], [b"tools", *digests], at=at)
        full = self._full_history_cost(total_tokens, extra_tokens, at)
        self.last_at = at
        cost = bill.cost
        if summarizer_usage is not None:
            cost += self.prices.cost(
                uncached_tokens=max(0, summarizer_usage.uncached_input_tokens),
                cache_read_tokens=summarizer_usage.cache_read_tokens,
                cache_write_tokens=summarizer_usage.cache_write_tokens,
                output_tokens=summarizer_usage.output_tokens,
            )
        self.lifetime += cost
        if full is None or self.lifetime_full is None:
            self.lifetime_full = None
        else:
            self.lifetime_full += full
        return CacheFigures(stable, cost, full, self.lifetime, self.lifetime_full)

    def _digests(self, messages: Sequence[Message]) -> list[bytes]:
        """Digests of ``messages``, reusing the previous context's for the same objects."""
        previous = self.previous or ()
        out = []
        for k, m in enumerate(messages):
            if k < len(previous) and previous[k] is m:
                out.append(self.previous_digests[k])
            else:
                out.append(sent_digest(m))
        return out

    def _full_history_cost(self, total: int | None, extra: int, at: float) -> float | None:
        """The bill of resending the whole history: read what was sent before, write the rest."""
        assert self.prices is not None
        if total is None:
            self.full_tokens = None
            return None
        total += extra
        warm = self.last_at is not None and at - self.last_at <= self.prices.ttl_s()
        read = self.full_tokens if (warm and self.full_tokens is not None) else 0
        read = self.prices.cacheable(min(read, total))
        self.full_tokens = total
        if total < self.prices.min_cacheable_tokens:
            return self.prices.cost(uncached_tokens=total)
        return self.prices.cost(cache_read_tokens=read, cache_write_tokens=total - read)
