"""The candidates of each checkpoint section, found mechanically in a span.

Requests and corrections (quoted), the current work and the next step, file paths and what
was done to them, shell commands, error lines, pending work, code identifiers and key
phrases: each finder returns :class:`~._items.Item` candidates weighed so they compete
for the budget by weight per character.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from contextfold.errors import FormatError
from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart
from contextfold.summarizers.extractive._items import (
    CONCEPTS,
    CONTEXT,
    CURRENT,
    ERRORS,
    FILES,
    NEXT,
    OPENING_DENSITY,
    PENDING,
    REQUEST,
    Item,
    norm,
)
from contextfold.summarizers.extractive._phrases import key_phrases

__all__ = ["collect"]

_PATH_RE = re.compile(
    r"(?<![\w/.:-])(?:[A-Za-z]:)?(?:~|\.{1,2})?/?(?:[\w@+-][\w.@+-]*/)+[\w@+-][\w.@+-]*"
    r"|(?<![\w/.-])[\w-]+\.(?:py|pyi|ex|exs|eex|heex|ts|tsx|js|jsx|mjs|json|md|toml|yaml|yml|"
    r"txt|cfg|ini|rs|go|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|sh|sql|html|css|scss|lock|"
    r"dart|lua|vue|svelte|xml|csv|env|proto)\b"
)
# These hint regexes start on a literal or a rare character class and look behind, so the
# regex engine skips ahead instead of trying every position of a long message.
_EXT_HINT_RE = re.compile(r"\.(?<=\w\.)[a-z]{1,6}\b")  # word.ext
_CAMEL_RE = re.compile(r"[A-Z](?<=[a-z][A-Z])")  # camelCase
_DOTTED_CALL_RE = re.compile(r"\.(?<=\w\.)\w+\(")  # obj.call(
_URL_RE = re.compile(r"https?://\S+")
_IDENT_RE = re.compile(
    r"`([^`\n]{2,60})`"
    r"|\b([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+(?:\.[A-Za-z_]\w*)*)\b"  # CamelCase(.attr)
    r"|\b([a-z_][a-z0-9]*(?:_[a-z0-9]+)+)\b"  # snake_case
    r"|\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\(\)?)"  # dotted.call(
)
# _ERROR_RE, _REQUEST_RE and _PENDING_RE match lowercased text: CPython's re is several
# times slower with (?i) and long alternations than on text lowered once.
_ERROR_RE = re.compile(
    r"\b(?:error|exception|traceback|failed|failure|fatal|panic|undefined|cannot|"
    r"can't|not found|no such|denied|refused|invalid|warning)\b"
)
_CORRECTION_RE = re.compile(
    r"(?i)^\s*(?:no\b(?!\s+(?:worries|problem|doubt|way|wonder))|nope|actually,|wait|stop|"
    r"don't|do not|instead|rather|that's wrong|that is wrong|not that|wrong|undo|revert|"
    r"never mind|please don't)"
)
_REQUEST_RE = re.compile(
    r"\b(?:please|can you|could you|would you|i want you|i need you|i'd like you|let's|"
    r"make sure|help me)\b"
    r"|^\s*(?:implement|add|fix|create|write|update|remove|refactor|change|build|run|check|"
    r"investigate|use|make|show|explain|find|look|read|delete|rename|move|test|try)\b"
)
_PENDING_RE = re.compile(
    r"\b(?:todo|to do|still need|need to|remaining|pending|not yet|next,? (?:i|we)|"
    r"will need|left to|follow[- ]up|later)\b"
)
_SPACE_RE = re.compile(r"\s+")

_VERBATIM_LIMIT = 240
_LINE_LIMIT = 200


def _short(text: str, limit: int) -> str:
    text = _SPACE_RE.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + " …"


def _first_sentences(text: str, limit: int) -> str:
    text = _SPACE_RE.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    out = ""
    for m in re.finditer(r"[^.!?]+[.!?]*", text):
        piece = m.group(0)
        if len(out) + len(piece) > limit:
            break
        out += piece
    return out.strip() or _short(text, limit)


def _message_texts(m: Message) -> tuple[str, str]:
    """(own text, tool output text) of a message."""
    own: list[str] = []
    tool: list[str] = []
    for p in m.parts:
        if isinstance(p, TextPart):
            own.append(p.text)
        elif isinstance(p, ToolResultPart):
            tool.append(p.text)
    return "\n".join(own), "\n".join(tool)


def collect(messages: Sequence[Message], read: set[str], modified: set[str]) -> list[Item]:
    """Every candidate of every section, from ``messages`` and the files read and modified."""
    texts: list[tuple[str, str]] = [_message_texts(m) for m in messages]
    items = _requests(messages, texts)
    items += _files(messages, texts, read, modified)
    items += _commands_and_errors(messages)
    items += _pending(texts)
    items += _identifiers(texts)
    speakers = [m.name or m.role for m in messages]
    items.extend(
        Item(CONTEXT, text, score, first, "kp:" + key, group=speaker)
        for text, key, score, first, speaker in key_phrases([own for own, _ in texts], speakers)
    )
    return items


def _requests(messages: Sequence[Message], texts: list[tuple[str, str]]) -> list[Item]:
    """The user's requests and corrections, the latest request and the current work."""
    items: list[Item] = []
    n = len(messages)
    user_idx = [i for i, m in enumerate(messages) if m.role == "user" and texts[i][0].strip()]
    last_user = user_idx[-1] if user_idx else None
    for rank, i in enumerate(user_idx):
        own = texts[i][0].strip()
        is_correction = rank > 0 and bool(_CORRECTION_RE.match(own))
        is_request = bool(_REQUEST_RE.search(own[:400].lower()))
        if not (is_correction or is_request or rank == 0):
            continue
        limit = _VERBATIM_LIMIT if (is_correction or rank == 0) else _LINE_LIMIT
        text = _first_sentences(own, limit)
        # Salience per character, comparable with the other sections: the opening request
        # and corrections matter most; later requests a little more than earlier ones.
        technical = "/" in own or _has_ident_hint(own)
        density = 0.35 if technical else 0.12
        if rank == 0:
            # The opening request frames everything after it: it goes in first whenever it
            # fits, even in a summary too small for much else (a merged previous summary
            # hands this place to the conversation's own opening, see _merge_previous).
            density = OPENING_DENSITY
        if is_correction:
            density = 0.5
        density *= 1.0 + 0.5 * (i / max(1, n))
        label = f'Correction: "{text}"' if is_correction else f'"{text}"'
        score = density * (len(label) + 3)
        items.append(Item(REQUEST, label, score, i, "req:" + norm(text)))
    if last_user is not None:
        own = _first_sentences(texts[last_user][0], _LINE_LIMIT)
        label = f'Follow the latest request: "{own}"'
        items.append(Item(NEXT, label, 0.8 * (len(label) + 3), n, "next:" + norm(own)))
    for i in range(n - 1, -1, -1):
        if messages[i].role == "assistant" and texts[i][0].strip():
            own = _first_sentences(texts[i][0], _LINE_LIMIT)
            items.append(Item(CURRENT, own, 0.5 * (len(own) + 3), n, "cur:" + norm(own)))
            break

    return items


