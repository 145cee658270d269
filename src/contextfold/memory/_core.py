"""The memory's sans-I/O core: what to read, what to run, what to commit.

Every store access is a yielded operation (see :mod:`contextfold.memory._ops`), so the
synchronous and asynchronous methods of :class:`~contextfold.memory.ConversationMemory`
share this one implementation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from contextfold._drive import relay
from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConflictError, StoreError
from contextfold.memory._bill import CacheFigures, CacheTracker
from contextfold.memory._context import Context, ContextPlan
from contextfold.memory._ops import (
    Commit,
    CoreGen,
    LastSeq,
    Latest,
    LoadState,
    Lock,
    SaveState,
)
from contextfold.memory._reader import History
from contextfold.memory._search import Searcher
from contextfold.memory._stats import BuildRecord, Ledger, MemoryStats, with_record
from contextfold.memory._totals import Totals
from contextfold.messages import Message
from contextfold.observability import now_ns, record_build
from contextfold.pricing import ModelPrices
from contextfold.search import VectorIndex
from contextfold.strategies.base import (
    PlanOp,
    SearchCall,
    Strategy,
    StrategyResult,
    StrategyState,
    SummaryCall,
    counts_tools,
)
from contextfold.summarizers.base import SummarizationResult
from contextfold.tokens.base import TokenCounter, tally_name
from contextfold.usage import Usage

_LOCK_BUSY = (
    "another process holds the compaction lock for this conversation; built without compacting"
)
#: How a note starts when the store could not take the lock (read-only or full database).
_LOCK_FAILED = "the store could not take the compaction lock"


class _Restart(Exception):
    """Raised into a plan when a newer checkpoint was stored while it ran."""

    def __init__(self, latest: CheckpointRecord | None) -> None:
        super().__init__("a newer checkpoint was stored")
        self.latest = latest


@dataclass
class _LockState:
    """The compaction lock, as one build sees it."""

    taken: bool | None = None  # None: not asked for yet
    busy: bool = False  # a summary call was refused: the lock is held elsewhere or failed
    notes: list[str] = field(default_factory=list)
    reason: str = _LOCK_BUSY  # why compaction was skipped

    def take(self, ttl: float) -> CoreGen[None]:
        try:
            self.taken = bool((yield Lock(ttl)))
        except StoreError as exc:
            # A read-only or full database cannot take the lock: build the plain window, as
            # when a summarizer fails, and say why in the stats.
            self.taken = False
            self.reason = f"{_LOCK_FAILED} ({exc}); built without compacting"
        if not self.taken:
            self.notes.append(self.reason)


@dataclass
class _Built:
    context: Context
    result: StrategyResult
    history: History


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


class MemoryCore(Searcher, Totals):
    """The state and logic of a memory, with no I/O: every store access is a yielded op."""

    def __init__(
        self,
        *,
        strategy: Strategy,
        counter: TokenCounter,
        tools: tuple[Mapping[str, Any], ...],
        lock_ttl: float,
        prices: ModelPrices | None = None,
    ) -> None:
        self.strategy = strategy
        self.prices = prices
        self.counter = counter
        self.tally_as = tally_name(counter)
        self.tools = tools
        self.lock_ttl = lock_ttl
        # What the strategy counts against its budget, when it counts tools itself.
        if counts_tools(strategy):
            self.tools_tokens = strategy.tool_tokens(counter)
        else:
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
        self.tally_read = False
        self.ledger = Ledger()
        self.last_stats: MemoryStats | None = None
        # This conversation's strategy state (failure streaks, where the window begins):
        # the strategy holds none. Read from the store at the first build, saved on change.
        self.state = StrategyState()
        self.state_loaded = False
        self.cache = CacheTracker(self.prices)
        # The vectors of the log for a Recall with an embedder, filled as searches need.
        self.vectors: VectorIndex | None = None

    def note_appended(self, seqs: Sequence[int], messages: Sequence[Message]) -> None:
        """Cache messages this memory appended, when they extend what is cached.

        Appending is also how the running total starts for free: a first seq of 1 means the
        log was empty, so this memory has seen every message and counts each one once.
        """
        seen = self._seen
        pairs = zip(seqs, messages, strict=True)
        if any(seq <= seen and self._cached(seq) != m for seq, m in pairs):
            # The append landed at a seq this memory has seen, holding another message than
            # the one it cached there: the log was deleted under it (and maybe written again),
            # so nothing cached belongs to it any more. (A retried append acknowledged at
            # the seq of the same message, already cached, is no sign of that.)
            self.reset()
        count = self.counter.count_message
        if self.total is None and seqs and seqs[0] == 1:
            self.total, self.total_upto = 0, 0
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

    # -- building -----------------------------------------------------------------------

    def build(self, *, dry: bool) -> CoreGen[_Built]:
        """Build (or, with ``dry``, plan) a context. See the module docstring."""
        last: int = yield LastSeq()
        self._check_not_shrunk(last)
        yield from self._check_same_log(last)
        yield from self._load_prefix(last)
        stored: CheckpointRecord | None = yield Latest()
        if not self.state_loaded:
            saved: dict[str, Any] | None = yield LoadState()
            if saved is not None:
                self.state = StrategyState.from_dict(saved)
            self.state_loaded = True
        before = self.state
        lock = _LockState()
        retried = False
        wasted = Usage()  # the summary calls of an attempt whose commit conflicted
        while True:
            history = yield from self._load_history(last, stored)
            if dry:
                result = yield from self.dry_plan(history, self.state, lock.notes)
                break
            plan = self.strategy.plan(
                history.messages,
                counter=self.counter,
                checkpoint=history.checkpoint,
                state=replace(self.state, cache_cold=self.cache.cold()),
            )
            try:
                result = yield from relay(plan, partial(self._answer, lock, stored, history))
            except _Restart as restart:  # someone compacted while we planned: build on theirs
                stored = restart.latest
                continue
            if not lock.busy:
                # A compaction skipped because another process holds the lock says nothing
                # about whether summarizing works: the failure streak stays as it was.
                self.state = result.state
            if result.checkpoint is None:
                break
            try:
                result = yield from self._commit(result, history, stored, lock)
            except ConflictError:
                if retried:
                    raise
                retried = True
                wasted = wasted + result.usage  # they were made, and billed, all the same
                stored = yield Latest()
                lock.notes.append("checkpoint commit conflicted; rebuilt on the newest one")
                continue
            break
        if wasted.total_tokens:
            result = _replace_result(result, usage=wasted + result.usage)
        if self.state != before:
            yield from self._save_state(lock.notes)
        return self._finish(last, history, result, lock.notes, dry=dry)

    def _save_state(self, notes: list[str]) -> CoreGen[None]:
        """Save the changed state; a failure costs only cache stability after a restart."""
        try:
            yield SaveState(self.state.to_dict())
        except StoreError as exc:
            notes.append(f"the strategy state was not saved ({exc})")

    def _commit(
        self,
        result: StrategyResult,
        history: History,
        stored: CheckpointRecord | None,
        lock: _LockState,
    ) -> CoreGen[StrategyResult]:
        """Store the result's new checkpoint under the compaction lock (single-flight).

        Raises:
            ConflictError: another process stored a checkpoint since ``stored``.
        """
        new = result.checkpoint
        assert new is not None
        if lock.taken is None:
            yield from lock.take(self.lock_ttl)
        if not lock.taken:
            return _without_new_checkpoint(result)
        record = self._sealed(new, history, stored, result)
        if record is None:
            lock.notes.append(
                f"the new checkpoint covers {new.last_covered_id!r}, which the strategy was "
                "not given or which several of its messages carry; it was not stored"
            )
            return _without_new_checkpoint(result)
        try:
            committed: CheckpointRecord = yield Commit(record, _cid(stored))
        except ConflictError:
            raise
        except StoreError as exc:  # a full or read-only database: the context still stands
            lock.notes.append(f"the new checkpoint could not be stored ({exc}); not kept")
            return _without_new_checkpoint(result)
        return _with_checkpoint(result, committed)

    def _answer(
        self, lock: _LockState, stored: CheckpointRecord | None, history: History, op: PlanOp
    ) -> CoreGen[Any]:
        """Answer a plan's request: a search through the store, or a summary call."""
        if isinstance(op, SearchCall):
            return (yield from self.answer_search(history, op, lock.notes))
        return (yield from self._summarize(lock, stored, op))

    def _summarize(
        self, lock: _LockState, stored: CheckpointRecord | None, call: SummaryCall
    ) -> CoreGen[SummarizationResult]:
        """Answer a strategy's summary call: take the compaction lock first, once per build.

        Raises:
            _Restart: the lock was taken and a newer checkpoint was stored meanwhile.
        """
        if lock.taken is None:
            yield from lock.take(self.lock_ttl)
            if lock.taken:
                latest: CheckpointRecord | None = yield Latest()
                if _cid(latest) != _cid(stored):
                    raise _Restart(latest)
        if not lock.taken:
            lock.busy = True
            return SummarizationResult.failure(lock.reason, "error")
        answer: SummarizationResult = yield call
        return answer

    @property
    def _seen(self) -> int:
        """The newest seq this memory has seen: cached, or counted into its total."""
        return max(len(self.prefix), self.seg_end if self.seg else 0, self.total_upto)

    def _check_not_shrunk(self, last: int) -> None:
        """Forget the cache when the log is shorter than what was seen (cleared elsewhere)."""
        if last < self._seen:
            self.reset()

    def _sealed(
        self,
        record: CheckpointRecord,
        history: History,
        stored: CheckpointRecord | None,
        result: StrategyResult,
    ) -> CheckpointRecord | None:
        """The strategy's checkpoint with the store seq of what it covers.

        The seq, not the id, is what later builds read from, so it must be the message the
        summary really ends at (see :func:`_covered_index`); None when that is unknown.
        """
        seq: int | None = None
        at = _covered_index(record.last_covered_id, history.messages, result)
        if at is not None:
            seq = history.seqs[at]
        elif (
            stored is not None
            and stored.last_covered_id == record.last_covered_id
            and not any(m.id == record.last_covered_id for m in history.messages)
        ):
            seq = stored.last_covered_seq  # the strategy kept the stored coverage
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
        history: History,
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
        skipped = [n for n in memory_notes if n == _LOCK_BUSY or n.startswith(_LOCK_FAILED)]
        if fallback_reason is None and skipped and result.summary_calls:
            fallback_reason = skipped[0]
        usage = result.usage
        known = self._free_total(last, history.seqs, history.messages)
        record = BuildRecord(last, result.tokens, 0 if dry else usage.total_tokens, known)
        # A build is added to the lifetime figures and the cache simulation only once its
        # context is handed back (see :meth:`commit`): one cancelled, or failing to bring
        # the total up to date, was never sent.
        ledger = self.ledger.branch(record) if dry else self.ledger
        stats = MemoryStats(
            current_tokens=result.tokens,
            message_count=last,
            context_message_count=len(result.messages),
            is_summarized=summarized,
            summarizer_tokens=record.summarizer,
            fallback=fallback_reason is not None,
            fallback_reason=fallback_reason,
            strategy=result.strategy,
            checkpoint_id=used.id if used is not None else None,
            compacted=result.checkpoint is not None and not dry,
            dropped_count=result.dropped_count + (unread - covered_unread),
            summarized_count=result.summarized_count + covered_unread,
            tools_tokens=self.tools_tokens,
            notes=(*result.notes, *memory_notes, *_unread_note(unread - covered_unread)),
            recalled=result.recalled,
            total_tokens=record.total,
            lifetime_tokens_saved=record.lifetime,
            limit_reached=result.limit_reached,
            _ledger=ledger,
            _record=record,
        )
        if not dry:
            self._evict(used)
        context = Context(tuple(result.messages), stats, used, self.tools)
        return _Built(context, result, history)

    def _evict(self, used: CheckpointRecord | None) -> None:
        """Drop cached messages a later build cannot need."""
        if used is not None and used.last_covered_seq is not None and self.seg:
            keep_from = used.last_covered_seq  # the next build reads from the covered message
            if keep_from > self.seg_start:
                cut = min(len(self.seg), keep_from - self.seg_start)
                self.seg = self.seg[cut:]
                self.seg_start += cut

    def post_build(self, built: _Built) -> CoreGen[None]:
        """Bring the running total up to date when it is being tracked."""
        record = built.context.stats._record
        assert record is not None
        total = yield from self._update_total(record.last_seq, record.total)
        if record.total is None and total is not None:
            record.total = total

    def commit(self, built: _Built) -> None:
        """Count the build as sent: its savings, its bill under the cache simulation.

        Called once the context is about to be handed back (after :meth:`post_build`), so
        the full history is priced with the total known by then. The stats are plain
        values: the context gets a new stats object carrying the figures.
        """
        stats = built.context.stats
        record = stats._record
        assert record is not None
        self.ledger.add(record)
        figures = self.cache.record(
            built.result.messages,
            self.counter,
            extra_tokens=self.tools_tokens,
            total_tokens=record.total,
            summarizer_usage=built.result.usage,
        )
        stats = replace(with_record(stats), **_cache_fields(figures))
        built.context = replace(built.context, stats=stats)
        self.last_stats = stats

    def plan(self) -> CoreGen[ContextPlan]:
        built = yield from self.build(dry=True)
        result, history = built.result, built.history
        kept_ids = set(result.kept)
        # By position where the ranges say it: a repeated id must not mark a summarized or
        # dropped message as kept.
        left_out = {
            i for a, b in (*result.dropped_ranges, *result.summarized_ranges) for i in range(a, b)
        }
        kept_idx = [
            i for i, m in enumerate(history.messages) if m.id in kept_ids and i not in left_out
        ]
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

    def build_and_count(self) -> CoreGen[Context]:
        started = now_ns()
        built = yield from self.build(dry=False)
        yield from self.post_build(built)
        self.commit(built)
        stats = built.context.stats
        record_build(built.result, started_ns=started, origin="memory", stats=stats)
        return built.context


