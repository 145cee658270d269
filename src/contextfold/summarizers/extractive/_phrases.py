"""Key phrases for the extractive summarizer: the names, numbers, dates and topics of a span.

A key phrase is a run of one to three content words cut out of a clause once greetings,
pronouns and filler are removed (``"I went to a LGBTQ support group yesterday"`` gives
``"LGBTQ support group"``, ``"support group yesterday"`` ...), a full date (``"8 May, 2023"``)
or a capitalized title (``"Becoming Nicole"``, ``"A Dance with Dragons"``). Each is weighed by
what tends to matter later: names, numbers and dates weigh most, everyday words and adverbs
least, and repetition raises the weight logarithmically.

This is the hot path of the summarizer on chat text, where almost every word is a candidate,
so it is written for speed:

* how a token reads (stripped, lowercased, stopword or not, capitalized, ends a clause) does
  not depend on the span, so each distinct token is classified once and remembered across
  calls (a bounded cache);
* a line with no free-standing dash is cut into clauses from its tokens, with one split,
  instead of by the clause regex (the same clauses; see ``_CLAUSE_END``);
* every run's 1-3 word keys go into one list, so counting them and finding each key's
  first occurrence happen in C, and a key is weighed once, at its first occurrence.

``tests/summarizers/test_extractive.py`` checks the result against a plain word-by-word reading. The
output is deterministic.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from typing import Any, cast

__all__ = ["STRIP", "KeyPhrase", "key_phrases"]

_STOPWORDS = frozenset(
    """
a about above after again against all also am an and any are aren't as at be because been
before being below between both but by can can't cannot could couldn't did didn't do does
doesn't doing don't down during each few for from further had hadn't has hasn't have haven't
having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll
i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor
not of off on once only or other ought our ours ourselves out over own same shan't she she'd
she'll she's should shouldn't so some such than that that's the their theirs them themselves
then there there's these they they'd they'll they're they've this those through to too under
until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
where's which while who who's whom why why's with won't would wouldn't you you'd you'll you're
you've your yours yourself yourselves im ive id dont doesnt didnt cant wont thats whats
just really so very quite pretty totally definitely absolutely actually basically literally
oh ok okay yeah yes yep hey hi hello wow thanks thank please sure cool great awesome amazing
nice good glad happy love lovely fantastic wonderful incredible super sounds sound seems
seem feel feeling felt think thought know knew guess mean means lot lots thing things stuff
something anything everything nothing much many way always never ever still even also too
get got getting go going gone went make made making take took taking come came coming
see saw seen look looks looking like liked want wanted need needed keep kept let lets
tell told say said talk talking share sharing hear heard glad hope hoping wish
one really awesome exciting excited fun interesting true right well back new
will can may might must shall would could should
""".split()  # noqa: SIM905 - a word list reads better as text
)

# Everyday words: kept in phrases, but they weigh little on their own.
_COMMON = frozenset(
    """
