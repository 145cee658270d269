"""OpenAI Agents SDK: a session over our stores, and a model-input filter that compacts.

Two extension points, usable together:

* :class:`ContextfoldSession` is a ``Session`` (``get_items`` / ``add_items`` / ``pop_item`` /
  ``clear_session``) over any contextfold store: in-memory, SQLite, Redis or PostgreSQL, sync
  or async. Items are kept as our messages and given back as the same Responses items
  (:mod:`contextfold.formats.openai_responses`, lossless: messages, function calls and their
  outputs, reasoning items, tool-specific items). With a ``strategy``, ``get_items()`` returns
  the compacted view the strategy builds (summary reused from the store), which is what the
  Runner prepends to a new turn; the store keeps every item.
* :func:`input_filter` returns a filter for ``RunConfig(call_model_input_filter=...)``: it
  compacts the whole model input before every model call of a run, pair-safe and inside the
  budget, and reuses the summary from one call to the next through a :class:`SummaryCache`.
  Use it for long runs: a session is read once per run, the filter sees every call.

The session imports nothing from the SDK (it meets the ``Session`` protocol structurally); the
filter imports ``agents`` when it is called and raises
:class:`~contextfold.errors.MissingExtraError` naming the ``openai-agents`` extra without it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from contextfold.errors import ConfigError, FormatError, MissingExtraError
from contextfold.formats import openai_responses
from contextfold.integrations._cache import (
    CachedSummary,
    InMemorySummaryCache,
    SummaryCache,
    covered_fingerprint,
)
from contextfold.integrations._checks import (
    check_counter,
    check_session_id,
    check_strategy,
    resolve_store,
)
from contextfold.memory import ConversationMemory
from contextfold.messages import Message, new_id
from contextfold.stores.base import (
    AsyncCheckpointLog,
    AsyncMessageLog,
    AsyncStore,
    CheckpointLog,
    Store,
)
from contextfold.strategies.base import Strategy
from contextfold.strategies.run import arun
from contextfold.tokens.base import TokenCounter

__all__ = [
    "CachedSummary",
    "ContextfoldInputFilter",
    "ContextfoldSession",
    "InMemorySummaryCache",
    "SummaryCache",
    "input_filter",
    "pair_safe_tail",
]

Item = dict[str, Any]
_INSTRUCTIONS_ID = "contextfold-instructions"


def pair_safe_tail(items: Sequence[Item], limit: int) -> list[Item]:
    """The newest ``limit`` items at most, without outputs whose call was cut off.

    A plain ``items[-limit:]`` can hold a ``function_call_output`` whose ``function_call``
    fell before the cut (a parallel call's output can even follow a kept call), which the
    Responses API rejects. Those outputs are left out, so the tail may hold fewer than
    ``limit`` items.
    """
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise ConfigError(f"limit must be an integer, got {limit!r:.80}", argument="limit")
    tail = list(items[-limit:]) if limit > 0 else []
    calls = {item.get("call_id") for item in tail if not _is_output(item)}
    return [item for item in tail if not _is_output(item) or item.get("call_id") in calls]


def _is_output(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    return isinstance(kind, str) and kind.endswith("_output") and "call_id" in item


class ContextfoldSession:
    """An OpenAI Agents SDK ``Session`` kept in a contextfold store.

    Args:
        session_id: the conversation id in the store.
        store: a :class:`~contextfold.stores.base.Store` / ``AsyncStore`` or a store URL. A
            store opened from a URL is closed by :meth:`close` / :meth:`aclose`; a store
            passed in is the caller's.
        strategy: when given, ``get_items()`` returns the strategy's compacted view (the
            summary is committed to the store once and reused); without one it returns every
            stored item.
        counter: counts tokens for the strategy (default: the approximate counter).
        session_settings: the SDK's ``SessionSettings`` (its ``limit`` is passed to
            :meth:`get_items` by the Runner).

    ``limit`` semantics: ``get_items(limit=n)`` returns at most the newest ``n`` items of
    the view (the compacted one with a strategy), leaving out leading tool outputs whose
    call fell before the cut (:func:`pair_safe_tail`).

    Raises:
        ConfigError: ``session_id`` is not a non-empty string, or ``store``, ``strategy`` or
            ``counter`` is of the wrong kind.
    """

    session_settings: Any = None

    def __init__(
        self,
        session_id: str,
        store: Store | AsyncStore | str,
        *,
        strategy: Strategy | None = None,
        counter: TokenCounter | None = None,
        session_settings: Any = None,
    ) -> None:
        check_session_id(session_id)
        if strategy is not None:
            check_strategy(strategy)
        check_counter(counter)
        self._store, self._owns_store = resolve_store(store)
        self.session_id = session_id
        self.session_settings = session_settings
        self._strategy = strategy
        self._counter = counter
        self._memory = self._new_memory()
        # One lock per event loop: a session may serve several (asyncio.run per call, threads).
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    def _new_memory(self) -> ConversationMemory:
        return ConversationMemory(
            store=self._store,
            conversation_id=self.session_id,
            strategy=self._strategy,
            counter=self._counter,
        )

    @property
    def memory(self) -> ConversationMemory:
        """The memory serving this session (stats of the last compacted read, full reads)."""
        return self._memory

    async def get_items(self, limit: int | None = None) -> list[Item]:
        """The conversation as Responses input items, oldest first.

        With a strategy, the compacted view (it may summarize once and commit the summary);
        without one, every stored item. See the class docs for ``limit``.
        """
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise ConfigError(
                f"limit must be None or an integer >= 0, got {limit!r}", argument="limit"
            )
        async with self._lock():
            if self._strategy is not None:
                items = (await self._memory.abuild_context()).to_responses()
            elif limit is not None:
                # Each message holds at least one item: the newest `limit` messages suffice.
                items = openai_responses.dump(await self._read_newest(limit))
            else:
                items = openai_responses.dump(await self._memory.aread_messages())
        return items if limit is None else pair_safe_tail(items, limit)

    async def add_items(self, items: list[Item]) -> None:
        """Append items (one call's items are grouped into messages as the format does).

        Every message gets an id of its own: ids derived from a batch's positions and
        content repeat across turns (a second "yes"), and so do the placeholder ids the SDK
        puts on Chat Completions output (``__fake_id__``); either would make the store take
        a new message for one already stored. The items' own ids are kept with the message
        and come back from :meth:`get_items`.
        """
        if not items:
            return
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise FormatError(
                    f"a session item must be a Responses item (a mapping), got "
                    f"{type(item).__name__}",
                    index=i,
                )
        loaded = openai_responses.load([dict(item) for item in items])
        messages = [m.replace(id=new_id()) for m in loaded]
        async with self._lock():
            await self._memory.aextend(messages)

    async def pop_item(self) -> Item | None:
        """Remove and return the newest item, None when the session is empty.

        The store is an append-only log, so this rewrites the conversation: it is read,
        deleted and written back without the item. Checkpoints that cover only older messages
        are committed again, so their summaries are not recomputed. Not atomic: do not pop
        while another process appends to the same session.
        """
        async with self._lock():
            messages = await self._memory.aread_messages()
            if not messages:
                return None
            items = openai_responses.dump(messages[-1:])
            popped = items[-1]
            kept = await self._checkpoints_before(len(messages))
            rest = messages[:-1] + openai_responses.load(items[:-1])
            await self._memory.aclear()
            await self._memory.aextend(rest)
            await self._recommit(kept)
            self._memory = self._new_memory()  # forget what the old one cached
        return popped

    async def clear_session(self) -> None:
        """Delete every item and checkpoint of this session."""
        async with self._lock():
            await self._memory.aclear()

    async def aclose(self) -> None:
        """Close the store when this session opened it from a URL."""
        if self._owns_store:
            if isinstance(self._store, AsyncMessageLog):
                await self._store.aclose()  # the async connections
            self._store.close()

    def close(self) -> None:
        """Sync form of :meth:`aclose`."""
        if self._owns_store:
            self._store.close()

    async def _read_newest(self, count: int) -> list[Message]:
        store, cid = self._store, self.session_id
        if isinstance(store, AsyncMessageLog):
            last = await store.alast_seq(cid)
            rows = await store.aread(cid, after_seq=max(0, last - count))
        else:
            last = store.last_seq(cid)
            rows = store.read(cid, after_seq=max(0, last - count))
        return [row.message for row in rows]

    async def _checkpoints_before(self, seq: int) -> list[Any]:
        store, cid = self._store, self.session_id
        if isinstance(store, AsyncCheckpointLog):
            records = await store.acheckpoints(cid)
        elif isinstance(store, CheckpointLog):
            records = store.checkpoints(cid)
        else:
            return []
        return [r for r in records if r.last_covered_seq is not None and r.last_covered_seq < seq]

    async def _recommit(self, records: Sequence[Any]) -> None:
        store, cid, previous = self._store, self.session_id, None
        for record in records:
            if isinstance(store, AsyncCheckpointLog):
                await store.aappend_checkpoint(cid, record, expected_previous=previous)
            else:
                store.append_checkpoint(cid, record, expected_previous=previous)
            previous = record.id

    def __repr__(self) -> str:
        strategy = self._strategy.name if self._strategy is not None else None
        return f"ContextfoldSession(session_id={self.session_id!r}, strategy={strategy!r})"


KeyFunction = Callable[[Any], str]


class ContextfoldInputFilter:
    """A ``call_model_input_filter`` that compacts the model input of every call.

    Made by :func:`input_filter`; see there. The object is configuration: it holds the
    strategy, the counter, the key function and the cache, and nothing per request, so one
    filter serves every run of a server at once.
    """

    def __init__(
        self,
        strategy: Strategy,
        *,
        counter: TokenCounter | None,
        cache: SummaryCache,
        key: KeyFunction | None,
    ) -> None:
        self.strategy = strategy
        self.counter = counter
        self.cache = cache
        self.key = key

    def __call__(self, data: Any) -> Awaitable[Any]:
        """Compact ``data.model_data`` (a ``CallModelData``); returns a ``ModelInputData``."""
        return self._filter(data)

    async def _filter(self, data: Any) -> Any:
        try:
            from agents.run_config import ModelInputData
        except ImportError as exc:  # pragma: no cover - the extra is installed in tests
            raise MissingExtraError("input_filter", "openai-agents") from exc
        instructions: str | None = data.model_data.instructions
        messages = openai_responses.load([dict(item) for item in data.model_data.input])
        prefix = [Message.system(instructions, id=_INSTRUCTIONS_ID)] if instructions else []
        key = self.key(data) if self.key is not None else _default_key(messages)
        entry = self.cache.get(key)
        checkpoint = None
        if entry is not None and entry.checkpoint is not None:
            seen = covered_fingerprint(messages, entry.checkpoint.last_covered_id)
            if seen is not None and seen == entry.fingerprint:
                checkpoint = entry.checkpoint
        result = await arun(
            self.strategy,
            prefix + messages,
            counter=self.counter,
            checkpoint=checkpoint,
            state=entry.state if entry is not None else None,
        )
        made = result.checkpoint or result.reused_checkpoint
        fingerprint = covered_fingerprint(messages, made.last_covered_id) if made else None
        self.cache.put(key, CachedSummary(made, result.state, fingerprint))
        kept = [m for m in result.messages if m.id != _INSTRUCTIONS_ID]
        items: list[Any] = openai_responses.dump(kept)
        return ModelInputData(input=items, instructions=instructions)

    def __repr__(self) -> str:
        return f"ContextfoldInputFilter(strategy={self.strategy.name!r})"


def _default_key(messages: Sequence[Message]) -> str:
    """The first non-system message's id: the same for every call of one conversation."""
    for message in messages:
        if message.role not in ("system", "developer"):
            return message.id
    return messages[0].id if messages else ""


def input_filter(
    strategy: Strategy,
    *,
    counter: TokenCounter | None = None,
    cache: SummaryCache | None = None,
    key: KeyFunction | None = None,
) -> ContextfoldInputFilter:
    """A filter for ``RunConfig(call_model_input_filter=...)`` that compacts each model call.

    Every model call of a run goes through it: the input items are loaded as messages (the
    agent's instructions counted as a leading system message, so the budget covers them),
    ``strategy`` builds the context, and the result goes back as Responses items, pair-safe
    and inside the strategy's budget. A summary made on one call is reused by the next calls
    of the same conversation, and extended only when new messages must be folded in.

    Args:
        strategy: the strategy that builds each context.
        counter: counts tokens (default: the approximate counter).
        cache: where each conversation's summary waits for the next call. Default: a new
            :class:`InMemorySummaryCache` owned by this filter; pass one of your own to share
            it between filters or to bound it.
        key: maps a ``CallModelData`` to the conversation's key. Default: the id of the first
            non-system input item, which every call (and every run) of one conversation
            shares. An entry is only used when the input still holds the messages its summary
            covers, so a shared key never injects another conversation's summary.

    Raises:
        ConfigError: ``strategy``, ``counter``, ``cache`` or ``key`` is of the wrong kind.
    """
    check_strategy(strategy)
    check_counter(counter)
    if cache is not None and not isinstance(cache, SummaryCache):
        raise ConfigError(
            f"cache must have get() and put() methods, got {type(cache).__name__}",
            argument="cache",
        )
    if key is not None and not callable(key):
        raise ConfigError(f"key must be callable, got {type(key).__name__}", argument="key")
    return ContextfoldInputFilter(
        strategy,
        counter=counter,
        cache=cache if cache is not None else InMemorySummaryCache(),
        key=key,
    )
