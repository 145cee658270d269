"""Full-text search of one conversation's log in SQL, for SQLite and PostgreSQL.

Written over a :class:`~contextfold.stores._sql.Dialect` like the other SQL operations (see
:mod:`contextfold.stores._sql`); kept in a module of its own so the log's operations and the
search's stay apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextfold.stores._codec import decode_rows
from contextfold.stores._search import fts5_match, query_words, tsquery_text
from contextfold.stores._sql import MAX_SEQ, Dialect, Op, Query
from contextfold.stores.base import StoredMessage

__all__ = ["COMMON_WORD", "op_search"]


def op_search(
    d: Dialect, conversation_id: str, query: str, limit: int, before_seq: int | None
) -> Op[list[StoredMessage]]:
    """The best ``limit`` messages for ``query`` (any of its words), best first.

    SQLite ranks with FTS5's ``bm25()`` inside the conversation's key range (so the index
    of every conversation is one table and a search touches one range of it); PostgreSQL
    ranks with ``ts_rank`` over the messages' ``tsvector`` column.
    """
    words = query_words(query)
    if not words or limit == 0 or (before_seq is not None and before_seq <= 1):
        return []
    if d.packed_keys:
        rows = yield Query(d.select_conversation_num, (conversation_id,))
        if not rows:
            return []
        base = int(rows[0][0]) << 32
        stop = base + min(MAX_SEQ + 1, before_seq if before_seq is not None else MAX_SEQ + 1)
        scope: tuple[Any, ...] = (base, stop)
        words = yield from _rare_words(d, words, scope, lambda w: f'"{w}"')
        params: tuple[Any, ...] = (base, fts5_match(words), base, stop, limit)
    else:
        stop = before_seq if before_seq is not None else MAX_SEQ + 1
        words = yield from _rare_words(d, words, (conversation_id, stop), lambda w: w)
        params = (tsquery_text(words), conversation_id, stop, limit)
    rows = yield Query(d.search_messages, params)
    return decode_rows(rows, conversation_id)


#: A word held by at least this many of the searched messages is left out of the query.
COMMON_WORD = 1000


def _rare_words(
    d: Dialect, words: list[str], scope: tuple[Any, ...], quote: Callable[[str], str]
) -> Op[list[str]]:
    """``words`` without those too common to tell messages apart (the rarest if all are).

    Ranking every message that holds a common word is what makes a search over a long
    conversation slow, and such a word adds little to the ranking (its inverse document
    frequency is low); a conversation of fewer than :data:`COMMON_WORD` messages keeps all.
    """
    if not d.count_word or len(words) < 2:
        return words
    counts: list[tuple[int, str]] = []
    for word in words:
        rows = yield Query(d.count_word, (*_count_params(d, quote(word), scope), COMMON_WORD))
        counts.append((int(rows[0][0]) if rows else 0, word))
    rare = [w for n, w in counts if n < COMMON_WORD]
    return rare or [min(counts)[1]]


def _count_params(d: Dialect, word: str, scope: tuple[Any, ...]) -> tuple[Any, ...]:
    return (word, *scope) if d.packed_keys else (*scope, word)
