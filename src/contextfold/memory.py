"""ConversationMemory: a stored transcript and the context built from it for each request.

The memory keeps the whole conversation in a :class:`~contextfold.stores.base.Store` (an
append-only log) and, on every :meth:`ConversationMemory.build_context`, runs its strategy to
decide what is sent. It reports what that request saved in :class:`MemoryStats`.

Three properties matter most for a long-lived conversation:

* **Reading cost does not grow with the conversation.** Sequence numbers are gap-free, so
  the memory reads windows by arithmetic. It caches what it read, and each build reads only
  the sequence numbers it has not seen. A :class:`~contextfold.strategies.sliding.SlidingWindow`
  build reads the system prefix plus the newest messages that cover the budget (walking back
  to a turn boundary, so the window never starts inside a tool exchange). With a stored
  checkpoint, it reads only the messages after the checkpoint. Any other strategy without a
  checkpoint receives the whole history once; later builds then read only what is new.
  A stored checkpoint is used when its ``strategy`` equals the strategy's ``name`` (or, for a
  :class:`~contextfold.strategies.pipeline.Pipeline`, the name of one of its stages), or
  when the strategy has an ``accepts_checkpoint(record) -> bool`` method that says yes. In that
  case the strategy receives the prefix plus the messages after the checkpoint, not the
  covered ones: a strategy that does not find ``last_covered_id`` in its input treats
  everything after the prefix as newer than the checkpoint.
* **A span is summarized once.** A checkpoint the strategy returns is committed to the store
  and reused by later builds, and by every other process that serves the conversation.
  Compaction is single-flight: the summarizer runs only while this process holds
  :meth:`~contextfold.stores.base.Store.compaction_lock`. When another process holds it, the
  build goes ahead without compacting (the strategy falls back as it does on a summarizer
  failure), and :attr:`MemoryStats.fallback_reason` says so. A commit rejected with
  :class:`~contextfold.errors.ConflictError` reloads the newest checkpoint and rebuilds once.
* **Nothing stored is lost or edited.** Building never writes messages. It can only append
  a checkpoint. :meth:`ConversationMemory.clear` is the one destructive call.

The synchronous and asynchronous methods share one sans-I/O core. The core is a generator
that yields small "store operation" and "summary call" requests, and two drivers carry them
out against a sync or an async store. The logic is written once. A sync-only store also
serves the async methods (its calls then block the event loop briefly); an async-only store
serves only the async methods.

A memory object is not safe for concurrent use by several threads or tasks. Use one per
task; many memories (in many processes) may serve the same stored conversation. When another
memory clears the conversation, this one notices at its next build if the log is now shorter
than what it has seen, and starts over; a log cleared and refilled past that length is not
detected, so clear a conversation from the memory that serves it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar, Union, overload

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConflictError, ContextfoldError, FormatError, StoreError
from contextfold.messages import Message
from contextfold.stores.base import AsyncStore, Store, StoredMessage
from contextfold.strategies.base import (
    DRY_RUN_SUMMARY,
    Strategy,
    StrategyResult,
    SummaryCall,
    _call_async,
    _call_sync,
)
from contextfold.summarizers.base import SummarizationResult
from contextfold.tokens.base import TokenCounter
from contextfold.turns import is_turn_start, prefix_length

__all__ = ["Context", "ContextPlan", "ConversationMemory", "MemoryStats"]

_T = TypeVar("_T")

#: Default budget of the default strategy, in tokens.
DEFAULT_MAX_TOKENS = 8000

_PREFIX_PAGE = 16  # rows per read while loading the system prefix
_FIRST_PAGE = 64  # rows of the first backwards read of a sliding window
_COUNT_PAGE = 2048  # rows per read while counting a stored history

_LOCK_BUSY = (
    "another process holds the compaction lock for this conversation; built without compacting"
)


# -- store operations the core asks its driver to perform -------------------------------


@dataclass(frozen=True, slots=True)
class _LastSeq:
    what = "read the last sequence number"


@dataclass(frozen=True, slots=True)
class _Read:
    after_seq: int
    limit: int | None
    what = "read messages"


@dataclass(frozen=True, slots=True)
class _Latest:
    what = "read the latest checkpoint"


@dataclass(frozen=True, slots=True)
class _Commit:
    record: CheckpointRecord
    expected_previous: str | None
    what = "commit a checkpoint"


@dataclass(frozen=True, slots=True)
class _Lock:
    ttl: float
    what = "take the compaction lock"


@dataclass(frozen=True, slots=True)
class _Append:
    messages: tuple[Message, ...]
    what = "append messages"


@dataclass(frozen=True, slots=True)
class _Delete:
    what = "delete the conversation"


@dataclass(frozen=True, slots=True)
class _Summarize:
    call: SummaryCall
    what = "summarize"


_Op = Union[_LastSeq, _Read, _Latest, _Commit, _Lock, _Append, _Delete, _Summarize]  # noqa: UP007
_Core = Generator[_Op, Any, _T]


# -- stats --------------------------------------------------------------------------------


class _BuildRecord:
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


class _Ledger:
    """Lifetime savings of one conversation in one memory.

    Only builds whose total is still unknown are kept (``pending``); the rest are folded into
    ``base``, so a memory serving a conversation for months holds O(1) state here once its
    totals are known.
    """

    def __init__(self, resolve: Callable[[_Ledger], None]) -> None:
        self.base = 0  # lifetime savings of every settled build
        self.pending: list[_BuildRecord] = []
        self._resolve = resolve

    def add(self, record: _BuildRecord) -> None:
        self.pending.append(record)
        self.settle()

    def branch(self, extra: _BuildRecord) -> _Ledger:
        """A ledger with the same (shared) pending builds plus one projected build."""
        other = _Ledger(self._resolve)
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

    def ensure(self, record: _BuildRecord) -> None:
        """Make ``record.total`` and ``record.lifetime`` known (may read the store)."""
        if record.lifetime is None:
            if record.total is None or any(r.total is None for r in self.pending):
                self._resolve(self)
            self.settle()

    def detach(self) -> None:
        """The conversation was cleared: stats already handed out can no longer count it."""

        def gone(_: _Ledger) -> None:
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
    conversation's length). From then on it adds only new messages, build by build. With an
    async-only store, call :meth:`ConversationMemory.acount_history` first.
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
    _ledger: _Ledger | None = field(default=None, repr=False, compare=False)
    _record: _BuildRecord | None = field(default=None, repr=False, compare=False)

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


# -- the context --------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """The messages to send for one request, with its stats.

    Iterating yields the messages; ``len()`` counts them. The ``to_*`` methods dump them to
    a provider's request shape through :mod:`contextfold.formats`.

    Attributes:
        messages: the context, in order.
        stats: what this build sent and saved.
        checkpoint: the checkpoint the context is built on (just committed, or reused), or
            None when the context carries no stored summary.
        tools: the memory's tool schemas, to send along.
    """

    messages: tuple[Message, ...]
    stats: MemoryStats
    checkpoint: CheckpointRecord | None = None
    tools: tuple[Mapping[str, Any], ...] = ()

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        return self.messages[index]

    def to_openai(self) -> list[dict[str, Any]]:
        """Chat Completions ``messages``."""
        from contextfold.formats import openai_chat

        return openai_chat.dump(self.messages)

    def to_anthropic(self) -> dict[str, Any]:
        """Anthropic Messages ``{"system": ..., "messages": [...]}``.

        Leading system and developer messages become ``system``; Anthropic takes no system
        role inside ``messages``.
        """
        from contextfold.formats import anthropic

        return anthropic.dump(self.messages)

    def to_responses(self) -> list[dict[str, Any]]:
        """Responses API ``input`` items."""
        from contextfold.formats import openai_responses

        return openai_responses.dump(self.messages)


@dataclass(frozen=True)
class ContextPlan:
    """What a build would do now, computed without calling a summarizer or writing.

    Ranges are of store sequence numbers (``range`` objects, so ``seq in r`` and ``len(r)``
    work). Summaries in ``messages`` are short placeholders, so token figures are
    projections.

    Attributes:
        messages: the projected context.
        stats: projected stats (``summarizer_tokens`` is 0; nothing was called).
        kept: sequence ranges sent verbatim.
        dropped: sequence ranges left out without a summary.
        summarized: sequence ranges a summary would represent (new or reused).
        summary_calls: how many summarizer calls the build would make.
        checkpoint: the stored checkpoint the plan builds on, if any.
        notes: the strategy's remarks.
    """

    messages: tuple[Message, ...]
    stats: MemoryStats
    kept: tuple[range, ...]
    dropped: tuple[range, ...]
    summarized: tuple[range, ...]
    summary_calls: int
    checkpoint: CheckpointRecord | None = None
    notes: tuple[str, ...] = ()

    @property
    def would_summarize(self) -> bool:
        """True when a real build would call the summarizer."""
        return self.summary_calls > 0


# -- the sans-I/O core ----------------------------------------------------------------------


@dataclass
class _History:
    """What the strategy receives, with the store seq of each message."""

    messages: list[Message]
    seqs: list[int]
    checkpoint: CheckpointRecord | None
    unread: range  # stored seqs after the prefix that were not passed (dropped or covered)


@dataclass
class _Built:
    context: Context
    result: StrategyResult
    history: _History


def _check_rows(rows: Sequence[StoredMessage], after_seq: int, where: str) -> None:
    """Sequence numbers must be gap-free; anything else is a damaged store."""
    for k, row in enumerate(rows):
        if not isinstance(row, StoredMessage) or row.seq != after_seq + 1 + k:
            got = getattr(row, "seq", row)
            raise StoreError(
                f"{where}: expected sequence number {after_seq + 1 + k}, got {got!r}; "
                "the store's log has a gap or returned rows out of order"
            )


def _seq_ranges(seqs: Sequence[int], spans: Sequence[tuple[int, int]]) -> list[range]:
    """Index spans of the history, as ranges of store seqs (split where seqs jump)."""
    out: list[range] = []
    for a, b in spans:
        i = a
        while i < b:
            j = i + 1
            while j < b and seqs[j] == seqs[j - 1] + 1:
                j += 1
            out.append(range(seqs[i], seqs[j - 1] + 1))
            i = j
    return out


def _merge(ranges: Sequence[range]) -> tuple[range, ...]:
    out: list[range] = []
    for r in sorted((r for r in ranges if len(r)), key=lambda r: r.start):
        if out and out[-1].stop >= r.start:
            out[-1] = range(out[-1].start, max(out[-1].stop, r.stop))
        else:
            out.append(r)
    return tuple(out)


class _MemoryCore:
    """The state and logic of a memory, with no I/O: every store access is a yielded op."""

    def __init__(
        self,
        *,
        strategy: Strategy,
        counter: TokenCounter,
        tools: tuple[Mapping[str, Any], ...],
        lock_ttl: float,
        resolve: Callable[[_Ledger], None],
    ) -> None:
        self.strategy = strategy
        self.counter = counter
        self.tools = tools
        self.lock_ttl = lock_ttl
        self._resolve = resolve
        self.tools_tokens = counter.count_tools(tools) if tools else 0
        self.reset()

    def reset(self) -> None:
        """Forget everything cached (after :meth:`ConversationMemory.clear`)."""
        old = getattr(self, "ledger", None)
        if old is not None:
            old.detach()
        self.prefix: list[Message] = []
        self.prefix_done = False
        self.seg: list[Message] = []  # messages with seqs seg_start .. seg_start+len-1
        self.seg_start = 1
        self.total: int | None = None  # tokens of seqs 1..total_upto, once known
        self.total_upto = 0
        self.ledger = _Ledger(self._resolve)
        self.last_stats: MemoryStats | None = None

    # -- cache helpers ------------------------------------------------------------------

    @property
    def seg_end(self) -> int:
        return self.seg_start + len(self.seg) - 1

    def _cached(self, seq: int) -> Message | None:
        if 1 <= seq <= len(self.prefix):
            return self.prefix[seq - 1]
        if self.seg and self.seg_start <= seq <= self.seg_end:
            return self.seg[seq - self.seg_start]
        return None

    def note_appended(self, seqs: Sequence[int], messages: Sequence[Message]) -> None:
        """Cache messages this memory appended, when they extend what is cached."""
        count = self.counter.count_message
        for seq, m in zip(seqs, messages, strict=True):
            if self.total is not None and seq == self.total_upto + 1:
                self.total += count(m)
                self.total_upto = seq
            if not self.prefix_done and seq == len(self.prefix) + 1:
                if m.role in ("system", "developer"):
                    self.prefix.append(m)
                    continue
                self.prefix_done = True
                self.seg, self.seg_start = [m], seq
            elif self.prefix_done and self.seg and seq == self.seg_end + 1:
                self.seg.append(m)
            elif self.prefix_done and not self.seg and seq == len(self.prefix) + 1:
                self.seg, self.seg_start = [m], seq

    def _read(self, after_seq: int, limit: int) -> _Core[list[Message]]:
        rows: list[StoredMessage] = yield _Read(after_seq, limit)
        _check_rows(rows, after_seq, "reading the conversation")
        if len(rows) != limit:
            raise StoreError(
                f"reading the conversation: asked for {limit} messages after seq {after_seq}, "
                f"got {len(rows)}; the log is shorter than its last sequence number says"
            )
        return [r.message for r in rows]

    def _load_prefix(self, last: int) -> _Core[None]:
        while not self.prefix_done and len(self.prefix) < last:
            after = len(self.prefix)
            rows = yield from self._read(after, min(_PREFIX_PAGE, last - after))
            n = prefix_length(rows)
            self.prefix.extend(rows[:n])
            if n < len(rows):
                self.prefix_done = True
                self.seg, self.seg_start = list(rows[n:]), after + n + 1

    def _ensure(self, lo: int, hi: int) -> _Core[None]:
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

    def _window_start(self, last: int, budget: int) -> _Core[int]:
        """The seq a sliding window must read from to cover ``budget`` at a turn start."""
        floor = len(self.prefix) + 1
        if self.seg and last - self.seg_end > _FIRST_PAGE:
            self.seg = []  # far behind: the newest page is all a window can need first
        if self.seg and self.seg_start <= last:
            yield from self._ensure(self.seg_start, last)
        else:
            yield from self._ensure(max(floor, last - _FIRST_PAGE + 1), last)
        count = self.counter.count_message
        acc = 0
        seq = last
        page = _FIRST_PAGE
        while seq >= floor:
            if seq < self.seg_start:
                page *= 2
                yield from self._ensure(max(floor, self.seg_start - page), last)
            m = self.seg[seq - self.seg_start]
            acc += count(m)
            if acc > budget and is_turn_start(m):
                return seq
            seq -= 1
        return floor

    def _load_history(self, last: int, stored: CheckpointRecord | None) -> _Core[_History]:
        """Read what the strategy needs, from the cache where possible."""
        floor = len(self.prefix) + 1
        ckpt = stored if self._applies(stored, last) else None
        start = floor
        if ckpt is not None and ckpt.last_covered_seq is not None:
            start = max(floor, ckpt.last_covered_seq + 1)
        else:
            budget = self._window_budget()
            if budget is not None and last >= floor:
                start = yield from self._window_start(last, budget)
        if last < floor:
            self.seg, self.seg_start = [], floor
        else:
            yield from self._ensure(start, last)
        n_prefix = min(len(self.prefix), last)
        messages = self.prefix[:n_prefix] + self.seg
        seqs = list(range(1, n_prefix + 1)) + list(range(self.seg_start, self.seg_end + 1))
        unread = range(floor, start) if last >= floor else range(0)
        return _History(messages, seqs, ckpt, unread)

    def _applies(self, ckpt: CheckpointRecord | None, last: int) -> bool:
        """Whether the stored checkpoint is one this strategy builds on."""
        if ckpt is None or not ckpt.summary.strip():
            return False
        if ckpt.last_covered_seq is not None and ckpt.last_covered_seq > last:
            return False
        accepts = getattr(self.strategy, "accepts_checkpoint", None)
        if callable(accepts):
            return bool(accepts(ckpt))
        return ckpt.strategy in _checkpoint_owners(self.strategy)

    def _window_budget(self) -> int | None:
        """The token budget when only a window of the newest messages can matter."""
        from contextfold.strategies.sliding import SlidingWindow

        if isinstance(self.strategy, SlidingWindow):
            return self.strategy.max_tokens
        return None

    def _update_total(self, last: int, history: _History) -> _Core[int | None]:
        """Keep the running total of the stored history current; None while unknown."""
        if self.total is None:
            # Free when this build read everything from seq 1.
            if _covers_all(history.seqs, last):
                self.total = self.counter.count_messages(history.messages)
                self.total_upto = last
            return self.total
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
        self.total_upto = max(self.total_upto, last)
        return self.total

    def count_history(self, ledger: _Ledger | None = None) -> _Core[int]:
        """Count the whole stored history once, filling every pending ledger total."""
        last: int = yield _LastSeq()
        pending: dict[int, list[_BuildRecord]] = {}
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
        self.total, self.total_upto = running, last
        self.ledger.settle()
        return running

    # -- building -----------------------------------------------------------------------

    def build(self, *, dry: bool) -> _Core[_Built]:
        """Build (or, with ``dry``, plan) a context. See the module docstring."""
        last: int = yield _LastSeq()
        self._check_not_shrunk(last)
        yield from self._load_prefix(last)
        stored: CheckpointRecord | None = yield _Latest()
        locked: bool | None = None  # None: not asked for yet
        retried = False
        memory_notes: list[str] = []
        while True:
            history = yield from self._load_history(last, stored)
            ckpt = history.checkpoint
            if dry:
                result = _dry_plan(self.strategy, history, self.counter)
                break
            gen = self.strategy.plan(history.messages, counter=self.counter, checkpoint=ckpt)
            restart = False
            answer: SummarizationResult | None = None
            try:
                call = next(gen)
                while True:
                    if locked is None:
                        locked = yield _Lock(self.lock_ttl)
                        if locked:
                            latest: CheckpointRecord | None = yield _Latest()
                            if _cid(latest) != _cid(stored):
                                # Someone compacted while we planned: build on theirs.
                                stored, restart = latest, True
                                gen.close()
                                break
                        else:
                            memory_notes.append(_LOCK_BUSY)
                    if locked:
                        answer = yield _Summarize(call)
                    else:
                        answer = SummarizationResult.failure(_LOCK_BUSY, "error")
                    call = gen.send(answer)
            except StopIteration as stop:
                result = stop.value
            if restart:
                continue
            new = result.checkpoint
            if new is None:
                break
            if locked is None:
                locked = yield _Lock(self.lock_ttl)
                if not locked:
                    memory_notes.append(_LOCK_BUSY)
            if not locked:
                result = _without_new_checkpoint(result)
                break
            record = self._sealed(new, history, stored)
            if record is None:
                memory_notes.append(
                    f"the new checkpoint covers {new.last_covered_id!r}, which "
                    "the strategy was not given; it was not stored"
                )
                result = _without_new_checkpoint(result)
                break
            try:
                committed: CheckpointRecord = yield _Commit(record, _cid(stored))
            except ConflictError:
                if retried:
                    raise
                retried = True
                stored = yield _Latest()
                memory_notes.append("checkpoint commit conflicted; rebuilt on the newest one")
                continue
            result = _with_checkpoint(result, committed)
            break
        return self._finish(last, history, result, memory_notes, dry=dry)

    def _check_not_shrunk(self, last: int) -> None:
        """Forget the cache when the log is shorter than what was seen (cleared elsewhere)."""
        seen = max(len(self.prefix), self.seg_end if self.seg else 0, self.total_upto)
        if last < seen:
            self.reset()

    def _sealed(
        self, record: CheckpointRecord, history: _History, stored: CheckpointRecord | None
    ) -> CheckpointRecord | None:
        """The strategy's checkpoint with the store seq of what it covers."""
        seq: int | None = None
        for i in range(len(history.messages) - 1, -1, -1):
            if history.messages[i].id == record.last_covered_id:
                seq = history.seqs[i]
                break
        if seq is None and stored is not None and stored.last_covered_id == record.last_covered_id:
            seq = stored.last_covered_seq
        if seq is None:
            return None
        changes: dict[str, Any] = {"last_covered_seq": seq}
        if not record.strategy:
            changes["strategy"] = self.strategy.name
        if record.previous_id is None and history.checkpoint is not None:
            changes["previous_id"] = history.checkpoint.id
        return record.replace(**changes)

    def _finish(
        self,
        last: int,
        history: _History,
        result: StrategyResult,
        memory_notes: list[str],
        *,
        dry: bool,
    ) -> _Built:
        used = result.checkpoint or result.reused_checkpoint
        summarized = bool(result.summarized_ranges) or used is not None
        unread = len(history.unread)
        covered_unread = unread if (history.checkpoint is not None and used is not None) else 0
        fallback_reason = result.fallback
        if fallback_reason is None and _LOCK_BUSY in memory_notes and result.summary_calls:
            fallback_reason = _LOCK_BUSY
        usage = result.usage
        known = self.total if self.total is not None and self.total_upto == last else None
        record = _BuildRecord(last, result.tokens, 0 if dry else usage.total_tokens, known)
        if dry:
            ledger = self.ledger.branch(record)
        else:
            ledger = self.ledger
            ledger.add(record)
        stats = MemoryStats(
            current_tokens=result.tokens,
            message_count=last,
            context_message_count=len(result.messages),
            is_summarized=summarized,
            summarizer_tokens=record.summarizer,
            fallback=result.fallback is not None or fallback_reason is not None,
            fallback_reason=fallback_reason,
            strategy=result.strategy,
            checkpoint_id=used.id if used is not None else None,
            compacted=result.checkpoint is not None and not dry,
            dropped_count=result.dropped_count + (unread - covered_unread),
            summarized_count=result.summarized_count + covered_unread,
            tools_tokens=self.tools_tokens,
            notes=(*result.notes, *memory_notes),
            _ledger=ledger,
            _record=record,
        )
        if not dry:
            self.last_stats = stats
            self._evict(used)
        context = Context(tuple(result.messages), stats, used, self.tools)
        return _Built(context, result, history)

    def _evict(self, used: CheckpointRecord | None) -> None:
        """Drop cached messages a later build cannot need."""
        if used is not None and used.last_covered_seq is not None and self.seg:
            keep_from = used.last_covered_seq + 1
            if keep_from > self.seg_start:
                cut = min(len(self.seg), keep_from - self.seg_start)
                self.seg = self.seg[cut:]
                self.seg_start += cut

    def post_build(self, built: _Built) -> _Core[None]:
        """Bring the running total up to date when it is being tracked."""
        record = built.context.stats._record
        assert record is not None
        total = yield from self._update_total(record.last_seq, built.history)
        if record.total is None and total is not None:
            record.total = total
            self.ledger.settle()

    def plan(self) -> _Core[ContextPlan]:
        built = yield from self.build(dry=True)
        # A plan over a short conversation knows the total for free.
        rec, ledger = built.context.stats._record, built.context.stats._ledger
        if (
            rec is not None
            and ledger is not None
            and rec.total is None
            and _covers_all(built.history.seqs, rec.last_seq)
        ):
            rec.total = self.counter.count_messages(built.history.messages)
            ledger.settle()
        result, history = built.result, built.history
        kept_ids = set(result.kept)
        kept_idx = [i for i, m in enumerate(history.messages) if m.id in kept_ids]
        kept = _seq_ranges(history.seqs, [(i, i + 1) for i in kept_idx])
        dropped = _seq_ranges(history.seqs, result.dropped_ranges)
        summarized = _seq_ranges(history.seqs, result.summarized_ranges)
        if len(history.unread):
            if history.checkpoint is not None and (
                result.checkpoint is not None or result.reused_checkpoint is not None
            ):
                summarized.append(history.unread)
            else:
                dropped.append(history.unread)
        return ContextPlan(
            messages=built.context.messages,
            stats=built.context.stats,
            kept=_merge(kept),
            dropped=_merge(dropped),
            summarized=_merge(summarized),
            summary_calls=result.summary_calls,
            checkpoint=history.checkpoint,
            notes=result.notes,
        )

    def build_and_count(self) -> _Core[Context]:
        built = yield from self.build(dry=False)
        yield from self.post_build(built)
        return built.context


