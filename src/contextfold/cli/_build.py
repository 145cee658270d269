"""Building counters, summarizers, strategies and stores from command-line specs."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from contextfold.cli._io import EXIT_USAGE, UsageError
from contextfold.errors import (
    ConfigError,
    ContextfoldError,
    FormatError,
    MissingExtraError,
    StoreError,
)
from contextfold.memory import ConversationMemory
from contextfold.strategies.base import Strategy
from contextfold.summarizers.base import AsyncSummarizer, Summarizer
from contextfold.tokens.base import TokenCounter

#: Newest messages kept verbatim when ``--keep-recent`` is not given.
DEFAULT_KEEP_RECENT = 6
#: Messages folded into the running summary per ``Hybrid`` call.
DEFAULT_CHUNK_SIZE = 10
#: The environment variable each provider SDK reads its API key from.
PROVIDER_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
#: The ``--strategy`` names. The library's ``SummaryCompactor`` is left out on purpose: it
#: budgets in characters, and every command promises a context within ``--budget`` tokens.
STRATEGIES = ("sliding", "summary", "hybrid", "checkpoint", "prune", "pipeline")
#: The strategies that call a summarizer.
SUMMARIZING = frozenset({"summary", "hybrid", "checkpoint", "pipeline"})
#: A store URL to show when one is malformed.
_STORE_HINT = "e.g. sqlite:///chats.db or redis://localhost:6379/0"


def check_prices(args: argparse.Namespace) -> None:
    """``--prices MODEL`` names a model with known prices, and comes with ``--store``.

    Checked before a command runs, so a bad value is a usage error (2) naming the option,
    whatever the command would do first; without a store there is no cost to estimate.
    """
    model = getattr(args, "prices", None)
    if model is None:
        return
    if not getattr(args, "store", None):
        raise UsageError(
            "--prices needs --store: the cost estimate is that of a stored conversation's requests",
            code=EXIT_USAGE,
        )
    from contextfold.pricing import prices_for

    try:
        prices_for(model)
    except ConfigError as exc:
        raise UsageError(f"--prices {model}: {exc}", code=EXIT_USAGE) from exc


def build_counter(spec: str) -> TokenCounter:
    """``approx``, ``approx:CHARS_PER_TOKEN``, ``tiktoken:ENCODING`` or ``tiktoken:MODEL``."""
    kind, _, arg = spec.partition(":")
    if kind == "approx":
        from contextfold.tokens import ApproxCounter

        if not arg:
            return ApproxCounter()
        try:
            chars = float(arg)
            if not math.isfinite(chars):  # nan counts nothing, inf makes every text free
                raise ValueError(arg)
            return ApproxCounter(chars)
        except ValueError as exc:
            raise UsageError(
                f"--counter {spec}: expected a positive number of characters per token",
                code=EXIT_USAGE,
            ) from exc
    if kind == "tiktoken":
        from contextfold.tokens import TiktokenCounter

        try:
            if not arg:
                return TiktokenCounter()
            if arg.endswith("_base") or arg in ("gpt2", "o200k_harmony"):
                return TiktokenCounter(encoding=arg)
            return TiktokenCounter(model=arg)
        except MissingExtraError:
            raise
        except ImportError as exc:
            raise MissingExtraError("the tiktoken counter", "tiktoken") from exc
        except (KeyError, ValueError) as exc:
            raise UsageError(f"--counter {spec}: unknown encoding or model ({exc})") from exc
    raise UsageError(
        f"--counter {spec}: expected approx, approx:CHARS_PER_TOKEN or tiktoken:ENCODING",
        code=EXIT_USAGE,
    )


def build_summarizer(
    spec: str, counter: TokenCounter | None = None
) -> Summarizer | AsyncSummarizer:
    """``extractive`` (offline) or ``openai:MODEL``, ``anthropic:MODEL``, ``litellm:MODEL``.

    The offline summarizer measures its room with ``counter``, the run's ``--counter``: the
    strategy caps the summary in those tokens, so a summary sized in others would overshoot
    the cap and push the newest messages out. A provider summarizer is refused early,
    naming the environment variable, when its API key is not set: better than a fallback on
    every call with an authentication error.
    """
    kind, _, model = spec.partition(":")
    if kind == "extractive":
        from contextfold.summarizers import ExtractiveSummarizer

        return ExtractiveSummarizer(counter=counter)
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
    env = PROVIDER_KEYS.get(provider)
    if env and not os.environ.get(env):
        raise UsageError(
            f"--summarizer {spec} needs an API key: set the {env} environment variable",
            hint="or use --summarizer extractive, which runs offline",
        )
    try:
        if kind == "openai":
            import openai

            from contextfold.summarizers import OpenAISummarizer

            return OpenAISummarizer(openai.OpenAI(), model=model)
        if kind == "anthropic":
            import anthropic

            from contextfold.summarizers import AnthropicSummarizer

            return AnthropicSummarizer(anthropic.Anthropic(), model=model)
        from contextfold.summarizers import LiteLLMSummarizer

        return LiteLLMSummarizer(model=model)
    except MissingExtraError:
        raise
    except ImportError as exc:
        raise MissingExtraError(f"the {kind} summarizer", kind) from exc


def build_strategy(
    name: str,
    *,
    budget: int,
    summarizer: Summarizer | AsyncSummarizer | None,
    keep_recent: int | None,
) -> Strategy:
    """A strategy by its command-line name, configured for ``budget`` tokens.

    A summary is capped at a quarter of the budget so it leaves room for the recent messages
    it sits next to. Pruning saves whatever it can (``min_savings=0``): a one-shot command
    has no prompt cache to protect. ``pipeline`` clears old tool outputs first and calls
    ``Hybrid`` only when the context is still over the budget, so a run whose tokens are
    mostly tool outputs needs no summary at all.

    Raises:
        UsageError: exit 2 for a misconfiguration (a :class:`ConfigError` from the
            strategy, with its message), exit 1 for any other refusal.
    """
    from contextfold import strategies as s

    recent = keep_recent if keep_recent is not None else DEFAULT_KEEP_RECENT
    cap = max(32, budget // 4)
    try:
        if name == "sliding":
            return s.SlidingWindow(budget)
        if name == "prune":
            return s.PruneToolOutputs(max_tokens=budget, keep_recent=recent, min_savings=0)
        if summarizer is None:
            raise UsageError(f"the {name!r} strategy needs a summarizer", code=EXIT_USAGE)
        if name == "summary":
            return s.Summarization(
                budget, keep_recent=recent, summarizer=summarizer, max_output_tokens=cap
            )
        if name in ("hybrid", "pipeline"):
            hybrid = s.Hybrid(
                budget,
                keep_recent=recent,
                chunk_size=DEFAULT_CHUNK_SIZE,
                summarizer=summarizer,
                max_output_tokens=cap,
            )
            if name == "hybrid":
                return hybrid
            prune = s.PruneToolOutputs(keep_recent=recent, min_savings=0)
            return s.Pipeline([prune, hybrid], max_tokens=budget)
        if name == "checkpoint":
            return s.Checkpoint(summarizer, max_tokens=budget, max_output_tokens=cap)
    except ConfigError as exc:
        raise UsageError(f"cannot configure the {name!r} strategy: {exc}", code=EXIT_USAGE) from exc
    except (ValueError, ContextfoldError) as exc:
        raise UsageError(f"cannot configure the {name!r} strategy: {exc}") from exc
    raise UsageError(f"unknown strategy {name!r}", code=EXIT_USAGE)


def strategy_from_args(
    args: argparse.Namespace,
    *,
    summarizer_spec: str | None = None,
    counter: TokenCounter | None = None,
) -> Strategy:
    """The strategy the options ask for, with a summarizer only if it needs one.

    ``summarizer_spec`` overrides ``--summarizer`` (a dry run stands the offline one in for
    any provider, so it needs no API key); ``counter`` is the run's token counter, which
    the offline summarizer sizes its summaries with.
    """
    summarizer = None
    if args.strategy in SUMMARIZING:
        summarizer = build_summarizer(summarizer_spec or args.summarizer, counter)
    strategy = build_strategy(
        args.strategy, budget=args.budget, summarizer=summarizer, keep_recent=args.keep_recent
    )
    recall = getattr(args, "recall", None)
    embedder = getattr(args, "embedder", None)
    fill = bool(getattr(args, "recall_fill", False))
    if recall is None:
        if embedder is not None or fill:
            option = "--embedder" if embedder is not None else "--recall-fill"
            raise UsageError(f"{option} works with --recall: add --recall", code=EXIT_USAGE)
        return strategy
    from contextfold.strategies.recall import Recall

    try:
        semantic = build_embedder(embedder) if embedder is not None else None
        return Recall(strategy, share=recall, max_tokens=args.budget, embedder=semantic, fill=fill)
    except ConfigError as exc:
        raise UsageError(
            f"cannot wrap {args.strategy!r} in Recall: {exc}", code=EXIT_USAGE
        ) from exc


def build_embedder(spec: str) -> Any:
    """The embedder named by ``--embedder``: ``wordllama`` or ``wordllama:DIM``.

    Raises:
        UsageError: an unknown name, or a size that is not a whole number.
        ConfigError: a size the model does not have.
        MissingExtraError: the semantic extra is not installed.
    """
    from contextfold.search import WordLlamaEmbedder

    name, _, size = spec.partition(":")
    if name != "wordllama":
        raise UsageError(
            f"--embedder {spec}: unknown embedder (wordllama or wordllama:DIM)", code=EXIT_USAGE
        )
    if not size:
        return WordLlamaEmbedder()
    if not size.isdigit():
        raise UsageError(f"--embedder {spec}: DIM must be 64, 128 or 256", code=EXIT_USAGE)
    return WordLlamaEmbedder(int(size))


def require_existing_store(url: str, *, conversation: str | None = None) -> None:
    """Refuse a SQLite store whose file is missing, rather than create an empty one.

    Opening a SQLite store creates its file, so a command that only reads (``log list``,
    ``show``, ``context``) would leave an empty database behind a typo and report nothing
    stored. Server stores (Redis, PostgreSQL) have no such file: an unknown one is empty.

    Raises:
        UsageError: the file of a ``sqlite:///`` URL does not exist (exit 1); with
            ``conversation``, the message also says that conversation is not there.
    """
    if not url.lower().startswith("sqlite:"):
        return
    from contextfold.stores.sqlite import parse_sqlite_url

    try:
        path = parse_sqlite_url(url)
    except StoreError:
        return  # opening the store reports the malformed URL
    if path == ":memory:" or path.startswith("file::memory:"):
        return
    if not Path(path).exists():
        lead = f"no conversation {conversation!r} in {url}" if conversation else f"--store {url}"
        raise UsageError(
            f"{lead}: the store does not exist ({path}: no such file)",
            hint="check the path; log append and compact --store create a store",
        )


def open_store(url: str) -> Any:
    """The store at ``url``; a malformed URL is a usage problem, not a traceback."""
    from contextfold import stores

    try:
        return stores.open_store(url)
    except (MissingExtraError, StoreError):
        raise
    except ValueError as exc:
        raise UsageError(f"--store {url}: {exc}", hint=_STORE_HINT) from exc


def open_memory(
    url: str,
    conversation: str,
    strategy: Strategy,
    counter: TokenCounter,
    prices: str | None = None,
) -> ConversationMemory:
    """The memory of a stored conversation; a bad URL is reported, not raised as a traceback."""
    try:
        return ConversationMemory.open(
            url, conversation_id=conversation, strategy=strategy, counter=counter, prices=prices
        )
    except (MissingExtraError, StoreError, FormatError):
        raise
    except ValueError as exc:
        raise UsageError(f"--store {url}: {exc}", hint=_STORE_HINT) from exc
