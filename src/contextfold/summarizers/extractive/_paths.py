"""The file paths of a span: only real ones, counted by mentions.

A summary that lists ``and/or``, ``row/col`` or ``/dev/null`` as files misleads whoever
resumes the work, so a string shaped like ``a/b`` is not enough. A path is listed when it is
*real*: a tool call named it (a path argument, or a word of a command), or it is shaped like a
file, with an extension (``lib/app/user.ex``, ``README.md``) or a leading ``/``, ``./``,
``../`` or ``~/`` and more than one segment. Device and process files are never listed.

Paths are listed as the span spelled them: ``/home/me/app/lib/x.ex`` and ``lib/x.ex`` may be
the same file or not (a path in a document is not one in the project), and only the span's
own tool calls could tell.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart
from contextfold.paths import is_plausible_path

__all__ = ["PathCounts", "count_paths", "is_device_file", "is_file_shaped", "is_plausible"]

# A path starts only where a run of path characters starts: from inside a run, each failed
# match would rescan the rest of it (quadratic on "1+1+1+ ... /" or "@@@@ ... /").
_PATH_RE = re.compile(
    r"(?<![\w/.:@+-])(?:[A-Za-z]:)?(?:~|\.{1,2})?/?(?:\.?[\w@+-][\w.@+-]*/)+\.?[\w@+-][\w.@+-]*/?"
    r"|(?<![\w/.:@+-])(?:~|\.{1,2})/[\w@+-][\w.@+-]*"
    r"|(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:py|pyi|ex|exs|eex|heex|leex|ts|tsx|js|jsx|mjs|json|md|toml|yaml|"
    r"yml|txt|cfg|ini|rs|go|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|sh|sql|html|css|scss|lock|"
    r"dart|lua|vue|svelte|xml|csv|proto|db|xlsx|ipynb|conf|log)(?![\w.])"
)
# A tool argument whose whole value is a path, whatever its shape ("path": "docs"): its key
# names a file or a folder. Another argument ("pattern": "and/or") is not one.
_PATH_ARG_RE = re.compile(
    r'"(?:\w*path|\w*file(?:name)?|\w*dir(?:ectory)?|cwd|root|src|dst|source|dest'
    r'(?:ination)?|target)"\s*:\s*"([^"\\]+)"',
    re.IGNORECASE,
)
# A hint that a text may hold a path: a slash, or a dot inside a word.
_EXT_HINT_RE = re.compile(r"\.(?<=\w\.)[a-z]{1,6}\b")
_URL_RE = re.compile(r"[a-z][a-z+.-]*://\S+")
_EXTENSION_RE = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_LINE_SUFFIX_RE = re.compile(r"(?::\d+)+:?$")
_NOT_FILES = ("/dev/", "/proc/", "/sys/")
_LIBRARY_RE = re.compile(r"[A-Z][a-z]+\.js|console\.\w+|[a-z]+\.(?:log|info|warn|error|debug)")
_MAX_PATH = 160


def is_file_shaped(path: str) -> bool:
    """Whether ``path`` looks like a file on its own: an extension, or a rooted multi-part path.

    ``and/or``, ``mods/funs`` and ``5.2.3`` are not; ``lib/x.ex``, ``./run`` and ``/etc/hosts``
    are. Device and process files (``/dev/null``) never are.
    """
    if is_device_file(path) or len(path) > _MAX_PATH:
        return False
    segments = [p for p in path.split("/") if p]
    if len(segments) > 1 and all(p.startswith(".") and p.strip(".") for p in segments):
        return False  # ".ex/.exs", ".json/.jsonl": extensions, not a file in a folder
    name = path.rstrip("/").rpartition("/")[2]
    if _EXTENSION_RE.search(name) and not name.replace(".", "").isdigit():
        stem = name.rpartition(".")[0]
        if "/" not in path and _LIBRARY_RE.fullmatch(name):
            return False  # Node.js, Vue.js, console.log: names, not files
        return bool(stem) or path.startswith((".", "/", "~"))
    if path.startswith(("./", "~/")):
        return True
    if path.startswith("/"):
        # a route such as /hooks/commit-event is not a file: ask for some depth
        return sum(1 for p in path.split("/") if p) >= 3
    return False


def is_device_file(path: str) -> bool:
    """Whether ``path`` is a device or process file (``/dev/null``, ``/proc/1/fd``)."""
    return path.startswith(_NOT_FILES)


def is_plausible(path: str) -> bool:
    """Whether a path a tool call implied can be printed as one (no newline, quote, paren)."""
    return is_plausible_path(path)


def _clean(path: str) -> str:
    path = path.rstrip(".,:;)'\"`")
    return _LINE_SUFFIX_RE.sub("", path) if ":" in path else path


def _found(text: str) -> list[str]:
    if not text or ("/" not in text and _EXT_HINT_RE.search(text) is None):
        return []
    if "://" in text:
        text = _URL_RE.sub(" ", text)
    if "\\" in text:  # JSON quoted inside a result or an argument: "a\\nlib/x.ex"
        text = text.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"')
    return [_clean(p) for p in _PATH_RE.findall(text)]


class PathCounts:
    """Mentions of the real paths of a span, with where each was first seen."""

    def __init__(self) -> None:
        self.mentions: Counter[str] = Counter()
        self.first: dict[str, int] = {}

    def add(self, path: str, index: int, weight: int = 1) -> None:
        if len(path) < 3 or path.count("/") > 12 or is_device_file(path):
            return
        self.mentions[path] += weight
        self.first.setdefault(path, index)


def count_paths(messages: Sequence[Message], known: set[str]) -> PathCounts:
    """Every real path mentioned in ``messages``; ``known`` paths (read or modified) count.

    A path a tool call names is real whatever its shape; one seen anywhere else must be
    file-shaped (:func:`is_file_shaped`).
    """
    counts = PathCounts()
    called: set[str] = set(known)
    for i, m in enumerate(messages):
        for part in m.parts:
            if isinstance(part, ToolCallPart):
                args = part.arguments
                whole = set(_PATH_ARG_RE.findall(args)) if '"' in args else set()
                for path in _found(args):
                    # a path argument's value ("path": "lib/app") is a path whatever its shape
                    if is_file_shaped(path) or path in whole:
                        called.add(path)
                        counts.add(path, i)
            elif isinstance(part, (TextPart, ToolResultPart)):
                for path in _found(part.text):
                    if path in called or is_file_shaped(path):
                        counts.add(path, i)
    for path in known:
        counts.add(path, len(messages), 2)
    return counts
