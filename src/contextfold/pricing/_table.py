"""The built-in price table: Anthropic, OpenAI and Gemini families as of 2026-12-01.

Dollar figures were read from the data bundled with ``genai-prices`` 0.2.3 (itself citing
each provider's pricing page) on 2026-12-01; the cache mechanics (minimum cacheable prefix,
TTL, how prefixes are matched) come from the providers' prompt-caching guides as summarized
in our research note (``research/anchors-2026.md``, section 2). Base prices only: the
long-context tiers some families charge above 200k input tokens are not modelled.
"""

from __future__ import annotations

from contextfold.pricing._prices import ModelPrices

__all__ = ["BUILTIN_PRICES"]

_DATE = "2026-12-01"
_ANTHROPIC = (
    "prices: genai-prices 0.2.3 data (platform.claude.com/docs/en/about-claude/pricing); "
    "minimum prefix and TTL: Anthropic prompt-caching docs"
)
_OPENAI = (
    "prices: genai-prices 0.2.3 data (developers.openai.com/api/docs/pricing); minimum "
    "prefix, 128-token steps and TTL: developers.openai.com/api/docs/guides/prompt-caching"
)
_GEMINI = (
    "prices: genai-prices 0.2.3 data (ai.google.dev pricing); implicit caching, minimum "
    "prefix: ai.google.dev/gemini-api/docs/caching; the TTL is best-effort (5 minutes assumed)"
)


def _anthropic(
    family: str,
    models: tuple[str, ...],
    base: float,
    min_tokens: int,
    *,
    read: float | None = None,
    note: str = "",
) -> ModelPrices:
    """Anthropic's rule: writes 1.25x base (5 min) or 2x (1 h), reads 0.1x, output 5x."""
    return ModelPrices(
        provider="anthropic",
        family=family,
        input=base,
        output=base * 5,
        cache_read=base / 10 if read is None else read,
        cache_write=base * 1.25,
        cache_write_long=base * 2,
        min_cacheable_tokens=min_tokens,
        cache_ttl_s=300.0,
        long_cache_ttl_s=3600.0,
        prefix_match="breakpoint",
        lookback_messages=20,
        models=models,
        source=_ANTHROPIC + note,
        as_of=_DATE,
    )


def _openai(
    family: str,
    models: tuple[str, ...],
    base: float,
    output: float,
    *,
    paid_writes: bool = False,
) -> ModelPrices:
    """OpenAI: reads 0.1x; writes free before GPT-5.6 (24 h retention), 1.25x from it (30 min)."""
    return ModelPrices(
        provider="openai",
        family=family,
        input=base,
        output=output,
        cache_read=base / 10,
        cache_write=base * 1.25 if paid_writes else base,
        cache_write_long=None if paid_writes else base,
        min_cacheable_tokens=1024,
        cache_ttl_s=1800.0 if paid_writes else 300.0,
        long_cache_ttl_s=None if paid_writes else 86400.0,
        cache_step_tokens=128,
        prefix_match="longest",
        models=models,
        source=_OPENAI,
        as_of=_DATE,
    )


def _gemini(
    family: str, models: tuple[str, ...], base: float, output: float, min_tokens: int
) -> ModelPrices:
    """Gemini implicit caching: no write or storage fee, reads 90% off."""
    return ModelPrices(
        provider="google",
        family=family,
        input=base,
        output=output,
        cache_read=base / 10,
        cache_write=base,
        min_cacheable_tokens=min_tokens,
        cache_ttl_s=300.0,
        prefix_match="longest",
        models=models,
        source=_GEMINI,
        as_of=_DATE,
    )


BUILTIN_PRICES: tuple[ModelPrices, ...] = (
    _anthropic("claude-opus-5", ("claude-opus-5",), 5.0, 512),
    _anthropic("claude-fable-5", ("claude-fable-5",), 10.0, 512, read=1.0),
    _anthropic("claude-fable-5-1", ("claude-fable-5-1", "claude-fable-5.1"), 10.0, 512, read=0.25),
    _anthropic("claude-fable-5-2", ("claude-fable-5-2", "claude-fable-5.2"), 8.0, 512, read=0.2),
    _anthropic("claude-mythos-5", ("claude-mythos-5",), 8.0, 512, read=0.2),
    _anthropic("claude-sonnet-5", ("claude-sonnet-5",), 2.0, 1024),
    _anthropic("claude-opus-4-8", ("claude-opus-4-8", "claude-opus-4.8"), 5.0, 1024),
    _anthropic("claude-opus-4-7", ("claude-opus-4-7", "claude-opus-4.7"), 5.0, 2048),
    _anthropic("claude-opus-4-6", ("claude-opus-4-6", "claude-opus-4.6"), 5.0, 4096),
    _anthropic("claude-opus-4-5", ("claude-opus-4-5", "claude-opus-4.5"), 5.0, 4096),
    _anthropic("claude-opus-4-1", ("claude-opus-4-1", "claude-opus-4.1"), 15.0, 1024),
    _anthropic("claude-opus-4", ("claude-opus-4", "claude-opus-4-0"), 15.0, 1024),
    _anthropic(
        "claude-sonnet-4-6",
        ("claude-sonnet-4-6", "claude-sonnet-4.6"),
        3.0,
        2048,
        note="; 2,048 observed (anthropic-sdk-python#1194) where the docs say 1,024",
    ),
    _anthropic("claude-sonnet-4-5", ("claude-sonnet-4-5", "claude-sonnet-4.5"), 3.0, 1024),
    _anthropic("claude-haiku-4-5", ("claude-haiku-4-5", "claude-haiku-4.5"), 1.0, 4096),
    _openai("gpt-5", ("gpt-5", "gpt-5-chat", "gpt-5-codex", "gpt-5.1"), 1.25, 10.0),
    _openai("gpt-5.2", ("gpt-5.2",), 1.75, 14.0),
    _openai("gpt-5-mini", ("gpt-5-mini",), 0.25, 2.0),
    _openai("gpt-5.5", ("gpt-5.5",), 5.0, 30.0),
    _openai("gpt-5.6-sol", ("gpt-5.6-sol",), 4.0, 20.0, paid_writes=True),
    _openai("gpt-5.6-terra", ("gpt-5.6-terra",), 2.0, 12.0, paid_writes=True),
    _openai("gpt-5.6-luna", ("gpt-5.6-luna",), 0.2, 1.2, paid_writes=True),
    _gemini("gemini-2.5-pro", ("gemini-2.5-pro",), 1.25, 10.0, 2048),
    _gemini("gemini-2.5-flash", ("gemini-2.5-flash",), 0.3, 2.5, 2048),
    _gemini(
        "gemini-3-pro",
        ("gemini-3-pro", "gemini-3-pro-preview", "gemini-3.1-pro", "gemini-3.1-pro-preview"),
        2.0,
        12.0,
        4096,
    ),
    _gemini("gemini-3.5-flash", ("gemini-3.5-flash",), 1.5, 9.0, 4096),
)
"""Built-in entries, one per family. Pass your own table wherever one is accepted."""