def _files(
    messages: Sequence[Message], texts: list[tuple[str, str]], read: set[str], modified: set[str]
) -> list[Item]:
    """Every file path mentioned, weighed by mentions and by whether it was read or changed."""
    items: list[Item] = []
    n = len(messages)
    mentions: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for i, (own, tool) in enumerate(texts):
        for source in (own, tool, _call_text(messages[i])):
            if not source or ("/" not in source and not _EXT_HINT_RE.search(source)):
                continue
            stripped = _URL_RE.sub(" ", source) if "://" in source else source
            for path in _PATH_RE.findall(stripped):
                path = path.rstrip(".,:;")
                if len(path) < 3 or path.count("/") > 12 or len(path) > 160:
                    continue
                mentions[path] += 1
                first_seen.setdefault(path, i)
    for path in read | modified:
        mentions[path] += 2
        first_seen.setdefault(path, n)
    for path, count in mentions.items():
        if path in modified:
            label, bonus = f"{path} (modified)", 6.0
        elif path in read:
            label, bonus = f"{path} (read)", 3.0
        else:
            label, bonus = path, 0.0
        score = (4.0 + bonus + 3.0 * math.log1p(count)) * len(label) / 12
        items.append(Item(FILES, label, score, first_seen[path], "path:" + path))

    return items


