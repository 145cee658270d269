"""Reading, writing and presenting conversations for the ``contextfold`` command."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from contextfold.errors import ContextfoldError, FormatError
from contextfold.formats.claude_code import merge_records as merge_claude_code
from contextfold.messages import Message

EXIT_OK = 0
EXIT_BAD_INPUT = 1
EXIT_USAGE = 2
EXIT_SUMMARIZER_FAILED = 3

FORMATS = ("openai", "anthropic", "responses")
_FORMAT_MODULES = {
    "openai": "openai_chat",
    "anthropic": "anthropic",
    "responses": "openai_responses",
}
STRATEGIES = ("sliding", "summary", "hybrid", "checkpoint", "prune")
DEFAULT_STORE = "sqlite:///contextfold.db"

# Well-known context window sizes, used by ``stats`` to put a conversation in perspective.
CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("8k (small local models)", 8_192),
    ("32k (mid-size models)", 32_768),
    ("128k (GPT-4o class)", 128_000),
    ("200k (Claude class)", 200_000),
    ("1M (long-context models)", 1_000_000),
)

_PROVIDER_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


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


@dataclass
class Loaded:
    """A conversation read from a file, with what is needed to write it back."""

    source: str
    messages: list[Message]
    format: str
    envelope: dict[str, Any] | None  # a request body whose messages we replace on output
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


def parse_json_or_jsonl(text: str, name: str) -> Any:
    """Parse a JSON document, or JSON Lines (one object per line) when that fails.

    Raises:
        UsageError: naming the line and column of the first syntax error.
    """
    if not text.strip():
        raise UsageError(f"{name}: empty input, expected a JSON conversation")
    try:
        return json.loads(text)
    except json.JSONDecodeError as whole:
        lines = text.splitlines()
        first = next((ln for ln in lines if ln.strip()), "")
        looks_jsonl = first.lstrip().startswith("{") and sum(1 for ln in lines if ln.strip()) > 1
        if not looks_jsonl:
            raise UsageError(
                f"{name}: invalid JSON at line {whole.lineno}, column {whole.colno}: {whole.msg}"
            ) from whole
        records = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise UsageError(
                    f"{name}: invalid JSON Lines record at line {number}, column {exc.colno}: "
                    f"{exc.msg}"
                ) from exc
        return records


def _is_claude_code_log(records: list[Any]) -> bool:
    return any(
        isinstance(r, dict)
        and r.get("type") in ("user", "assistant")
        and isinstance(r.get("message"), dict)
        for r in records
    )


def _swe_agent_history(history: list[Any]) -> list[dict[str, Any]]:
    """SWE-agent's ``history`` entries as OpenAI chat messages (``tool_call_ids`` → id)."""
    out = []
    for i, m in enumerate(history):
        if not isinstance(m, dict):
            raise UsageError(f"history entry {i} is not an object")
        msg = {k: m[k] for k in ("role", "content", "tool_calls", "name") if m.get(k) is not None}
        ids = m.get("tool_call_ids")
        if ids:
            msg["tool_call_id"] = ids[0]
        out.append(msg)
    return out


def unwrap(payload: Any) -> tuple[Any, dict[str, Any] | None, str | None]:
    """Find the conversation inside a payload.

    Returns ``(conversation, envelope, note)``. The rule, in order:

    * a list is the conversation itself;
    * an object with ``messages`` (an OpenAI or Anthropic request body) or ``input`` (a
      Responses request) is kept whole, and the output replaces only those fields;
    * an object with ``traj`` (a tau-bench run) or ``history`` (a SWE-agent trajectory)
      gives that list; the output is the bare message list.
    """
    if isinstance(payload, list):
        if payload and all(isinstance(x, dict) and "traj" in x for x in payload):
            raise UsageError(
                f"this file holds {len(payload)} runs, each with a 'traj' conversation; "
                "pick one, e.g.: jq '.[0]' FILE | contextfold compact - --budget N"
            )
        return payload, None, None
    if isinstance(payload, dict):
        if "messages" in payload or "input" in payload:
            return payload, payload, None
        if isinstance(payload.get("traj"), list):
            return payload["traj"], None, "read the 'traj' list (a tau-bench run)"
        if isinstance(payload.get("history"), list):
            return (
                _swe_agent_history(payload["history"]),
                None,
                "read the 'history' list (a SWE-agent trajectory)",
            )
        keys = ", ".join(sorted(payload)[:6])
        raise UsageError(
            "an object was given but it has none of 'messages', 'input', 'traj' or 'history' "
            f"(keys: {keys})"
        )
    raise UsageError(f"expected a JSON list or object, got {type(payload).__name__}")


def _format_module(name: str) -> Any:
    try:
        return importlib.import_module(f"contextfold.formats.{_FORMAT_MODULES[name]}")
    except ImportError as exc:
        raise UsageError(
            f"the {name!r} format is not available in this build of contextfold ({exc})"
        ) from exc


def detect_format(payload: Any) -> str:
    """The CLI name (``openai``, ``anthropic``, ``responses``) of the format of ``payload``."""
    from contextfold import formats

    try:
        detected = formats.detect(payload)
    except FormatError as exc:
        raise UsageError(
            f"unknown conversation format: {exc}",
            hint="pass --format openai|anthropic|responses",
        ) from exc
    return {v: k for k, v in _FORMAT_MODULES.items()}[detected]


def _select(envelope: dict[str, Any], fmt: str) -> Any:
    """The part of a request body that the format's ``load`` reads."""
    if fmt == "responses":
        return envelope.get("input", [])
    if fmt == "anthropic":
        return {k: envelope[k] for k in ("system", "messages") if k in envelope}
    return envelope.get("messages", [])


def load_conversation(path: str, *, fmt: str = "auto") -> Loaded:
    """Read, unwrap and parse a conversation file (``-`` is stdin)."""
    text, name = _read_text(path)
    raw = parse_json_or_jsonl(text, name)
    note = None
    if isinstance(raw, list) and _is_claude_code_log(raw):
        raw = merge_claude_code(raw)
        note = "merged a Claude Code session log"
        if fmt == "auto":
            fmt = "anthropic"
    conversation, envelope, unwrap_note = unwrap(raw)
    note = note or unwrap_note
    if fmt != "auto":
        chosen = fmt
    elif envelope is not None and "input" in envelope and "messages" not in envelope:
        chosen = "responses"
    else:
        chosen = detect_format(conversation)
    if envelope is not None:
        conversation = _select(envelope, chosen)
    module = _format_module(chosen)
    try:
        messages = list(module.load(conversation))
    except FormatError as exc:
        raise UsageError(f"{name}: not a valid {chosen} conversation: {exc}") from exc
    except ContextfoldError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{name}: not a valid {chosen} conversation: {exc!r}") from exc
    return Loaded(name, messages, chosen, envelope, note)


def dump_conversation(messages: Sequence[Message], fmt: str, envelope: Any | None = None) -> Any:
    """Messages in provider format ``fmt``; a request body keeps its other fields."""
    dumped = _format_module(fmt).dump(list(messages))
    if envelope is None:
        return dumped
    out = {k: v for k, v in envelope.items() if k not in ("messages", "input", "system")}
    if isinstance(dumped, dict):
        out.update(dumped)
    else:
        out["input" if fmt == "responses" else "messages"] = dumped
    return out