def _checkpoint_owners(strategy: Strategy) -> set[str]:
    """Names whose checkpoints ``strategy`` builds on: its own, and a pipeline's stages'."""
    from contextfold.strategies.pipeline import Pipeline

    names = {strategy.name}
    if isinstance(strategy, Pipeline):
        for stage in strategy.stages:
            names |= _checkpoint_owners(stage)
    return names


def _covers_all(seqs: Sequence[int], last: int) -> bool:
    """Seqs are strictly increasing from 1, so length and last element decide."""
    return len(seqs) == last and (last == 0 or seqs[-1] == last)


def _cid(ckpt: CheckpointRecord | None) -> str | None:
    return None if ckpt is None else ckpt.id


def _dry_plan(strategy: Strategy, history: _History, counter: TokenCounter) -> StrategyResult:
    """Run the strategy answering every summary call with a placeholder."""
    gen = strategy.plan(history.messages, counter=counter, checkpoint=history.checkpoint)
    calls = 0
    try:
        call = next(gen)
        while True:
            calls += 1
            text = DRY_RUN_SUMMARY.format(n=len(call.request.messages))
            call = gen.send(SummarizationResult.success(text, details={"dry_run": True}))
    except StopIteration as stop:
        result: StrategyResult = stop.value
    if result.summary_calls < calls:
        result = _replace_result(result, summary_calls=calls)
    return result


