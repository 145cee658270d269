"""The strategy contract: the protocol, its result, its per-conversation state, its abilities.

Strategies are sans-I/O planners. ``plan()`` is a generator: when it needs a summary it
yields a :class:`SummaryCall` and receives the :class:`SummarizationResult`; when done it
returns a :class:`StrategyResult`. The drivers in :mod:`contextfold.strategies.run` run it
synchronously, asynchronously or without calling any summarizer, so the logic is written
once (httpx ``Auth.auth_flow`` is the model).

A strategy object is immutable configuration: one instance may serve every conversation of a
server, from threads and tasks at once. What varies per conversation (how many compactions
failed in a row, for the loop guard) is a :class:`StrategyState` the caller passes to
``plan()`` and gets back on :attr:`StrategyResult.state`;
:class:`~contextfold.ConversationMemory` keeps it for its conversation.

Abilities only some strategies have are small protocols checked with a ``TypeGuard``
(:func:`accepts_checkpoints`, :func:`bounded_window`, :func:`counts_tools`), so callers never
test for a concrete strategy class.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Protocol,
    TypeAlias,
    TypeGuard,
    TypeVar,
    cast,
    runtime_checkable,
)

from contextfold.checkpoints import CheckpointRecord
from contextfold.messages import Message
from contextfold.summarizers.base import (
    AsyncSummarizer,
    Summarizer,
    SummaryRequest,
)
from contextfold.tokens.base import TokenCounter
from contextfold.usage import Usage

if TYPE_CHECKING:
    from contextfold.search._embed import Embedder

__all__ = [
    "AcceptsCheckpoint",
    "BoundedWindow",
    "CountsTools",
    "PlanGenerator",
    "PlanOp",
    "SearchCall",
    "SearchHit",
    "Strategy",
    "StrategyResult",
    "StrategyState",
    "SummaryCall",
    "WindowAnchor",
    "accepts_checkpoints",
    "bounded_window",
    "checkpoint_applies",
    "counts_tools",
    "tools_of",
    "with_tools",
]


@dataclass(frozen=True, slots=True)
class SummaryCall:
    """A request for the driver: run ``summarizer`` on ``request``."""

    summarizer: Summarizer | AsyncSummarizer
    request: SummaryRequest


@dataclass(frozen=True, slots=True)
class WindowAnchor:
    """Where the previous context's window began, so the next one can start the same way.

    Attributes:
        start_id: id of the first message of the kept tail.
        request_id: id of the user request kept apart from the tail (the newest turn did
            not fit whole), or None.
    """

    start_id: str
    request_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out: dict[str, Any] = {"start_id": self.start_id}
        if self.request_id is not None:
            out["request_id"] = self.request_id
        return out

    @classmethod
    def from_dict(cls, data: object) -> WindowAnchor | None:
        """Inverse of :meth:`to_dict`; None for anything malformed (the window is refitted)."""
        if not isinstance(data, Mapping):
            return None
        start, request = data.get("start_id"), data.get("request_id")
        if not isinstance(start, str) or not (request is None or isinstance(request, str)):
            return None
        return cls(start, request)


@dataclass(frozen=True, slots=True)
class SearchCall:
    """A request for the driver: messages older than ``before`` that match ``query``.

    :class:`~contextfold.Recall` yields it to find what the inner strategy did not send. The
    driver that holds the whole history (:func:`~contextfold.strategies.run`) answers with a
    BM25 search over it; :class:`~contextfold.ConversationMemory`, which may hold only a
    bounded tail, asks its store's search, so the older log is searched without being read.
    The answer is a tuple of :class:`SearchHit`, best first; the leading system prefix is
    never searched.

    Attributes:
        query: the text to search for.
        before: an index into the messages the plan was given: only messages stored before
            that one are searched (its length: everything given, and what came before).
        limit: how many hits at most.
        around: how many neighbouring messages each side of a hit to return with it.
        spread: how much of a match's rank a message next to it inherits (0: none). An
            answer often shares no word with the question ("What did she paint?" is
            answered by "A lake at sunrise!" after "What have you been painting?"), so
            with a spread the driver scores each message by its own rank among the
            matches plus ``spread`` times its better neighbour's
            (:func:`contextfold.search.spread_ranks`).
        embedder: with one, the driver also ranks the messages by meaning (the ``limit``
            closest to the query) and fuses both rankings before the spread
            (:func:`contextfold.search.fuse_ranks`); it raises
            :class:`~contextfold.search.EmbedderError` when the embedder fails.
        semantic: the weight of the semantic ranks in that fusion (the keyword ranks
            weigh 1).
    """

    query: str
    before: int
    limit: int
    around: int = 3
    spread: float = 0.0
    embedder: Embedder | None = None
    semantic: float = 0.5


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One answer to a :class:`SearchCall`: a matching message with its neighbours.

    Positions are the driver's: an index into the history given to
    :func:`~contextfold.strategies.run`, or the store's sequence number under a memory.

    Attributes:
        position: where the matching message is.
        start: where ``excerpt[0]`` is; the excerpt is gap-free, so the match is
            ``excerpt[position - start]``.
        excerpt: the match with up to ``around`` neighbours each side, none of them from
            the system prefix or from ``before`` on.
    """

    position: int
    start: int
    excerpt: tuple[Message, ...]

    @property
    def message(self) -> Message:
        """The matching message itself."""
        return self.excerpt[self.position - self.start]


