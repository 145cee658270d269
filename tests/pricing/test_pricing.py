"""The price model and the prompt-cache simulator (contextfold.pricing)."""

from __future__ import annotations

import dataclasses
import importlib.util
import random
import sys

import pytest

from contextfold.errors import ConfigError, MissingExtraError
from contextfold.pricing import (
    BUILTIN_PRICES,
    CacheSimulator,
    ModelPrices,
    find_prices,
    from_genai_prices,
    prices_for,
)

SONNET = prices_for("claude-sonnet-4-5", source="builtin")
GPT5 = prices_for("gpt-5", source="builtin")


def simple(**changes: object) -> ModelPrices:
    """Round figures: input 1, write 2, read 0.1 dollars per million; minimum 100 tokens."""
    base = ModelPrices(
        provider="test",
        family="test-1",
        input=1.0,
        output=4.0,
        cache_read=0.1,
        cache_write=2.0,
        min_cacheable_tokens=100,
        cache_ttl_s=300.0,
        models=("test-1",),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


# -- ModelPrices ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "argument"),
    [
        ({"input": -1.0}, "input"),
        ({"cache_read": float("nan")}, "cache_read"),
        ({"output": "3"}, "output"),
        ({"min_cacheable_tokens": -5}, "min_cacheable_tokens"),
        ({"cache_ttl_s": 0}, "cache_ttl_s"),
        ({"cache_step_tokens": 0}, "cache_step_tokens"),
        ({"lookback_messages": 0}, "lookback_messages"),
        ({"cache_write_long": 3.0}, "cache_write_long"),  # without long_cache_ttl_s
        ({"prefix_match": "suffix"}, "prefix_match"),
        ({"provider": ""}, "provider"),
        ({"models": "test-1"}, "models"),
    ],
)
def test_bad_prices_raise_config_error_naming_the_argument(
    changes: dict[str, object], argument: str
) -> None:
    with pytest.raises(ConfigError) as info:
        simple(**changes)
    assert info.value.argument == argument
    assert isinstance(info.value, ValueError)


def test_builtin_table_has_sources_dates_and_the_three_providers() -> None:
    assert {p.provider for p in BUILTIN_PRICES} == {"anthropic", "openai", "google"}
    for p in BUILTIN_PRICES:
        assert p.source, p.family
        assert p.as_of == "2026-12-01", p.family
        assert p.models, p.family
        assert p.cache_read < p.input <= p.cache_write, p.family
    families = [p.family for p in BUILTIN_PRICES]
    assert len(families) == len(set(families))


def test_anthropic_multipliers_and_minimums() -> None:
    assert SONNET.cache_write == pytest.approx(SONNET.input * 1.25)
    assert SONNET.cache_write_long == pytest.approx(SONNET.input * 2)
    assert SONNET.cache_read == pytest.approx(SONNET.input * 0.1)
    assert SONNET.min_cacheable_tokens == 1024
    assert prices_for("claude-haiku-4-5", source="builtin").min_cacheable_tokens == 4096
    assert prices_for("claude-opus-5", source="builtin").min_cacheable_tokens == 512
    assert SONNET.ttl_s() == 300
    assert SONNET.ttl_s(long_ttl=True) == 3600


def test_openai_writes_are_free_before_gpt_5_6_and_paid_from_it() -> None:
    assert GPT5.cache_write == GPT5.input
    sol = prices_for("gpt-5.6-sol", source="builtin")
    assert sol.cache_write == pytest.approx(sol.input * 1.25)
    assert sol.cache_write_long is None
    with pytest.raises(ConfigError) as info:
        sol.write_price(long_ttl=True)
    assert info.value.argument == "long_ttl"


def test_models_match_their_dated_snapshots_but_not_other_models() -> None:
    assert find_prices("claude-sonnet-4-5-20250929", BUILTIN_PRICES) is SONNET
    assert find_prices("claude-sonnet-4-5@20250929", BUILTIN_PRICES) is SONNET
    assert find_prices("gpt-5-2025-08-07", BUILTIN_PRICES) is GPT5
    assert find_prices("gpt-5-mini", BUILTIN_PRICES).family == "gpt-5-mini"
    assert SONNET.covers("Claude-Sonnet-4-5")
    with pytest.raises(ConfigError) as info:
        find_prices("gpt-5-nano", BUILTIN_PRICES)
    assert info.value.argument == "model"
    with pytest.raises(ConfigError):
        find_prices("gpt-5", BUILTIN_PRICES, provider="anthropic")


def test_own_table_and_bad_source() -> None:
    mine = simple()
    assert prices_for("test-1", table=[mine]) is mine
    with pytest.raises(ConfigError) as info:
        prices_for("gpt-5", source="web")  # type: ignore[arg-type]
    assert info.value.argument == "source"


