"""Reading, writing and presenting conversations for the ``contextfold`` command."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from contextfold import formats
from contextfold.errors import ContextfoldError, FormatError
from contextfold.formats import FormatName, trajectories
from contextfold.formats.trajectories import Found, Shape
from contextfold.messages import Message

EXIT_OK = 0
EXIT_BAD_INPUT = 1
EXIT_USAGE = 2
EXIT_SUMMARIZER_FAILED = 3

FORMATS = ("openai", "anthropic", "responses")
# The CLI's short format names and the library's.
_LIBRARY_NAMES: dict[str, FormatName] = {
    "openai": "openai_chat",
    "anthropic": "anthropic",
    "responses": "openai_responses",
}
_CLI_NAMES = {v: k for k, v in _LIBRARY_NAMES.items()}
DEFAULT_STORE = "sqlite:///contextfold.db"

# Well-known context window sizes, used by ``stats`` to put a conversation in perspective.
CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("8k (small local models)", 8_192),
    ("32k (mid-size models)", 32_768),
    ("128k (GPT-4o class)", 128_000),
    ("200k (Claude class)", 200_000),
    ("1M (long-context models)", 1_000_000),
)


class UsageError(Exception):
    """A problem with the input or the options that the user can fix; never a traceback."""

    def __init__(self, message: str, *, code: int = EXIT_BAD_INPUT, hint: str | None = None):
        super().__init__(message)
        self.code = code
        self.hint = hint


# -- output helpers ------------------------------------------------------------------------


def _rich_console(stream: IO[str]) -> Any | None:
    """A rich console for ``stream`` when rich is installed and the stream is a terminal."""
    if not stream.isatty() or os.environ.get("NO_COLOR") is not None:
        return None
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(file=stream)


def table(
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    stream: IO[str],
) -> None:
    """Print a table: rich on a terminal, aligned plain text otherwise."""
    console = _rich_console(stream)
    cells = [[_cell(v) for v in row] for row in rows]
    if console is not None:
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for i, h in enumerate(headers):
            table.add_column(h, justify="right" if _numeric_column(cells, i) else "left")
        for row in cells:
            table.add_row(*row)
        console.print(table)
        return
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    if title:
        stream.write(f"{title}\n")
    head = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    stream.write(head.rstrip() + "\n")
    stream.write("  ".join("-" * w for w in widths) + "\n")
    for row in cells:
        out = [
            c.rjust(w) if _numeric_column(cells, i) else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        stream.write("  ".join(out).rstrip() + "\n")
    stream.write("\n")


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.2f}"
    return "" if value is None else str(value)


def _numeric_column(cells: Sequence[Sequence[str]], index: int) -> bool:
    values = [row[index] for row in cells if row[index]]
    return bool(values) and all(v.replace(",", "").replace(".", "").isdigit() for v in values)


def _ignore(n: int = 1) -> None:
    """Progress callback that draws nothing."""


@contextmanager
def progress(label: str, total: int, *, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``; draws a bar on an interactive stderr only.

    Uses rich when available, otherwise rewrites one plain line. Nothing is drawn when
    stderr is not a terminal, so piped output and logs stay clean.
    """
    stream = sys.stderr
    if not enabled or total <= 1 or not stream.isatty():
        yield _ignore
        return
    console = _rich_console(stream)
    if console is not None:
        from rich.progress import Progress

        with Progress(console=console, transient=True) as bar:
            task = bar.add_task(label, total=total)

            def advance_bar(n: int = 1) -> None:
                bar.advance(task, n)

            yield advance_bar
        return
    done = 0

    def advance(n: int = 1) -> None:
        nonlocal done
        done += n
        stream.write(f"\r{label}: {done}/{total}")
        stream.flush()

    try:
        yield advance
    finally:
        stream.write("\r" + " " * (len(label) + 24) + "\r")
        stream.flush()


def write_json(data: Any, out: str | None) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if out is None or out == "-":
        sys.stdout.write(text)
        return
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from exc


# -- reading conversations -----------------------------------------------------------------
#
# What a file holds (request body, tau-bench run, SWE-agent trajectory, Claude Code log) is
# told by contextfold.formats.trajectories; this part reads the file and words its errors.


@dataclass
class Loaded:
    """A conversation read from a file, with what is needed to write it back."""

    source: str
    messages: list[Message]
    format: str
    envelope: Mapping[str, Any] | None  # a request body whose messages we replace on output
    note: str | None = None


def _read_text(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file")
    if p.is_dir():
        raise UsageError(f"{path}: is a directory, expected a JSON or JSONL file")
    try:
        return p.read_text(encoding="utf-8"), path
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _find(text: str, name: str) -> Found:
    """The conversation in the file's text, or a :class:`UsageError` saying what is wrong."""
    try:
        raw = trajectories.parse_json_or_jsonl(text)
    except FormatError as exc:
        raise UsageError(f"{name}: {exc}") from exc
    try:
        return trajectories.find_conversation(raw)
    except FormatError as exc:
        several_runs = exc.field == "traj"
        hint = "e.g.: jq '.[0]' FILE | contextfold compact - --budget N" if several_runs else None
        raise UsageError(str(exc), hint=hint) from exc


def _choose(found: Found, fmt: str) -> FormatName:
    if fmt != "auto":
        return _LIBRARY_NAMES[fmt]
    try:
        return found.choose()
    except FormatError as exc:
        raise UsageError(
            f"unknown conversation format: {exc}",
            hint="pass --format openai|anthropic|responses",
        ) from exc


def load_conversation(path: str, *, fmt: str = "auto") -> Loaded:
    """Read, unwrap and parse a conversation file (``-`` is stdin)."""
    text, name = _read_text(path)
    found = _find(text, name)
    chosen = _choose(found, fmt)
    cli_name = _CLI_NAMES[chosen]
    try:
        messages = formats.load(found.payload_for(chosen), chosen)
    except FormatError as exc:
        raise UsageError(f"{name}: not a valid {cli_name} conversation: {exc}") from exc
    except ContextfoldError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{name}: not a valid {cli_name} conversation: {exc!r}") from exc
    return Loaded(name, messages, cli_name, found.envelope, found.note)


def dump_conversation(
    messages: Sequence[Message], fmt: str, envelope: Mapping[str, Any] | None = None
) -> Any:
    """Messages in provider format ``fmt``; a request body keeps its other fields."""
    shape = Shape(_LIBRARY_NAMES[fmt], envelope)
    return trajectories.write_conversation(list(messages), shape)