@dataclass(frozen=True, slots=True)
class StrategyState:
    """What one conversation carries from a build to the next.

    Strategies hold no per-conversation state themselves; a build takes the state the
    previous build of the same conversation returned (:attr:`StrategyResult.state`) and
    returns the next one. Start a conversation with ``StrategyState()`` (or ``None``).

    Attributes:
        failed_compactions: compactions in a row that failed to get under budget; once it
            reaches a strategy's ``max_failed_compactions`` the summarizer is not called
            again until a build needs no compaction or one succeeds.
        stages: the states of a :class:`~contextfold.strategies.Pipeline`'s stages, in order.
        window: where the previous context's window began; a cache-stable strategy keeps
            starting there (only appending) until the context would exceed its budget.
        pruned_through: id of the newest message whose tool outputs a
            :class:`~contextfold.strategies.PruneToolOutputs` cleared; outputs up to it stay
            cleared, newer ones are cleared in one batch when it pays.
        cache_cold: set by the caller for one build: the provider's prompt cache is known
            to have expired, so compacting now rewrites nothing that was cached and a
            strategy may compact ahead of need (down to its lower mark). Never saved.
    """

    failed_compactions: int = 0
    stages: tuple[StrategyState, ...] = ()
    window: WindowAnchor | None = None
    pruned_through: str | None = None
    cache_cold: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (defaults left out)."""
        out: dict[str, Any] = {}
        if self.failed_compactions:
            out["failed_compactions"] = self.failed_compactions
        if self.stages:
            out["stages"] = [stage.to_dict() for stage in self.stages]
        if self.window is not None:
            out["window"] = self.window.to_dict()
        if self.pruned_through is not None:
            out["pruned_through"] = self.pruned_through
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StrategyState:
        """Inverse of :meth:`to_dict`; unknown keys are ignored."""
        failed = data.get("failed_compactions", 0)
        stages = data.get("stages", ())
        if isinstance(failed, bool) or not isinstance(failed, int) or failed < 0:
            failed = 0
        if not isinstance(stages, (list, tuple)):
            stages = ()
        return cls(
            failed_compactions=failed,
            stages=tuple(cls.from_dict(s) for s in stages if isinstance(s, Mapping)),
            window=WindowAnchor.from_dict(data.get("window")),
            pruned_through=through
            if isinstance(through := data.get("pruned_through"), str)
            else None,
        )

    def stage(self, index: int) -> StrategyState:
        """The state of a pipeline's stage ``index`` (a fresh one when none is known)."""
        return self.stages[index] if index < len(self.stages) else _FRESH


_FRESH = StrategyState()


