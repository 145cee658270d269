"""MemoryStats (plain figures of one build) and the lifetime ledger that fills them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


class BuildRecord:
    """One build as the lifetime ledger sees it; ``total`` and ``lifetime`` may come later."""

    __slots__ = ("current", "last_seq", "lifetime", "summarizer", "total")

    def __init__(self, last_seq: int, current: int, summarizer: int, total: int | None) -> None:
        self.last_seq = last_seq
        self.current = current
        self.summarizer = summarizer
        self.total = total
        self.lifetime: int | None = None  # net tokens saved up to and including this build

    @property
    def net(self) -> int:
        """This build's contribution to lifetime savings (needs ``total``)."""
        assert self.total is not None
        return max(0, self.total - self.current) - self.summarizer


class Ledger:
    """Lifetime savings of one conversation in one memory; pure bookkeeping, no I/O.

    Only builds whose total is still unknown are kept (``pending``); the rest are folded into
    ``base``, so a memory serving a conversation for months holds O(1) state here once its
    totals are known. The memory fills pending totals when it counts the history
    (:meth:`~contextfold.ConversationMemory.count_totals`).
    """

    def __init__(self, root: Ledger | None = None) -> None:
        self.base = 0  # lifetime savings of every settled build
        self.pending: list[BuildRecord] = []
        # A plan's ledger is a branch of the memory's; a clear detaches them all at once.
        self.root: Ledger = self if root is None else root
        self.cleared = False

    def add(self, record: BuildRecord) -> None:
        self.pending.append(record)
        self.settle()

    def branch(self, extra: BuildRecord) -> Ledger:
        """A ledger with the same (shared) pending builds plus one projected build."""
        other = Ledger(self.root)
        other.base = self.base
        other.pending = [*self.pending, extra]
        other.settle()
        return other

    def settle(self) -> None:
        """Fold builds into ``base`` in order, while their totals are known."""
        while self.pending and self.pending[0].total is not None:
            record = self.pending.pop(0)
            if record.lifetime is None:
                record.lifetime = self.base + record.net
            self.base = record.lifetime

    def needs_count(self, record: BuildRecord) -> bool:
        """Whether filling ``record`` needs the history counted (its total, or an earlier one)."""
        if record.lifetime is not None:
            return False
        return record.total is None or any(r.total is None for r in self.pending)

    def detach(self) -> None:
        """The conversation was cleared: stats already handed out can no longer be counted."""
        self.root.cleared = True


