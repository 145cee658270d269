"""How the memory core reads a stored history: only what the strategy can need.

The system prefix is read once and cached; the messages after it live in one cached segment
that each build extends or trims (:meth:`HistoryReader._ensure`). A strategy with a bounded
window (:class:`~contextfold.strategies.base.BoundedWindow`) gets only the newest messages
its window can hold, found by the one window walker on the newest pages; a strategy that
builds on a checkpoint gets the newest covered message and what follows it (located by
sequence number, so a newer message repeating its id cannot move the checkpoint); any other
strategy gets the whole history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import PairingError, StoreError
from contextfold.memory._ops import CoreGen, Read
from contextfold.messages import Message
from contextfold.stores.base import StoredMessage
from contextfold.strategies.base import (
    Strategy,
    StrategyState,
    bounded_window,
    checkpoint_applies,
)
from contextfold.strategies.sliding import fit_tail
from contextfold.tokens.base import TokenCounter
from contextfold.turns import newest_request, prefix_length

__all__ = ["History", "HistoryReader"]

_PREFIX_PAGE = 16  # rows per read while loading the system prefix
_FIRST_PAGE = 64  # rows of the first backwards read of a bounded window


@dataclass
class History:
    """What the strategy receives, with the store seq of each message."""

    messages: list[Message]
    seqs: list[int]
    checkpoint: CheckpointRecord | None
    unread: range  # stored seqs after the prefix that were not passed (dropped or covered)


def _check_rows(rows: Sequence[StoredMessage], after_seq: int, where: str) -> None:
    """Sequence numbers must be gap-free; anything else is a damaged store."""
    for k, row in enumerate(rows):
        if not isinstance(row, StoredMessage) or row.seq != after_seq + 1 + k:
            got = getattr(row, "seq", row)
            raise StoreError(
                f"{where}: expected sequence number {after_seq + 1 + k}, got {got!r}; "
                "the store's log has a gap or returned rows out of order"
            )


class HistoryReader:
    """The prefix and segment cache of a memory core, and the reads that fill it."""

    strategy: Strategy
    counter: TokenCounter
    prefix: list[Message]
    prefix_done: bool
    seg: list[Message]  # messages with seqs seg_start .. seg_end
    seg_start: int
    state: StrategyState

    if TYPE_CHECKING:

        def reset(self) -> None: ...

    @property
    def seg_end(self) -> int:
        return self.seg_start + len(self.seg) - 1

    def _cached(self, seq: int) -> Message | None:
        if 1 <= seq <= len(self.prefix):
            return self.prefix[seq - 1]
        if self.seg and self.seg_start <= seq <= self.seg_end:
            return self.seg[seq - self.seg_start]
        return None

    def _check_same_log(self, last: int) -> CoreGen[None]:
        """Forget the cache when the log grew past it but is no longer the log it holds.

        Another memory's ``clear()`` or a ``delete()`` followed by new appends leaves a log
        that may be longer than the one this memory cached, with other messages under the
        same seqs (the same ids too, when the application assigns them). So whenever
        messages came from elsewhere, the newest cached one is read back and compared, in
        the read that fetches the new ones (one more row, no more round trips). A log
        rewritten to exactly the length this memory last saw, with none added since, is not
        noticed (nothing is read then); nor is one far past the cache under a bounded window,
        which drops the cached messages and reads its window afresh (only the system
        prompt is kept from the old log then).
        """
        if not self.seg or last <= self.seg_end:
            return
        gap = last - self.seg_end
        extend = gap <= _FIRST_PAGE
        if not extend and self._window_budget() is not None:
            return  # the window starts afresh (see _window_start): nothing cached is reused
        rows = yield from self._read(self.seg_end - 1, 1 + (gap if extend else 0))
        if rows[0] != self.seg[-1]:
            self.reset()  # the core's: every cache and figure of the old log goes
        elif extend:
            self.seg.extend(rows[1:])

    def _read(self, after_seq: int, limit: int) -> CoreGen[list[Message]]:
        rows: list[StoredMessage] = yield Read(after_seq, limit)
        _check_rows(rows, after_seq, "reading the conversation")
        if len(rows) != limit:
            raise StoreError(
                f"reading the conversation: asked for {limit} messages after seq {after_seq}, "
                f"got {len(rows)}; the log is shorter than its last sequence number says"
            )
        return [r.message for r in rows]

    def _load_prefix(self, last: int) -> CoreGen[None]:
        while not self.prefix_done and len(self.prefix) < last:
            after = len(self.prefix)
            rows = yield from self._read(after, min(_PREFIX_PAGE, last - after))
            n = prefix_length(rows)
            self.prefix.extend(rows[:n])
            if n < len(rows):
                self.prefix_done = True
                self.seg, self.seg_start = list(rows[n:]), after + n + 1

    def _ensure(self, lo: int, hi: int) -> CoreGen[None]:
        """Make the segment cover exactly ``lo..hi`` (reading only what is missing)."""
        if hi < lo:
            self.seg, self.seg_start = [], lo
            return
        if not self.seg or self.seg_end < lo - 1 or self.seg_start > hi + 1:
            self.seg = yield from self._read(lo - 1, hi - lo + 1)
            self.seg_start = lo
            return
        if self.seg_end < hi:
            self.seg.extend((yield from self._read(self.seg_end, hi - self.seg_end)))
        if self.seg_start > lo:
            older = yield from self._read(lo - 1, self.seg_start - lo)
            self.seg = older + self.seg
            self.seg_start = lo
        self.seg = self.seg[lo - self.seg_start : hi - self.seg_start + 1]
        self.seg_start = lo

    def _window_start(self, last: int, budget: int) -> CoreGen[int]:
        """The seq a bounded window must read from: pages back until the walker has enough.

        The window walker runs on the newest page; while everything read fits the budget, or
        the newest turn's request is not read yet, an older page is read.
        """
        floor = len(self.prefix) + 1
        if self.seg and last - self.seg_end > _FIRST_PAGE:
            self.seg = []  # far behind: the newest page is all a window can need first
        if self.seg and self.seg_start <= last:
            lo = self.seg_start
        else:
            lo = max(floor, last - _FIRST_PAGE + 1)
        page = _FIRST_PAGE
        while True:
            yield from self._ensure(lo, last)
            reach = self._window_reach(budget)
            if reach is not None:
                return self.seg_start + reach
            if lo <= floor:
                return floor
            page *= 2
            lo = max(floor, lo - page)

    def _reach_anchor(self, start: int, last: int, budget: int) -> CoreGen[int]:
        """``start``, or earlier so the read holds the messages the window is anchored on.

        A cache-stable window starts where the previous one did (its anchor), which can be
        older than what the newest units need: without it the strategy would move the window
        where a build over the whole history would not. An anchor that can still be used is
        within ``budget`` tokens of the end, so reading stops there.
        """
        anchor = self.state.window
        if anchor is None:
            return start
        wanted = {anchor.start_id, anchor.request_id} - {None}
        floor = len(self.prefix) + 1
        page = _FIRST_PAGE
        while start > floor:
            tail = self.seg[start - self.seg_start :]
            if wanted <= {m.id for m in tail} or self.counter.count_messages(tail) > budget:
                break
            start = max(floor, start - page)
            page *= 2
            yield from self._ensure(start, last)
        return start

    def _window_reach(self, budget: int) -> int | None:
        """Where in the cached segment to read from, or None when more must be read first.

        Enough is read once the newest turn's request is in the segment and the newest units
        that fit the budget (found by the window walker) are preceded by a whole unit that
        does not: the window then starts after that unit, or keeps the request. Reading from
        that unit also tells the next build, after an append, that its window cannot start
        earlier.
        """
        view = [*self.prefix, *self.seg]
        p = len(self.prefix)
        request = newest_request(view, p, len(view))
        if request is None:
            return None  # the newest turn's request is older than what was read
        room = budget - self.counter.count_messages(self.prefix)
        if room < 0:
            return request - p  # over budget: the strategy says so on what it needs
        try:
            fits_from = fit_tail(view, (p,), room, self.counter, floor=p)
        except PairingError:
            return None  # a result whose call is older than what was read
        # The unit before the newest units that fit: it starts at the nearest message that
        # is not only tool results (a result never opens a unit).
        before = fits_from - 1
        while before >= p and view[before].is_tool_result_only:
            before -= 1
        if before < p:
            return None  # every whole unit read fits: the window may start earlier
        return min(before, request) - p

    def _load_history(self, last: int, stored: CheckpointRecord | None) -> CoreGen[History]:
        """Read what the strategy needs, from the cache where possible."""
        floor = len(self.prefix) + 1
        ckpt = stored if self._applies(stored, last) else None
        start = floor
        if ckpt is not None and ckpt.last_covered_seq is not None:
            # From the covered message itself: the strategy finds it right after the
            # prefix, so a newer message repeating its id cannot be taken for it.
            start = max(floor, ckpt.last_covered_seq)
        else:
            budget = self._window_budget()
            if budget is not None and last >= floor:
                start = yield from self._window_start(last, budget)
                start = yield from self._reach_anchor(start, last, budget)
        if last < floor:
            self.seg, self.seg_start = [], floor
        else:
            yield from self._ensure(start, last)
        n_prefix = min(len(self.prefix), last)
        messages = self.prefix[:n_prefix] + self.seg
        seqs = list(range(1, n_prefix + 1)) + list(range(self.seg_start, self.seg_end + 1))
        unread = range(floor, start) if last >= floor else range(0)
        return History(messages, seqs, ckpt, unread)

    def _applies(self, ckpt: CheckpointRecord | None, last: int) -> bool:
        """Whether the stored checkpoint is one this strategy builds on."""
        if ckpt is None or not ckpt.summary.strip():
            return False
        if ckpt.last_covered_seq is not None and ckpt.last_covered_seq > last:
            return False
        return checkpoint_applies(self.strategy, ckpt)

    def _window_budget(self) -> int | None:
        """The token budget when only a window of the newest messages can matter."""
        if bounded_window(self.strategy):
            return self.strategy.window_budget(self.counter)
        return None
