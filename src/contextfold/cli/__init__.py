"""The ``contextfold`` command: compact, plan, inspect and convert conversations from a shell.

Commands::

    contextfold compact FILE --budget N   write the context that fits N tokens (stats on stderr)
    contextfold plan FILE --budget N      dry run: what each message would become, and why
    contextfold stats FILE...             token breakdown by role, tool and turn
    contextfold convert FILE --to FMT     translate between provider formats
    contextfold log ...                   append to and read a stored conversation

Exit codes (also in ``docs/cli.md``): 0 ok, 1 bad input (the message says what to fix),
2 usage error (including a bad option value that a library constructor refuses with
``ConfigError``), 3 the summarizer failed and ``--no-fallback`` forbade the sliding-window
fallback.

Only the standard library is needed. When ``rich`` is installed (the ``cli`` extra) and
stderr is a terminal, tables and progress bars use it; otherwise the output is plain text,
which is also what scripts and tests see.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence

from contextfold.cli._build import check_prices
from contextfold.cli._compact import add_compact_parser, add_plan_parser
from contextfold.cli._convert import add_convert_parser
from contextfold.cli._io import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_SUMMARIZER_FAILED,
    EXIT_USAGE,
    UsageError,
)
from contextfold.cli._log import add_log_parser
from contextfold.cli._options import EPILOG
from contextfold.cli._stats import add_stats_parser
from contextfold.errors import (
    BudgetError,
    ConfigError,
    ContextfoldError,
    PairingError,
    SummarizerError,
)

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_OK",
    "EXIT_SUMMARIZER_FAILED",
    "EXIT_USAGE",
    "build_parser",
    "main",
    "report_error",
]

# -- parser --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``contextfold`` command.

    Each command module adds its own sub-parser, so a command's options sit next to its
    handler; the shared options come from ``_options``.
    """
    from contextfold import __version__

    parser = argparse.ArgumentParser(
        prog="contextfold",
        description=textwrap.fill(
            "Fit LLM conversations into a token budget: trim pair-safely, fold old turns "
            "into summaries, and report what it saved.",
            80,
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"contextfold {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (
        add_compact_parser,
        add_plan_parser,
        add_stats_parser,
        add_convert_parser,
        add_log_parser,
    ):
        add(sub)
    return parser


# -- entry point ---------------------------------------------------------------------------


def _fail(message: str, code: int, hint: str | None = None) -> int:
    sys.stderr.write(f"contextfold: error: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    return code


def _code_and_hint(exc: Exception) -> tuple[int, str | None]:
    """The exit code of an error, and a hint that says what to do about it."""
    if isinstance(exc, UsageError):
        return exc.code, exc.hint
    if isinstance(exc, ConfigError):  # a bad option value reached a library constructor
        return EXIT_USAGE, None
    if isinstance(exc, SummarizerError):
        return EXIT_SUMMARIZER_FAILED, "drop --no-fallback to accept the fallback"
    if isinstance(exc, BudgetError):
        return (
            EXIT_BAD_INPUT,
            f"raise --budget to at least {exc.required}" if exc.required else None,
        )
    if isinstance(exc, PairingError):
        return EXIT_BAD_INPUT, "pass --repair drop or --repair text"
    return EXIT_BAD_INPUT, None  # missing extras, formats, stores: the message says what


def report_error(exc: Exception) -> int:
    """Print ``exc`` as one ``contextfold: error:`` line (and a hint); return its exit code.

    The mapping is the one in the module docstring: a :class:`UsageError` carries its own
    code, a :class:`~contextfold.errors.ConfigError` is a usage error (2), a
    :class:`~contextfold.errors.SummarizerError` is 3, and every other contextfold error is
    bad input (1).
    """
    code, hint = _code_and_hint(exc)
    return _fail(str(exc), code, hint)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        check_prices(args)
        code: int = args.func(args)
        return code
    except (UsageError, ContextfoldError) as exc:
        return report_error(exc)
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
