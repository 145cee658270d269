"""Answering a :class:`~contextfold.strategies.base.SearchCall` over a history in hand.

:func:`~contextfold.strategies.run` holds the whole history, so it answers a recall search
by indexing the part that may be searched (after the system prefix, before the call's
``before``) and cutting each hit's neighbours out of the list. The memory answers the same
call with its store's search instead (:mod:`contextfold.memory._search`); both give the
same shape of answer, built by :func:`hit_around`, and rank it the same way
(:func:`spread_ranks`, when the call asks for a spread).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from contextfold.messages import Message
from contextfold.search._bm25 import BM25Index, searchable_text
from contextfold.search._embed import VectorIndex, embed_checked, fuse_ranks, rank_score
from contextfold.strategies.base import SearchCall, SearchHit
from contextfold.turns import prefix_length

__all__ = ["hit_around", "rank_matches", "search_messages", "spread_ranks"]


def spread_ranks(positions: Sequence[int], call: SearchCall, lo: int, hi: int) -> list[int]:
    """The ``call.limit`` best positions once each match lends rank to its neighbours.

    ``positions`` are the search's matches, best first (``call.limit`` of them: a deeper
    pool ranked no better on LoCoMo, and costs a longer search). A match at rank ``r`` scores
    ``1 / (10 + r + 1)``, and a message (a match or not) scores its own plus ``call.spread``
    times the better of its two neighbours' (the messages right before and after it, inside
    ``lo..hi-1``). So the answer after a matching question, which shares no word with the
    query itself, ranks next to the question, and of two equal matches the one beside
    another match ranks first; a run of weak matches lends no more than its best one. Of
    equal scores the better match goes first (a neighbour never displaces the match that
    lends to it), then the later position (of a match's two neighbours, the one after it is
    more often its answer); without a spread the order is the search's.
    """
    if call.spread <= 0:
        return list(positions[: call.limit])
    own: dict[int, float] = {}
    for rank, position in enumerate(positions):
        own.setdefault(position, rank_score(rank))
    lent: dict[int, float] = {}
    for position, weight in own.items():
        for near in (position - 1, position + 1):
            if lo <= near < hi:
                lent[near] = max(lent.get(near, 0.0), call.spread * weight)
    score = {p: own.get(p, 0.0) + lent.get(p, 0.0) for p in own.keys() | lent.keys()}
    return sorted(score, key=lambda p: (-score[p], -own.get(p, 0.0), -p))[: call.limit]


def rank_matches(
    call: SearchCall, matches: Sequence[int], semantic: Sequence[int], lo: int, hi: int
) -> list[int]:
    """The positions a driver answers ``call`` with, best first.

    ``matches`` are the keyword search's, ``semantic`` the embedder's (empty without one);
    both are fused (:func:`~contextfold.search.fuse_ranks`), then spread
    (:func:`spread_ranks`).
    """
    order = fuse_ranks(matches, semantic, call.semantic) if semantic else list(matches)
    return spread_ranks(order, call, lo, hi)


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
    with what the inner strategy left out, not with the whole history; so are the vectors
    of a call with an embedder (the span is embedded on every call: a memory keeps them).

    Raises:
        EmbedderError: the call's embedder failed or returned something unusable.
    """
    lo = prefix_length(messages)
    hi = max(lo, min(call.before, len(messages)))
    if not call.query.strip() or call.limit <= 0 or hi <= lo:
        return ()
    index = BM25Index()
    for i in range(lo, hi):
        index.add(i, searchable_text(messages[i]))
    matches = [pos for pos, _ in index.search(call.query, limit=call.limit)]
    semantic: list[int] = []
    if call.embedder is not None:
        texts = [searchable_text(messages[i]) for i in range(lo, hi)]
        vectors = embed_checked(call.embedder, [call.query, *texts])
        store = VectorIndex(call.embedder.name)
        store.add(range(lo, hi), vectors[1:])
        semantic = store.search(vectors[0], limit=call.limit, lo=lo, hi=hi)
    return tuple(
        hit_around(pos, lo, hi, call.around, lambda a, b: messages[a:b])
        for pos in rank_matches(call, matches, semantic, lo, hi)
    )
