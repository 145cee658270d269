"""The candidates of each section, found mechanically in a span.

Two layouts, chosen by what the span is:

* an **agent run** (tool calls present, or a previous summary in the checkpoint layout) gets
  the checkpoint sections: the user's requests and corrections (quoted; client notices such
  as ``[Request interrupted by user]`` left out), the real files read and changed
  (:mod:`._paths`), error lines of tool results (tracebacks, ``error:`` lines, failed runs:
  not a commit subject that happens to say "fix"), pending work, the current work and the
  latest request, code identifiers, and under "Critical context" the clauses that carry the
  facts of the messages;
* a **chat** gets requests, facts, decisions and open questions, each a clause of a message.

Each finder returns :class:`~._items.Item` candidates with a weight of their own and the
facts they carry, so they compete for the room by what they add (see :func:`~._items.select`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from contextfold.errors import FormatError
from contextfold.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from contextfold.summarizers.extractive._facts import (
    W_NUMBER,
    W_WORD,
    clauses_of,
    fact_keys,
    is_version,
    strip_notices,
)
from contextfold.summarizers.extractive._items import (
    CONCEPTS,
    CONTEXT,
    CURRENT,
    DECISIONS,
    ERRORS,
    FACTS,
    FILES,
    NEXT,
    OPEN,
    OPENING_WEIGHT,
    PENDING,
    REQUEST,
    REQUESTS,
    Item,
    norm,
    path_weight,
    speaker_name,
)
from contextfold.summarizers.extractive._paths import count_paths

__all__ = ["collect_agent", "collect_chat", "demote_superseded_versions", "repeats_of"]

_IDENT_RE = re.compile(
    r"`([^`\n]{2,60})`"
    r"|\b([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+(?:\.[A-Za-z_]\w*)*)\b"  # CamelCase(.attr)
    r"|\b([a-z_][a-z0-9]*(?:_[a-z0-9]+)+)\b"  # snake_case
    # dotted.call(, started only where a dotted run starts: from inside one, each failed
    # match would rescan the rest of the run (quadratic on "a.a.a. ... (")
    r"|(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\(\)?)"
)
_CAMEL_RE = re.compile(r"[A-Z](?<=[a-z][A-Z])")
_FILE_NAME_RE = re.compile(r"\w\.(?:[a-z]{1,4}|heex|json|yaml|toml)$")
# An error line of a tool result: a traceback, an exception, a compiler or shell error, a
# failed test. Anchored at the start of a line, so a commit subject saying "fix the failing
# test" is not one.
_ERROR_LINE_RE = re.compile(
    r"^[ \t]*(?:Traceback \(most recent call last\)|(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b"
    r"|(?:error|fatal|panic)(?:\[[\w-]+\])?:|(?:FAILED|FAIL|ERROR)\b|\*\* \([A-Z]\w*|npm ERR!"
    r"|[^\n]{0,120}?(?:: command not found|: No such file or directory|: Permission denied"
    r"|\b(?:error|Error|ERROR)(?:\[\w+\])?: ))[^\n]*",
    re.MULTILINE,
)
_COMMIT_LINE_RE = re.compile(r"^[ \t]*[0-9a-f]{7,40}\s")
_CORRECTION_RE = re.compile(
    r"(?i)^\s*(?:no\b(?!\s+(?:worries|problem|doubt|way|wonder))|nope|actually,|wait|stop|"
    r"don't|do not|instead|rather|that's wrong|that is wrong|not that|wrong|undo|revert|"
    r"never mind|please don't)"
)
_REQUEST_RE = re.compile(
    r"\b(?:please|can you|could you|would you|i want you|i need you|i'd like you|let's|"
    r"make sure|help me)\b"
    r"|^\s*(?:implement|add|fix|create|write|update|remove|refactor|change|build|run|check|"
    r"investigate|use|make|show|explain|find|look|read|delete|rename|move|test|try|work on|"
    r"continue)\b"
)
_PENDING_RE = re.compile(
    r"\b(?:todo|to do|still need|need to|remaining|pending|not yet|next,? (?:i|we)|"
    r"will need|left to|follow[- ]up|later)\b"
)
_DECISION_RE = re.compile(
    r"\b(?:i recommend|recommended|we'll|we will|i'll|i will|decided|agreed|going with|"
    r"opened|changed|updated|refunded|enabled|created|switched|moved|renamed|"
    r"now go|keeps|will be|set up|cancel(?:l?ed)?|booked|confirmed)\b"
)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_MIN_FACTS = 1.0  # a clause whose facts weigh less says nothing worth its room
_SPACE_RE = re.compile(r"\s+")
_SHELL_TOOLS = frozenset({"bash", "shell", "run", "exec", "execute", "terminal", "run_command"})
# Tools whose results are file contents or search hits: an "error:" in them is code, not news.
_CONTENT_TOOLS = frozenset(
    {"read", "read_file", "view", "open", "open_file", "cat", "grep", "glob", "ls", "search"}
)


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
        if len(out) + len(m.group(0)) > limit:
            break
        out += m.group(0)
    return out.strip() or _short(text, limit)


def own_texts(messages: Sequence[Message]) -> list[str]:
    """Each message's own text (no tool output), client notices removed."""
    out: list[str] = []
    for m in messages:
        text = "\n".join(p.text for p in m.parts if isinstance(p, TextPart))
        out.append(strip_notices(text) if m.role == "user" else text)
    return out


