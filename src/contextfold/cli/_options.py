"""Parser pieces the commands share: input, counter, strategy and output options.

Each command module adds its own sub-parser next to its handler; what several commands accept
in the same form is defined once here, so ``--counter`` or ``--budget`` reads and behaves the
same wherever it appears.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from contextfold.cli._build import STRATEGIES
from contextfold.cli._io import FORMATS
from contextfold.errors import ConfigError

#: The exit codes, shown at the end of every ``--help``.
EPILOG = """\
exit codes:
  0  success
  1  bad input: missing file, invalid JSON, unknown format, broken tool pairing,
     budget too small for the system prompt, missing extra or API key
  2  usage error (unknown option, missing argument)
  3  the summarizer failed and --no-fallback was given
"""

#: What ``--json`` means for commands whose JSON is just their report.
JSON_HELP = "machine-readable output"


def positive(text: str) -> int:
    """An argparse type for a whole number above zero; anything else is a usage error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


def share(text: str) -> float:
    """An argparse type for a fraction strictly between 0 and 1 (``0.3``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {value}")
    return value


def model_budget(text: str) -> int:
    """An argparse type for ``--model``: the budget for that model (see ``contextfold.models``).

    An unknown model is a usage error that says to give ``--budget`` instead.
    """
    from contextfold.models import budget_for

    try:
        return budget_for(text)
    except ConfigError:
        raise argparse.ArgumentTypeError(
            f"no context window is known for model {text!r}; give --budget N instead"
        ) from None


def conversation_id(text: str) -> str:
    """An argparse type for a conversation id: any text but the empty string."""
    if not text:
        raise argparse.ArgumentTypeError("expected a conversation id, got an empty string")
    return text


def add_command(
    sub: Any, name: str, help_text: str, description: str | None = None
) -> argparse.ArgumentParser:
    """A sub-parser with the house layout: wrapped description, exit codes as epilog.

    Without ``description`` the help line, as a sentence, describes the command (the
    ``log`` subcommands are one-liners).
    """
    if description is None:
        description = help_text[0].upper() + help_text[1:] + "."
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help_text,
        description=textwrap.fill(description, 80),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def add_counter(p: argparse.ArgumentParser) -> None:
    """``--counter SPEC``: how tokens are counted."""
    p.add_argument(
        "--counter",
        default="approx",
        metavar="SPEC",
        help="token counter: approx, approx:CHARS_PER_TOKEN or tiktoken:ENCODING "
        "(default: approx, 4 characters per token)",
    )
    p.add_argument(
        "--prices",
        metavar="MODEL",
        default=None,
        help="with --store: estimate the request's input cost with prompt caching under this "
        "model's prices (e.g. claude-sonnet-4-5, gpt-5), next to resending the full history",
    )


def add_format(p: argparse.ArgumentParser) -> None:
    """``--format``: the provider format of the input, detected unless given."""
    p.add_argument(
        "--format",
        choices=("auto", *FORMATS),
        default="auto",
        help="provider format of the input (default: detected)",
    )


def add_input(p: argparse.ArgumentParser, *, many: bool = False) -> None:
    """The conversation file(s) to read, their format and the token counter."""
    if many:
        p.add_argument("files", nargs="+", metavar="FILE", help="conversation files (- is stdin)")
    else:
        p.add_argument("file", metavar="FILE", help="conversation file, JSON or JSONL (- is stdin)")
    add_format(p)
    add_counter(p)


def add_strategy(p: argparse.ArgumentParser, *, summarizer: bool = True) -> None:
    """``--budget``, ``--strategy``, ``--keep-recent`` and, unless a dry run, the summarizer."""
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--budget", type=positive, metavar="N", help="token budget")
    size.add_argument(
        "--model",
        type=model_budget,
        dest="budget",
        metavar="NAME",
        help="set the budget for this model instead: 80%% of its context window minus room "
        "for the answer (gpt-4o, claude-sonnet-4-5, gemini-2.5-pro ...)",
    )
    p.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="hybrid",
        help="how to fit the budget (default: hybrid = summary of old turns + recent turns; "
        "pipeline = clear old tool outputs, then hybrid only if still over). The library's "
        "SummaryCompactor is not offered: it budgets in characters, not tokens",
    )
    p.add_argument(
        "--keep-recent",
        type=positive,
        default=None,
        metavar="N",
        help="newest messages never summarized (summary, hybrid) or newest tool results "
        "never cleared (prune); pipeline uses it for both; default 6. The checkpoint "
        "strategy keeps a quarter of the budget instead",
    )
    p.add_argument(
        "--recall",
        type=share,
        nargs="?",
        const=0.3,
        default=None,
        metavar="SHARE",
        help="wrap the strategy in Recall: this share of the budget (0.3 when no number is "
        "given) quotes earlier messages that match the newest user message",
    )
    p.add_argument(
        "--embedder",
        default=None,
        metavar="SPEC",
        help="with --recall, rank by meaning too: wordllama (offline, the semantic extra) "
        "or wordllama:DIM (64, 128 or 256)",
    )
    p.add_argument(
        "--recall-fill",
        action="store_true",
        help="with --recall, let the excerpts also use the budget the strategy leaves "
        "unused (more recalled, more tokens sent)",
    )
    if summarizer:
        p.add_argument(
            "--summarizer",
            default="extractive",
            metavar="SPEC",
            help="extractive (offline, default), openai:MODEL, anthropic:MODEL or litellm:MODEL",
        )
        p.add_argument(
            "--no-fallback",
            action="store_true",
            help="exit with code 3 instead of falling back to the sliding window when the "
            "summarizer fails",
        )


def add_json(p: argparse.ArgumentParser, help_text: str = JSON_HELP) -> None:
    """``--json``: print the command's result as JSON on stdout."""
    p.add_argument("--json", action="store_true", help=help_text)


def add_output(p: argparse.ArgumentParser, help_text: str) -> None:
    """``-o/--output OUT``: where the payload goes instead of stdout."""
    p.add_argument("-o", "--output", metavar="OUT", help=help_text)


def add_quiet(p: argparse.ArgumentParser) -> None:
    """``-q/--quiet``: no stats table on stderr."""
    p.add_argument("-q", "--quiet", action="store_true", help="no stats table")