@dataclass(frozen=True)
class StrategyResult:
    """The context a strategy built, and an account of how.

    What was dropped or summarized is recorded as index ranges into ``history`` (the input
    list), so building a result costs nothing per message that was left out: a sliding
    window over a million messages stays as cheap as over a thousand. The id views and
    ``tokens_before`` are computed on first access.

    Attributes:
        messages: the context to send.
        strategy: the strategy's name.
        tokens: tokens of ``messages`` under the counter used.
        history: the input messages (not copied).
        counter: the counter used, for ``tokens_before``.
        kept: ids of input messages kept verbatim.
        dropped_ranges: ``(start, end)`` index ranges of ``history`` left out without a
            summary.
        summarized_ranges: index ranges of ``history`` covered by a summary (new or reused).
        pruned: ids of input messages sent in a shortened form (tool outputs cleared).
        checkpoint: a new checkpoint the caller should persist, if one was made.
        reused_checkpoint: the prior checkpoint the context was built on, if any.
        fallback: why the strategy fell back to the sliding window, when it did.
        failure_code: the summarizer failure code behind ``fallback``.
        usage: what the summarizer calls of this run cost.
        summary_calls: how many summarizer calls were made.
        notes: human-readable reasons, for plans and logs.
        state: the conversation's state for its next build (see :class:`StrategyState`).
        limit_reached: the configured limit (``Hybrid``'s ``max_chunks``) that stopped the
            strategy before it had summarized everything over budget, and what it left out
            without a summary; None when no limit stopped it. Kept apart from ``notes`` so
            stats and tools can report it without parsing prose.
        recalled: positions of the earlier messages :class:`~contextfold.Recall` put back as
            excerpts (indexes into ``history``, or store sequence numbers under a memory).
            They stay counted in ``dropped_ranges`` / ``summarized_ranges``: the excerpts
            are quotations next to the newest message, not the messages themselves.
    """

    messages: tuple[Message, ...]
    strategy: str
    tokens: int
    history: Sequence[Message] = field(default=(), repr=False, compare=False)
    counter: TokenCounter | None = field(default=None, repr=False, compare=False)
    kept: tuple[str, ...] = ()
    dropped_ranges: tuple[tuple[int, int], ...] = ()
    summarized_ranges: tuple[tuple[int, int], ...] = ()
    pruned: tuple[str, ...] = ()
    checkpoint: CheckpointRecord | None = None
    reused_checkpoint: CheckpointRecord | None = None
    fallback: str | None = None
    failure_code: str | None = None
    usage: Usage = field(default_factory=Usage)
    summary_calls: int = 0
    notes: tuple[str, ...] = ()
    state: StrategyState = _FRESH
    limit_reached: str | None = None
    recalled: tuple[int, ...] = ()
    known_tokens_before: int | None = field(default=None, repr=False, compare=False)
    _cache: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def tokens_before(self) -> int:
        """Tokens of the full input history (computed once, on first access)."""
        if self.known_tokens_before is not None:
            return self.known_tokens_before
        cached = self._cache.get("tokens_before")
        if cached is None:
            if self.counter is None:
                from contextfold.tokens.approx import ApproxCounter

                cached = ApproxCounter().count_messages(self.history)
            else:
                cached = self.counter.count_messages(self.history)
            self._cache["tokens_before"] = cached
        return cached

    @property
    def dropped(self) -> tuple[str, ...]:
        """Ids of input messages left out without a summary."""
        return tuple(self.history[i].id for a, b in self.dropped_ranges for i in range(a, b))

    @property
    def summarized(self) -> tuple[str, ...]:
        """Ids of input messages covered by a summary."""
        return tuple(self.history[i].id for a, b in self.summarized_ranges for i in range(a, b))

    @property
    def dropped_count(self) -> int:
        """How many input messages were left out without a summary."""
        return sum(b - a for a, b in self.dropped_ranges)

    @property
    def summarized_count(self) -> int:
        """How many input messages a summary covers."""
        return sum(b - a for a, b in self.summarized_ranges)

    @property
    def is_summarized(self) -> bool:
        """True when the context carries a summary."""
        return bool(self.summarized_ranges)

    @property
    def tokens_saved(self) -> int:
        """Tokens not sent compared with the full history."""
        return max(0, self.tokens_before - self.tokens)