def repeats_of(items: Sequence[Item]) -> dict[str, float]:
    """How much each exact fact weighs for being repeated: ``1 + 0.3 ln(items naming it)``,
    at most 2.

    Only numbers, ids, amounts and the like: an order number named five times is what the
    conversation is about, while a name or a word repeated (``Settings``, ``plan``) is only
    the vocabulary of the topic.
    """
    counts: Counter[str] = Counter()
    for it in items:
        counts.update(k for k, w in it.facts.items() if w >= W_NUMBER)
    return {k: min(2.0, 1.0 + 0.3 * math.log(c)) for k, c in counts.items() if c > 1}


def _clause_items(
    messages: Sequence[Message],
    owns: Sequence[str],
    section: int,
    *,
    named: bool,
    opening: int = -1,
) -> list[Item]:
    """Every fact-carrying clause of the messages' own text, as candidates of ``section``.

    The first clause of message ``opening`` is a candidate however little it carries:
    "Please cancel my subscription." is what the whole chat is about.
    """
    items: list[Item] = []
    n = max(1, len(owns))
    # Between named people, their own names and short forms of them ("Thanks, Mel!") say
    # nothing new: the prefix of each line already names the speaker.
    names = {
        name[:end]
        for name in {m.name.lower() for m in messages if m.name and named}
        for end in range(3, len(name) + 1)
    }
    for i, own in enumerate(owns):
        if not own:
            continue
        speaker = speaker_name(messages[i].name or "") if named else ""
        scale = 1.0 + 0.25 * i / n
        for j, c in enumerate(clauses_of(own, i)):
            if names and not names.isdisjoint(c.keys):
                c.keys = {k: w for k, w in c.keys.items() if k not in names}
            if sum(c.keys.values()) < _MIN_FACTS and not (i == opening and j == 0):
                continue  # "Let me check." carries nothing a reader needs
            key = f"{section}:{norm(c.text)}"
            items.append(Item(section, c.text, 0.0, i, key, c.keys, scale, speaker))
    return items


# -- agent runs --------------------------------------------------------------------------------


def collect_agent(messages: Sequence[Message], read: set[str], modified: set[str]) -> list[Item]:
    """Every candidate of the checkpoint sections, from ``messages`` and the files touched."""
    owns = own_texts(messages)
    items = _requests(messages, owns)
    items += _files(messages, read, modified)
    items += _errors_and_commands(messages)
    items += _pending(owns)
    items += _identifiers(owns)
    items += _clause_items(messages, owns, CONTEXT, named=False)
    # The assistant's reasoning states facts too ("the test fails because ..."); they fill
    # what room the messages' own text leaves.
    thoughts = ["\n".join(p.text for p in m.parts if isinstance(p, ThinkingPart)) for m in messages]
    for it in _clause_items(messages, thoughts, CONTEXT, named=False):
        it.scale *= 0.7
        items.append(it)
    return items


