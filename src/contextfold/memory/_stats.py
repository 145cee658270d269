"""MemoryStats and the lifetime ledger behind its lazy totals."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contextfold.errors import StoreError


class BuildRecord:
    """One build as the lifetime ledger sees it; ``total`` and ``lifetime`` come lazily."""

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
    """Lifetime savings of one conversation in one memory.

    Only builds whose total is still unknown are kept (``pending``); the rest are folded into
    ``base``, so a memory serving a conversation for months holds O(1) state here once its
    totals are known.
    """

    def __init__(self, resolve: Callable[[Ledger], None]) -> None:
        self.base = 0  # lifetime savings of every settled build
        self.pending: list[BuildRecord] = []
        self._resolve = resolve

    def add(self, record: BuildRecord) -> None:
        self.pending.append(record)
        self.settle()

    def branch(self, extra: BuildRecord) -> Ledger:
        """A ledger with the same (shared) pending builds plus one projected build."""
        other = Ledger(self._resolve)
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

    def ensure(self, record: BuildRecord) -> None:
        """Make ``record.total`` and ``record.lifetime`` known (may read the store)."""
        if record.lifetime is None:
            if record.total is None or any(r.total is None for r in self.pending):
                self._resolve(self)
            self.settle()

    def detach(self) -> None:
        """The conversation was cleared: stats already handed out can no longer count it."""

        def gone(_: Ledger) -> None:
            raise StoreError("the conversation was cleared; its stored history is gone")

        self._resolve = gone


@dataclass(frozen=True, eq=False)
class MemoryStats:
    """What one build sent, and what it saved.

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

    ``total_tokens``, ``tokens_saved``, ``compression_ratio`` and ``lifetime_tokens_saved``
    are properties: they need the token count of the whole stored history. A memory that
    wrote or read the whole conversation knows it already. A memory opened on a long stored
    conversation counts it on first access, once, reading the log in pages (linear in the
    conversation's length). From then on it adds only new messages, build by build. That
    first count reads the store synchronously: in async code (and always with an async-only
    store) call ``await memory.acount_history()`` first, and the properties read no store.
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
    _ledger: Ledger | None = field(default=None, repr=False, compare=False)
    _record: BuildRecord | None = field(default=None, repr=False, compare=False)

    @property
    def total_tokens(self) -> int:
        """Tokens of the full stored history at build time (what sending it all would cost)."""
        record = self._record
        if record is None or self._ledger is None:
            return self.current_tokens
        if record.total is None:
            self._ledger.ensure(record)
        assert record.total is not None
        return record.total

    @property
    def tokens_saved(self) -> int:
        """``total_tokens - current_tokens``, never below 0: tokens this request did not send."""
        return max(0, self.total_tokens - self.current_tokens)

    @property
    def compression_ratio(self) -> float:
        """``current_tokens / total_tokens``; 1.0 means nothing was left out."""
        total = self.total_tokens
        return 1.0 if total <= 0 else self.current_tokens / total

    @property
    def lifetime_tokens_saved(self) -> int:
        """Net tokens saved by every build of this conversation in this memory, up to this one.

        The sum over builds of ``tokens_saved`` minus the sum of ``summarizer_tokens``: what
        compaction saved after paying for itself. It can be negative when summaries cost more
        than they saved. Plans (:meth:`ConversationMemory.plan`) add their projection to the
        builds before them without being recorded.
        """
        record = self._record
        if record is None or self._ledger is None:
            return self.tokens_saved - self.summarizer_tokens
        self._ledger.ensure(record)
        assert record.lifetime is not None
        return record.lifetime

    def as_dict(self) -> dict[str, Any]:
        """Every figure, properties included (may count the history; see the class doc)."""
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
            "notes": list(self.notes),
        }