def test_cost_and_cacheable() -> None:
    p = simple()
    assert p.cost(uncached_tokens=1_000_000) == pytest.approx(1.0)
    assert p.cost(
        cache_read_tokens=1_000_000, cache_write_tokens=1_000_000, output_tokens=1_000_000
    ) == pytest.approx(0.1 + 2.0 + 4.0)
    with pytest.raises(ConfigError) as info:
        p.cost(cache_read_tokens=-1)
    assert info.value.argument == "cache_read_tokens"
    assert p.cacheable(99) == 0
    assert p.cacheable(150) == 150
    assert GPT5.cacheable(1023) == 0
    assert GPT5.cacheable(1024 + 127) == 1024
    assert GPT5.cacheable(1024 + 300) == 1024 + 256


# -- CacheSimulator ---------------------------------------------------------------------------


def test_a_growing_conversation_reads_its_prefix_and_writes_the_rest() -> None:
    sim = CacheSimulator(simple())
    first = sim.bill([80, 40], ["s", "u1"], at=0)
    assert (first.cache_write_tokens, first.cache_read_tokens, first.uncached_tokens) == (120, 0, 0)
    second = sim.bill([80, 40, 30, 20], ["s", "u1", "a1", "u2"], at=10)
    assert second.cache_read_tokens == 120
    assert second.cache_write_tokens == 50
    assert second.matched_messages == 2
    assert not second.prefix_break
    assert second.cost == pytest.approx((120 * 0.1 + 50 * 2.0) / 1e6)
    # The floor reads the same and pays the new tokens at the cheaper input price.
    assert second.floor_cost == pytest.approx((120 * 0.1 + 50 * 1.0) / 1e6)


def test_a_prompt_under_the_minimum_is_not_cached() -> None:
    sim = CacheSimulator(simple())
    small = sim.bill([50, 40], ["s", "u1"], at=0)
    assert (small.uncached_tokens, small.cache_write_tokens) == (90, 0)
    assert small.cost == pytest.approx(90 * 1.0 / 1e6)
    bigger = sim.bill([50, 40, 30], ["s", "u1", "u2"], at=1)
    assert bigger.cache_read_tokens == 0
    assert bigger.cache_write_tokens == 120


def test_entries_expire_unless_read_and_the_long_ttl_lasts_an_hour() -> None:
    sim = CacheSimulator(simple())
    sim.bill([200], ["a"], at=0)
    for k in range(1, 6):  # every 4 minutes: each read restarts the 5-minute TTL
        assert sim.bill([200], ["a"], at=k * 240).cache_read_tokens == 200
    assert sim.bill([200], ["a"], at=5 * 240 + 301).cache_read_tokens == 0

    no_refresh = CacheSimulator(simple(refresh_on_read=False))
    no_refresh.bill([200], ["a"], at=0)
    assert no_refresh.bill([200], ["a"], at=240).cache_read_tokens == 200
    assert no_refresh.bill([200], ["a"], at=480).cache_read_tokens == 0

    hour = CacheSimulator(SONNET, long_ttl=True)
    first = hour.bill([2000], ["a"], at=0)
    assert first.cost == pytest.approx(2000 * SONNET.input * 2 / 1e6)
    assert hour.bill([2000], ["a"], at=3000).cache_read_tokens == 2000
    assert hour.bill([2000], ["a"], at=3000 + 3601).cache_read_tokens == 0
    with pytest.raises(ConfigError) as info:
        CacheSimulator(prices_for("gpt-5.6-sol", source="builtin"), long_ttl=True)
    assert info.value.argument == "long_ttl"


def test_an_edited_prefix_breaks_and_is_rewritten() -> None:
    sim = CacheSimulator(simple())
    sim.bill([100, 50, 50], ["s", "u1", "u2"], at=0)
    edited = sim.bill([100, 60, 50, 50], ["s", "summary", "u2", "u3"], at=1)
    assert edited.prefix_break
    assert edited.cache_read_tokens == 0  # Anthropic-style: only whole earlier requests hit
    assert edited.cache_write_tokens == 260
    # The floor still reads what was sent before (s and u2) from the cache.
    assert edited.floor_cost == pytest.approx((150 * 0.1 + 110 * 1.0) / 1e6)
    assert edited.floor_cost <= edited.cost


def test_breakpoint_and_longest_prefix_matching_differ() -> None:
    tokens, first, second = [600, 600, 600], ["s", "a", "b"], ["s", "a", "c"]
    anthropic = CacheSimulator(simple(min_cacheable_tokens=1024))
    anthropic.bill(tokens, first, at=0)
    assert anthropic.bill(tokens, second, at=1).cache_read_tokens == 0
    openai = CacheSimulator(
        simple(min_cacheable_tokens=1024, prefix_match="longest", cache_step_tokens=128)
    )
    openai.bill(tokens, first, at=0)
    hit = openai.bill(tokens, second, at=1)
    assert hit.cache_read_tokens == 1024 + 128  # 1,200 matched, rounded down to the steps
    assert hit.matched_messages == 2