def _requests(messages: Sequence[Message], owns: Sequence[str]) -> list[Item]:
    """The user's requests and corrections, the latest request and the current work."""
    items: list[Item] = []
    n = len(messages)
    users = [i for i, m in enumerate(messages) if m.role == "user" and owns[i].strip()]
    for rank, i in enumerate(users):
        own = owns[i].strip()
        correction = rank > 0 and bool(_CORRECTION_RE.match(own))
        if not (correction or rank == 0 or _REQUEST_RE.search(own[:400].lower())):
            continue
        text = _first_sentences(own, 240 if (correction or rank == 0) else 200)
        weight = OPENING_WEIGHT if rank == 0 else (8.0 if correction else 3.0)
        label = f'Correction: "{text}"' if correction else f'"{text}"'
        items.append(Item(REQUEST, label, weight, i, "req:" + norm(text), fact_keys(text)))
    if users:
        own = _first_sentences(owns[users[-1]], 200)
        label = f'Follow the latest request: "{own}"'
        items.append(Item(NEXT, label, 10.0, n, "next:" + norm(own)))
    for i in range(n - 1, -1, -1):
        if messages[i].role == "assistant" and owns[i].strip():
            own = _first_sentences(owns[i], 200)
            items.append(Item(CURRENT, own, 8.0, n, "cur:" + norm(own), fact_keys(own)))
            break
    return items


def _files(messages: Sequence[Message], read: set[str], modified: set[str]) -> list[Item]:
    """Every real path mentioned, weighed by mentions and by whether it was read or changed."""
    counts = count_paths(messages, read | modified)
    items: list[Item] = []
    for path, count in counts.mentions.items():
        if path in modified:
            label, bonus = f"{path} (modified)", 6.0
        elif path in read:
            label, bonus = f"{path} (read)", 3.0
        else:
            label, bonus = path, 0.0
        weight = path_weight(label, bonus, count)
        items.append(Item(FILES, label, weight, counts.first[path], "path:" + path))
    return items


def _errors_and_commands(messages: Sequence[Message]) -> list[Item]:
    """Error lines of tool results, each with the command that produced it, and the latest
    commands run (under "Current work")."""
    items: list[Item] = []
    commands: dict[str, str] = {}
    content: set[str] = set()  # calls whose results are file contents or search hits
    recent: list[tuple[int, str]] = []
    for i, m in enumerate(messages):
        for part in m.parts:
            if isinstance(part, ToolCallPart):
                if part.name.lower() in _CONTENT_TOOLS:
                    content.add(part.id)
                cmd = _command_of(part)
                if cmd:
                    commands[part.id] = _short(cmd.splitlines()[0], 80)
                    recent.append((i, commands[part.id]))
            elif isinstance(part, ToolResultPart) and part.text and part.call_id not in content:
                hits = [
                    h.strip()
                    for h in _ERROR_LINE_RE.findall(part.text[:20_000])
                    if not _COMMIT_LINE_RE.match(h)
                ][:2]
                if part.is_error and not hits:
                    hits = [ln.strip() for ln in part.text.splitlines() if ln.strip()][:1]
                cmd = commands.get(part.call_id)
                for line in hits:
                    text = _short(line, 160)
                    label = f"`{cmd}`: {text}" if cmd else text
                    weight = (6.0 if part.is_error else 3.0) * len(label) / 40
                    items.append(Item(ERRORS, label, weight, i, "err:" + norm(text)))
    for k, (i, cmd) in enumerate(recent[-3:]):
        label = f"ran `{cmd}`"
        items.append(Item(CURRENT, label, 1.5 + k, i, "cmd:" + norm(cmd)))
    return items


