"""Search over a stored log: argument checks, query text for SQL engines, lazy BM25 indexes.

* :func:`check_search_args` rejects a bad query, limit or bound the same way for every store,
  and :func:`check_spans` the runs of a span read (the neighbours of a search's hits).
* :func:`query_words` reduces a query to the plain words every engine is asked for, and
  :func:`fts5_match` / :func:`tsquery_text` write them as SQLite FTS5 and PostgreSQL
  queries where any word may match (a question rarely repeats a message word for word).
* :class:`LogIndexes` keeps one :class:`~contextfold.search.BM25Index` per conversation for
  the stores without a search engine of their own (in memory, Redis). An index is filled
  lazily from the log: a search first adds what was appended since the last one. Nothing is
  locked while the log is read, so an async store never holds a thread lock across an await.
* :class:`WordCounts` remembers, for the SQL stores, how many messages hold each word
  searched for, so the next search counts only what was appended since.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextfold.messages import Message
from contextfold.search import BM25Index, searchable_text, tokenize
from contextfold.stores.base import StoreConfigError, StoredMessage

__all__ = [
    "LogIndexes",
    "WordCounts",
    "check_search_args",
    "check_spans",
    "fts5_match",
    "op_index_search",
    "query_head",
    "query_words",
    "tsquery_text",
]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_MAX_WORDS = 32  # a longer query is searched by its first distinct words


def check_search_args(query: object, limit: object, before_seq: object) -> None:
    """Reject a query that is not a string, a negative limit or a bad ``before_seq``.

    Raises:
        StoreConfigError: naming the argument (a ConfigError and a StoreError).
    """
    if not isinstance(query, str):
        raise StoreConfigError(f"query must be a string, got {query!r}", argument="query")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise StoreConfigError(f"limit must be an integer >= 0, got {limit!r}", argument="limit")
    if before_seq is not None and (
        isinstance(before_seq, bool) or not isinstance(before_seq, int) or before_seq < 0
    ):
        raise StoreConfigError(
            f"before_seq must be None or an integer >= 0, got {before_seq!r}",
            argument="before_seq",
        )


def check_spans(spans: object) -> tuple[tuple[int, int], ...]:
    """The ``(lo, hi)`` runs of a span read, checked: integers, ``1 <= lo < hi``, in order.

    Raises:
        StoreConfigError: naming ``spans`` (a ConfigError and a StoreError).
    """
    runs: Sequence[object] = spans if isinstance(spans, (list, tuple)) else ()
    bad = runs is not spans
    out: list[tuple[int, int]] = []
    for span in runs:
        if not (isinstance(span, tuple) and len(span) == 2 and all(type(v) is int for v in span)):
            bad = True
            break
        lo, hi = span
        if not 1 <= lo < hi or (out and lo < out[-1][1]):
            bad = True
            break
        out.append((lo, hi))
    if bad:
        raise StoreConfigError(
            f"spans must be (lo, hi) pairs of integers with 1 <= lo < hi, in order and apart, "
            f"got {spans!r}",
            argument="spans",
        )
    return tuple(out)


def query_words(query: str) -> list[str]:
    """The distinct words of ``query`` worth searching for, lowercased, in order.

    The words the BM25 tokenizer drops (function words) are dropped here too. Identifiers
    are split into their words (``ORD-1042`` gives ``ord`` and ``1042``), as the SQL
    engines' own tokenizers split them; only letters and digits remain, so the words are
    safe inside any engine's query syntax.
    """
    out: list[str] = []
    for word in _WORD.findall(query.lower()):
        if word in out or not tokenize(word):
            continue
        out.append(word)
        if len(out) == _MAX_WORDS:
            break
    return out


def query_head(query: str) -> str:
    """``query`` up to its last word that :func:`query_words` keeps.

    The index searches of the in-memory and Redis stores search this, so every store
    searches a long query by the same first words.
    """
    seen: set[str] = set()
    for match in _WORD.finditer(query):
        word = match.group().lower()
        if word in seen or not tokenize(word):
            continue
        seen.add(word)
        if len(seen) == _MAX_WORDS:
            return query[: match.end()]
    return query


def fts5_match(words: Iterable[str]) -> str:
    """An FTS5 MATCH expression where any of ``words`` may match (each quoted)."""
    return " OR ".join(f'"{w}"' for w in words)


def tsquery_text(words: Iterable[str]) -> str:
    """A ``to_tsquery`` text where any of ``words`` may match."""
    return " | ".join(words)


@dataclass
class _Index:
    first_id: str | None
    bm25: BM25Index = field(default_factory=BM25Index)
    last_id: str | None = None  # the fingerprint of the newest message indexed


def fingerprint(message: Message) -> str:
    """A short digest of everything ``message`` holds: two logs' messages at one seq with the
    same id (an application's own ids, written again) still differ by their content."""
    text = json.dumps(message.to_dict(), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


class LogIndexes:
    """One BM25 index per conversation, filled from the log as searches need it.

    A conversation deleted and written again is told from the old one by its first message
    and by the newest message indexed, compared by :func:`fingerprint` (see
    :func:`op_index_search`); its index is then rebuilt. A store drops the index of a
    conversation it deletes. A log another process rewrites with the same first and newest
    messages (ids and content) and other messages between them is not told apart.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._indexes: dict[str, _Index] = {}

    def indexed_upto(self, cid: str, first_id: str | None) -> tuple[int, str | None]:
        """The newest seq indexed for ``cid`` and its message's id (``(0, None)`` when the
        index is new or was stale)."""
        with self._lock:
            index = self._indexes.get(cid)
            if index is None or index.first_id != first_id:
                self._indexes[cid] = index = _Index(first_id)
            return index.bm25.last_key or 0, index.last_id

    def search(
        self,
        cid: str,
        first_id: str | None,
        new: Iterable[tuple[int, Message]],
        query: str,
        *,
        limit: int,
        before_seq: int | None,
    ) -> list[tuple[int, float]]:
        """Add the ``new`` ``(seq, message)`` pairs (what is not indexed yet), then search."""
        with self._lock:
            index = self._indexes.get(cid)
            if index is None or index.first_id != first_id:
                self._indexes[cid] = index = _Index(first_id)
            bm25 = index.bm25
            added: Message | None = None
            for seq, message in new:
                if seq > (bm25.last_key or 0):
                    bm25.add(seq, searchable_text(message))
                    added = message
            if added is not None:
                index.last_id = fingerprint(added)
            return bm25.search(query_head(query), limit=limit, hi=before_seq)

    def forget(self, cid: str) -> None:
        """Drop the index of a deleted conversation."""
        with self._lock:
            self._indexes.pop(cid, None)


class WordCounts:
    """How many messages of each conversation hold each word, as a SQL search last counted.

    A SQL search leaves out the words too many of the searched messages hold, and counting
    one word costs a read of up to that many index entries and rows, which is most of what
    a search costs. The log only grows (a conversation is deleted whole, which
    :meth:`forget` follows), so a count before seq ``s`` stays right for ``s`` and needs
    only the messages from ``s`` on for a later bound; a word held by the threshold's worth
    of messages before ``s`` is held by as many before any later bound. A count is kept per
    conversation and word with the bound it was made for.

    A conversation another process deletes and writes again keeps its old counts here;
    they only choose which words are searched for, so a search never returns a message that
    does not match. Bounded: past ``max_conversations`` the least recently searched one is
    dropped, and a conversation's counts are cleared past ``max_words``.
    """

    def __init__(self, max_conversations: int = 256, max_words: int = 4096) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, dict[str, tuple[int, int]]] = {}
        self._max_conversations = max_conversations
        self._max_words = max_words

    def lookup(
        self, cid: str, words: Iterable[str], stop: int, threshold: int
    ) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
        """The counts known before ``stop``, and for the others what is left to count.

        Returns ``(known, todo)``: ``known`` maps a word to its count (capped at
        ``threshold``; for a word rare before a later bound, that bound's count, which is
        at least this one's); ``todo`` maps each other word to ``(count so far, first seq to
        count from)``, ``(0, 1)`` for a word never counted up to ``stop``.
        """
        with self._lock:
            counts = self._counts.get(cid, {})
            known: dict[str, int] = {}
            todo: dict[str, tuple[int, int]] = {}
            for word in words:
                n, at = counts.get(word, (0, 0))
                if at == stop or (at < stop and n >= threshold) or (at > stop and n < threshold):
                    known[word] = n  # exact, still common, or rare before a later bound
                else:
                    todo[word] = (n, at) if 0 < at < stop else (0, 1)
            return known, todo

    def note(self, cid: str, counts: Mapping[str, int], stop: int, threshold: int) -> None:
        """Remember ``counts`` (capped at ``threshold``) as made before ``stop``."""
        if not counts:
            return
        with self._lock:
            known = self._counts.pop(cid, None) or {}
            if len(known) + len(counts) > self._max_words:
                known = {}
            for word, n in counts.items():
                old_n, old_at = known.get(word, (0, stop))
                # A word common before an earlier bound keeps that bound.
                common_before = old_n >= threshold and old_at < stop
                known[word] = (old_n, old_at) if common_before else (n, stop)
            self._counts[cid] = known  # the most recently searched at the end
            while len(self._counts) > self._max_conversations:
                del self._counts[next(iter(self._counts))]

    def forget(self, cid: str) -> None:
        """Drop the counts of a deleted conversation."""
        with self._lock:
            self._counts.pop(cid, None)


#: Reads ``limit`` (None: all) messages after a seq, as a store operation.
ReadOp = Callable[[int, "int | None"], Generator[Any, Any, list[StoredMessage]]]


def op_index_search(
    indexes: LogIndexes,
    read: ReadOp,
    cid: str,
    query: str,
    limit: int,
    before_seq: int | None,
) -> Generator[Any, Any, list[StoredMessage]]:
    """A search answered by ``indexes``, reading what is not indexed yet with ``read``.

    A store operation of its own (the Redis store runs it like any other): the first
    message identifies the log, the messages after the indexed ones are added, and each hit
    is read back by its seq.
    """
    if limit == 0 or not tokenize(query):
        return []
    first = yield from read(0, 1)
    if not first:
        indexes.forget(cid)
        return []
    identity = fingerprint(first[0].message)
    done, last_id = indexes.indexed_upto(cid, identity)
    if done:
        # Deleted and written again by another process, with the same first message?
        newest = yield from read(done - 1, 1)
        if not newest or fingerprint(newest[0].message) != last_id:
            indexes.forget(cid)
            done, _ = indexes.indexed_upto(cid, identity)
    new = yield from read(done, None)
    pairs = ((row.seq, row.message) for row in new)
    hits = indexes.search(cid, identity, pairs, query, limit=limit, before_seq=before_seq)
    out: list[StoredMessage] = []
    for seq, _ in hits:
        out.extend((yield from read(seq - 1, 1)))
    return out