#: What a plan may yield: a summary call, or (from :class:`~contextfold.Recall`) a search.
PlanOp: TypeAlias = "SummaryCall | SearchCall"
#: A plan: yields :data:`PlanOp` requests, is sent their answers, returns the result.
PlanGenerator: TypeAlias = Generator[PlanOp, Any, StrategyResult]


@runtime_checkable
class Strategy(Protocol):
    """Builds a context from a history; see the module docstring for the protocol."""

    @property
    def name(self) -> str:
        """A short stable name (``"sliding"``, ``"hybrid"`` ...), used in stats and records."""
        ...

    def plan(
        self,
        messages: Sequence[Message],
        /,
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None = None,
        state: StrategyState | None = None,
    ) -> PlanGenerator:
        """Yield summary calls as needed and return the result. Must not mutate input.

        ``state`` is what the previous build of the same conversation returned in
        :attr:`StrategyResult.state` (None for a fresh conversation).
        """
        ...


@runtime_checkable
class AcceptsCheckpoint(Protocol):
    """A strategy that decides which stored checkpoints it builds on.

    Without this ability a checkpoint applies when its ``strategy`` is the strategy's name.
    """

    def accepts_checkpoint(self, checkpoint: CheckpointRecord, /) -> bool:
        """Whether ``checkpoint`` is one this strategy continues from."""
        ...


@runtime_checkable
class BoundedWindow(Protocol):
    """A strategy that only ever sends the newest messages, up to a token budget.

    A caller holding a long stored history may then read only the newest messages that
    could fit, instead of the whole log.
    """

    def window_budget(self, counter: TokenCounter, /) -> int:
        """Tokens of messages (after the system prefix) a build can send at most."""
        ...


_C = TypeVar("_C", bound="CountsTools")


@runtime_checkable
class CountsTools(Protocol):
    """A strategy that counts the request's tool schemas against its budget."""

    @property
    def tools(self) -> tuple[Mapping[str, Any], ...]:
        """The tool schemas it counts (empty when it has none of its own)."""
        ...

    def tool_tokens(self, counter: TokenCounter, /) -> int:
        """Tokens the tool schemas cost under ``counter``."""
        ...

    def with_tools(self: _C, tools: Sequence[Mapping[str, Any]], /) -> _C:
        """The same configuration counting ``tools``, unless it has schemas of its own."""
        ...


def accepts_checkpoints(strategy: object) -> TypeGuard[AcceptsCheckpoint]:
    """True when ``strategy`` chooses its own checkpoints (:class:`AcceptsCheckpoint`)."""
    return isinstance(strategy, AcceptsCheckpoint)


def bounded_window(strategy: object) -> TypeGuard[BoundedWindow]:
    """True when ``strategy`` only sends a budgeted window (:class:`BoundedWindow`)."""
    return isinstance(strategy, BoundedWindow)


def counts_tools(strategy: object) -> TypeGuard[CountsTools]:
    """True when ``strategy`` counts tool schemas against its budget (:class:`CountsTools`)."""
    return isinstance(strategy, CountsTools)


def with_tools(strategy: Strategy, tools: Sequence[Mapping[str, Any]]) -> Strategy:
    """``strategy`` counting ``tools`` against its budget, when it counts tools at all.

    A strategy with schemas of its own keeps them; one that does not count tools is returned
    as it is.
    """
    if tools and counts_tools(strategy):
        return cast(Strategy, strategy.with_tools(tools))
    return strategy


def tools_of(strategy: Strategy) -> tuple[Mapping[str, Any], ...]:
    """The tool schemas ``strategy`` counts (none when it does not count tools)."""
    return strategy.tools if counts_tools(strategy) else ()


def checkpoint_applies(strategy: Strategy, checkpoint: CheckpointRecord) -> bool:
    """Whether ``strategy`` builds on ``checkpoint`` (its own rule, or the name rule)."""
    if accepts_checkpoints(strategy):
        return strategy.accepts_checkpoint(checkpoint)
    return checkpoint.strategy == strategy.name
