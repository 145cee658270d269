"""Prices from ``genai-prices`` (the ``pricing`` extra), with our cache rules beside them.

``genai-prices`` (pydantic's price database) ships a snapshot of every provider's prices in
the wheel, so it works offline; it only goes online when asked to through its own
``UpdatePrices``, which this module never does. It knows dollars, not cache mechanics: the
minimum cacheable prefix, the TTL and how prefixes are matched come from our table's entry
for the same family (or the provider's first entry, or the ``rules`` you pass).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Sequence
from typing import Any, Literal

from contextfold.errors import ConfigError, MissingExtraError
from contextfold.pricing._prices import ModelPrices, find_prices
from contextfold.pricing._table import BUILTIN_PRICES

__all__ = ["from_genai_prices", "prices_for"]

PriceSource = Literal["auto", "builtin", "genai-prices"]


def from_genai_prices(
    model: str,
    *,
    provider: str | None = None,
    at: _dt.datetime | None = None,
    rules: ModelPrices | None = None,
    table: Sequence[ModelPrices] = BUILTIN_PRICES,
) -> ModelPrices:
    """The prices ``genai-prices`` has for ``model``, with the cache rules of our table.

    Args:
        model: the model name as sent to the API (``"claude-sonnet-4-5-20250929"``).
        provider: the provider id (``"anthropic"``, ``"openai"``, ``"google"``); found from
            the model name when None.
        at: the time whose prices to use (prices change); now when None.
        rules: an entry whose cache rules (minimum prefix, TTLs, matching) to keep; by
            default the entry of ``table`` covering ``model``, or the provider's first.
        table: where to look the rules up.

    Raises:
        MissingExtraError: ``genai-prices`` is not installed.
        ConfigError: ``genai-prices`` does not know the model, or no cache rules are known
            for its provider.
    """
    try:
        from genai_prices import data_snapshot
    except ImportError as exc:
        raise MissingExtraError("from_genai_prices", "pricing") from exc
    import genai_prices

    when = at or _dt.datetime.now(_dt.timezone.utc)
    try:
        found, info = data_snapshot.get_snapshot().find_provider_model(model, None, provider, None)
    except LookupError as exc:
        raise ConfigError(
            f"genai-prices has no prices for {model!r}: {exc}", argument="model"
        ) from exc
    price = info.get_prices(when)
    base = rules if rules is not None else _rules_for(model, found.id, table)
    input_price = _mtok(price, "input_mtok", 0.0)
    long_write = None
    if base.long_cache_ttl_s is not None:
        # Without a price of its own, a long write keeps the rules' ratio to their input
        # price (2x on Anthropic, 1x where writes cost the input price): the rules' dollar
        # figure is another model's.
        ratio = (base.cache_write_long or base.input) / base.input if base.input else 1.0
        long_write = _mtok(price, "cache_write_1h_mtok", input_price * ratio)
    return dataclasses.replace(
        base,
        provider=found.id,
        family=info.id,
        input=input_price,
        output=_mtok(price, "output_mtok", 0.0),
        cache_read=_mtok(price, "cache_read_mtok", input_price),
        cache_write=_mtok(price, "cache_write_mtok", input_price),
        cache_write_long=long_write,
        models=(info.id,),
        source=f"genai-prices {genai_prices.__version__} data; cache rules: {base.family} entry",
        as_of=when.date().isoformat(),
    )


def prices_for(
    model: str,
    *,
    provider: str | None = None,
    table: Sequence[ModelPrices] | None = None,
    source: PriceSource = "auto",
) -> ModelPrices:
    """The prices of ``model``: from your ``table``, ``genai-prices`` or the built-in table.

    Args:
        model: the model name (a dated snapshot name finds its family).
        provider: restrict the search to one provider.
        table: your own entries; when given, only they are searched.
        source: ``"auto"`` uses ``genai-prices`` when it is installed and knows the model,
            else the built-in table; ``"builtin"`` and ``"genai-prices"`` force one.

    Raises:
        ConfigError: no entry covers the model, or ``source`` is unknown.
        MissingExtraError: ``source="genai-prices"`` without the ``pricing`` extra.
    """
    if source not in ("auto", "builtin", "genai-prices"):
        raise ConfigError(
            f"source must be 'auto', 'builtin' or 'genai-prices', got {source!r}",
            argument="source",
        )
    if table is not None:
        return find_prices(model, table, provider=provider)
    if source == "builtin":
        return find_prices(model, BUILTIN_PRICES, provider=provider)
    if source == "genai-prices":
        return from_genai_prices(model, provider=provider)
    try:
        return from_genai_prices(model, provider=provider)
    except (MissingExtraError, ConfigError):
        return find_prices(model, BUILTIN_PRICES, provider=provider)


def _rules_for(model: str, provider: str, table: Sequence[ModelPrices]) -> ModelPrices:
    try:
        return find_prices(model, table, provider=provider)
    except ConfigError:
        pass
    for entry in table:
        if entry.provider == provider:
            return entry
    raise ConfigError(
        f"no cache rules known for provider {provider!r}; pass rules=ModelPrices(...)",
        argument="rules",
    )


def _mtok(price: Any, key: str, default: float) -> float:
    """A per-million price of a genai-prices ``ModelPrice`` as a float (tiers: the base)."""
    value = getattr(price, key, None)
    if value is None:
        return default
    return float(getattr(value, "base", value))
