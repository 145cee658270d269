"""Recall: put back what the newest message asks about, from the part of the history not sent.

No strategy looks at what the user is asking: a sliding window keeps what is recent and a
summary keeps what a summarizer thought mattered. :class:`Recall` wraps any budgeted strategy
and takes a share of its budget for excerpts of the older history that match the newest user
message (or a query the caller gives):

1. the inner strategy plans inside the rest of the budget (its reserve grows by the share);
2. the plan yields a :class:`~contextfold.strategies.base.SearchCall` for what was not sent,
   answered by the driver: :func:`~contextfold.strategies.run` searches the history it holds
   with BM25, a :class:`~contextfold.ConversationMemory` asks its store, so a memory that
   reads only a bounded tail still searches the whole log; each match lends part of its
   rank to its neighbours, so the reply to a matching question ranks too;
3. the hits become excerpts (:mod:`contextfold.strategies._excerpts`): whole units only, none
   the summary or the context already holds, the request before an answer when there is
   room, each line with the message's position and time, framed and escaped like a summary;
4. they go right before the newest request, after the stable prefix, so the cached prefix of
   a provider's prompt cache survives.

A Recall is immutable configuration like every strategy: it keeps nothing per request, so one
object serves every conversation. It reports the inner strategy's name, builds on the same
checkpoints and only reads a bounded tail under a memory when the inner strategy does.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConfigError
from contextfold.framing import SummaryPlacement, message_texts
from contextfold.messages import Message
from contextfold.search import Embedder, EmbedderError, searchable_text, tokenize
from contextfold.search._embed import require_numpy
from contextfold.strategies._config import FrozenConfig, ToolBudget, check_option
from contextfold.strategies._excerpts import (
    RECALL_PLACEMENT,
    Choice,
    choose,
    insert,
    line,
    normalized,
    render,
    spans_text,
)
from contextfold.strategies.base import (
    PlanGenerator,
    SearchCall,
    SearchHit,
    Strategy,
    StrategyResult,
    StrategyState,
    bounded_window,
    checkpoint_applies,
    counts_tools,
    tools_of,
    with_tools,
)
from contextfold.tokens.base import TokenCounter
from contextfold.turns import newest_request, prefix_length

__all__ = ["Query", "Recall"]

#: A fixed query, or a function of the history giving one (None: nothing to recall).
Query = str | Callable[[Sequence[Message]], str | None] | None
_QUERY_CHARS = 2000  # a longer message is searched by its start
_FIT_TRIES = 8  # choices made, each in less room, before giving up on the excerpts
_WORD = re.compile(r"[^\W_]+")


def _reserved(strategy: Strategy, room: int) -> Strategy:
    """``strategy`` keeping ``room`` more tokens free: the room the excerpts take."""
    if not isinstance(strategy, ToolBudget):
        raise ConfigError(
            f"Recall needs a strategy with a token budget and a reserve, got "
            f"{type(strategy).__name__}",
            argument="strategy",
        )
    clone = copy.copy(strategy)
    object.__setattr__(clone, "reserve_tokens", strategy.reserve_tokens + room)
    clone._tools_changed()
    return cast(Strategy, clone)


def _check_share(share: object) -> float:
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
        raise ConfigError(
            f"share must be a number between 0 and 1 (exclusive), got {share!r}", argument="share"
        )
    return float(share)


def _check_unit(argument: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(
            f"{argument} must be a number from 0 to 1, got {value!r}", argument=argument
        )
    return float(value)


def _budget_of(strategy: Strategy, max_tokens: int | None) -> int:
    own = getattr(strategy, "max_tokens", None)
    if max_tokens is None:
        if own is None:
            raise ConfigError(
                f"Recall needs max_tokens: {type(strategy).__name__} has no budget of its own",
                argument="max_tokens",
            )
        max_tokens = own
    check_option("max_tokens", max_tokens, 1)
    if isinstance(own, int) and max_tokens > own:
        raise ConfigError(
            f"max_tokens ({max_tokens}) is larger than the budget of the strategy it wraps "
            f"({own}): the whole context must fit that strategy's budget",
            argument="max_tokens",
        )
    return max_tokens


class Recall(FrozenConfig):
    """Wraps ``strategy`` and recalls earlier excerpts that match the newest user message.

    Args:
        strategy: the strategy that builds the rest of the context; it must have a token
            budget (every shipped strategy but an unbudgeted :class:`PruneToolOutputs`).
        share: the part of ``max_tokens`` kept for the excerpts (0.3: 30%). The inner
            strategy builds inside the rest, so the whole stays within ``max_tokens``.
        max_tokens: the request's budget; the inner strategy's ``max_tokens`` by default.
        query: what to search for. None takes the newest user message's text; a string is
            searched as it is (see :meth:`with_query` for one request); a function gets the
            history and returns the query (None or empty: nothing is recalled).
        candidates: how many hits to ask the search for.
        around: neighbours each side of a hit the search returns, from which whole units
            and the request before an answer are taken.
        spread: how much of a match's rank passes to the messages right before and after
            it (0 to 1; 0 ranks by the search's order alone). An answer rarely repeats the
            question's words, but the question it answers does: with a spread, the reply
            to a matching question is recalled too (see
            :func:`contextfold.search.spread_ranks`).
        embedder: an :class:`~contextfold.search.Embedder` to rank by meaning as well (a
            paraphrase shares no word with the question); its ranking is fused with the
            keyword one. None (the default) searches by keywords alone. When it fails, the
            build falls back to the keyword search and says so in a note.
        semantic: the weight of the semantic ranks against the keyword ones (which weigh
            1), from 0 to 1; used only with an ``embedder``.
        fill: let the excerpts also take what the inner context leaves unused of its own
            budget, up to ``max_tokens``. A cache-stable window between two compactions
            sits anywhere from its lower mark to its budget, so this often doubles the
            room for excerpts; they are not cached (they change with every question), so
            each request then costs more. Off by default: the excerpts take ``share``.
        placement: how the excerpts are framed; a user-role block merged into the newest
            request by default.

    Raises:
        ConfigError: an argument is out of range, or ``strategy`` has no budget to share.
        MissingExtraError: an ``embedder`` is given but numpy is not installed.
    """

    def __new__(cls, strategy: Strategy, **options: Any) -> Recall:
        # A window-bounded inner strategy keeps the memory's bounded reads: the search
        # reaches the older log through the store, not through what is read.
        target = _BoundedRecall if bounded_window(strategy) and cls is Recall else cls
        return object.__new__(target)

    def __init__(
        self,
        strategy: Strategy,
        *,
        share: float = 0.3,
        max_tokens: int | None = None,
        query: Query = None,
        candidates: int = 30,
        around: int = 3,
        spread: float = 0.8,
        embedder: Embedder | None = None,
        semantic: float = 0.5,
        fill: bool = False,
        placement: SummaryPlacement = RECALL_PLACEMENT,
    ) -> None:
        if isinstance(strategy, Recall) or not isinstance(strategy, Strategy):
            raise ConfigError(
                f"strategy must be a strategy other than Recall, got {strategy!r}",
                argument="strategy",
            )
        if query is not None and not isinstance(query, str) and not callable(query):
            raise ConfigError(
                f"query must be a string, a function or None, got {query!r}", argument="query"
            )
        if not isinstance(placement, SummaryPlacement):
            raise ConfigError(
                f"placement must be a SummaryPlacement, got {placement!r}", argument="placement"
            )
        check_option("candidates", candidates, 1)
        check_option("around", around, 0)
        self.spread = _check_unit("spread", spread)
        if embedder is not None:
            if not isinstance(embedder, Embedder):
                raise ConfigError(
                    f"embedder must have a name and an embed(texts) method, got {embedder!r}",
                    argument="embedder",
                )
            require_numpy()  # the vectors are compared with it: say so now, not mid-build
        self.embedder = embedder
        self.semantic = _check_unit("semantic", semantic)
        if not isinstance(fill, bool):
            raise ConfigError(f"fill must be True or False, got {fill!r}", argument="fill")
        self.fill = fill
        self.strategy = strategy
        self.share = _check_share(share)
        self.max_tokens = _budget_of(strategy, max_tokens)
        self.room = int(self.max_tokens * self.share)
        self.query = query
        self.candidates = candidates
        self.around = around
        self.placement = placement
        # A smaller max_tokens than the inner strategy's own: it keeps the difference free.
        inner_max = getattr(strategy, "max_tokens", None)
        narrower = inner_max - self.max_tokens if isinstance(inner_max, int) else 0
        self.inner = _reserved(strategy, self.room + narrower)
        self._freeze()

    def _options(self) -> dict[str, Any]:
        return {
            "share": self.share,
            "max_tokens": self.max_tokens,
            "query": self.query,
            "candidates": self.candidates,
            "around": self.around,
            "spread": self.spread,
            "embedder": self.embedder,
            "semantic": self.semantic,
            "fill": self.fill,
            "placement": self.placement,
        }

    @property
    def name(self) -> str:
        """The inner strategy's name: checkpoints and stats read as that strategy's."""
        return self.inner.name

    def __repr__(self) -> str:
        semantic = f", embedder={self.embedder!r}" if self.embedder is not None else ""
        return (
            f"Recall({self.strategy!r}, share={self.share}, max_tokens={self.max_tokens}{semantic})"
        )

    def with_query(self, query: Query) -> Recall:
        """The same configuration searching for ``query`` (for one request, say)."""
        return Recall(self.strategy, **{**self._options(), "query": query})

    def accepts_checkpoint(self, checkpoint: CheckpointRecord, /) -> bool:
        """A checkpoint applies when it applies to the inner strategy."""
        return checkpoint_applies(self.inner, checkpoint)

    @property
    def tools(self) -> tuple[Mapping[str, Any], ...]:
        """The tool schemas the inner strategy counts."""
        return tools_of(self.strategy)

    def tool_tokens(self, counter: TokenCounter, /) -> int:
        """Tokens of the inner strategy's tool schemas."""
        return self.inner.tool_tokens(counter) if counts_tools(self.inner) else 0

    def with_tools(self, tools: Sequence[Mapping[str, Any]], /) -> Recall:
        """The same recall over the inner strategy counting ``tools``."""
        inner = with_tools(self.strategy, tools)
        return self if inner is self.strategy else Recall(inner, **self._options())

    def _query(self, messages: Sequence[Message]) -> str | None:
        if isinstance(self.query, str):
            text: str | None = self.query
        elif self.query is not None:
            text = self.query(messages)
            if text is not None and not isinstance(text, str):
                raise ConfigError(
                    f"the query function must return a string or None, got {text!r}",
                    argument="query",
                )
        else:
            at = newest_request(messages, prefix_length(messages), len(messages))
            text = messages[at].text if at is not None else None
        text = (text or "").strip()
        return text[:_QUERY_CHARS] or None

    def plan(
        self,
        messages: Sequence[Message],
        /,
        *,
        counter: TokenCounter,
        checkpoint: CheckpointRecord | None = None,
        state: StrategyState | None = None,
    ) -> PlanGenerator:
        """The inner plan, then a search for what it did not send, then the excerpts.

        Raises:
            PairingError, BudgetError: as the inner strategy does, before any search.
        """
        result = yield from self.inner.plan(
            messages, counter=counter, checkpoint=checkpoint, state=state
        )
        query = self._query(messages)
        if query is None:
            return _noted(result, "recall: no user message to search for")
        # What the messages may take: the budget less the reserve and the tool schemas
        # (result.tokens counts messages only).
        limit = (
            self.max_tokens
            - getattr(self.strategy, "reserve_tokens", 0)
            - self.tool_tokens(counter)
        )
        overhead = counter.count_text(self.placement.frame("")) + 4
        left = limit - result.tokens
        room = (left if self.fill else min(self.room, left)) - overhead
        if room <= 0:
            return _noted(result, "recall: no room left in the budget for excerpts")
        call = SearchCall(
            query,
            _boundary(messages, result),
            self.candidates,
            around=self.around,
            spread=self.spread,
            embedder=self.embedder,
            semantic=self.semantic,
        )
        try:
            hits = yield call
        except EmbedderError as exc:
            # The keyword search alone: a failing embedder costs the meaning, not the build.
            result = _noted(result, f"recall: {exc}; searched by keywords only")
            hits = yield dataclasses.replace(call, embedder=None)
        return self._recalled(messages, result, query, tuple(hits), room, counter, limit)

    def _recalled(
        self,
        messages: Sequence[Message],
        result: StrategyResult,
        query: str,
        hits: tuple[SearchHit, ...],
        room: int,
        counter: TokenCounter,
        limit: int,
    ) -> StrategyResult:
        """``result`` with the chosen excerpts placed, or with a note saying why none were."""
        context = result.messages
        at = newest_request(context, prefix_length(context), len(context))
        if not hits or at is None:
            return _noted(result, f"recall: nothing earlier matches {_short(query)}")
        own = _own_parts(messages, context[at])
        sent = normalized(" ".join(message_texts(context)))
        terms = frozenset(tokenize(query))

        def cost(position: int, message: Message) -> int:
            return counter.count_text(line(position, message, terms=terms)) + 1

        for _ in range(_FIT_TRIES):  # the whole may count more than its lines did
            choice = choose(hits, sent=sent, room=room, cost=cost)
            if not choice.messages:
                return _noted(result, _why_none(query, choice))
            body = render(choice.messages, terms)
            built = insert(context, at, own, body, self.placement)
            tokens = result.tokens + counter.count_messages(built) - counter.count_messages(context)
            if tokens <= limit:
                return dataclasses.replace(
                    result,
                    messages=tuple(built),
                    tokens=tokens,
                    recalled=tuple(sorted(choice.messages)),
                    notes=(*result.notes, _note(query, choice, hits, room)),
                )
            room -= (tokens - limit) * 3 // 2 + 4
        return _noted(result, "recall: the excerpts did not fit the budget")


class _BoundedRecall(Recall):
    """A :class:`Recall` over a window-bounded strategy: it sends a bounded window too."""

    def window_budget(self, counter: TokenCounter, /) -> int:
        """The inner strategy's window (its budget less the recall's share)."""
        inner = self.inner
        assert bounded_window(inner)
        return inner.window_budget(counter)


def _boundary(messages: Sequence[Message], result: StrategyResult) -> int:
    """The end of the search: just after the newest message the inner strategy did not send.

    Usually the oldest kept message; when the newest turn ran over the budget and lost its
    middle, past that middle too (the excerpts leave out what the context holds).
    """
    kept = set(result.kept)
    prefix = prefix_length(messages)
    for i in range(len(messages) - 1, prefix - 1, -1):
        if messages[i].id not in kept:
            return i + 1
    return prefix


def _own_parts(messages: Sequence[Message], target: Message) -> int:
    """How many of ``target``'s parts are the input message's own (a summary may lead)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].id == target.id:
            return min(len(messages[i].parts), len(target.parts))
    return len(target.parts)


def _short(query: str) -> str:
    return repr(query if len(query) <= 60 else query[:57] + "...")


def _noted(result: StrategyResult, note: str) -> StrategyResult:
    return dataclasses.replace(result, notes=(*result.notes, note))


def _why_none(query: str, choice: Choice) -> str:
    return (
        f"recall: no excerpt for {_short(query)}: {choice.already_sent} hit(s) already in "
        f"the context or summary, {choice.broken} not whole units, {choice.no_room} too long"
    )


def _note(query: str, choice: Choice, hits: Sequence[SearchHit], room: int) -> str:
    """What was recalled and why: the query, the matched terms, what was skipped."""
    texts = " ".join(searchable_text(h.message) for h in hits if h.position in choice.hits)
    found = set(tokenize(texts))
    words = dict.fromkeys(w for w in _WORD.findall(query.lower()) if set(tokenize(w)) & found)
    matched = list(words)[:8]
    skipped = []
    if choice.already_sent:
        skipped.append(f"{choice.already_sent} already in the context or summary")
    if choice.broken:
        skipped.append(f"{choice.broken} not whole units")
    if choice.no_room:
        skipped.append(f"{choice.no_room} without room")
    return (
        f"recall: {len(choice.hits)} excerpt(s), messages {spans_text(choice.messages)}, "
        f"for {_short(query)} (matched: {', '.join(matched) or 'none'}); "
        f"{choice.tokens} of {room} tokens" + (f"; skipped {', '.join(skipped)}" if skipped else "")
    )