def _covered_index(
    covered_id: str, messages: Sequence[Message], result: StrategyResult
) -> int | None:
    """Index of the message a new checkpoint ends at, or None when it cannot be told.

    Ids are meant to be unique, but a history loaded turn by turn can repeat one. The end of
    the strategy's newest summarized range says which copy the summary ends at; without it,
    a single copy is unambiguous and several are not.
    """
    ends = [b for a, b in result.summarized_ranges if b > a]
    if ends and messages[max(ends) - 1].id == covered_id:
        return max(ends) - 1
    found = [i for i, m in enumerate(messages) if m.id == covered_id]
    return found[0] if len(found) == 1 else None


def _cid(ckpt: CheckpointRecord | None) -> str | None:
    return None if ckpt is None else ckpt.id


def _replace_result(result: StrategyResult, **changes: Any) -> StrategyResult:
    return replace(result, **changes)


def _without_new_checkpoint(result: StrategyResult) -> StrategyResult:
    return _replace_result(result, checkpoint=None)


def _with_checkpoint(result: StrategyResult, committed: CheckpointRecord) -> StrategyResult:
    return _replace_result(result, checkpoint=committed)


def _cache_fields(figures: CacheFigures) -> dict[str, Any]:
    """The :class:`MemoryStats` fields of one build's cache figures."""
    return {
        "stable_prefix_tokens": figures.stable_prefix_tokens,
        "estimated_cost_usd": figures.estimated_cost_usd,
        "full_history_cost_usd": figures.full_history_cost_usd,
        "lifetime_cost_usd": figures.lifetime_cost_usd,
        "lifetime_full_history_cost_usd": figures.lifetime_full_history_cost_usd,
    }


def _unread_note(count: int) -> tuple[str, ...]:
    """The note that squares the strategy's own drop count with ``dropped_count``: the
    memory read only a window, and the older messages it did not read are left out too."""
    if count <= 0:
        return ()
    return (f"{count} older stored messages, not read (outside the window), are left out too",)