def _commands_and_errors(messages: Sequence[Message]) -> list[Item]:
    """Shell commands the assistant ran and the error lines tool results carried."""
    items: list[Item] = []
    n = len(messages)
    for i, m in enumerate(messages):
        for call in m.tool_calls:
            cmd = _command_of(call)
            if cmd:
                line = _short(cmd.splitlines()[0], 160)
                score = (2.0 + 2.0 * i / max(1, n)) * len(line) / 20
                items.append(Item(FILES, f"$ {line}", score, i, "cmd:" + norm(line)))
        for part in m.parts:
            if isinstance(part, ToolResultPart):
                body = part.text
                lines = [ln for ln in body.splitlines() if ln.strip()]
                hits = [ln for ln in lines if _ERROR_RE.search(ln.lower())] if lines else []
                if part.is_error and lines and not hits:
                    hits = lines[:1]
                for ln in hits[:2]:
                    line = _short(ln.strip(), 160)
                    score = (4.0 if part.is_error else 1.5) * len(line) / 20
                    items.append(Item(ERRORS, line, score, i, "err:" + norm(line)))

    return items


def _pending(texts: list[tuple[str, str]]) -> list[Item]:
    """Sentences of the recent messages that say what is still to do."""
    items: list[Item] = []
    n = len(texts)
    start_recent = max(0, n - max(8, n // 3))
    for i in range(start_recent, n):
        own = texts[i][0]
        if not own or not _PENDING_RE.search(own.lower()):
            continue
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", own):
            if _PENDING_RE.search(sentence.lower()) and 8 <= len(sentence) <= 400:
                line = _short(sentence.strip("-* "), 180)
                items.append(Item(PENDING, line, 2.0 * len(line) / 20, i, "todo:" + norm(line)))

    return items


def _identifiers(texts: list[tuple[str, str]]) -> list[Item]:
    """Code identifiers (backticks, CamelCase, snake_case, dotted calls), by mentions."""
    items: list[Item] = []
    idents: Counter[str] = Counter()
    ident_first: dict[str, int] = {}
    for i, (own, _) in enumerate(texts):
        if not own or not _has_ident_hint(own):
            continue
        for match in _IDENT_RE.finditer(own):
            ident = next(g for g in match.groups() if g)
            if _PATH_RE.fullmatch(ident) or (" " in ident.strip() and len(ident) > 40):
                continue
            idents[ident] += 1
            ident_first.setdefault(ident, i)
    for ident, count in idents.items():
        score = (1.5 + 1.5 * math.log1p(count)) * len(ident) / 10
        items.append(Item(CONCEPTS, ident, score, ident_first[ident], "id:" + ident.lower()))

    return items


def _has_ident_hint(text: str) -> bool:
    """Whether ``text`` may hold a code identifier (backticks, snake_case, camelCase, a call).

    Substring tests first: they cost far less than a regex scan of a long chat message.
    """
    if "`" in text or "_" in text:
        return True
    if "(" in text and _DOTTED_CALL_RE.search(text) is not None:
        return True
    return _CAMEL_RE.search(text) is not None


def _call_text(m: Message) -> str:
    if m.role != "assistant":
        return ""
    calls = [p for p in m.parts if isinstance(p, ToolCallPart)]
    return "\n".join(c.arguments for c in calls) if calls else ""


def _command_of(call: ToolCallPart) -> str | None:
    if call.name.lower() not in ("bash", "shell", "run", "exec", "execute", "terminal"):
        return None
    try:
        args = call.parsed_arguments()
    except FormatError:  # not JSON, or nested too deeply to decode
        return None
    cmd = args.get("command") if isinstance(args, Mapping) else None
    if isinstance(cmd, list):
        cmd = " ".join(str(c) for c in cmd)
    return cmd if isinstance(cmd, str) and cmd.strip() else None
