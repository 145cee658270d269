"""The payback of an early compaction, against the formula and the cache simulator."""

from __future__ import annotations

import math

import pytest

from contextfold.errors import ConfigError
from contextfold.pricing import CacheSimulator, payback_requests, prices_for

SONNET = prices_for("claude-sonnet-4-5", source="builtin")


def test_a_warm_compaction_pays_back_after_the_formula_s_requests() -> None:
    n = payback_requests(SONNET, context_tokens=3_500, compacted_tokens=2_400)
    assert n == pytest.approx((2_400 * 1.25 - 3_500 * 0.1) / (1_100 * 0.1))
    # The simulator agrees: after ceil(n) more requests the early compaction is cheaper.
    k = math.ceil(n)
    keep, early = CacheSimulator(SONNET), CacheSimulator(SONNET)
    keep.bill([3_500], ["a"], at=0.0)
    early.bill([3_500], ["a"], at=0.0)
    kept = sum(keep.bill([3_500], ["a"], at=float(t)).cost for t in range(1, k + 2))
    moved = sum(early.bill([2_400], ["b"], at=float(t)).cost for t in range(1, k + 2))
    assert moved < kept
    # ... and not before: after floor(n) requests keeping is still cheaper.
    keep, early = CacheSimulator(SONNET), CacheSimulator(SONNET)
    keep.bill([3_500], ["a"], at=0.0)
    early.bill([3_500], ["a"], at=0.0)
    kept = sum(keep.bill([3_500], ["a"], at=float(t)).cost for t in range(1, k - 1))
    moved = sum(early.bill([2_400], ["b"], at=float(t)).cost for t in range(1, k - 1))
    assert moved > kept


def test_a_cold_cache_makes_a_compaction_free() -> None:
    n = payback_requests(SONNET, context_tokens=3_500, compacted_tokens=2_400, cache_warm=False)
    assert n == 0.0


def test_a_summary_call_lengthens_the_payback() -> None:
    plain = payback_requests(SONNET, context_tokens=8_000, compacted_tokens=2_000)
    paid = payback_requests(
        SONNET, context_tokens=8_000, compacted_tokens=2_000, summary_cost_usd=0.01
    )
    assert paid > plain > 0


def test_a_compaction_that_does_not_shrink_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        payback_requests(SONNET, context_tokens=1_000, compacted_tokens=1_000)
    assert err.value.argument == "compacted_tokens"
