"""How the memory core answers searches: its own and a Recall plan's, through the store.

A memory may read only a bounded tail of the log (:mod:`contextfold.memory._reader`), so a
:class:`~contextfold.strategies.base.SearchCall` from :class:`~contextfold.Recall` cannot be
answered from what was read. The core asks the store's search instead (a
:class:`~contextfold.memory._ops.Search` op), maps the plan's index bound to a sequence
number, and reads the hits' neighbours by seq, from the cached segment where it can and
otherwise in one store call for all of them. A store without the search ability is searched
by reading its log once per search, with a note saying so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Iterable, Sequence
from typing import Any

from contextfold._drive import relay
from contextfold.errors import ConfigError, StoreError
from contextfold.memory._ops import CoreGen, Embed, Read, ReadSpans, Search
from contextfold.memory._reader import History, HistoryReader
from contextfold.messages import Message
from contextfold.search import (
    BM25Index,
    EmbedderError,
    VectorIndex,
    rank_matches,
    searchable_text,
)
from contextfold.stores.base import StoredMessage
from contextfold.strategies.base import (
    PlanOp,
    SearchCall,
    SearchHit,
    StrategyResult,
    StrategyState,
)
from contextfold.strategies.run import placeholder_summary

__all__ = ["Searcher", "check_query"]

_NO_SEARCH = "the store cannot search its log: it was read whole to search it"


def check_query(query: object, limit: object) -> None:
    """Reject what :meth:`~contextfold.ConversationMemory.search` cannot search with.

    Raises:
        ConfigError: naming ``query`` or ``limit``.
    """
    if not isinstance(query, str):
        raise ConfigError(f"query must be a string, got {query!r}", argument="query")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(
            f"limit must be an integer of at least 1, got {limit!r}", argument="limit"
        )


class Searcher(HistoryReader):
    """The searches of a memory core (a mixin over its reader)."""

    vectors: VectorIndex | None

    def search_log(
        self, query: str, limit: int, before_seq: int | None, notes: list[str] | None = None
    ) -> CoreGen[list[StoredMessage]]:
        """Stored messages matching ``query``, best first, from the store's search.

        A store without the ability is read whole and searched with a BM25 index built for
        this one search (``notes`` gets a line saying so).
        """
        rows: list[StoredMessage] | None = yield Search(query, before_seq, limit)
        if rows is not None:
            return list(rows)
        if notes is not None and _NO_SEARCH not in notes:
            notes.append(_NO_SEARCH)
        everything: list[StoredMessage] = yield Read(0, None)
        index = BM25Index()
        by_seq: dict[int, Message] = {}
        for row in everything:
            if before_seq is None or row.seq < before_seq:
                index.add(row.seq, searchable_text(row.message))
                by_seq[row.seq] = row.message
        return [StoredMessage(seq, by_seq[seq]) for seq, _ in index.search(query, limit=limit)]

    def answer_search(
        self, history: History, call: SearchCall, notes: list[str]
    ) -> CoreGen[tuple[SearchHit, ...]]:
        """Answer a plan's search: positions are store seqs, the prefix is never searched."""
        floor = len(self.prefix) + 1
        before = _seq_before(history, call.before, floor)
        if not call.query.strip() or call.limit <= 0 or before <= floor:
            return ()
        rows = yield from self.search_log(call.query, call.limit, before, notes)
        matches = [row.seq for row in rows if floor <= row.seq < before]
        semantic = (yield from self._semantic(call, floor, before)) if call.embedder else []
        found = {row.seq: row.message for row in rows}
        spans = []
        for seq in rank_matches(call, matches, semantic, floor, before):
            back, ahead = _reach(found.get(seq), call.around)
            spans.append((seq, max(floor, seq - back), min(before, seq + ahead + 1)))
        known = yield from self._neighbours(_merged((lo, hi) for _, lo, hi in spans), found)
        return tuple(
            SearchHit(seq, lo, tuple(known[s] for s in range(lo, hi))) for seq, lo, hi in spans
        )

    def _semantic(self, call: SearchCall, floor: int, before: int) -> CoreGen[list[int]]:
        """The seqs in ``floor..before-1`` closest in meaning to the query, best first.

        The memory keeps the vectors of its log (:attr:`vectors`, one embedder's): a search
        embeds only the messages stored since the newest one it holds, read in one call, and
        the query, in one :class:`~contextfold.memory._ops.Embed`.
        """
        embedder = call.embedder
        assert embedder is not None
        index = self.vectors
        if index is None or index.name != embedder.name:
            index = self.vectors = VectorIndex(embedder.name)
        start = max(floor, (index.last_key or 0) + 1)
        rows: list[StoredMessage] = []
        if start < before:
            rows = yield Read(start - 1, before - start)
            rows = [row for row in rows if start <= row.seq < before]
        texts = tuple(searchable_text(row.message) for row in rows)
        vectors = yield Embed(embedder, (call.query, *texts))
        if index.width is not None and vectors.shape[1] != index.width:
            self.vectors = None  # start over at the next search, with what it gives then
            raise EmbedderError(
                f"embedder {embedder.name!r} returned vectors of length {vectors.shape[1]}, "
                f"its earlier ones were {index.width} long"
            )
        index.add([row.seq for row in rows], vectors[1:])
        found: list[int] = index.search(vectors[0], limit=call.limit, lo=floor, hi=before)
        return found

    def dry_plan(
        self, history: History, state: StrategyState, notes: list[str]
    ) -> CoreGen[StrategyResult]:
        """Plan without a summarizer (placeholders, as ``dry_run``), searching the store.

        ``summary_calls`` counts the calls the plan would make, as ``dry_run`` does.
        """
        calls = 0

        def answer(op: PlanOp) -> Generator[Any, Any, Any]:
            nonlocal calls
            if isinstance(op, SearchCall):
                return (yield from self.answer_search(history, op, notes))
            calls += 1
            return placeholder_summary(op)

        plan = self.strategy.plan(
            history.messages, counter=self.counter, checkpoint=history.checkpoint, state=state
        )
        result = yield from relay(plan, answer)
        if result.summary_calls < calls:
            result = dataclasses.replace(result, summary_calls=calls)
        return result

    def _neighbours(
        self, runs: list[tuple[int, int]], found: dict[int, Message]
    ) -> CoreGen[dict[int, Message]]:
        """The messages of the ``(lo, hi)`` seq runs by seq: those ``found`` by the search
        and those cached come free, the rest are read.

        What is left is read in one store call (one statement in the SQL stores), not one
        read per hit.

        Raises:
            StoreError: the store left out a message of a run (its log is damaged).
        """
        known: dict[int, Message] = {}
        lacking: list[tuple[int, int]] = []
        for lo, hi in runs:
            for seq in range(lo, hi):
                message = found.get(seq)
                if message is None:
                    message = self._cached(seq)
                if message is None:
                    lacking.append((seq, seq + 1))
                else:
                    known[seq] = message
        missing = _merged(lacking)
        if missing:
            rows: list[StoredMessage] = yield ReadSpans(tuple(missing))
            wanted = [seq for lo, hi in missing for seq in range(lo, hi)]
            if [getattr(row, "seq", None) for row in rows] != wanted:
                raise StoreError(
                    f"reading the neighbours of search hits: asked for seqs {_runs(missing)}, "
                    "got others; the log has a gap or is shorter than its last sequence "
                    "number says"
                )
            known.update((row.seq, row.message) for row in rows)
        return known


def _reach(message: Message | None, around: int) -> tuple[int, int]:
    """How many neighbours before and after a hit to read: what choosing its excerpt needs.

    A plain message (no tool call or result) is a unit by itself and needs at most the
    message before it (the request, for a short answer); a tool message, or a neighbour hit
    not read yet, gets ``around`` each side, so its whole unit can be found. Reading less
    around the plain hits decodes a third as many messages on a chat's search.
    """
    if message is not None and not message.tool_calls and not message.tool_results:
        return min(1, around), 0
    return around, around


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``(lo, hi)`` spans with the overlapping and touching ones joined, in order."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _runs(spans: Sequence[tuple[int, int]]) -> str:
    return ", ".join(f"{lo}-{hi - 1}" for lo, hi in spans)


def _seq_before(history: History, index: int, floor: int) -> int:
    """The store seq of ``history.messages[index]`` (one past the end for the length)."""
    seqs: Sequence[int] = history.seqs
    if 0 <= index < len(seqs):
        return seqs[index]
    return (seqs[-1] + 1) if seqs else floor
