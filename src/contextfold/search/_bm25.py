"""A small incremental BM25 index in pure Python, for searching a conversation's log.

A conversation grows by appends and is never edited, so the index only ever adds documents,
under increasing integer keys (a message's position or sequence number). Each term keeps its
postings as two parallel lists (keys and term frequencies) in key order, which makes an
append O(terms of the message) and lets a query restrict itself to a key range with a
bisection instead of a scan. Scores use the statistics of the whole index at query time
(Okapi BM25 with the usual ``k1`` and ``b``), so nothing is recomputed on append.

Tokenization is deliberately plain and deterministic (:func:`tokenize`): Unicode words,
lowercased; numbers and identifiers (``ORD-1042``, ``5.2.3``, ``ana@example.com``,
``4417``) are kept whole because they are what a question about a past message most often
names; a few English function words are left out and a light suffix rule folds ``booked``,
``booking`` and ``books`` together.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from dataclasses import dataclass, field

from contextfold.errors import ConfigError
from contextfold.framing import message_texts
from contextfold.messages import Message

__all__ = ["BM25Index", "searchable_text", "tokenize"]

# A word, optionally joined to more words by one of . - _ : / @ + (ids, versions, emails).
_TOKEN = re.compile(r"[^\W_]+(?:[._:/@+\-][^\W_]+)*", re.UNICODE)
_SPLIT = re.compile(r"[._:/@+\-]")
_STOPWORDS = frozenset(
    re.split(
        r"\s+",
        """a an and are as at be been but by did do does for from had has have he her his how i
    if in into is it its me my of on or our she so than that the their them then there these
    they this to was we were what when where which who whom why will with would you your""",
    )
)
_CACHE_LIMIT = 200_000  # distinct words whose terms are remembered


def _stem(word: str) -> str:
    """Fold a few English inflections: ``painted``, ``painting``, ``paints`` give ``paint``.

    Far cruder than a Porter stemmer, and meant to be: the same word always gives the same
    term, queries and messages go through the same rule, and it costs a few string tests.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    else:
        if word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
            word = word[:-2]
        elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]
    return word


_TERMS: dict[str, tuple[str, ...]] = {}


def _terms(token: str) -> tuple[str, ...]:
    """The index terms of one lowercased token (cached: words repeat a lot)."""
    cached = _TERMS.get(token)
    if cached is not None:
        return cached
    if _SPLIT.search(token) is None:
        out: tuple[str, ...] = () if token in _STOPWORDS else (_stem(token),)
    elif "@" in token or any(ch.isdigit() for ch in token):
        # Whole, for an exact match to rank first, and by its words, so ``1042`` finds it.
        out = (token, *dict.fromkeys(w for w in _SPLIT.split(token) if w))
    else:
        out = tuple(_stem(w) for w in _SPLIT.split(token) if w and w not in _STOPWORDS)
    if len(_TERMS) >= _CACHE_LIMIT:
        _TERMS.clear()
    _TERMS[token] = out
    return out


def tokenize(text: str) -> list[str]:
    """The index terms of ``text``, in order (repeats kept, for term frequencies).

    A token that holds a digit or an ``@`` is an identifier: it is kept whole, followed by
    its words (``ORD-1042`` gives ``ord-1042``, ``ord`` and ``1042``); other joined words
    (``state-of-the-art``) are split into their words. Words are lowercased, function
    words dropped, and the rest lightly stemmed.
    """
    out: list[str] = []
    known = _TERMS.get
    for token in _TOKEN.findall(text.lower()):
        out.extend(known(token) or _terms(token))
    return out


def searchable_text(message: Message) -> str:
    """What a search sees of ``message``: its text, tool names and arguments, tool results.

    Every index (this one, SQLite FTS5, PostgreSQL full-text search) indexes this same text,
    so a message is found by the same words whichever store holds it.
    """
    return "\n".join(t for t in message_texts((message,)) if t)


@dataclass
class _Postings:
    keys: list[int] = field(default_factory=list)
    freqs: list[int] = field(default_factory=list)


class BM25Index:
    """An append-only BM25 index over documents with increasing integer keys.

    Not thread-safe by itself: a store that shares one between threads guards it with its
    own lock.

    Args:
        k1: term frequency saturation (1.2 by default).
        b: document length normalization, 0 to 1 (0.75 by default).

    Raises:
        ConfigError: ``k1`` is negative or ``b`` is outside 0..1.
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        if isinstance(k1, bool) or not isinstance(k1, (int, float)) or k1 < 0:
            raise ConfigError(f"k1 must be a number of at least 0, got {k1!r}", argument="k1")
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 <= b <= 1:
            raise ConfigError(f"b must be a number from 0 to 1, got {b!r}", argument="b")
        self.k1 = float(k1)
        self.b = float(b)
        self._postings: dict[str, _Postings] = {}
        self._lengths: dict[int, int] = {}
        self._total_length = 0
        self._last_key: int | None = None

    def __len__(self) -> int:
        return len(self._lengths)

    @property
    def last_key(self) -> int | None:
        """The newest key added, None while the index is empty."""
        return self._last_key

    def add(self, key: int, text: str) -> None:
        """Index ``text`` under ``key``, which must be greater than every key added before.

        Raises:
            ConfigError: ``key`` is not an integer above the last key.
        """
        if isinstance(key, bool) or not isinstance(key, int):
            raise ConfigError(f"key must be an integer, got {key!r}", argument="key")
        if self._last_key is not None and key <= self._last_key:
            raise ConfigError(
                f"keys must increase: got {key} after {self._last_key}", argument="key"
            )
        terms: dict[str, int] = {}
        length = 0
        for token in _TOKEN.findall(text.lower()):
            for term in _TERMS.get(token) or _terms(token):
                terms[term] = terms.get(term, 0) + 1
                length += 1
        index = self._postings
        for term, tf in terms.items():
            postings = index.get(term)
            if postings is None:
                postings = index[term] = _Postings()
            postings.keys.append(key)
            postings.freqs.append(tf)
        self._lengths[key] = length
        self._total_length += length
        self._last_key = key

    def search(
        self, query: str, *, limit: int = 10, lo: int | None = None, hi: int | None = None
    ) -> list[tuple[int, float]]:
        """The best ``limit`` documents for ``query`` as ``(key, score)``, best first.

        Only keys with ``lo <= key < hi`` are considered (either bound may be None). Ties go
        to the newer document, so the same query always gives the same order.
        """
        if limit <= 0 or not self._lengths:
            return []
        n = len(self._lengths)
        avg = self._total_length / n or 1.0
        k1 = self.k1
        base, per_length = k1 * (1.0 - self.b), k1 * self.b / avg
        lengths = self._lengths
        scores: dict[int, float] = {}
        get = scores.get
        for term in dict.fromkeys(tokenize(query)):
            postings = self._postings.get(term)
            if postings is None:
                continue
            keys, freqs = postings.keys, postings.freqs
            df = len(keys)
            weight = math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * (k1 + 1.0)
            start = 0 if lo is None else bisect_left(keys, lo)
            stop = df if hi is None else bisect_left(keys, hi)
            for i in range(start, stop):
                key, tf = keys[i], freqs[i]
                scores[key] = get(key, 0.0) + weight * tf / (tf + base + per_length * lengths[key])
        # Newest first, then a stable sort by score: ties stay newest first. Both sorts run
        # without a Python key function.
        newest_first = sorted(scores, reverse=True)
        best = sorted(newest_first, key=scores.__getitem__, reverse=True)[:limit]
        return [(key, scores[key]) for key in best]