able across add age ago ahead air almost alone along already although amount another answer
anyone anyway appreciate area around ask asked away bad based beautiful become bed begin
believe best better big bit body book both break bring brought build busy buy call called
calm care case cause chance change check child children city class close come comes cool
could course create creative crazy cute day days deal decided deep different do done doing
dream during early easy else end enjoy enjoyed enough especially every everyone example
experience eyes face fact family far favorite feels few fine find finding first follow found
free friend friends front full future game gave give given gives giving glad goal goes
gonna hand hands hang hard head heart help helped helping helps high hold home hope huge
idea important inspired inspiring inspiration joy keeps kid kids kind kinda last later learn
learned least leave left less life little live long longer lose lost loved loves lucky man
meant meet memories mind minds moment moments month months morning move moving myself
name need next night normal now often old open others outside part passion past people
perfect person pic picture place plan plans play played point positive power pretty proud
put reach read ready real really reason recently remember reminds rest road room run
saying school season seeing seem self sense set shared shows side sign since small soon
special spend spent start started stay step story strong support supportive sure sweet
taken talked team tell tells thanks time times tiny today together tomorrow tough tried
try trying turn understand use used using usually walk wanna warm watch water week weekend
weeks whole win wonder work worked working works world worth wow year years yesterday young
""".split()  # noqa: SIM905 - a word list reads better as text
)

_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
_DATE_RE = re.compile(
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)? (?:{_MONTHS}),? \d{{4}}"
    rf"|(?:{_MONTHS}) \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}"
    rf"|(?:{_MONTHS}),? \d{{4}}"
    r"|\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2})?)\b"
)
# A title: capitalized words (or numbers), possibly joined by short lowercase connectors.
# The first word starts with one character class, so the regex engine can skip ahead to the
# next capital or digit instead of trying every position.
_TITLE_WORD = r"(?:[A-Z][\w'\u2019.-]*|\d+)"
_TITLE_RE = re.compile(
    r"[A-Z\d](?:(?<=[A-Z])[\w'\u2019.-]*|(?<=\d)\d*)"
    r"(?:[ \t]+(?:(?:of|and|the|with|a|an|in|on|for|to|from|at|by|&)[ \t]+)*"
    rf"{_TITLE_WORD})+"
)
_CLAUSE_RE = re.compile(r"[.!?;:,()\"\u201c\u201d]+(?:\s+|$)|\n+|\s[-\u2013\u2014]+\s")
# On a line with no free-standing dash, _CLAUSE_RE cuts exactly after the whitespace-separated
# tokens that end in one of these (the punctuation it removes is stripped from words anyway).
_CLAUSE_END = frozenset('.!?;:,()"\u201c\u201d')
_DASH_TOKEN_RE = re.compile(r"(?<!\S)[-\u2013\u2014]+(?!\S)")
_WEAK_SUFFIXES = ("ly", "ful", "ous", "ive", "ed", "able", "ible")
_DIGIT_RE = re.compile(r"\d")
_UPPER_RE = re.compile(r"[A-Z]")
_ARTICLES = frozenset({"a", "an", "the"})
_TIME_RE = re.compile(r"^\d{1,2}:\d{2}$")
_MONTH_WORDS = frozenset(m.lower() for m in _MONTHS.split("|"))
#: Characters stripped from the ends of a word.
STRIP = ".,!?;:()[]{}<>\"'`*“”‘’"

# How a token acts in a clause (see key_phrases.classify).
_BREAK, _BREAK_FIRST, _CONTENT, _SKIP = range(4)

#: One candidate phrase: ``(text as first written, key, score, first message, speaker)``.
KeyPhrase = tuple[str, str, float, int, str]
# (mode, word, lowercase, capitalized, article, ends a clause)
_Token = tuple[int, str, str, bool, str, bool]
_Run = tuple[list[_Token], str, int, bool]


def key_phrases(
    owns: Sequence[str], speakers: Sequence[str], *, by_line: bool = True
) -> list[KeyPhrase]:
    """Distinct 1-3 word content phrases, dates and titles of ``owns``, weighted.

    Args:
        owns: each message's own text ("" for none).
        speakers: who wrote each message (name or role).
        by_line: cut plain lines into clauses from their tokens (the fast path); False
            always uses the clause regex (the same phrases, more slowly).

    Returns:
        The phrases, each once, in a deterministic order.

    A word weighs more when it is capitalized mid-sentence (a name), carries a digit (a
    number, a date, a version) or is rare across the span's messages; very short words and
    words used in many messages weigh less. Repetition raises a phrase's weight
    logarithmically: a topic returned to often matters, but one mention of a name or a date
    can matter just as much.

    Two passes keep the per-word work small. The first (:class:`_Reader`) cuts each clause
    into runs of content words (each distinct token is classified once) and counts document
    frequencies. The second (:func:`_score`) lays every run's 1-3 word keys out in one list,
    so counting and finding each key's first occurrence run in C; weights are computed only
    for each key's first occurrence, once the document frequencies are known.
    """
    tokens = _TOKENS
    if len(tokens) > _TOKEN_CACHE_LIMIT:
        tokens.clear()
    reader = _Reader(tokens)
    for i, own in enumerate(owns):
        if own:
            reader.read(own, i, by_line)
    total = max(1, sum(1 for own in owns if own))
    return _score(reader.runs, reader.specials, speakers, reader.df, total)


class _Reader:
    """The first pass: dates, titles, runs of content words and document frequencies.

    Attributes:
        tokens: the remembered token readings (shared across calls, see ``_TOKENS``).
        specials: dates and titles, ``key -> [text, first message, weight, count]``.
        df: in how many messages each lowercase word appears.
        runs: the runs of content words: their tokens, the article before, the message,
            and whether the first one opens its clause (no bonus for a capital there).
    """

    __slots__ = ("df", "runs", "specials", "tokens")

    def __init__(self, tokens: dict[str, _Token]) -> None:
        self.tokens = tokens
        self.specials: dict[str, list[Any]] = {}
        self.df: Counter[str] = Counter()
        self.runs: list[_Run] = []

    def special(self, key: str, text: str, i: int, w: float) -> None:
        """Count a date or a title; its text, message and weight are those of its first."""
        entry = self.specials.get(key)
        if entry is None:
            self.specials[key] = [text, i, w, 1]
        else:
            entry[3] += 1

    def classify(self, raw: str) -> _Token:
        """``(mode, word, lowercase, capitalized, article, ends a clause)`` of one token."""
        word = raw.strip(STRIP)
        low = word.lower()
        lead = word if low in _ARTICLES else ""
        cap = bool(word) and word[0].isupper()
        if low in _STOPWORDS:
            # A capitalized filler word mid-clause is part of a name ("Under Armour"); at
            # the start of a clause it is just capitalized. "I" and "I'm" never are.
            if not cap or (word[0] == "I" and (len(word) == 1 or word[1] in "'\u2019")):
                mode = _BREAK
            else:
                mode = _CONTENT if low in _MONTH_WORDS else _BREAK_FIRST
        elif not word or not (word[0].isalnum() or word[-1].isalnum()):
            mode = _SKIP
        else:
            mode = _CONTENT
        info = (mode, word, low, cap, lead, raw[-1] in _CLAUSE_END)
        self.tokens[raw] = info
        return info

    def read(self, own: str, i: int, by_line: bool) -> None:
        """Read message ``i``: its dates and titles, its runs, its words' frequencies."""
        if _DIGIT_RE.search(own):
            for date in _DATE_RE.findall(own):
                self.special(date.lower(), date, i, 6.0)
        if _UPPER_RE.search(own, 1):
            for title in _TITLE_RE.findall(own):
                title = title.rstrip(".'\u2019-")
                caps = sum(1 for w in title.split() if w[:1].isupper())
                if caps < 2 or title.count(" ") > 8:
                    continue
                self.special(title.lower(), title, i, 1.6 * caps + 1.0)
        if (
            not by_line
            or "\n" in own
            or (_has_dash(own) and _DASH_TOKEN_RE.search(own) is not None)
        ):
            # The general case: the clause regex decides where clauses end.
            seen: set[str] = set()
            for clause in _CLAUSE_RE.split(own):
                raws = clause.split()
                seen.update(raws)
                self.scan(raws, i, False)
        else:
            # One line without a free-standing dash: a clause ends exactly after a token
            # ending in clause punctuation, so one split does (see _CLAUSE_END).
            raws = own.split()
            seen = set(raws)
            self.scan(raws, i, True)
        tokens = self.tokens
        self.df.update({tokens[raw][2] for raw in seen})

    def scan(self, raws: list[str], i: int, by_token: bool) -> None:
        """Cut the runs of content words out of one clause (or, ``by_token``, a line)."""
        found = list(map(self.tokens.get, raws))
        if None in found:  # tokens not seen before: classify them
            classify = self.classify
            infos = [info or classify(raw) for info, raw in zip(found, raws, strict=True)]
        else:
            infos = cast("list[_Token]", found)
        runs = self.runs
        run: list[_Token] | None = None
        lead = run_lead = ""
        at_start = False
        j = 0  # the token's position in its clause
        for info in infos:
            mode = info[0]
            if mode == 2 or (mode == 1 and j):  # _CONTENT, or _BREAK_FIRST mid-clause
                if run is None:
                    run = [info]
                    run_lead = lead
                    at_start = not j
                else:
                    run.append(info)
            elif mode != 3:  # _BREAK, or _BREAK_FIRST first in the clause
                if run is not None:
                    runs.append((run, run_lead, i, at_start))
                    run = None
                lead = info[4]
            if by_token and info[5]:
                if run is not None:
                    runs.append((run, run_lead, i, at_start))
                    run = None
                lead = ""
                j = 0
            else:
                j += 1
        if run is not None:
            runs.append((run, run_lead, i, at_start))


