"""The candidates of an extractive summary: chosen by the facts they add, merged, rendered.

Every candidate is an :class:`Item` of one section, with a fixed weight of its own (a
request, a path, an error line) and the facts it carries (:func:`~._facts.fact_keys`). Its
value is its own weight plus the weight of the facts no chosen item carries yet, so a second
clause repeating ``LS-48219`` adds little and a clause with a new amount a lot. :class:`Chooser`
fills the room greedily by value per character, re-valuing an item when it comes up (values
only fall as facts are covered, so this lazy greedy picks what a full re-scan would).
:func:`render` writes the sections that have something, in order: there is no ``(none)``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from contextfold.summarizers._serialize import label_name
from contextfold.summarizers.extractive._facts import fact_keys
from contextfold.summarizers.prompts import CHECKPOINT_SECTIONS

__all__ = [
    "AGENT_LAYOUT",
    "CHAT_LAYOUT",
    "CONCEPTS",
    "CONTEXT",
    "CURRENT",
    "DECISIONS",
    "ERRORS",
    "FACTS",
    "FILES",
    "NEXT",
    "OPEN",
    "OPENING_WEIGHT",
    "PENDING",
    "REQUEST",
    "REQUESTS",
    "Chooser",
    "Item",
    "is_agent_summary",
    "merge_previous",
    "norm",
    "path_weight",
    "render",
    "speaker_name",
]

# Sections of an agent run, in CHECKPOINT_SECTIONS order ...
REQUEST, CONCEPTS, FILES, ERRORS, PENDING, CURRENT, NEXT, CONTEXT = range(8)
# ... and of a chat.
REQUESTS, FACTS, DECISIONS, OPEN = range(10, 14)
AGENT_LAYOUT: tuple[int, ...] = tuple(range(8))
CHAT_LAYOUT: tuple[int, ...] = (REQUESTS, FACTS, DECISIONS, OPEN)
_HEADINGS: dict[int, str] = {
    **dict(enumerate(CHECKPOINT_SECTIONS)),
    REQUESTS: "Requests",
    FACTS: "Facts",
    DECISIONS: "Decisions",
    OPEN: "Open questions",
}
_LOOKUP = {h.lower(): i for i, h in _HEADINGS.items()}
# A previous summary's lines keep a small bonus, and weigh like the newest messages: they
# already won a place once, and a fact does not grow stale by being summarized.
_PREVIOUS_BONUS = 0.5
_PREVIOUS_SCALE = 1.25
_PATH_STATUS = {" (modified)": 6.0, " (read)": 3.0}
#: The weight of the request that opens a conversation: enough to go in first at any room.
OPENING_WEIGHT = 40.0


@dataclass(slots=True)
class Item:
    """One candidate line of a section: its own weight, its facts, its place in the span."""

    section: int
    text: str
    weight: float
    order: float
    key: str
    facts: Mapping[str, float] = field(default_factory=dict)
    scale: float = 1.0  # newer messages weigh a little more: they hold the current state
    speaker: str = ""  # who said it, between named people; consecutive lines share a prefix


def norm(text: str) -> str:
    """A line's identity for deduplication: lowercase, single spaces, no end punctuation."""
    return " ".join(text.lower().split()).strip(' .,;:-"')


def _cost(it: Item) -> int:
    # "- " and the newline; a speaker's prefix is shared by the consecutive lines of one
    # speaker, so each is charged for half of it (the counter corrects the estimate).
    return len(it.text) + 3 + (len(it.speaker) + 2) // 2 if it.speaker else len(it.text) + 3


class Chooser:
    """Chooses items for a room; built once per summary, asked for several rooms.

    ``repeats`` scales a fact by how often the span mentions it (a fact named five times
    outweighs one named once). What does not depend on the room (each item's scaled fact
    weights, its cost, the first ranking) is computed here once.
    """

    def __init__(self, items: Sequence[Item], repeats: Mapping[str, float]) -> None:
        self.items = items
        self.facts = [
            [(k, w * repeats.get(k, 1.0) * it.scale) for k, w in it.facts.items()] for it in items
        ]
        self.own = [it.weight * it.scale for it in items]
        self.costs = [_cost(it) for it in items]
        self.heap = [
            (-(self.own[n] + sum(w for _, w in self.facts[n])) / self.costs[n], it.order, it.key, n)
            for n, it in enumerate(items)
        ]
        heapq.heapify(self.heap)

    def select(self, room: float) -> tuple[list[Item], float]:
        """The items that fit ``room`` characters, chosen by the weight they add per character,
        and the weight they carry together.

        Section headings are charged when a section first gets an item. Deterministic: ties
        go to the earlier item, then to the key.
        """
        items, facts, own, costs = self.items, self.facts, self.own, self.costs
        covered: set[str] = set()
        seen_keys: set[str] = set()
        sections: set[int] = set()
        used = 0.0
        heap = list(self.heap)  # a copy of a heap is a heap
        chosen: list[Item] = []
        total = 0.0
        while heap and room - used >= 8:
            neg, order, key, n = heapq.heappop(heap)
            it = items[n]
            if key in seen_keys:
                continue
            current = (own[n] + sum(w for k, w in facts[n] if k not in covered)) / costs[n]
            if current <= 0:
                continue
            if current < -neg - 1e-12:  # facts were covered since it was queued: re-queue
                heapq.heappush(heap, (-current, order, key, n))
                continue
            cost = costs[n] + (0 if it.section in sections else len(_HEADINGS[it.section]) + 4)
            if used + cost > room:
                continue
            seen_keys.add(key)
            sections.add(it.section)
            covered.update(it.facts)
            chosen.append(it)
            used += cost
            total += current * costs[n]
        return chosen, total


