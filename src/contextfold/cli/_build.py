"""Building counters, summarizers, strategies and stores from command-line specs."""

from __future__ import annotations

import importlib
import inspect
import os
from typing import Any

from contextfold.cli._io import _PROVIDER_KEYS, EXIT_USAGE, UsageError
from contextfold.errors import MissingExtraError, StoreError
from contextfold.tokens.base import TokenCounter

DEFAULT_KEEP_RECENT = 6
DEFAULT_CHUNK_SIZE = 10

# -- building counters, summarizers and strategies -----------------------------------------


def build_counter(spec: str) -> TokenCounter:
    """``approx``, ``approx:CHARS_PER_TOKEN``, ``tiktoken:ENCODING`` or ``tiktoken:MODEL``."""
    kind, _, arg = spec.partition(":")
    if kind == "approx":
        from contextfold.tokens.approx import ApproxCounter

        if not arg:
            return ApproxCounter()
        try:
            return ApproxCounter(float(arg))
        except ValueError as exc:
            raise UsageError(
                f"--counter {spec}: expected a positive number of characters per token",
                code=EXIT_USAGE,
            ) from exc
    if kind == "tiktoken":
        from contextfold import tokens

        cls: Any = getattr(tokens, "TiktokenCounter", None)
        if cls is None:
            raise UsageError("the tiktoken counter is not available in this build")
        try:
            if not arg:
                counter: TokenCounter = cls()
            elif arg.endswith("_base") or arg in ("gpt2", "o200k_harmony"):
                counter = cls(encoding=arg)
            else:
                counter = cls(model=arg)
        except MissingExtraError:
            raise
        except ImportError as exc:
            raise MissingExtraError("the tiktoken counter", "tiktoken") from exc
        except (KeyError, ValueError) as exc:
            raise UsageError(f"--counter {spec}: unknown encoding or model ({exc})") from exc
        return counter
    raise UsageError(
        f"--counter {spec}: expected approx, approx:CHARS_PER_TOKEN or tiktoken:ENCODING",
        code=EXIT_USAGE,
    )


def build_summarizer(spec: str) -> Any:
    """``extractive`` (offline) or ``openai:MODEL``, ``anthropic:MODEL``, ``litellm:MODEL``."""
    kind, _, model = spec.partition(":")
    from contextfold import summarizers

    if kind == "extractive":
        return _construct(summarizers, "ExtractiveSummarizer")
    if kind not in ("openai", "anthropic", "litellm"):
        raise UsageError(
            f"--summarizer {spec}: expected extractive, openai:MODEL, anthropic:MODEL "
            "or litellm:MODEL",
            code=EXIT_USAGE,
        )
    if not model:
        raise UsageError(f"--summarizer {spec}: name the model, e.g. {kind}:MODEL", code=EXIT_USAGE)
    provider = kind
    if kind == "litellm":
        provider = model.split("/", 1)[0] if "/" in model else ""
        if not provider:
            provider = "anthropic" if model.startswith("claude") else "openai"
    env = _PROVIDER_KEYS.get(provider)
    if env and not os.environ.get(env):
        raise UsageError(
            f"--summarizer {spec} needs an API key: set the {env} environment variable",
            hint="or use --summarizer extractive, which runs offline",
        )
    try:
        if kind == "openai":
            import openai

            return _construct(summarizers, "OpenAISummarizer", openai.OpenAI(), model=model)
        if kind == "anthropic":
            import anthropic

            return _construct(
                summarizers, "AnthropicSummarizer", anthropic.Anthropic(), model=model
            )
        import litellm  # noqa: F401

        return _construct(summarizers, "LiteLLMSummarizer", model=model)
    except MissingExtraError:
        raise
    except ImportError as exc:
        raise MissingExtraError(f"the {kind} summarizer", kind) from exc


def _construct(module: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    cls = getattr(module, name, None)
    if cls is None:
        raise UsageError(f"{name} is not available in this build of contextfold")
    return cls(*args, **kwargs)


def _accepted(cls: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``options`` that ``cls`` accepts as keywords."""
    params = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return options
    return {k: v for k, v in options.items() if k in params}


def build_strategy(
    name: str,
    *,
    budget: int,
    summarizer: Any | None,
    keep_recent: int | None,
) -> Any:
    """A strategy by its CLI name, configured for ``budget`` tokens."""
    from contextfold import strategies

    classes = {
        "sliding": "SlidingWindow",
        "summary": "Summarization",
        "hybrid": "Hybrid",
        "checkpoint": "Checkpoint",
        "prune": "PruneToolOutputs",
    }
    cls = getattr(strategies, classes[name], None)
    if cls is None:
        try:  # the sliding window may live in its own module before it is re-exported
            module = importlib.import_module(f"contextfold.strategies.{name}")
            cls = getattr(module, classes[name])
        except (ImportError, AttributeError):
            raise UsageError(
                f"the {name!r} strategy is not available in this build of contextfold"
            ) from None
    recent = keep_recent if keep_recent is not None else DEFAULT_KEEP_RECENT
    options: dict[str, Any] = {
        "max_tokens": budget,
        "keep_recent": recent,
        "keep_recent_turns": recent,
        "chunk_size": DEFAULT_CHUNK_SIZE,
        # A summary never gets more than a quarter of the budget, so it leaves room for the
        # recent messages it is meant to sit next to.
        "max_output_tokens": max(32, budget // 4),
        # A one-shot command has no prompt cache to protect, so any saving is worth pruning.
        "min_savings": 0,
    }
    if summarizer is not None:
        options["summarizer"] = summarizer
    try:
        return cls(**_accepted(cls, options))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"cannot configure the {name!r} strategy: {exc}") from exc


def open_store(url: str) -> Any:
    from contextfold import stores

    try:
        return stores.open_store(url)
    except (MissingExtraError, StoreError):
        raise
    except ValueError as exc:
        raise UsageError(
            f"--store {url}: {exc}", hint="e.g. sqlite:///chats.db or redis://localhost:6379/0"
        ) from exc
