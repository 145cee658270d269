"""ConversationMemory: the public facade over the store, the core and the drivers."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, TypeVar

from contextfold.errors import ConfigError, FormatError, StoreError
from contextfold.memory._context import Context, ContextPlan
from contextfold.memory._core import MemoryCore
from contextfold.memory._ops import (
    CoreGen,
    Delete,
    LastSeq,
    adrive,
    drive,
)
from contextfold.memory._search import check_query
from contextfold.memory._stats import MemoryStats
from contextfold.messages import Message
from contextfold.pricing import ModelPrices, prices_for
from contextfold.stores.base import AsyncStore, Store, StoredMessage
from contextfold.strategies.base import Strategy, StrategyState, tools_of, with_tools
from contextfold.tokens.base import TokenCounter

_T = TypeVar("_T")

#: Default budget of the default strategy, in tokens.
DEFAULT_MAX_TOKENS = 8000


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
        tools: tool schemas sent with each request, handed back on :class:`Context`. They
            count against the strategy's budget: a strategy that counts tools (every built-in
            one) but has none of its own runs as a shallow copy carrying these (see
            :attr:`strategy`); one with schemas of its own keeps them, and when no ``tools``
            are given here the strategy's are the memory's. ``stats.tools_tokens`` is what
            the strategy counted.
        lock_ttl: seconds after which a compaction lock left by a crashed process expires.
        prices: the model's prices (a :class:`~contextfold.pricing.ModelPrices`, or a model
            name for :func:`~contextfold.pricing.prices_for`). With them each build's stats
            estimate the request's cost with prompt caching next to what resending the full
            history would cost, and a window may move early once the cache has expired.

    Raises:
        ConfigError: an argument is of the wrong kind or out of range (raised here, not at
            the first build; ``argument`` names it).

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
        prices: ModelPrices | str | None = None,
    ) -> None:
        _check_arguments(conversation_id, lock_ttl)
        if isinstance(prices, str):
            prices = prices_for(prices)
        elif prices is not None and not isinstance(prices, ModelPrices):
            raise ConfigError(
                f"prices must be a ModelPrices or a model name, got {type(prices).__name__}",
                argument="prices",
            )
        tool_list = tuple(tools or ())
        if counter is None:
            from contextfold.tokens.approx import ApproxCounter

            counter = ApproxCounter()
        if strategy is None:
            from contextfold.strategies.sliding import SlidingWindow

            strategy = SlidingWindow(DEFAULT_MAX_TOKENS, tools=tool_list)
        elif not isinstance(strategy, Strategy):
            raise ConfigError(
                f"strategy must have a name and a plan() method, got {type(strategy).__name__}",
                argument="strategy",
            )
        else:
            strategy = with_tools(strategy, tool_list)
            tool_list = tool_list or tools_of(strategy)
        self._owns_store = False
        self._store: Any = self._resolve_store(store)
        self.conversation_id: str = conversation_id or "conv_" + uuid.uuid4().hex
        # The core's cache is shared state: calls of one memory run one at a time.
        self._thread_lock = threading.RLock()
        self._task_lock: asyncio.Lock | None = None
        self._core = MemoryCore(
            strategy=strategy,
            counter=counter,
            tools=tool_list,
            lock_ttl=lock_ttl,
            prices=prices,
        )

    @property
    def strategy_state(self) -> StrategyState:
        """This conversation's strategy state (failure streaks), as of the last build.

        The strategy object holds no per-conversation state, so one strategy can serve many
        memories; each memory keeps its own here. It is held by this object (a memory opened
        again on the same stored conversation starts from a fresh state).
        """
        return self._core.state

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
        raise ConfigError(
            f"store must be a Store, an AsyncStore or a URL, got {type(store).__name__}",
            argument="store",
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
        prices: ModelPrices | str | None = None,
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
            prices=prices,
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
        prices: ModelPrices | str | None = None,
    ) -> ConversationMemory:
        """Async form of :meth:`open`."""
        memory = cls(
            strategy=strategy,
            store=url_or_store,
            counter=counter,
            conversation_id=conversation_id,
            tools=tools,
            lock_ttl=lock_ttl,
            prices=prices,
        )
        try:
            await memory._adrive(memory._warm())
        except BaseException:
            await memory.aclose()
            raise
        return memory

    def _warm(self) -> CoreGen[None]:
        last: int = yield LastSeq()
        yield from self._core._load_prefix(last)

    # -- properties ---------------------------------------------------------------------

    @property
    def strategy(self) -> Strategy:
        """The strategy that builds each context.

        When the memory's ``tools`` were handed to a strategy that had none, this is the
        copy carrying them (strategies are immutable, so it shares only configuration).
        """
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

    def read_messages(self) -> list[Message]:
        """The full stored transcript, oldest first.

        A method, not a property, because it reads the whole log: linear in the
        conversation's length, and a store round trip every call.
        """
        return self._drive(self._read_all())

    async def aread_messages(self) -> list[Message]:
        """Async form of :meth:`read_messages`."""
        return await self._adrive(self._read_all())

    @property
    def messages(self) -> NoReturn:
        """Gone: reading the log is :meth:`read_messages` (it does I/O, so it is a method)."""
        raise AttributeError(
            "ConversationMemory.messages is now the method read_messages() "
            "(await aread_messages() in async code): it reads the whole stored log"
        )

    def search(self, query: str, *, limit: int = 10) -> list[StoredMessage]:
        """Stored messages matching ``query`` (any of its words), best first, with their seqs.

        The store's own search (FTS5, PostgreSQL full-text search, a BM25 index); a store
        without one is read whole. Raises :class:`ConfigError` for a bad query or limit.
        """
        check_query(query, limit)
        return self._drive(self._core.search_log(query, limit, None))

    async def asearch(self, query: str, *, limit: int = 10) -> list[StoredMessage]:
        """Async form of :meth:`search`."""
        check_query(query, limit)
        return await self._adrive(self._core.search_log(query, limit, None))

    def _read_all(self) -> CoreGen[list[Message]]:
        last: int = yield LastSeq()
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
        """Append several messages atomically; returns their sequence numbers.

        Raises:
            FormatError: ``messages`` is not a sequence of :class:`Message`.
        """
        return self._drive(self._append_core(_as_batch(messages)))

    async def aextend(self, messages: Sequence[Message]) -> list[int]:
        """Async form of :meth:`extend`."""
        return await self._adrive(self._append_core(_as_batch(messages)))

    def _append_core(self, messages: tuple[Message, ...]) -> CoreGen[list[int]]:
        for i, m in enumerate(messages):
            if not isinstance(m, Message):
                raise FormatError(
                    f"expected a contextfold Message, got {type(m).__name__}; convert provider "
                    "payloads with contextfold.formats first",
                    index=i,
                )
        if not messages:
            return []
        seqs: list[int] = yield self._core.append_op(messages)
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

    def _clear_core(self) -> CoreGen[None]:
        yield Delete()
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
        """Tokens of the whole stored history now (counted once, then kept up to date)."""
        return self._drive(self._core.count_history())

    async def acount_history(self) -> int:
        """Async form of :meth:`count_history`."""
        return await self._adrive(self._core.count_history())

    def count_totals(self, stats: MemoryStats) -> MemoryStats:
        """A copy of ``stats`` (of a build or a plan of this memory) with its totals filled.

        ``total_tokens``, ``tokens_saved``, ``compression_ratio`` and
        ``lifetime_tokens_saved`` are None when the memory could not know them without
        reading the log (see :class:`MemoryStats`). This reads it once, in pages, and fills
        every build's pending total; from then on the memory keeps a running total, so
        later stats arrive complete. Stats that are already complete come back as they are,
        without I/O.

        Raises:
            StoreError: the conversation was cleared since these stats were built, or the
                store failed (or is async-only: use :meth:`acount_totals`).
            ConfigError: ``stats`` were built by another memory.
        """
        known = self._core.known_totals(stats)
        return known if known is not None else self._drive(self._core.count_totals(stats))

    async def acount_totals(self, stats: MemoryStats) -> MemoryStats:
        """Async form of :meth:`count_totals`."""
        known = self._core.known_totals(stats)
        if known is not None:
            return known
        return await self._adrive(self._core.count_totals(stats))

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
    def _drive(self, core: CoreGen[_T]) -> _T:
        """Run a core generator against the sync store, one call at a time."""
        with self._thread_lock:
            return drive(self._store, self.conversation_id, core)

    async def _adrive(self, core: CoreGen[_T]) -> _T:
        """Run a core generator against the async store (or a sync one, inline)."""
        if self._task_lock is None:
            self._task_lock = asyncio.Lock()
        async with self._task_lock:
            return await adrive(self._store, self.conversation_id, core)


def _check_arguments(conversation_id: object, lock_ttl: object) -> None:
    """Reject a bad ``conversation_id`` or ``lock_ttl`` before anything is opened."""
    if conversation_id is not None and (
        not isinstance(conversation_id, str) or not conversation_id
    ):
        raise ConfigError(
            f"conversation_id must be a non-empty string, got {conversation_id!r}",
            argument="conversation_id",
        )
    if isinstance(lock_ttl, bool) or not isinstance(lock_ttl, (int, float)) or not lock_ttl > 0:
        raise ConfigError(
            f"lock_ttl must be a positive number of seconds, got {lock_ttl!r}",
            argument="lock_ttl",
        )


def _as_batch(messages: object) -> tuple[Message, ...]:
    """``messages`` as a tuple to append; a string, a lone message or a non-iterable is a
    :class:`FormatError` (each item is checked on append)."""
    if isinstance(messages, (str, bytes, Message)) or not hasattr(messages, "__iter__"):
        raise FormatError(
            f"extend() expects a sequence of Message, got {type(messages).__name__}; "
            "use add() for one message"
        )
    return tuple(messages)