def _score(
    runs: Sequence[_Run],
    specials: dict[str, list[Any]],
    speakers: Sequence[str],
    df: Counter[str],
    total: int,
) -> list[KeyPhrase]:
    """Count every 1-3 word key of the runs and weigh each distinct key once.

    A date or title that is also a run's key is reported as the date or title when it came
    first (in one message it is read first).
    """
    generic = max(3.0, total * 0.04)
    keys, starts = _key_layout(runs)
    counts = Counter(keys)
    # Each key's first position: assigning in reverse leaves the smallest index.
    first_at = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1), strict=True))
    weights: dict[str, float] = {}
    out: list[KeyPhrase] = []
    find_run = bisect.bisect_right
    for key, at in first_at.items():
        r = find_run(starts, at) - 1
        run, lead, i, at_start = runs[r]
        count = counts[key]
        entry = specials.pop(key, None)
        if entry is not None:
            count += entry[3]
            if entry[1] <= i:
                out.append(_phrase(entry[0], key, entry[2], count, entry[1], speakers))
                continue
        a, n = _span_of(at - starts[r], len(run))
        text, score = _run_phrase(run, a, n, lead, at_start, count, weights, df, generic)
        out.append((text, key, score, i, speakers[i]))
    for key, entry in specials.items():
        out.append(_phrase(entry[0], key, entry[2], entry[3], entry[1], speakers))
    return out