def _replace_result(result: StrategyResult, **changes: Any) -> StrategyResult:
    from dataclasses import replace

    return replace(result, **changes)


def _without_new_checkpoint(result: StrategyResult) -> StrategyResult:
    return _replace_result(result, checkpoint=None)


def _with_checkpoint(result: StrategyResult, committed: CheckpointRecord) -> StrategyResult:
    return _replace_result(result, checkpoint=committed)


# -- the public class ---------------------------------------------------------------------


class ConversationMemory:
    """A stored conversation and the context to send for each request.

    Args:
        strategy: decides what is sent. Default: ``SlidingWindow(max_tokens=8000)``
            (with ``tools`` counted against the budget).
        store: a :class:`~contextfold.stores.base.Store` / ``AsyncStore``, or a URL for
            :func:`~contextfold.stores.open_store` (``sqlite:///chats.db``, ``redis://...``).
            Default: a fresh :class:`~contextfold.stores.InMemoryStore`. A store opened
            from a URL is closed by :meth:`close`; a store passed in is the caller's.
        counter: counts tokens. Default: :class:`~contextfold.tokens.approx.ApproxCounter`.
        conversation_id: which conversation of the store this memory serves; generated
            when not given.
        tools: tool schemas sent with each request, reported in ``stats.tools_tokens`` and
            handed back on :class:`Context`.
        lock_ttl: seconds after which a compaction lock left by a crashed process expires.

    Example:
        >>> from contextfold.messages import Message
        >>> memory = ConversationMemory()
        >>> _ = memory.add(Message.user("Hello, I need help with my order"))
        >>> ctx = memory.build_context()
        >>> ctx.stats.context_message_count
        1
    """

    def __init__(
        self,
        *,
        strategy: Strategy | None = None,
        store: Store | AsyncStore | str | None = None,
        counter: TokenCounter | None = None,
        conversation_id: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        lock_ttl: float = 120.0,
    ) -> None:
        if conversation_id is not None and (
            not isinstance(conversation_id, str) or not conversation_id
        ):
            raise FormatError(
                f"conversation_id must be a non-empty string, got {conversation_id!r}",
                field="conversation_id",
            )
        if lock_ttl <= 0:
            raise FormatError(f"lock_ttl must be positive, got {lock_ttl!r}", field="lock_ttl")
        tool_list = tuple(tools or ())
        if counter is None:
            from contextfold.tokens.approx import ApproxCounter

            counter = ApproxCounter()
        if strategy is None:
            from contextfold.strategies.sliding import SlidingWindow

            strategy = SlidingWindow(DEFAULT_MAX_TOKENS, tools=tool_list)
        elif not isinstance(strategy, Strategy):
            raise FormatError(
                f"strategy must have a name and a plan() method, got {type(strategy).__name__}",
                field="strategy",
            )
        self._owns_store = False
        self._store: Any = self._resolve_store(store)
        self.conversation_id: str = conversation_id or "conv_" + uuid.uuid4().hex
        self._core = _MemoryCore(
            strategy=strategy,
            counter=counter,
            tools=tool_list,
            lock_ttl=lock_ttl,
            resolve=self._resolve_totals,
        )

    def _resolve_store(self, store: Store | AsyncStore | str | None) -> Any:
        if store is None:
            from contextfold.stores.memory import InMemoryStore

            return InMemoryStore()
        if isinstance(store, str):
            from contextfold.stores import open_store

            opened = open_store(store)
            self._owns_store = True
            return opened
        if isinstance(store, (Store, AsyncStore)):
            return store
        raise StoreError(
            f"store must be a Store, an AsyncStore or a URL, got {type(store).__name__}"
        )

    # -- restoring ----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url_or_store: Store | AsyncStore | str,
        *,
        conversation_id: str,
        strategy: Strategy | None = None,
        counter: TokenCounter | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        lock_ttl: float = 120.0,
    ) -> ConversationMemory:
        """Serve a stored conversation (or start it, when the id is new).

        Reads the sequence number and the system prefix, so a store that cannot be reached or
        that holds damaged rows fails here with :class:`~contextfold.errors.StoreError`
        rather than at the first request. The rest is read on demand.
        """
        memory = cls(
            strategy=strategy,
            store=url_or_store,
            counter=counter,
            conversation_id=conversation_id,
            tools=tools,
            lock_ttl=lock_ttl,
        )
        try:
            memory._drive(memory._warm())
        except BaseException:
            memory.close()
            raise
        return memory

    @classmethod
    async def aopen(
        cls,
        url_or_store: Store | AsyncStore | str,
        *,
        conversation_id: str,
        strategy: Strategy | None = None,
        counter: TokenCounter | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        lock_ttl: float = 120.0,
    ) -> ConversationMemory:
        """Async form of :meth:`open`."""
        memory = cls(
            strategy=strategy,
            store=url_or_store,
            counter=counter,
            conversation_id=conversation_id,
            tools=tools,
            lock_ttl=lock_ttl,
        )
        try:
            await memory._adrive(memory._warm())
        except BaseException:
            await memory.aclose()
            raise
        return memory

    def _warm(self) -> _Core[None]:
        last: int = yield _LastSeq()
        yield from self._core._load_prefix(last)

    # -- properties ---------------------------------------------------------------------

    @property
    def strategy(self) -> Strategy:
        """The strategy that builds each context."""
        return self._core.strategy

    @property
    def counter(self) -> TokenCounter:
        """The token counter."""
        return self._core.counter

    @property
    def store(self) -> Any:
        """The store holding the transcript."""
        return self._store

    @property
    def stats(self) -> MemoryStats | None:
        """Stats of the last :meth:`build_context`, or None before the first."""
        return self._core.last_stats

    @property
    def messages(self) -> list[Message]:
        """The full stored transcript, oldest first (reads the whole log)."""
        return self._drive(self._read_all())

    async def amessages(self) -> list[Message]:
        """Async form of :attr:`messages`."""
        return await self._adrive(self._read_all())

    def _read_all(self) -> _Core[list[Message]]:
        last: int = yield _LastSeq()
        return (yield from self._core._read(0, last)) if last else []

    def __repr__(self) -> str:
        return (
            f"ConversationMemory(conversation_id={self.conversation_id!r}, "
            f"strategy={self._core.strategy!r}, store={type(self._store).__name__})"
        )

    # -- writing ------------------------------------------------------------------------

    def add(self, message: Message) -> int:
        """Append one message; returns its sequence number."""
        return self._drive(self._append_core((message,)))[0]

    async def aadd(self, message: Message) -> int:
        """Async form of :meth:`add`."""
        return (await self._adrive(self._append_core((message,))))[0]

    def extend(self, messages: Sequence[Message]) -> list[int]:
        """Append several messages atomically; returns their sequence numbers."""
        return self._drive(self._append_core(tuple(messages)))

    async def aextend(self, messages: Sequence[Message]) -> list[int]:
        """Async form of :meth:`extend`."""
        return await self._adrive(self._append_core(tuple(messages)))

    def _append_core(self, messages: tuple[Message, ...]) -> _Core[list[int]]:
        for i, m in enumerate(messages):
            if not isinstance(m, Message):
                raise FormatError(
                    f"expected a contextfold Message, got {type(m).__name__}; convert provider "
                    "payloads with contextfold.formats first",
                    index=i,
                )
        if not messages:
            return []
        seqs: list[int] = yield _Append(messages)
        if len(seqs) != len(messages):
            raise StoreError(
                f"the store returned {len(seqs)} sequence numbers for {len(messages)} messages"
            )
        self._core.note_appended(seqs, messages)
        return list(seqs)

    def clear(self) -> None:
        """Delete this conversation (messages and checkpoints) and start it empty."""
        self._drive(self._clear_core())

    async def aclear(self) -> None:
        """Async form of :meth:`clear`."""
        await self._adrive(self._clear_core())

    def _clear_core(self) -> _Core[None]:
        yield _Delete()
        self._core.reset()

    # -- building -----------------------------------------------------------------------

    def build_context(self) -> Context:
        """Build the context to send now; may summarize and commit a checkpoint.

        Raises:
            BudgetError: the strategy cannot fit the budget (for example the system prompt
                alone is over it).
            PairingError: the stored history has a broken tool call/result pairing.
            StoreError: the store failed; nothing stored was changed.
        """
        return self._drive(self._core.build_and_count())

    async def abuild_context(self) -> Context:
        """Async form of :meth:`build_context`; gives the same context."""
        return await self._adrive(self._core.build_and_count())

    def plan(self) -> ContextPlan:
        """What :meth:`build_context` would do now, without summarizing or writing."""
        return self._drive(self._core.plan())

    async def aplan(self) -> ContextPlan:
        """Async form of :meth:`plan`."""
        return await self._adrive(self._core.plan())

    def count_history(self) -> int:
        """Tokens of the whole stored history (counted once, then kept up to date)."""
        return self._drive(self._core.count_history())

    async def acount_history(self) -> int:
        """Async form of :meth:`count_history`; lets stats of async-only stores resolve."""
        return await self._adrive(self._core.count_history())

    def _resolve_totals(self, ledger: _Ledger) -> None:
        if not isinstance(self._store, Store):
            raise StoreError(
                "this store is async-only; call `await memory.acount_history()` before "
                "reading total_tokens, tokens_saved or compression_ratio"
            )
        self._drive(self._core.count_history(ledger))

    # -- closing ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store if this memory opened it from a URL."""
        if self._owns_store:
            self._owns_store = False
            if isinstance(self._store, Store):
                self._store.close()

    async def aclose(self) -> None:
        """Async form of :meth:`close`."""
        if self._owns_store:
            self._owns_store = False
            if isinstance(self._store, AsyncStore):
                await self._store.aclose()
            else:
                self._store.close()

    def __enter__(self) -> ConversationMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ConversationMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- drivers ------------------------------------------------------------------------

    def _drive(self, core: _Core[_T]) -> _T:
        """Run a core generator against the sync store."""
        store = self._store
        if not isinstance(store, Store):
            raise StoreError(f"{type(store).__name__} is async-only; use the a-prefixed methods")
        cid = self.conversation_id
        with ExitStack() as stack:
            value: Any = None
            error: BaseException | None = None
            while True:
                try:
                    op = core.send(value) if error is None else core.throw(error)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                value, error = None, None
                try:
                    if isinstance(op, _Summarize):
                        value = _call_sync(op.call)
                    elif isinstance(op, _Lock):
                        value = stack.enter_context(store.compaction_lock(cid, ttl=op.ttl))
                    else:
                        value = _sync_op(store, cid, op)
                except ContextfoldError as exc:
                    error = exc
                except Exception as exc:
                    error = _store_error(store, cid, op, exc)

    async def _adrive(self, core: _Core[_T]) -> _T:
        """Run a core generator against the async store (or a sync one, inline)."""
        store = self._store
        is_async = isinstance(store, AsyncStore)
        cid = self.conversation_id
        async with AsyncExitStack() as stack:
            value: Any = None
            error: BaseException | None = None
            while True:
                try:
                    op = core.send(value) if error is None else core.throw(error)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                value, error = None, None
                try:
                    if isinstance(op, _Summarize):
                        value = await _call_async(op.call)
                    elif isinstance(op, _Lock):
                        if is_async:
                            cm = store.acompaction_lock(cid, ttl=op.ttl)
                            value = await stack.enter_async_context(cm)
                        else:
                            value = stack.enter_context(store.compaction_lock(cid, ttl=op.ttl))
                    elif is_async:
                        value = await _async_op(store, cid, op)
                    else:
                        value = _sync_op(store, cid, op)
                except ContextfoldError as exc:
                    error = exc
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    error = _store_error(store, cid, op, exc)


