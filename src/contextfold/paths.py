"""Which files an agent's tool calls read and modified.

A coding agent's summary and checkpoint must say which files the work touched. The paths
are read from the tool calls themselves (path arguments, editor commands, patches, simple
shell commands), exactly as the calls spelled them; unknown tools are ignored rather than
guessed at.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from contextfold.errors import FormatError
from contextfold.messages import Message, ToolCallPart

__all__ = ["file_operations", "is_plausible_path"]

_READ_TOOLS = frozenset(
    {"read", "read_file", "view", "cat", "open", "open_file", "notebookread", "readfile", "ls"}
)
_WRITE_TOOLS = frozenset(
    {
        "write",
        "write_file",
        "create",
        "create_file",
        "edit",
        "multiedit",
        "edit_file",
        "str_replace",
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "apply_patch",
        "notebookedit",
        "replace",
        "insert",
    }
)
_SHELL_TOOLS = frozenset({"bash", "shell", "run", "exec", "execute", "terminal", "run_command"})
_PATH_KEYS = ("file_path", "path", "filename", "file", "notebook_path", "target_file")
_EDITOR_WRITE_COMMANDS = frozenset({"create", "str_replace", "insert", "undo_edit", "write"})
_SHELL_READERS = frozenset({"cat", "head", "tail", "less", "more", "wc", "nl", "bat"})
_SHELL_WRITERS = frozenset({"touch", "rm", "mv", "cp", "mkdir", "tee", "sed", "truncate"})
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)


def _call_args(call: ToolCallPart) -> Mapping[str, Any]:
    try:
        args = call.parsed_arguments()
    except FormatError:  # not JSON, or nested too deeply to decode: no paths to read
        return {}
    return args if isinstance(args, Mapping) else {}


def _shell_files(command: str) -> tuple[list[str], list[str]]:
    """Files a simple shell command reads or writes (best effort, never raises)."""
    reads: list[str] = []
    writes: list[str] = []
    for segment in re.split(r"&&|\|\||;|\|", command):
        try:
            words = shlex.split(segment, posix=True)
        except ValueError:
            words = segment.split()
        if not words:
            continue
        prog = words[0].rsplit("/", 1)[-1]
        args = [w for w in words[1:] if not w.startswith("-")]
        if prog in _SHELL_READERS:
            reads.extend(a for a in args if "/" in a or "." in a)
        elif prog == "sed" and "-i" in words:
            writes.extend(a for a in args[1:] if "/" in a or "." in a)
        elif prog in _SHELL_WRITERS and prog != "sed":
            writes.extend(a for a in args if "/" in a or "." in a)
        if ">" in segment:
            target = segment.rsplit(">", 1)[1].strip().split(" ")[0]
            if target and target not in ("/dev/null", "&1", "&2"):
                writes.append(target)
    return reads, writes


def file_operations(messages: Iterable[Message]) -> tuple[set[str], set[str]]:
    """Paths read and modified by the tool calls in ``messages``.

    Recognizes the common agent tools: Read/Write/Edit-style tools with a path argument,
    editor tools with a ``command`` (``view`` reads, the others write), ``apply_patch``
    bodies, and simple shell commands (``cat``, ``sed -i``, redirections ...). Unknown tools
    are ignored rather than guessed at.

    Returns:
        ``(read, modified)`` sets of paths, exactly as the calls spelled them.
    """
    read: set[str] = set()
    modified: set[str] = set()
    for m in messages:
        if m.role != "assistant":
            continue
        for call in m.tool_calls:
            name = call.name.lower()
            args = _call_args(call)
            path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
            command = args.get("command")
            if name in _SHELL_TOOLS and isinstance(command, str):
                r, w = _shell_files(command)
                read.update(r)
                modified.update(w)
            elif name in ("str_replace_editor", "str_replace_based_edit_tool") and path:
                (read if command == "view" else modified).add(path)
            elif name == "apply_patch":
                body = args.get("input") or args.get("patch") or call.arguments
                if isinstance(body, str):
                    modified.update(p.strip() for p in _PATCH_FILE.findall(body))
            elif path and name in _WRITE_TOOLS:
                modified.add(path)
            elif path and name in _READ_TOOLS:
                read.add(path)
            elif name in _EDITOR_WRITE_COMMANDS and path:
                modified.add(path)
    return read, modified


#: The longest path worth printing in a summary.
_MAX_PATH = 160
_PLAUSIBLE = re.compile(r"[\w@+~.,=-]*(?:/[\w@+~.,= -]*)*/?")


def is_plausible_path(path: str) -> bool:
    """Whether a path a tool call implied can be printed as one (no newline, quote, paren).

    A shell heredoc or pipe misread by :func:`file_operations` (``EOF\n)"``) is no file to
    list in a summary or carry to the next checkpoint.
    """
    return bool(path) and _PLAUSIBLE.fullmatch(path) is not None and len(path) <= _MAX_PATH