def test_a_hit_beyond_the_lookback_is_missed() -> None:
    sim = CacheSimulator(simple(lookback_messages=20))
    sim.bill([200], ["s"], at=0)
    near = ["s", *(f"m{i}" for i in range(20))]
    assert sim.bill([200] + [10] * 20, near, at=1).cache_read_tokens == 200
    far = ["x", *(f"n{i}" for i in range(21))]
    sim.bill([200] + [10] * 21, far, at=2)
    assert sim.bill([200] + [10] * 21 + [10], [*far, "y"], at=3).cache_read_tokens == 410
    assert sim.bill([200], ["s"], at=4).cache_read_tokens == 200
    deep = ["s", *(f"k{i}" for i in range(21))]
    assert sim.bill([200] + [10] * 21, deep, at=5).cache_read_tokens == 0


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"tokens": [1, 2], "hashes": ["a"], "at": 0}, "hashes"),
        ({"tokens": [-1], "hashes": ["a"], "at": 0}, "tokens"),
        ({"tokens": [1.5], "hashes": ["a"], "at": 0}, "tokens"),
        ({"tokens": [1], "hashes": ["a"], "at": float("inf")}, "at"),
        ({"tokens": [1], "hashes": ["a"], "at": 0, "output_tokens": -2}, "output_tokens"),
    ],
)
def test_bad_requests_raise_config_error(kwargs: dict[str, object], argument: str) -> None:
    sim = CacheSimulator(simple())
    with pytest.raises(ConfigError) as info:
        sim.bill(**kwargs)  # type: ignore[arg-type]
    assert info.value.argument == argument


def test_time_never_goes_back_and_prices_must_be_prices() -> None:
    sim = CacheSimulator(simple())
    sim.bill([1], ["a"], at=10)
    with pytest.raises(ConfigError) as info:
        sim.bill([1], ["a"], at=9)
    assert info.value.argument == "at"
    with pytest.raises(ConfigError) as info:
        CacheSimulator({"input": 1.0})  # type: ignore[arg-type]
    assert info.value.argument == "prices"


@pytest.mark.parametrize("prices", [SONNET, GPT5], ids=["anthropic", "openai"])
def test_the_floor_never_exceeds_the_bill(prices: ModelPrices) -> None:
    rng = random.Random(7)
    sim = CacheSimulator(prices)
    history: list[tuple[str, int]] = []
    at = 0.0
    for step in range(200):
        history.append((f"m{step}", rng.randint(10, 900)))
        if rng.random() < 0.1:
            history = [("summary", rng.randint(100, 2000)), *history[-4:]]
        at += rng.choice([5.0, 60.0, 400.0])
        bill = sim.bill([t for _, t in history], [h for h, _ in history], at=at)
        assert bill.floor_cost <= bill.cost + 1e-12
        assert bill.cache_read_tokens + bill.cache_write_tokens + bill.uncached_tokens == (
            bill.input_tokens
        )


# -- genai-prices -----------------------------------------------------------------------------


def test_without_genai_prices_the_builtin_table_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    with pytest.raises(MissingExtraError, match="pricing"):
        from_genai_prices("claude-sonnet-4-5", provider="anthropic")
    assert prices_for("claude-sonnet-4-5-20250929") is SONNET


@pytest.mark.skipif(
    importlib.util.find_spec("genai_prices") is None, reason="the 'pricing' extra is not installed"
)
def test_genai_prices_gives_the_dollars_and_our_table_the_cache_rules() -> None:
    import datetime as dt

    when = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    p = from_genai_prices("claude-sonnet-4-5-20250929", provider="anthropic", at=when)
    assert (p.input, p.cache_write, p.cache_read, p.output) == (3.0, 3.75, 0.3, 15.0)
    assert p.cache_write_long == 6.0
    assert p.min_cacheable_tokens == SONNET.min_cacheable_tokens
    assert p.as_of == "2026-12-01"
    assert "genai-prices" in p.source
    openai = from_genai_prices("gpt-5", provider="openai", at=when)
    assert openai.cache_write == openai.input  # no write price listed: writes are free
    assert openai.prefix_match == "longest"
    with pytest.raises(ConfigError) as info:
        from_genai_prices("no-such-model-xyz", provider="openai")
    assert info.value.argument == "model"


@pytest.mark.skipif(
    importlib.util.find_spec("genai_prices") is None, reason="the 'pricing' extra is not installed"
)
@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-5-nano", "gpt-5.2"])
def test_a_long_write_without_a_price_of_its_own_keeps_the_rules_ratio(model: str) -> None:
    """It took the dollar figure of the rules' model (gpt-5's $1.25 for gpt-4o-mini's
    $0.15 input: 8x too high); OpenAI writes cost the input price, long or not."""
    import datetime as dt

    when = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    p = from_genai_prices(model, provider="openai", at=when)
    assert p.cache_write_long is not None
    assert p.cache_write_long == pytest.approx(p.input)
    anthropic = from_genai_prices("claude-haiku-4-5", provider="anthropic", at=when)
    assert anthropic.cache_write_long == pytest.approx(2 * anthropic.input)


def test_the_builtin_table_prices_gpt_5_2_as_its_own_model() -> None:
    p = prices_for("gpt-5.2", source="builtin")
    assert (p.input, p.cache_read, p.output) == (1.75, 0.175, 14.0)
    assert prices_for("gpt-5.1", source="builtin").input == 1.25


def test_importing_pricing_loads_no_optional_package() -> None:
    import subprocess

    code = "import sys, contextfold.pricing; assert 'genai_prices' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
