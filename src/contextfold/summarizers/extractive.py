"""The offline default summarizer: a structured checkpoint built without a model.

:class:`ExtractiveSummarizer` reads the span and writes the checkpoint sections
(:data:`contextfold.summarizers.prompts.CHECKPOINT_SECTIONS`) from what it can find
mechanically: the user's requests and corrections (quoted), file paths and what was done
to them, shell commands, error lines, code identifiers, pending work, the latest request, and, under
"Critical context", the span's *key phrases*.

A key phrase is a run of one to three content words cut out of a clause once greetings,
pronouns and filler are removed (``"I went to a LGBTQ support group yesterday"`` gives
``"LGBTQ support group"``, ``"support group yesterday"`` ...), a full date
(``"8 May, 2023"``) or a capitalized title (``"Becoming Nicole"``, ``"A Dance with
Dragons"``). Each is weighed by what tends to matter later: names, numbers and dates weigh
most, everyday words and adverbs least, and repetition raises the weight logarithmically.
Key phrases are found by :mod:`contextfold.summarizers._phrases`, the hot path on chat text.

Every candidate, whatever its section, competes for the token budget by weight per
character; the budget is filled greedily in that order, a phrase already contained in a
chosen one is skipped, and the counter has the last word (the weakest items are dropped until
the text fits). The result is dense in distinct names, numbers, dates, places and paths
rather than in filler, and deterministic: the same span gives the same text.

A previous summary (``request.previous_summary``) is merged, not copied: its items compete for
the budget with the new ones (with a bonus, since they already survived once), duplicates are
removed, and its "Current work" and "Next step" give way when the new span says something
newer.

No third-party package is needed. ``bench/retention.py`` measures the throughput (CPU time,
one core) and what survives at a given budget.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart
from contextfold.summarizers._phrases import key_phrases
from contextfold.summarizers._serialize import file_operations
from contextfold.summarizers.base import SummarizationResult, SummaryRequest, Usage, precheck
from contextfold.tokens.base import TokenCounter

__all__ = ["ExtractiveSummarizer"]

# Section keys, in CHECKPOINT_SECTIONS order.
_REQUEST, _CONCEPTS, _FILES, _ERRORS, _PENDING, _CURRENT, _NEXT, _CONTEXT = range(8)
_HEADINGS = (
    "Primary request and intent",
    "Key technical concepts",
    "Files and code",
    "Errors and fixes",
    "Pending tasks",
    "Current work",
    "Next step",
    "Critical context",
)

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
_OPENING_DENSITY = 2.0  # salience per character of the request that opens the conversation
_PLAIN_REQUEST_DENSITY = 0.27  # ... and of the first request of a later span
_LINE_LIMIT = 200


@dataclass(slots=True)
class _Item:
    section: int
    text: str
    score: float
    order: float
    key: str
    group: str = ""  # items of one group render on one line (same speaker)
    _plain: str | None = None
    _subs: set[str] | None = None

    @property
    def plain(self) -> str:
        """Lowercase text without light punctuation (computed once)."""
        if self._plain is None:
            self._plain = _plain(self.text)
        return self._plain

    @property
    def subs(self) -> set[str]:
        """Every run of up to 8 words of :attr:`plain` (computed once; not to be changed)."""
        if self._subs is None:
            plain = self.plain
            self._subs = _subphrases(plain) if " " in plain else {plain}
        return self._subs


# Light punctuation, deleted before containment checks.
_PLAIN_DELETE = str.maketrans("", "", ",;:!?()\"'")


def _plain(text: str) -> str:
    """Lowercase without light punctuation, for containment checks between items."""
    return " ".join(text.lower().translate(_PLAIN_DELETE).split())


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .,;:-")


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


def _split_sections(summary: str) -> dict[int, list[str]]:
    """Parse a previous summary into section items (bullets or lines)."""
    out: dict[int, list[str]] = {}
    current = _CONTEXT
    lookup = {h.lower(): i for i, h in enumerate(_HEADINGS)}
    for raw in summary.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            current = lookup.get(line.lstrip("#").strip().lower(), _CONTEXT)
            continue
        if line.startswith(("- ", "* ")):
            line = line[2:].strip()
        if not line or line == "(none)":
            continue
        out.setdefault(current, []).append(line)
    return out


class ExtractiveSummarizer:
    """A deterministic, model-free checkpoint summarizer (sync and async).

    Args:
        max_output_tokens: the summary's token budget when the request sets none; a request's
            ``max_output_tokens`` wins when given.
        counter: the counter that measures the budget; the approximate counter by default.
        model: the name reported in results and checkpoint records.

    The result's ``details`` carry ``files_read`` and ``files_modified`` (sorted lists,
    accumulated with those in ``request.details``), so a checkpoint strategy can carry them
    across compactions.
    """

    #: Fingerprint recorded in checkpoints in place of a prompt hash (no prompt is used);
    #: bumped when the extraction rules change what a summary contains.
    prompt_hash = "extractive-1"

    def __init__(
        self,
        *,
        max_output_tokens: int = 1024,
        counter: TokenCounter | None = None,
        model: str = "extractive",
    ) -> None:
        if max_output_tokens <= 0:
            from contextfold.errors import ContextfoldError

            raise ContextfoldError("max_output_tokens must be positive")
        if counter is None:
            from contextfold.tokens.approx import ApproxCounter

            counter = ApproxCounter()
        self.max_output_tokens = max_output_tokens
        self.counter = counter
        self.model = model

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_output_tokens={self.max_output_tokens})"

    # -- protocol ---------------------------------------------------------------------------

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Build the summary; fails only when cancelled, late, or nothing can be said."""
        early = precheck(request)
        if early is not None:
            return early
        try:
            return self._summarize(request)
        except Exception as exc:  # the contract: never raise
            return SummarizationResult.failure(
                f"extractive summarizer failed: {type(exc).__name__}: {exc}", model=self.model
            )

    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Async form of :meth:`summarize` (the work is CPU-only and quick)."""
        return self.summarize(request)

    # -- work -------------------------------------------------------------------------------

    def _budget(self, request: SummaryRequest) -> int:
        cap = request.max_output_tokens
        return min(cap, self.max_output_tokens) if cap else self.max_output_tokens

    def _summarize(self, request: SummaryRequest) -> SummarizationResult:
        budget = self._budget(request)
        messages = request.messages
        read, modified = file_operations(messages)
        prior = request.details or {}
        read |= set(_str_list(prior.get("files_read")))
        modified |= set(_str_list(prior.get("files_modified")))
        read -= modified
        items = _collect(messages, read, modified)
        if request.previous_summary and request.previous_summary.strip():
            items = _merge_previous(items, request.previous_summary)
        if not items:
            return SummarizationResult.failure(
                "nothing to summarize: the span has no text", "empty", model=self.model
            )
        text = self._render_within(items, budget)
        details: dict[str, Any] = {
            "files_read": sorted(read),
            "files_modified": sorted(modified),
        }
        if text is None:
            return SummarizationResult.failure(
                f"budget of {budget} tokens is too small for a structured summary",
                "truncated",
                model=self.model,
            )
        source_chars = sum(len(m.text) for m in messages)
        usage = Usage(
            input_tokens=source_chars // 4,
            output_tokens=self.counter.count_text(text),
        )
        return SummarizationResult.success(text, usage=usage, model=self.model, details=details)

    def _render_within(self, items: list[_Item], budget: int) -> str | None:
        """Greedy fill by salience per character, then trim until the count fits."""
        skeleton = _render([])
        if self.counter.count_text(skeleton) > budget:
            return None
        # Approximate characters per token from the counter itself, for the greedy phase.
        probe = "the quick brown fox jumps over the lazy dog 0123456789 src/app/main.py " * 4
        cpt = len(probe) / max(1, self.counter.count_text(probe))
        room = (budget - self.counter.count_text(skeleton)) * cpt
        ranked = sorted(items, key=_rank)
        chosen: list[_Item] = []
        seen: set[str] = set()
        for _ in range(2):  # the second pass refills the room freed by dropping duplicates
            chosen = _greedy(ranked, chosen, seen, room)
            before = len(chosen)
            chosen = _drop_contained(chosen)
            if len(chosen) == before:
                break
        text = _render(chosen)
        # The greedy phase estimated; the counter decides. Drop the weakest until it fits.
        if self.counter.count_text(text) > budget:
            chosen.sort(key=_rank)
            lo, hi = 0, len(chosen)
            while lo < hi:  # the largest prefix of the ranking that fits
                mid = (lo + hi + 1) // 2
                if self.counter.count_text(_render(chosen[:mid])) <= budget:
                    lo = mid
                else:
                    hi = mid - 1
            text = _render(chosen[:lo])
        return text


def _rank(it: _Item) -> tuple[float, float, str]:
    return (-it.score / (len(it.text) + 3), it.order, it.key)


def _cost(it: _Item, groups: set[tuple[int, str]]) -> int:
    cost = len(it.text) + 3
    if it.group and (it.section, it.group) not in groups:
        cost += len(it.group) + 4
    return cost


def _subphrases(plain: str, max_words: int = 8) -> set[str]:
    """Every run of up to ``max_words`` consecutive words of ``plain``."""
    words = plain.split()
    out: set[str] = set()
    for a in range(len(words)):
        key = ""
        for b in range(a, min(len(words), a + max_words)):
            key = f"{key} {words[b]}" if key else words[b]
            out.add(key)
    return out


def _greedy(
    ranked: Sequence[_Item], chosen: list[_Item], seen: set[str], room: float
) -> list[_Item]:
    """Add items in rank order while they fit; skip ones a chosen item already contains."""
    out = list(chosen)
    groups = {(it.section, it.group) for it in out if it.group}
    used = float(sum(len(it.text) + 3 for it in out)) + sum(len(g) + 4 for _, g in groups)
    covered: dict[int, set[str]] = {}
    for it in out:
        covered.setdefault(it.section, set()).update(it.subs)
    for it in ranked:
        if room - used < 6:
            break
        if it.key in seen:
            continue
        cost = _cost(it, groups)
        if used + cost > room:
            continue
        seen.add(it.key)
        low = it.plain
        section_cover = covered.setdefault(it.section, set())
        if low in section_cover:
            continue
        out.append(it)
        used += cost
        section_cover.update(it.subs)
        if it.group:
            groups.add((it.section, it.group))
    return out


def _str_list(value: Any) -> list[str]:
    if isinstance(value, (list, tuple, set, frozenset)):
        return [v for v in value if isinstance(v, str)]
    return []


# -- candidate collection ---------------------------------------------------------------------


def _collect(messages: Sequence[Message], read: set[str], modified: set[str]) -> list[_Item]:
    items: list[_Item] = []
    n = len(messages)
    texts: list[tuple[str, str]] = [_message_texts(m) for m in messages]

    owns = [own for own, _ in texts]

    # -- requests, corrections, current work, next step -------------------------------------
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
            density = _OPENING_DENSITY
        if is_correction:
            density = 0.5
        density *= 1.0 + 0.5 * (i / max(1, n))
        label = f'Correction: "{text}"' if is_correction else f'"{text}"'
        score = density * (len(label) + 3)
        items.append(_Item(_REQUEST, label, score, i, "req:" + _norm(text)))
    if last_user is not None:
        own = _first_sentences(texts[last_user][0], _LINE_LIMIT)
        label = f'Follow the latest request: "{own}"'
        items.append(_Item(_NEXT, label, 0.8 * (len(label) + 3), n, "next:" + _norm(own)))
    for i in range(n - 1, -1, -1):
        if messages[i].role == "assistant" and texts[i][0].strip():
            own = _first_sentences(texts[i][0], _LINE_LIMIT)
            items.append(_Item(_CURRENT, own, 0.5 * (len(own) + 3), n, "cur:" + _norm(own)))
            break

    # -- files --------------------------------------------------------------------------------
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
        items.append(_Item(_FILES, label, score, first_seen[path], "path:" + path))

    # -- commands and errors ----------------------------------------------------------------
    for i, m in enumerate(messages):
        for call in m.tool_calls:
            cmd = _command_of(call)
            if cmd:
                line = _short(cmd.splitlines()[0], 160)
                score = (2.0 + 2.0 * i / max(1, n)) * len(line) / 20
                items.append(_Item(_FILES, f"$ {line}", score, i, "cmd:" + _norm(line)))
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
                    items.append(_Item(_ERRORS, line, score, i, "err:" + _norm(line)))

    # -- pending tasks --------------------------------------------------------------------------
    start_recent = max(0, n - max(8, n // 3))
    for i in range(start_recent, n):
        own = texts[i][0]
        if not own or not _PENDING_RE.search(own.lower()):
            continue
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", own):
            if _PENDING_RE.search(sentence.lower()) and 8 <= len(sentence) <= 400:
                line = _short(sentence.strip("-* "), 180)
                items.append(_Item(_PENDING, line, 2.0 * len(line) / 20, i, "todo:" + _norm(line)))

    # -- identifiers ----------------------------------------------------------------------------
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
        items.append(_Item(_CONCEPTS, ident, score, ident_first[ident], "id:" + ident.lower()))

    # -- key phrases ----------------------------------------------------------------------------
    speakers = [m.name or m.role for m in messages]
    items.extend(
        _Item(_CONTEXT, text, score, first, "kp:" + key, group=speaker)
        for text, key, score, first, speaker in key_phrases(owns, speakers)
    )
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
        import json

        args = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        return None
    cmd = args.get("command") if isinstance(args, Mapping) else None
    if isinstance(cmd, list):
        cmd = " ".join(str(c) for c in cmd)
    return cmd if isinstance(cmd, str) and cmd.strip() else None


def _merge_previous(items: list[_Item], previous: str) -> list[_Item]:
    sections = _split_sections(previous)
    new_keys = {_norm(it.text) for it in items}
    has_new = {it.section for it in items}
    out = list(items)
    if sections.get(_REQUEST):
        # The span continues a conversation: its first request is not the opening one, and
        # the previous summary's requests keep the first place instead.
        for it in out:
            if it.section == _REQUEST and it.score >= _OPENING_DENSITY * (len(it.text) + 3):
                it.score = _PLAIN_REQUEST_DENSITY * (len(it.text) + 3)
    for section, lines in sections.items():
        if section in (_CURRENT, _NEXT) and section in has_new:
            continue  # stale: the new span says what is happening now
        for k, line in enumerate(lines):
            key = _norm(line)
            if not key or key in new_keys:
                continue
            new_keys.add(key)
            # Earlier facts keep a bonus: they already won a place once; the requests that
            # opened the conversation keep the first place.
            score = 2.5 * (len(line) / 10 + 1)
            if section == _REQUEST:
                score = max(score, _OPENING_DENSITY * (len(line) + 3))
            out.append(_Item(section, line, score, -1000 + k, "prev:" + key))
    return out


def _drop_contained(chosen: list[_Item]) -> list[_Item]:
    """Drop a short item whose words appear, whole, inside a longer chosen item of its
    section (a phrase chosen before the longer phrase that contains it)."""
    covered: dict[int, set[str]] = {}
    keep: list[_Item] = []
    for it in sorted(chosen, key=lambda it: (-len(it.text), it.key)):
        low = it.plain
        section_cover = covered.setdefault(it.section, set())
        if len(low) < 40 and low in section_cover:
            continue
        section_cover.update(it.subs)
        keep.append(it)
    return keep


def _render(chosen: Sequence[_Item]) -> str:
    by_section: dict[int, list[_Item]] = {}
    for it in chosen:
        by_section.setdefault(it.section, []).append(it)
    lines: list[str] = []
    for idx, heading in enumerate(_HEADINGS):
        lines.append(f"## {heading}")
        section = sorted(by_section.get(idx, []), key=lambda it: (it.order, it.key))
        if not section:
            lines.append("(none)")
            continue
        if idx == _CONTEXT:
            lines.extend(_render_groups(section))
        else:
            lines.extend(f"- {it.text}" for it in section)
    return "\n".join(lines)


def _render_groups(section: Sequence[_Item]) -> list[str]:
    """One line per group (speaker), groups in order of first appearance."""
    groups: dict[str, list[str]] = {}
    for it in section:
        groups.setdefault(it.group, []).append(it.text)
    return [
        f"- {g}: {'; '.join(texts)}" if g else f"- {'; '.join(texts)}"
        for g, texts in groups.items()
    ]
