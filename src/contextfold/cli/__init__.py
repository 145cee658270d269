"""The ``contextfold`` command: compact, plan, inspect and convert conversations from a shell.

Commands::

    contextfold compact FILE --budget N   write the context that fits N tokens (stats on stderr)
    contextfold plan FILE --budget N      dry run: what each message would become, and why
    contextfold stats FILE...             token breakdown by role, tool and turn
    contextfold convert FILE --to FMT     translate between provider formats
    contextfold log ...                   append to and read a stored conversation

Exit codes (also in ``docs/cli.md``): 0 ok, 1 bad input (the message says what to fix),
2 usage error, 3 the summarizer failed and ``--no-fallback`` forbade the sliding-window
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

from contextfold.cli._commands import (
    cmd_compact,
    cmd_convert,
    cmd_log_append,
    cmd_log_context,
    cmd_log_list,
    cmd_log_show,
    cmd_plan,
    cmd_stats,
)
from contextfold.cli._io import (
    DEFAULT_STORE,
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_SUMMARIZER_FAILED,
    EXIT_USAGE,
    FORMATS,
    STRATEGIES,
    UsageError,
)
from contextfold.errors import (
    BudgetError,
    ContextfoldError,
    FormatError,
    MissingExtraError,
    PairingError,
    StoreError,
    SummarizerError,
)

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_OK",
    "EXIT_SUMMARIZER_FAILED",
    "EXIT_USAGE",
    "build_parser",
    "main",
]

# -- parser --------------------------------------------------------------------------------


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


_EPILOG = """\
exit codes:
  0  success
  1  bad input: missing file, invalid JSON, unknown format, broken tool pairing,
     budget too small for the system prompt, missing extra or API key
  2  usage error (unknown option, missing argument)
  3  the summarizer failed and --no-fallback was given
