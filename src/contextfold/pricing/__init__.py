"""What requests cost with prompt caching: price tables and a cache simulator.

A :class:`ModelPrices` holds one model family's prices (US dollars per million tokens for
input, cache writes, cache reads and output) and its prompt-cache rules (minimum cacheable
prefix, TTL, how a prefix is matched), with the source and date of its figures.
:data:`BUILTIN_PRICES` covers the Anthropic, OpenAI and Gemini families; :func:`prices_for`
finds a model's entry there, in your own table, or in ``genai-prices`` when the ``pricing``
extra is installed. A :class:`CacheSimulator` follows one conversation request by request
and returns each request's :class:`Bill`, so the cost of a context strategy's prefix breaks
can be measured before anything is sent; :func:`payback_requests` says when an early
compaction pays for itself. See ``docs/pricing.md``.

Nothing here reads the network or the environment.
"""

from __future__ import annotations

from contextfold.pricing._cache import Bill, CacheSimulator
from contextfold.pricing._genai import from_genai_prices, prices_for
from contextfold.pricing._payback import payback_requests
from contextfold.pricing._prices import PER_TOKENS, ModelPrices, PrefixMatch, find_prices
from contextfold.pricing._table import BUILTIN_PRICES

__all__ = [
    "BUILTIN_PRICES",
    "PER_TOKENS",
    "Bill",
    "CacheSimulator",
    "ModelPrices",
    "PrefixMatch",
    "find_prices",
    "from_genai_prices",
    "payback_requests",
    "prices_for",
]
