"""Model limits: how many tokens a model's context holds, and a budget that leaves room.

A strategy's budget is a number of tokens; what number is right depends on the model the
context is sent to. :func:`budget_for` gives one from the model's name::

    SlidingWindow(budget_for("gpt-4o"))
    Checkpoint(summarizer, max_tokens=budget_for("claude-sonnet-4-5"))
    ConversationMemory(strategy=SlidingWindow(budget_for("gemini-2.5-pro")))

The limits come from a maintained source when one is installed, else from our table
(:data:`BUILTIN_LIMITS`):

1. LiteLLM's model map (the ``litellm`` extra), read from the file its wheel ships, so nothing
   goes to the network (importing ``litellm`` fetches the map online unless told not to; when
   it is already imported, its live ``litellm.model_cost`` is used, with any model you
   registered there);
2. ``genai-prices`` (the ``pricing`` extra), which knows context windows but not output caps;
3. the built-in table of the common Anthropic, OpenAI and Gemini families, with the source and
   date of its figures.

The default rule, **80% of the window, minus room for the answer**, leaves a margin for what
a token counter cannot see exactly (provider framing, tool schemas counted differently, a
tokenizer that is only approximated) and keeps the model's answer from being cut short. The
answer's room is the model's maximum output, capped at 16,384 tokens (a model that may write
128k tokens seldom does in one turn). Both parts are parameters of :func:`budget_for`.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from contextfold.errors import ConfigError

__all__ = [
    "BUILTIN_LIMITS",
    "DEFAULT_ANSWER_CAP",
    "DEFAULT_RATIO",
    "LimitSource",
    "ModelLimits",
    "budget_for",
    "model_limits",
]

#: The share of the window :func:`budget_for` fills by default.
DEFAULT_RATIO = 0.8
#: The most room :func:`budget_for` keeps for the answer by default, in tokens.
DEFAULT_ANSWER_CAP = 16_384

LimitSource = Literal["auto", "litellm", "genai-prices", "builtin"]


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """What one model (or model family) can take and give.

    Attributes:
        model: the model name, or for a table entry the family prefix it covers
            (``claude-sonnet-4-5`` covers ``claude-sonnet-4-5-20250929``).
        context_window: the most input tokens one request can carry.
        max_output_tokens: the most tokens one answer can have, when known.
        provider: who serves it (``anthropic``, ``openai``, ``google``), when known.
        source: where the figures come from.
        as_of: when they were checked (ISO date), when known.
    """

    model: str
    context_window: int
    max_output_tokens: int | None
    provider: str | None = None
    source: str = ""
    as_of: str | None = None


_DATE = "2026-12-01"
_ANTHROPIC = "Anthropic models overview; LiteLLM model map 1.110.2"
_OPENAI = "OpenAI model pages; LiteLLM model map 1.110.2"
_GEMINI = "Google Gemini models page; LiteLLM model map 1.110.2"


def _family(rows: Sequence[tuple[str, int, int]], provider: str, source: str) -> list[ModelLimits]:
    return [ModelLimits(m, w, o, provider, source, _DATE) for m, w, o in rows]


#: Context windows and output caps of the common families (input tokens; output tokens).
BUILTIN_LIMITS: tuple[ModelLimits, ...] = (
    *_family(
        [
            ("claude-opus-4-5", 200_000, 64_000),
            ("claude-opus-4-1", 200_000, 32_000),
            ("claude-opus-4", 200_000, 32_000),
            ("claude-sonnet-4-5", 200_000, 64_000),
            ("claude-sonnet-4", 200_000, 64_000),
            ("claude-haiku-4-5", 200_000, 64_000),
            ("claude-3-7-sonnet", 200_000, 64_000),
            ("claude-3-5-sonnet", 200_000, 8_192),
            ("claude-3-5-haiku", 200_000, 8_192),
            ("claude-3-opus", 200_000, 4_096),
            ("claude-3-haiku", 200_000, 4_096),
        ],
        "anthropic",
        _ANTHROPIC,
    ),
    *_family(
        [
            ("gpt-5", 272_000, 128_000),
            ("gpt-5-mini", 272_000, 128_000),
            ("gpt-5-nano", 272_000, 128_000),
            ("gpt-5.1", 272_000, 128_000),
            ("gpt-4.1", 1_047_576, 32_768),
            ("gpt-4.1-mini", 1_047_576, 32_768),
            ("gpt-4.1-nano", 1_047_576, 32_768),
            ("gpt-4o", 128_000, 16_384),
            ("gpt-4o-mini", 128_000, 16_384),
            ("gpt-4-turbo", 128_000, 4_096),
            ("gpt-4", 8_192, 4_096),
            ("gpt-3.5-turbo", 16_385, 4_096),
            ("o1", 200_000, 100_000),
            ("o1-mini", 128_000, 65_536),
            ("o3", 200_000, 100_000),
            ("o3-mini", 200_000, 100_000),
            ("o4-mini", 200_000, 100_000),
        ],
        "openai",
        _OPENAI,
    ),
    *_family(
        [
            ("gemini-2.5-pro", 1_048_576, 65_535),
            ("gemini-2.5-flash", 1_048_576, 65_535),
            ("gemini-2.5-flash-lite", 1_048_576, 65_535),
            ("gemini-2.0-flash", 1_048_576, 8_192),
            ("gemini-1.5-pro", 2_097_152, 8_192),
            ("gemini-1.5-flash", 1_048_576, 8_192),
        ],
        "google",
        _GEMINI,
    ),
)


def model_limits(
    model: str, *, source: LimitSource = "auto", table: Sequence[ModelLimits] = BUILTIN_LIMITS
) -> ModelLimits:
    """The limits of ``model``, from the first source that knows it.

    Args:
        model: the model name as you send it; a provider prefix (``openai:gpt-4o``,
            ``anthropic/claude-sonnet-4-5``) and a date suffix are understood.
        source: ``auto`` (LiteLLM, then ``genai-prices``, then ``table``) or one of them only.
        table: the entries to match by family prefix; yours, or :data:`BUILTIN_LIMITS`.

    Raises:
        ConfigError: no source knows ``model`` (the message says how to pass a budget
            instead), or ``source`` is not one of the four.
    """
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"model must be a model name, got {model!r}", argument="model")
    if source not in ("auto", "litellm", "genai-prices", "builtin"):
        raise ConfigError(
            f"source must be 'auto', 'litellm', 'genai-prices' or 'builtin', got {source!r}",
            argument="source",
        )
    found: ModelLimits | None = None
    if source in ("auto", "litellm"):
        found = _from_litellm(model)
    if found is None and source in ("auto", "genai-prices"):
        found = _from_genai_prices(model, table)
    if found is None and source in ("auto", "builtin"):
        found = _from_table(model, table)
    if found is None:
        where = "any installed source or the built-in table" if source == "auto" else source
        raise ConfigError(
            f"no context window is known for model {model!r} in {where}; pass the budget "
            "yourself, for example SlidingWindow(max_tokens=100_000), or give "
            "budget_for(..., table=[ModelLimits(...)]) an entry for it",
            argument="model",
        )
    return found


def budget_for(
    model: str,
    *,
    ratio: float = DEFAULT_RATIO,
    answer_tokens: int | None = None,
    source: LimitSource = "auto",
    table: Sequence[ModelLimits] = BUILTIN_LIMITS,
) -> int:
    """A token budget for contexts sent to ``model``: ``ratio`` of its window, minus the answer.

    Args:
        model: the model name (see :func:`model_limits`).
        ratio: the share of the context window to fill, above 0 and at most 1.
        answer_tokens: tokens kept free for the answer; default the model's maximum output
            capped at :data:`DEFAULT_ANSWER_CAP` (the cap when the maximum is unknown).
        source: where to look the model up (see :func:`model_limits`).
        table: the built-in entries to match (see :func:`model_limits`).

    Raises:
        ConfigError: the model is unknown, ``ratio`` or ``answer_tokens`` is out of range,
            or they leave no room for a context.

    Example:
        >>> budget_for("gpt-4o", source="builtin")  # 0.8 * 128,000 - 16,384
        86016
    """
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise ConfigError(f"ratio must be above 0 and at most 1, got {ratio!r}", argument="ratio")
    if answer_tokens is not None and (
        isinstance(answer_tokens, bool) or not isinstance(answer_tokens, int) or answer_tokens < 0
    ):
        raise ConfigError(
            f"answer_tokens must be a whole number of tokens, 0 or more, got {answer_tokens!r}",
            argument="answer_tokens",
        )
    limits = model_limits(model, source=source, table=table)
    if answer_tokens is None:
        answer_tokens = min(limits.max_output_tokens or DEFAULT_ANSWER_CAP, DEFAULT_ANSWER_CAP)
    budget = int(limits.context_window * ratio) - answer_tokens
    if budget < 1:
        raise ConfigError(
            f"{ratio} of {model!r}'s {limits.context_window:,}-token window leaves no room "
            f"after {answer_tokens:,} answer tokens; lower answer_tokens or raise ratio",
            argument="answer_tokens",
        )
    return budget


# -- sources ----------------------------------------------------------------------------


def _names(model: str) -> list[str]:
    """``model`` as given, then without a provider prefix (``openai:``, ``gemini/``)."""
    bare = model.strip().rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    return [model] if bare == model else [model, bare]


def _from_table(model: str, table: Sequence[ModelLimits]) -> ModelLimits | None:
    """The entry whose name is the longest prefix of ``model`` ending at a ``-``/``@``."""
    best: ModelLimits | None = None
    for name in _names(model):
        for entry in table:
            family = entry.model
            matches = name == family or (name.startswith(family) and name[len(family)] in "-@")
            if matches and (best is None or len(family) > len(best.model)):
                best = entry
        if best is not None:
            return best
    return None


def _from_litellm(model: str) -> ModelLimits | None:
    loaded = _litellm_map()
    if loaded is None:
        return None
    cost_map, label = loaded
    for name in _names(model):
        entry = cost_map.get(name)
        if isinstance(entry, Mapping):
            window = entry.get("max_input_tokens") or entry.get("max_tokens")
            if isinstance(window, int) and window > 0:
                out = entry.get("max_output_tokens")
                provider = entry.get("litellm_provider")
                return ModelLimits(
                    name,
                    window,
                    out if isinstance(out, int) and out > 0 else None,
                    provider if isinstance(provider, str) else None,
                    label,
                )
    return None


def _litellm_map() -> tuple[Mapping[str, Any], str] | None:
    """LiteLLM's live map when it is imported, else the copy its wheel ships (no network)."""
    module = sys.modules.get("litellm")
    live = getattr(module, "model_cost", None)
    if isinstance(live, Mapping) and live:
        return live, f"LiteLLM model map {_version('litellm')} (litellm.model_cost)"
    return _shipped_litellm_map()


@functools.lru_cache(maxsize=1)
def _shipped_litellm_map() -> tuple[Mapping[str, Any], str] | None:
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations)))
    path = path / "model_prices_and_context_window_backup.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return data, f"LiteLLM model map {_version('litellm')} ({path.name})"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


def _from_genai_prices(model: str, table: Sequence[ModelLimits]) -> ModelLimits | None:
    try:
        from genai_prices import data_snapshot
    except ImportError:
        return None
    snapshot = data_snapshot.get_snapshot()
    for name in _names(model):
        try:
            provider, info = snapshot.find_provider_model(name, None, None, None)
        except LookupError:
            continue
        window = getattr(info, "context_window", None)
        if isinstance(window, int) and window > 0:
            family = _from_table(name, table)  # genai-prices has no output caps
            return ModelLimits(
                name,
                window,
                family.max_output_tokens if family is not None else None,
                getattr(provider, "id", None),
                f"genai-prices {_version('genai-prices')}",
            )
    return None