"""


def _add_input(p: argparse.ArgumentParser, *, many: bool = False) -> None:
    if many:
        p.add_argument("files", nargs="+", metavar="FILE", help="conversation files (- is stdin)")
    else:
        p.add_argument("file", metavar="FILE", help="conversation file, JSON or JSONL (- is stdin)")
    p.add_argument(
        "--format",
        choices=("auto", *FORMATS),
        default="auto",
        help="provider format of the input (default: detected)",
    )
    p.add_argument(
        "--counter",
        default="approx",
        metavar="SPEC",
        help="token counter: approx, approx:CHARS_PER_TOKEN or tiktoken:ENCODING "
        "(default: approx, 4 characters per token)",
    )


def _add_strategy(p: argparse.ArgumentParser, *, summarizer: bool = True) -> None:
    p.add_argument("--budget", type=_positive, required=True, metavar="N", help="token budget")
    p.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="hybrid",
        help="how to fit the budget (default: hybrid = summary of old turns + recent turns)",
    )
    p.add_argument(
        "--keep-recent",
        type=_positive,
        default=None,
        metavar="N",
        help="newest messages never summarized (summary, hybrid) or newest tool results "
        "never cleared (prune); default 6. The checkpoint strategy keeps a quarter of the "
        "budget instead",
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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``contextfold`` command."""
    from contextfold import __version__

    parser = argparse.ArgumentParser(
        prog="contextfold",
        description=textwrap.fill(
            "Fit LLM conversations into a token budget: trim pair-safely, fold old turns "
            "into summaries, and report what it saved.",
            80,
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"contextfold {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_text: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help_text,
            description=textwrap.fill(description, 80),
            epilog=_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    p = command(
        "compact",
        "write the part of a conversation that fits a token budget",
        "Read a conversation, fit it into --budget tokens with the chosen strategy, and write "
        "the result in the same provider format. A stats table goes to stderr. Wrapper "
        "objects are accepted: a request body ('messages'/'input'), a tau-bench run ('traj'), "
        "a SWE-agent trajectory ('history'), and Claude Code session logs (JSONL).",
    )
    _add_input(p)
    _add_strategy(p)
    p.add_argument("-o", "--output", metavar="OUT", help="write the context here (default stdout)")
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"context": ..., "stats": ...} on stdout instead of a table on stderr',
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no stats table")
    p.add_argument(
        "--repair",
        choices=("drop", "text"),
        help="fix broken tool pairing instead of failing: drop orphans, or keep them as text",
    )
    p.add_argument(
        "--store",
        nargs="?",
        const=DEFAULT_STORE,
        metavar="URL",
        help=f"also persist the conversation and its checkpoint (default URL: {DEFAULT_STORE}); "
        "a second run appends only new messages and reuses the checkpoint",
    )
    p.add_argument(
        "--conversation",
        metavar="ID",
        help="conversation id in the store (default: the file name without extension)",
    )
    p.set_defaults(func=cmd_compact)

    p = command(
        "plan",
        "dry run: show what each message would become, and why",
        "Show, per message, whether it would be kept, pruned, summarized or dropped, and "
        "the projected tokens. No summarizer is called.",
    )
    _add_input(p)
    _add_strategy(p, summarizer=False)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--repair", choices=("drop", "text"), help="fix broken tool pairing first")
    p.set_defaults(func=cmd_plan)

    p = command(
        "stats",
        "token breakdown by role, tool and turn",
        "Count the tokens of one or more conversations: by role, by tool, by turn, the "
        "largest messages, and how the total compares with common context windows.",
    )
    _add_input(p, many=True)
    p.add_argument("--top", type=_positive, default=5, metavar="N", help="rows per ranking")
    p.add_argument("--all-turns", action="store_true", help="list every turn in order")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_stats)

    p = command(
        "convert",
        "translate a conversation between provider formats",
        "Read a conversation and write it in another provider format.",
    )
    _add_input(p)
    p.add_argument("--to", choices=FORMATS, required=True, help="target format")
    p.add_argument("-o", "--output", metavar="OUT", help="write here (default stdout)")
    p.set_defaults(func=cmd_convert)

    log = command(
        "log",
        "append to and read a stored conversation",
        "Use a store (sqlite:///file.db, redis://..., postgresql://...) from the shell.",
    )
    log_sub = log.add_subparsers(dest="log_command", metavar="SUBCOMMAND", required=True)

    def log_command(name: str, help_text: str) -> argparse.ArgumentParser:
        q = log_sub.add_parser(
            name,
            help=help_text,
            description=textwrap.fill(help_text[0].upper() + help_text[1:] + ".", 80),
            epilog=_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        q.add_argument("--store", required=True, metavar="URL", help="store URL")
        return q

    q = log_command("append", "append messages to a stored conversation")
    q.add_argument("--conversation", required=True, metavar="ID")
    q.add_argument("file", nargs="?", metavar="FILE", help="conversation file to append")
    q.add_argument("--role", choices=("system", "developer", "user", "assistant"))
    q.add_argument("--text", help="text of one message to append")
    q.add_argument("--format", choices=("auto", *FORMATS), default="auto")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=cmd_log_append)

    q = log_command("show", "print a stored conversation and its checkpoints")
    q.add_argument("--conversation", required=True, metavar="ID")
    q.add_argument("--counter", default="approx", metavar="SPEC")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=cmd_log_show)

    q = log_command("list", "list the conversations in a store")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=cmd_log_list)

    q = log_command("context", "build the context of a stored conversation within a budget")
    q.add_argument("--conversation", required=True, metavar="ID")
    _add_strategy(q)
    q.add_argument("--counter", default="approx", metavar="SPEC")
    q.add_argument("--to", choices=FORMATS, default="openai", help="output format")
    q.add_argument("-o", "--output", metavar="OUT")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.add_argument("-q", "--quiet", action="store_true", help="no stats table")
    q.set_defaults(func=cmd_log_context)
    return parser


# -- entry point ---------------------------------------------------------------------------


def _fail(message: str, code: int, hint: str | None = None) -> int:
    sys.stderr.write(f"contextfold: error: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except UsageError as exc:
        return _fail(str(exc), exc.code, exc.hint)
    except SummarizerError as exc:
        return _fail(str(exc), EXIT_SUMMARIZER_FAILED, "drop --no-fallback to accept the fallback")
    except MissingExtraError as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    except BudgetError as exc:
        hint = f"raise --budget to at least {exc.required}" if exc.required else None
        return _fail(str(exc), EXIT_BAD_INPUT, hint)
    except PairingError as exc:
        return _fail(str(exc), EXIT_BAD_INPUT, "pass --repair drop or --repair text")
    except (FormatError, StoreError) as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    except ContextfoldError as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
