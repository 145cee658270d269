"""Answering a :class:`~contextfold.strategies.base.SearchCall` over a history in hand.

:func:`~contextfold.strategies.run` holds the whole history, so it answers a recall search
by indexing the part that may be searched (after the system prefix, before the call's
``before``) and cutting each hit's neighbours out of the list. The memory answers the same
call with its store's search instead (:mod:`contextfold.memory._search`); both give the
same shape of answer, built by :func:`hit_around`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from contextfold.messages import Message
from contextfold.search._bm25 import BM25Index, searchable_text
from contextfold.strategies.base import SearchCall, SearchHit
from contextfold.turns import prefix_length

__all__ = ["hit_around", "search_messages"]


def hit_around(
    position: int, lo: int, hi: int, around: int, fetch: Callable[[int, int], Sequence[Message]]
) -> SearchHit:
    """The hit at ``position`` with up to ``around`` neighbours each side, inside ``lo..hi-1``.

    ``fetch(start, stop)`` returns the messages at positions ``start`` to ``stop - 1``.
    """
    start = max(lo, position - around)
    stop = min(hi, position + around + 1)
    return SearchHit(position, start, tuple(fetch(start, stop)))


def search_messages(messages: Sequence[Message], call: SearchCall) -> tuple[SearchHit, ...]:
    """Answer ``call`` with a BM25 search over ``messages`` (positions are list indexes).

    The index is built for this one call over the searchable span only, so its cost grows
    with what the inner strategy left out, not with the whole history.
    """
    lo = prefix_length(messages)
    hi = max(lo, min(call.before, len(messages)))
    if not call.query.strip() or call.limit <= 0 or hi <= lo:
        return ()
    index = BM25Index()
    for i in range(lo, hi):
        index.add(i, searchable_text(messages[i]))
    hits = index.search(call.query, limit=call.limit)
    return tuple(
        hit_around(pos, lo, hi, call.around, lambda a, b: messages[a:b]) for pos, _ in hits
    )