@dataclass(frozen=True, eq=False)
class MemoryStats:
    """What one build sent, and what it saved: plain figures, reading them does no I/O.

    Token figures are under the memory's counter. The first seven fields match the seed
    library's ``MemoryStats``.

    Attributes:
        current_tokens: tokens of the context messages that will be sent (tool schemas not
            included; see ``tools_tokens``).
        message_count: messages in the full stored history when the build started.
        context_message_count: messages in the returned context (a summary message counts
            as one).
        is_summarized: the context carries a summary (new or reused).
        summarizer_tokens: input plus output tokens the summarizer calls of this build cost
            (0 when nothing was summarized, or the summary was reused).
        fallback: the strategy fell back to a plain window instead of summarizing.
        fallback_reason: why it fell back, or None.
        strategy: the name of the strategy that built the context.
        checkpoint_id: id of the checkpoint the context is built on, new or reused.
        compacted: a new checkpoint was committed by this build.
        dropped_count: stored messages left out without a summary.
        summarized_count: stored messages represented by the summary instead of verbatim.
        tools_tokens: tokens of the memory's tool schemas (sent with each request on top of
            ``current_tokens``).
        notes: human-readable remarks from the strategy and the memory.
        recalled: sequence numbers of the stored messages :class:`~contextfold.Recall` quoted
            as excerpts next to the newest message (the notes say for which query).
        total_tokens: tokens of the full stored history at build time (what sending it all
            would cost), or None when the memory does not know it without reading the log.
        lifetime_tokens_saved: net tokens saved by every build of this conversation in this
            memory, up to this one: the sum of ``tokens_saved`` minus the sum of
            ``summarizer_tokens``, so compaction pays for itself when it is positive. A plan
            adds its projection to the builds before it without being recorded. None while
            the total of this build or of an earlier one is unknown.
        stable_prefix_tokens: tokens at the start of this context identical, as sent, to the
            previous context of the conversation (the part a provider's prompt cache can
            serve); None for the first build of this memory.
        estimated_cost_usd: the estimated input cost of this request under the memory's
            ``prices`` with prompt caching (cache reads, writes, expiry), plus the summarizer
            calls the build made, priced the same way; None without prices.
        full_history_cost_usd: what sending the whole stored history would have cost for this
            request, cached the same way; None without prices or while the total is unknown.
        lifetime_cost_usd: ``estimated_cost_usd`` summed over this memory's builds.
        lifetime_full_history_cost_usd: ``full_history_cost_usd`` summed likewise (None once
            a total was unknown).
        limit_reached: the strategy's configured limit that stopped it before everything over
            budget was summarized (``Hybrid``'s ``max_chunks``), with what it left out; None
            when no limit stopped it. Those messages are in ``dropped_count`` for this build.

    Why ``None``: the total of a long stored conversation is known for free when the memory
    read all of it or appended all of it itself (it then keeps a running total, build by
    build). A memory opened on a conversation someone else wrote would have to read the whole
    log to know it, which is a cost no attribute access should hide (and impossible to do
    synchronously on an async-only store). Call
    :meth:`~contextfold.ConversationMemory.count_totals` (or ``await acount_totals``) for a
    copy with the figures filled in; from then on the memory keeps the total current, and
    later builds report it without reading more than the new messages.
    """

    current_tokens: int
    message_count: int
    context_message_count: int
    is_summarized: bool
    summarizer_tokens: int = 0
    fallback: bool = False
    fallback_reason: str | None = None
    strategy: str = ""
    checkpoint_id: str | None = None
    compacted: bool = False
    dropped_count: int = 0
    summarized_count: int = 0
    tools_tokens: int = 0
    notes: tuple[str, ...] = ()
    recalled: tuple[int, ...] = ()
    total_tokens: int | None = None
    lifetime_tokens_saved: int | None = None
    stable_prefix_tokens: int | None = None
    estimated_cost_usd: float | None = None
    full_history_cost_usd: float | None = None
    lifetime_cost_usd: float | None = None
    lifetime_full_history_cost_usd: float | None = None
    limit_reached: str | None = None
    _ledger: Ledger | None = field(default=None, repr=False, compare=False)
    _record: BuildRecord | None = field(default=None, repr=False, compare=False)

    @property
    def tokens_saved(self) -> int | None:
        """``total_tokens - current_tokens``, never below 0; None while the total is unknown."""
        if self.total_tokens is None:
            return None
        return max(0, self.total_tokens - self.current_tokens)

    @property
    def compression_ratio(self) -> float | None:
        """``current_tokens / total_tokens`` (1.0: nothing left out); None while unknown."""
        total = self.total_tokens
        if total is None:
            return None
        return 1.0 if total <= 0 else self.current_tokens / total

    def as_dict(self) -> dict[str, Any]:
        """Every figure, the derived ones included (None where a total is unknown)."""
        return {
            "current_tokens": self.current_tokens,
            "total_tokens": self.total_tokens,
            "tokens_saved": self.tokens_saved,
            "message_count": self.message_count,
            "context_message_count": self.context_message_count,
            "compression_ratio": self.compression_ratio,
            "is_summarized": self.is_summarized,
            "summarizer_tokens": self.summarizer_tokens,
            "lifetime_tokens_saved": self.lifetime_tokens_saved,
            "fallback": self.fallback,
            "fallback_reason": self.fallback_reason,
            "strategy": self.strategy,
            "checkpoint_id": self.checkpoint_id,
            "compacted": self.compacted,
            "dropped_count": self.dropped_count,
            "summarized_count": self.summarized_count,
            "tools_tokens": self.tools_tokens,
            "stable_prefix_tokens": self.stable_prefix_tokens,
            "estimated_cost_usd": self.estimated_cost_usd,
            "full_history_cost_usd": self.full_history_cost_usd,
            "lifetime_cost_usd": self.lifetime_cost_usd,
            "lifetime_full_history_cost_usd": self.lifetime_full_history_cost_usd,
            "notes": list(self.notes),
            "limit_reached": self.limit_reached,
            "recalled": list(self.recalled),
        }


def with_record(stats: MemoryStats) -> MemoryStats:
    """``stats`` with the figures its build record knows now (the same object if unchanged)."""
    record = stats._record
    if record is None:
        return stats
    if (record.total, record.lifetime) == (stats.total_tokens, stats.lifetime_tokens_saved):
        return stats
    return replace(stats, total_tokens=record.total, lifetime_tokens_saved=record.lifetime)
