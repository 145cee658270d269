"""Full-text search of one conversation's log in SQL, for SQLite and PostgreSQL.

Written over a :class:`~contextfold.stores._sql.Dialect` like the other SQL operations (see
:mod:`contextfold.stores._sql`); kept in a module of its own so the log's operations and the
search's stay apart.
"""

from __future__ import annotations

import json
from typing import Any

from contextfold.stores._codec import decode_rows
from contextfold.stores._search import WordCounts, fts5_match, query_words, tsquery_text
from contextfold.stores._sql import MAX_SEQ, Dialect, Op, Query, op_last_seq
from contextfold.stores.base import Spans, StoredMessage

__all__ = ["COMMON_WORD", "op_read_spans", "op_search"]


def op_search(
    d: Dialect,
    conversation_id: str,
    query: str,
    limit: int,
    before_seq: int | None,
    known: WordCounts | None = None,
) -> Op[list[StoredMessage]]:
    """The best ``limit`` messages for ``query`` (any of its words), best first.

    SQLite ranks with FTS5's ``bm25()`` inside the conversation's key range (so the index
    of every conversation is one table and a search touches one range of it); PostgreSQL
    ranks with ``ts_rank`` over the messages' ``tsvector`` column. ``known`` keeps the word
    counts of a search before a given seq for the next one (a search of everything, whose
    counts grow with every append, neither reads nor keeps them).
    """
    words = query_words(query)
    if not words or limit == 0 or (before_seq is not None and before_seq <= 1):
        return []
    stop = before_seq if before_seq is not None else MAX_SEQ + 1
    known = known if before_seq is not None else None
    if d.packed_keys:
        rows = yield Query(d.select_conversation_num, (conversation_id,))
        if not rows:
            return []
        base = int(rows[0][0]) << 32
        stop = min(MAX_SEQ + 1, stop)
        words = yield from _rare_words(d, (conversation_id, base, stop), words, known)
        params: tuple[Any, ...] = (base, fts5_match(words), base, base + stop, limit)
    else:
        words = yield from _rare_words(d, (conversation_id, 0, stop), words, known)
        params = (tsquery_text(words), conversation_id, stop, limit)
    rows = yield Query(d.search_messages, params, replan=d.cached_plans)
    return decode_rows(rows, conversation_id)


#: A word held by at least this many of the searched messages is left out of the query.
COMMON_WORD = 1000


def _rare_words(
    d: Dialect, at: tuple[str, int, int], words: list[str], known: WordCounts | None
) -> Op[list[str]]:
    """``words`` without those too common to tell messages apart (the rarest if all are).

    Ranking every message that holds a common word is what makes a search over a long
    conversation slow, and such a word adds little to the ranking (its inverse document
    frequency is low); a conversation of fewer than :data:`COMMON_WORD` messages keeps all.
    Each word is counted up to :data:`COMMON_WORD`, all in one statement, and only over
    the messages ``known`` has not counted yet. ``at`` is the conversation, its SQLite key
    base (0 on PostgreSQL) and the seq searched before.
    """
    if not d.count_words or len(words) < 2:
        return words
    cid, base, stop = at
    counts, todo = (
        known.lookup(cid, words, stop, COMMON_WORD) if known else ({}, dict.fromkeys(words, (0, 1)))
    )
    if known is not None and todo:
        # A count kept for a bound past the log's end would miss the messages appended
        # below that bound later: count and keep it for the end instead.
        stop = min(stop, (yield from op_last_seq(d, cid)) + 1)
    counted: dict[str, int] = {}
    for start in sorted({first for _, first in todo.values()}):
        group = [w for w, (_, first) in todo.items() if first == start]
        if d.packed_keys:  # the range as keys, the words as a JSON array
            params: tuple[Any, ...] = (
                base + start - 1,
                base + stop,
                COMMON_WORD,
                json.dumps(group),
            )
        else:
            params = (cid, start, stop, COMMON_WORD, group)
        rows = yield Query(d.count_words, params, replan=d.cached_plans)
        for word, n in rows:
            counted[str(word)] = min(COMMON_WORD, todo[str(word)][0] + int(n))
    if known is not None:
        known.note(cid, counted, stop, COMMON_WORD)
    counts.update(counted)
    rare = [w for w in words if counts.get(w, 0) < COMMON_WORD]
    return rare or [min((counts.get(w, 0), w) for w in words)[1]]


def op_read_spans(d: Dialect, conversation_id: str, spans: Spans) -> Op[list[StoredMessage]]:
    """The messages of every ``(lo, hi)`` seq run, oldest first, in one statement.

    The runs are the neighbours of a search's hits, a few messages each; their seqs travel
    as one list (a JSON array for SQLite), so any number of runs is one statement.
    """
    seqs = [seq for lo, hi in spans for seq in range(lo, min(hi, MAX_SEQ + 1))]
    if not seqs:
        return []
    listed = json.dumps(seqs) if d.packed_keys else seqs
    rows = yield Query(d.select_seqs, (conversation_id, listed))
    return decode_rows(rows, conversation_id)