def _store_error(store: Any, cid: str, op: _Op, exc: Exception) -> StoreError:
    err = StoreError(
        f"{type(store).__name__} failed to {op.what} for conversation {cid!r}: "
        f"{type(exc).__name__}: {exc}"
    )
    err.__cause__ = exc
    return err


def _sync_op(store: Store, cid: str, op: _Op) -> Any:
    if isinstance(op, _LastSeq):
        return store.last_seq(cid)
    if isinstance(op, _Read):
        return store.read(cid, after_seq=op.after_seq, limit=op.limit)
    if isinstance(op, _Latest):
        return store.latest_checkpoint(cid)
    if isinstance(op, _Commit):
        return store.append_checkpoint(cid, op.record, expected_previous=op.expected_previous)
    if isinstance(op, _Append):
        return store.append(cid, op.messages)
    if isinstance(op, _Delete):
        return store.delete(cid)
    raise AssertionError(f"unhandled store operation {op!r}")  # pragma: no cover


async def _async_op(store: AsyncStore, cid: str, op: _Op) -> Any:
    if isinstance(op, _LastSeq):
        return await store.alast_seq(cid)
    if isinstance(op, _Read):
        return await store.aread(cid, after_seq=op.after_seq, limit=op.limit)
    if isinstance(op, _Latest):
        return await store.alatest_checkpoint(cid)
    if isinstance(op, _Commit):
        return await store.aappend_checkpoint(
            cid, op.record, expected_previous=op.expected_previous
        )
    if isinstance(op, _Append):
        return await store.aappend(cid, op.messages)
    if isinstance(op, _Delete):
        return await store.adelete(cid)
    raise AssertionError(f"unhandled store operation {op!r}")  # pragma: no cover
