"""When an early compaction pays for itself under prompt caching.

A context that only appends is read from the cache at the read price, request after request.
Compacting it ahead of need (from ``context_tokens`` down to ``compacted_tokens``) costs once:
the compacted context is written at the write price instead of the old one being read, plus
whatever the summary call costs. From then on each request reads ``context_tokens -
compacted_tokens`` fewer cached tokens. The compaction pays back after

    n = (compacted * write - context * read + summary) / ((context - compacted) * read)

requests (prices per token). With Anthropic's 5-minute cache (write 1.25x, read 0.1x of the
input price) a 3,500-token context compacted to 2,400 tokens needs about 24 requests: while
the cache is warm an early compaction rarely pays, which is why the strategies compact only
when a request would not fit, or early once the cache has expired (then the compaction writes
nothing that was cached, and ``n`` is zero).
"""

from __future__ import annotations

import math

from contextfold.errors import ConfigError
from contextfold.pricing._prices import PER_TOKENS, ModelPrices

__all__ = ["payback_requests"]


def payback_requests(
    prices: ModelPrices,
    *,
    context_tokens: int,
    compacted_tokens: int,
    summary_cost_usd: float = 0.0,
    cache_warm: bool = True,
) -> float:
    """How many later requests an early compaction needs to pay for itself.

    Args:
        prices: the model's prices.
        context_tokens: the context as it is (cached, when ``cache_warm``).
        compacted_tokens: the context after the compaction.
        summary_cost_usd: what writing the summary costs (0 for a window or offline summary).
        cache_warm: whether the current context is still in the provider's cache. When it is
            not, the next request writes either context anyway.

    Returns:
        The number of requests (0 when it pays at once, ``math.inf`` when it never does).

    Raises:
        ConfigError: a token count is negative, or the compaction does not shrink anything.
    """
    if context_tokens < 0 or compacted_tokens < 0:
        raise ConfigError("token counts must not be negative", argument="context_tokens")
    if compacted_tokens >= context_tokens:
        raise ConfigError(
            f"compacted_tokens ({compacted_tokens}) must be below context_tokens "
            f"({context_tokens})",
            argument="compacted_tokens",
        )
    write = prices.write_price() / PER_TOKENS
    read = prices.cache_read / PER_TOKENS
    now = compacted_tokens * write + summary_cost_usd
    now -= context_tokens * (read if cache_warm else write)
    saved = (context_tokens - compacted_tokens) * read
    if now <= 0:
        return 0.0
    return now / saved if saved > 0 else math.inf