def _key_layout(runs: Sequence[_Run]) -> tuple[list[str], list[int]]:
    """Every run's 1-3 word keys in one list, and where each run's keys start.

    A run of ``k`` words lays out its ``k`` single words, then its ``k - 1`` pairs, then its
    ``k - 2`` triples. When a run follows an article, the keys at its start keep it ("a
    trophy", "the Wolves"): that is how the thing was named, and how a later question will
    name it.
    """
    keys: list[str] = []
    starts: list[int] = []
    join = " ".join
    for run, lead, _, _ in runs:
        starts.append(len(keys))
        if len(run) == 1:
            low = run[0][2]
            keys.append(f"{lead.lower()} {low}" if lead else low)
            continue
        lows = [t[2] for t in run]
        pairs = list(map(join, pairwise(lows)))
        triples = list(map(join, zip(lows, lows[1:], lows[2:], strict=False)))
        if lead:
            low_lead = lead.lower()
            lows[0] = f"{low_lead} {lows[0]}"
            pairs[0] = f"{low_lead} {pairs[0]}"
            if triples:
                triples[0] = f"{low_lead} {triples[0]}"
        keys += lows
        keys += pairs
        keys += triples
    return keys, starts


def _span_of(offset: int, length: int) -> tuple[int, int]:
    """``(first word, number of words)`` of the key at ``offset`` in a run's layout."""
    if offset < length:
        return offset, 1
    if offset < 2 * length - 1:
        return offset - length, 2
    return offset - (2 * length - 1), 3


def _run_phrase(
    run: list[_Token],
    a: int,
    n: int,
    lead: str,
    at_start: bool,
    count: int,
    weights: dict[str, float],
    df: Counter[str],
    generic: float,
) -> tuple[str, float]:
    """The text and score of words ``a .. a + n`` of ``run`` (``weights`` is a cache)."""
    if n == 1:
        # One word: the commonest case by far.
        _, word, low, cap, _, _ = run[a]
        w = weights.get(low)
        if w is None:
            w = weights[low] = _word_weight(word, low, df, generic)
        if cap and (a or not at_start):
            w += 1.5
        if a == 0 and lead:
            return f"{lead} {word}", w * (1.0 + 0.8 * math.log(count)) * 1.5
        return word, w * (1.0 + 0.8 * math.log(count))
    acc = 0.0
    for b in range(a, a + n):
        _, word, low, cap, _, _ = run[b]
        w = weights.get(low)
        if w is None:
            w = _word_weight(word, low, df, generic)
            weights[low] = w
        if cap and (b or not at_start):
            w += 1.5
        acc = w if b == a else acc + w
    text = " ".join([t[1] for t in run[a : a + n]])
    if a == 0 and lead:
        text = f"{lead} {text}"
    n_words = text.count(" ") + 1
    return text, acc * (1.0 + 0.8 * math.log(count)) * (1.0 + 0.5 * (n_words - 1))


def _phrase(
    text: str, key: str, weight: float, count: int, i: int, speakers: Sequence[str]
) -> KeyPhrase:
    n_words = text.count(" ") + 1
    score = weight * (1.0 + 0.8 * math.log(count)) * (1.0 + 0.5 * (n_words - 1))
    return (text, key, score, i, speakers[i])


# How each distinct token reads (mode, word, lowercase ...) does not depend on the span, so
# it is remembered across calls: a conversation summarized again and again repeats most of
# its vocabulary. Bounded: cleared when it grows past the limit.
_TOKENS: dict[str, _Token] = {}
_TOKEN_CACHE_LIMIT = 200_000


def _has_dash(text: str) -> bool:
    return "-" in text or "\u2013" in text or "\u2014" in text


def _word_weight(word: str, low: str, df: Counter[str], generic: float) -> float:
    """The weight of a content word, before the bonus for a capital."""
    w = 1.0
    if _TIME_RE.match(word):
        w = 0.3  # clock times are rarely what a later question needs
    elif _DIGIT_RE.search(word):
        w += 2.0
    elif len(word) <= 2:
        w *= 0.3
    if low in _COMMON:
        w *= 0.35
    elif low.endswith(_WEAK_SUFFIXES):
        w *= 0.6  # adverbs, adjectives and past tenses rarely name a fact
    if df.get(low, 0) > generic:
        w *= 0.5
    return w