def _pending(owns: Sequence[str]) -> list[Item]:
    """Sentences of the recent messages that say what is still to do."""
    items: list[Item] = []
    n = len(owns)
    for i in range(max(0, n - max(8, n // 3)), n):
        own = owns[i]
        if not own or not _PENDING_RE.search(own.lower()):
            continue
        for sentence in _SENTENCE_RE.split(own):
            if _PENDING_RE.search(sentence.lower()) and 8 <= len(sentence) <= 400:
                line = _short(sentence.strip("-* "), 180)
                items.append(Item(PENDING, line, 4.0, i, "todo:" + norm(line), fact_keys(line)))
    return items


def _identifiers(owns: Sequence[str]) -> list[Item]:
    """Code identifiers (backticks, CamelCase, snake_case, dotted calls), by mentions."""
    idents: Counter[str] = Counter()
    first: dict[str, int] = {}
    for i, own in enumerate(owns):
        if not own or not ("`" in own or "_" in own or "(" in own or _CAMEL_RE.search(own)):
            continue
        for match in _IDENT_RE.finditer(own):
            ident = next(g for g in match.groups() if g)
            if "/" in ident or _FILE_NAME_RE.search(ident) or (" " in ident and len(ident) > 40):
                continue  # a path or a file name is listed under the files
            idents[ident] += 1
            first.setdefault(ident, i)
    return [
        Item(CONCEPTS, ident, (0.5 + 0.8 * math.log1p(c)) * len(ident) / 10, first[ident], ident)
        for ident, c in idents.items()
        if c >= 2 and len(ident) >= 4
    ]


def _command_of(call: ToolCallPart) -> str | None:
    if call.name.lower() not in _SHELL_TOOLS:
        return None
    try:
        args = call.parsed_arguments()
    except FormatError:  # not JSON, or nested too deeply to decode
        return None
    cmd = args.get("command") if isinstance(args, Mapping) else None
    if isinstance(cmd, list):
        cmd = " ".join(str(c) for c in cmd)
    return cmd if isinstance(cmd, str) and cmd.strip() else None


# -- chats ---------------------------------------------------------------------------------------


def collect_chat(messages: Sequence[Message], *, opening: bool = True) -> list[Item]:
    """Requests, facts, decisions and open questions of a chat, each a clause of a message.

    The user's first clause opens the summary whatever the room (unless the span continues a
    summarized conversation, ``opening=False``); a question in the span's
    last message is still open; the user's questions and requests are requests; a clause
    that commits to or reports an action is a decision; every other clause is a fact.
    """
    owns = own_texts(messages)
    # Between two named people (not a user and an assistant) a question is conversation,
    # not a request, and nobody is deciding for the other: everything is a fact.
    peers = all(m.name for m in messages if m.role in ("user", "assistant"))
    first = next((i for i, m in enumerate(messages) if m.role == "user" and owns[i].strip()), -1)
    items = _clause_items(
        messages, owns, FACTS, named=peers, opening=first if opening and not peers else -1
    )
    last = max((i for i, own in enumerate(owns) if own.strip()), default=-1)
    opened = not opening or peers
    for it in items:
        i = int(it.order)
        plain = it.text.lower()
        user = messages[i].role == "user"
        if user and not opened:
            it.section, it.weight, opened = REQUESTS, OPENING_WEIGHT, True
        elif i == last and it.text.endswith("?"):
            it.section, it.weight = OPEN, 2.0
        elif peers:
            continue
        elif user and (it.text.endswith("?") or _REQUEST_RE.search(plain) is not None):
            it.section, it.weight = REQUESTS, 1.0
        elif _DECISION_RE.search(plain) is not None:
            it.section, it.weight = DECISIONS, 4.0
        else:
            continue
        it.key = f"{it.section}:{it.key.partition(':')[2]}"
    return items


def plain_items(messages: Sequence[Message]) -> list[Item]:
    """Each message's own text as a line, for a span too short to hold a fact-carrying clause.

    A span with text always gets a summary: "question 3", "ok, thanks" are still what was
    said, and an empty summary would make the caller fall back for nothing.
    """
    items: list[Item] = []
    for i, own in enumerate(own_texts(messages)):
        text = " ".join(own.split())
        if text:
            section = REQUESTS if messages[i].role == "user" else FACTS
            items.append(Item(section, text[:200], 1.0, i, f"{section}:{norm(text)}"))
    return items


def demote_superseded_versions(items: Sequence[Item]) -> None:
    """A version followed later by a newer one of the same line (5.2.1, then 5.2.3) is
    history: it weighs as a plain word, so the room goes to the version in use."""
    latest: dict[str, tuple[float, str]] = {}
    for it in items:
        for key in it.facts:
            if is_version(key):
                family = key.rpartition(".")[0]
                if family not in latest or it.order >= latest[family][0]:
                    latest[family] = (it.order, key)
    for it in items:
        stale = [k for k in it.facts if is_version(k) and latest[k.rpartition(".")[0]][1] != k]
        if stale:
            it.facts = {k: (W_WORD if k in stale else w) for k, w in it.facts.items()}