def render(chosen: Iterable[Item], layout: Sequence[int]) -> str:
    """The sections of ``layout`` that have items, each item a bullet, in span order."""
    by_section: dict[int, list[Item]] = {}
    for it in chosen:
        by_section.setdefault(it.section, []).append(it)
    lines: list[str] = []
    for idx in layout:
        section = by_section.get(idx)
        if not section:
            continue
        lines.append(f"## {_HEADINGS[idx]}")
        lines.extend(_bullets(sorted(section, key=lambda it: (it.order, it.key))))
    return "\n".join(lines)


def speaker_name(name: str) -> str:
    """``name`` as a bullet may print it before ``:``: one line, no brackets, no colon.

    A name is as untrusted as what its speaker said: a line break in it would start a
    section or a bullet of its own, and a colon would end the name early when the summary
    is read back as the previous one.
    """
    return " ".join(label_name(name).replace(":", " ").split())


def _bullets(section: Sequence[Item]) -> list[str]:
    """One bullet per item; consecutive items of one speaker share a bullet and its name."""
    out: list[str] = []
    run: list[str] = []
    speaker = ""
    for it in section:
        if it.speaker and it.speaker == speaker:
            run.append(it.text)
            continue
        if run:
            out.append(f"- {speaker}: {'; '.join(run)}")
            run = []
        speaker = it.speaker
        if speaker:
            run = [it.text]
        else:
            out.append(f"- {it.text}")
    if run:
        out.append(f"- {speaker}: {'; '.join(run)}")
    return out


def split_sections(summary: str) -> dict[int, list[str]]:
    """Parse a previous summary (either layout, or free text) into section lines."""
    out: dict[int, list[str]] = {}
    current = -1
    for raw in summary.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            current = _LOOKUP.get(line.lstrip("#").strip().lower(), -1)
            continue
        if line.startswith(("- ", "* ")):
            line = line[2:].strip()
        if line and line != "(none)":
            out.setdefault(current, []).append(line)
    return out


def is_agent_summary(summary: str | None) -> bool:
    """Whether a previous summary uses the checkpoint sections of an agent run."""
    if not summary:
        return False
    sections = split_sections(summary)
    return any(0 <= s < CONTEXT for s in sections)


def merge_previous(items: list[Item], previous: str, layout: Sequence[int]) -> list[Item]:
    """``items`` plus the lines of ``previous``, which compete with them for the room.

    The previous summary's requests keep the first place; its current work and next step
    give way when the new span says something newer; its unlabelled lines join the facts.
    """
    sections = split_sections(previous)
    fallback = CONTEXT if layout is AGENT_LAYOUT else FACTS
    new_keys = {norm(it.text) for it in items} | {it.key for it in items if it.section == FILES}
    has_new = {it.section for it in items}
    out = list(items)
    for it in out:
        if it.section in (REQUEST, REQUESTS) and it.weight >= OPENING_WEIGHT:
            it.weight = 2.0  # the conversation's opening request is the previous one's
    for section, lines in sections.items():
        if section not in layout:
            section = _translate(section, layout, fallback)
        if section in (CURRENT, NEXT, OPEN) and section in has_new:
            continue  # stale: the new span says what is happening now
        for k, line in enumerate(lines):
            if section == FILES and layout is AGENT_LAYOUT:
                out.extend(_previous_path(line, k, new_keys))
                continue
            key = norm(line)
            if not key or key in new_keys:
                continue
            new_keys.add(key)
            weight = _PREVIOUS_BONUS
            if section in (REQUEST, REQUESTS):
                weight = OPENING_WEIGHT if k == 0 else 1.0 + _PREVIOUS_BONUS
            facts = fact_keys(line)
            out.append(
                Item(section, line, weight, -1000 + k, "prev:" + key, facts, _PREVIOUS_SCALE)
            )
    return out


def path_weight(label: str, bonus: float, mentions: int) -> float:
    """A path's weight: more for a file changed (``bonus`` 6) or read (3), and for mentions."""
    return (4.0 + bonus + 3.0 * math.log1p(mentions)) * len(label) / 12


def _previous_path(line: str, k: int, seen: set[str]) -> list[Item]:
    """A previous summary's path line, weighed as a path (it was named at least twice: once
    in the span it came from, once in that summary), unless the new span lists it too."""
    path, bonus = line, 0.0
    for suffix, extra in _PATH_STATUS.items():
        if line.endswith(suffix):
            path, bonus = line[: -len(suffix)], extra
    if "path:" + path in seen:
        return []
    seen.add("path:" + path)
    return [Item(FILES, line, path_weight(line, bonus, 2), -1000 + k, "path:" + path)]


def _translate(section: int, layout: Sequence[int], fallback: int) -> int:
    """A section of the other layout, mapped onto ``layout``."""
    pairs = {REQUESTS: REQUEST, REQUEST: REQUESTS, OPEN: PENDING, PENDING: OPEN}
    mapped = pairs.get(section, fallback)
    return mapped if mapped in layout else fallback
