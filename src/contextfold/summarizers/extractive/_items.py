"""The candidates of an extractive summary: ranked, merged with a previous one, rendered.

Every candidate is an :class:`Item` of one checkpoint section. The budget is filled greedily
by weight per character (:func:`greedy`), a phrase contained in a chosen one is skipped
(:func:`drop_contained`), and :func:`render` writes the sections in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.summarizers.prompts import CHECKPOINT_SECTIONS

__all__ = [
    "CONCEPTS",
    "CONTEXT",
    "CURRENT",
    "ERRORS",
    "FILES",
    "HEADINGS",
    "NEXT",
    "OPENING_DENSITY",
    "PENDING",
    "REQUEST",
    "Item",
    "drop_contained",
    "greedy",
    "merge_previous",
    "norm",
    "rank",
    "render",
]

# Section keys, in CHECKPOINT_SECTIONS order.
REQUEST, CONCEPTS, FILES, ERRORS, PENDING, CURRENT, NEXT, CONTEXT = range(8)
HEADINGS = CHECKPOINT_SECTIONS

OPENING_DENSITY = 2.0  # salience per character of the request that opens the conversation
_PLAIN_REQUEST_DENSITY = 0.27  # ... and of the first request of a later span


@dataclass(slots=True)
class Item:
    """One candidate line of a section, with its weight and its place in the span."""

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


def norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .,;:-")


def _split_sections(summary: str) -> dict[int, list[str]]:
    """Parse a previous summary into section items (bullets or lines)."""
    out: dict[int, list[str]] = {}
    current = CONTEXT
    lookup = {h.lower(): i for i, h in enumerate(HEADINGS)}
    for raw in summary.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            current = lookup.get(line.lstrip("#").strip().lower(), CONTEXT)
            continue
        if line.startswith(("- ", "* ")):
            line = line[2:].strip()
        if not line or line == "(none)":
            continue
        out.setdefault(current, []).append(line)
    return out


def rank(it: Item) -> tuple[float, float, str]:
    return (-it.score / (len(it.text) + 3), it.order, it.key)


def _cost(it: Item, groups: set[tuple[int, str]]) -> int:
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


def greedy(ranked: Sequence[Item], chosen: list[Item], seen: set[str], room: float) -> list[Item]:
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


def merge_previous(items: list[Item], previous: str) -> list[Item]:
    sections = _split_sections(previous)
    new_keys = {norm(it.text) for it in items}
    has_new = {it.section for it in items}
    out = list(items)
    if sections.get(REQUEST):
        # The span continues a conversation: its first request is not the opening one, and
        # the previous summary's requests keep the first place instead.
        for it in out:
            if it.section == REQUEST and it.score >= OPENING_DENSITY * (len(it.text) + 3):
                it.score = _PLAIN_REQUEST_DENSITY * (len(it.text) + 3)
    for section, lines in sections.items():
        if section in (CURRENT, NEXT) and section in has_new:
            continue  # stale: the new span says what is happening now
        for k, line in enumerate(lines):
            key = norm(line)
            if not key or key in new_keys:
                continue
            new_keys.add(key)
            # Earlier facts keep a bonus: they already won a place once; the requests that
            # opened the conversation keep the first place.
            score = 2.5 * (len(line) / 10 + 1)
            if section == REQUEST:
                score = max(score, OPENING_DENSITY * (len(line) + 3))
            out.append(Item(section, line, score, -1000 + k, "prev:" + key))
    return out


def drop_contained(chosen: list[Item]) -> list[Item]:
    """Drop a short item whose words appear, whole, inside a longer chosen item of its
    section (a phrase chosen before the longer phrase that contains it)."""
    covered: dict[int, set[str]] = {}
    keep: list[Item] = []
    for it in sorted(chosen, key=lambda it: (-len(it.text), it.key)):
        low = it.plain
        section_cover = covered.setdefault(it.section, set())
        if len(low) < 40 and low in section_cover:
            continue
        section_cover.update(it.subs)
        keep.append(it)
    return keep


def render(chosen: Sequence[Item]) -> str:
    by_section: dict[int, list[Item]] = {}
    for it in chosen:
        by_section.setdefault(it.section, []).append(it)
    lines: list[str] = []
    for idx, heading in enumerate(HEADINGS):
        lines.append(f"## {heading}")
        section = sorted(by_section.get(idx, []), key=lambda it: (it.order, it.key))
        if not section:
            lines.append("(none)")
            continue
        if idx == CONTEXT:
            lines.extend(_render_groups(section))
        else:
            lines.extend(f"- {it.text}" for it in section)
    return "\n".join(lines)


def _render_groups(section: Sequence[Item]) -> list[str]:
    """One line per group (speaker), groups in order of first appearance."""
    groups: dict[str, list[str]] = {}
    for it in section:
        groups.setdefault(it.group, []).append(it.text)
    return [
        f"- {g}: {'; '.join(texts)}" if g else f"- {'; '.join(texts)}"
        for g, texts in groups.items()
    ]
