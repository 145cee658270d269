"""The running total of a stored conversation and the stats figures that depend on it.

Split from :mod:`contextfold.memory._core` so the build logic and the token bookkeeping
read on their own. :class:`Totals` is a mixin of :class:`~contextfold.memory._core.MemoryCore`:
its methods use the core's cache and its ``_read`` operation, and like the rest of the core
they do no I/O themselves, only yield store operations.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from contextfold.errors import ConfigError, StoreError
from contextfold.memory._ops import Append, CoreGen, LastSeq, LoadTally, SaveTally
from contextfold.memory._stats import BuildRecord, Ledger, MemoryStats, with_record
from contextfold.messages import Message
from contextfold.stores.base import Tally
from contextfold.tokens.base import TokenCounter, tally_name

_COUNT_PAGE = 2048  # rows per read while counting a stored history


class Totals:
    """Token totals of the stored history, kept by the memory core (see the module doc)."""

    counter: TokenCounter
    ledger: Ledger
    total: int | None  # tokens of seqs 1..total_upto, once known
    total_upto: int
    seg: list[Message]
    seg_start: int
    #: Whether the store's tally was read yet (once per memory, see :meth:`_stored_total`).
    tally_read: bool

    #: The counter's tally name when the memory was made (see :attr:`tally_counter`).
    tally_as: str | None

    @property
    def tally_counter(self) -> str | None:
        """The name the store keeps this memory's running total under (None: not kept).

        A counter whose configuration changes while it serves (a calibrated counter learning
        its ratio) counts differently from then on, so its totals stop being kept instead of
        mixing counts of two configurations under one name.
        """
        name = self.tally_as
        return name if name is not None and tally_name(self.counter) == name else None

    def append_op(self, messages: tuple[Message, ...]) -> Append:
        """The append of ``messages``, carrying their counts so the store's tally moves."""
        counter = self.tally_counter
        if counter is None:
            return Append(messages)
        count = self.counter.count_message
        tokens = tuple(count(m) for m in messages)
        if not all(type(n) is int and n >= 0 for n in tokens):
            return Append(messages)  # a counter of fractions: the store keeps whole tokens
        return Append(messages, counter, tokens)

    def _stored_total(self, last: int) -> CoreGen[None]:
        """Start the running total from the store's tally, once (a store without one: no-op).

        A tally is a cache of the immutable log, so one that covers no more than ``last``
        messages is exactly their total; the messages after it are counted on demand.
        """
        if self.tally_read or self.total is not None:
            return
        counter = self.tally_counter
        if counter is None:
            self.tally_read = True
            return
        try:
            tally: Tally | None = yield LoadTally(counter)
        except StoreError:
            self.tally_read = True
            return  # a running total only spares a count; without it the count is made
        # Marked read only once it was: a build cancelled while reading leaves it to the next.
        self.tally_read = True
        if tally is not None and tally.upto_seq <= last:
            self.total, self.total_upto = tally.tokens, tally.upto_seq

    def _save_total(self) -> CoreGen[None]:
        """Save the running total for later memories; a failure only costs them a count."""
        counter = self.tally_counter
        if counter is None or self.total is None or self.total_upto == 0:
            return
        with contextlib.suppress(StoreError):
            yield SaveTally(counter, Tally(self.total_upto, self.total))

    if TYPE_CHECKING:

        def _cached(self, seq: int) -> Message | None: ...

        def _read(self, after_seq: int, limit: int) -> CoreGen[list[Message]]: ...

    def _update_total(self, last: int, known: int | None) -> CoreGen[int | None]:
        """Keep the running total of the stored history current; None while unknown.

        ``known`` is the total the build already has for ``last`` (see :meth:`_free_total`).
        The store's tally starts it otherwise, when the messages after the tally are few
        enough to count within a build (:data:`_COUNT_PAGE`); more are left to
        :meth:`count_history`, so a build never reads the whole log.
        """
        if self.total is None:
            if known is not None:
                self.total, self.total_upto = known, last
                return self.total
            yield from self._stored_total(last)
            if self.total is None:
                return None
            if last - self.total_upto > _COUNT_PAGE:
                # Too far behind to catch up inside a build: leave it to count_history,
                # which starts from the same tally (read again then).
                self.total, self.total_upto, self.tally_read = None, 0, False
                return None
        if self.total_upto >= last:
            return self.total
        read = False
        count = self.counter.count_message
        seq = self.total_upto + 1
        while seq <= last:
            cached = self._cached(seq)
            if cached is not None:
                self.total += count(cached)
                seq += 1
                continue
            stop = min(last, seq + _COUNT_PAGE - 1)
            if self.seg and seq < self.seg_start <= stop:
                stop = self.seg_start - 1
            rows = yield from self._read(seq - 1, stop - seq + 1)
            self.total += self.counter.count_messages(rows)
            seq = stop + 1
            read = True
        self.total_upto = max(self.total_upto, last)
        if read:
            yield from self._save_total()
        return self.total

    def count_history(self, ledger: Ledger | None = None) -> CoreGen[int]:
        """Count the whole stored history once, filling every pending ledger total.

        Counting starts at the running total (or the store's tally) when no pending build
        needs a total from before it.
        """
        last: int = yield LastSeq()
        yield from self._stored_total(last)
        pending: dict[int, list[BuildRecord]] = {}
        for led in (self.ledger, ledger):
            if led is None:
                continue
            for r in led.pending:
                if r.total is None:
                    pending.setdefault(r.last_seq, []).append(r)
        if self.total is not None and not any(s < self.total_upto for s in pending):
            base, upto = self.total, self.total_upto
        else:
            base, upto = 0, 0
        for r in pending.pop(0, []):
            r.total = 0
        count = self.counter.count_message
        seq = upto + 1
        running = base
        if upto in pending:
            for r in pending.pop(upto):
                r.total = running
        while seq <= last:
            stop = min(last, seq + _COUNT_PAGE - 1)
            rows = yield from self._read(seq - 1, stop - seq + 1)
            for m in rows:
                running += count(m)
                for r in pending.pop(seq, ()):
                    r.total = running
                seq += 1
        if pending:  # a build saw more messages than are stored now: the log was cleared
            raise StoreError("the stored conversation is shorter than when it was built")
        counted = last > upto
        self.total, self.total_upto = running, last
        if counted:
            yield from self._save_total()
        self.ledger.settle()
        if ledger is not None:
            ledger.settle()
        return running

    def _stats_ledger(self, stats: MemoryStats) -> tuple[BuildRecord, Ledger] | None:
        """The build record and ledger of ``stats``, or None when it has none to fill."""
        if not isinstance(stats, MemoryStats):
            raise ConfigError(
                f"stats must be the MemoryStats of a build or plan, got {type(stats).__name__}",
                argument="stats",
            )
        record, ledger = stats._record, stats._ledger
        if record is None or ledger is None:
            return None
        if ledger.root is not self.ledger.root:
            if ledger.cleared:
                raise StoreError("the conversation was cleared; its stored history is gone")
            raise ConfigError(
                "stats: these stats come from another memory; ask the memory that built them",
                argument="stats",
            )
        return record, ledger

    def known_totals(self, stats: MemoryStats) -> MemoryStats | None:
        """``stats`` filled from what is known without I/O, or None when counting is needed."""
        found = self._stats_ledger(stats)
        if found is None:
            return stats
        record, ledger = found
        if ledger.needs_count(record):
            return None
        ledger.settle()
        return with_record(stats)

    def count_totals(self, stats: MemoryStats) -> CoreGen[MemoryStats]:
        """``stats`` with its totals filled, counting the stored history when needed."""
        found = self._stats_ledger(stats)
        if found is None:
            return stats
        record, ledger = found
        if ledger.needs_count(record):
            yield from self.count_history(ledger)
        ledger.settle()
        return with_record(stats)

    def _free_total(
        self, last: int, seqs: Sequence[int], messages: Sequence[Message]
    ) -> int | None:
        """The stored history's total at ``last`` when it costs no read: the running total,
        or the count of what this build read when it read everything from seq 1."""
        if self.total is not None and self.total_upto == last:
            return self.total
        if _covers_all(seqs, last):
            return self.counter.count_messages(messages)
        return None


def _covers_all(seqs: Sequence[int], last: int) -> bool:
    """Seqs are strictly increasing from 1, so length and last element decide."""
    return len(seqs) == last and (last == 0 or seqs[-1] == last)
