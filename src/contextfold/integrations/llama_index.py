"""LlamaIndex: ``ContextfoldMemory``, a ``BaseMemory`` over our stores and strategies.

Give it to an agent or a chat engine (``FunctionAgent.run(..., memory=memory)``,
``SimpleChatEngine.from_defaults(memory=memory)``). The whole chat history is kept in a
contextfold store (in-memory, SQLite, Redis or PostgreSQL); :meth:`ContextfoldMemory.get`
returns what the strategy decides to send (a window, or a summary plus the newest messages,
never a tool call without its result), and the summary is committed to the store once and
reused by later calls. :meth:`ContextfoldMemory.get_all` returns everything stored.

Messages are converted without loss (see :mod:`contextfold.integrations._llama_index_messages`:
text, images, thinking, tool calls in blocks or in ``additional_kwargs`` as the OpenAI LLM
stores them, tool results); :func:`to_messages` and :func:`to_chat_messages` are the public
converters. This module imports ``llama_index.core`` at import time: install the
``llama-index`` extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextfold.errors import MissingExtraError
from contextfold.integrations._checks import (
    check_counter,
    check_session_id,
    check_strategy,
    resolve_store,
)
from contextfold.integrations._llama_index_messages import (
    RECORD,
    from_chat_messages,
    to_chat_message,
    to_message,
)
from contextfold.memory import ConversationMemory
from contextfold.messages import Message
from contextfold.stores.base import AsyncMessageLog, AsyncStore, Store
from contextfold.strategies.base import Strategy
from contextfold.tokens.base import TokenCounter

try:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.memory.types import BaseMemory
except ImportError as exc:  # pragma: no cover - the extra is installed in tests
    raise MissingExtraError("contextfold.integrations.llama_index", "llama-index") from exc

__all__ = ["ContextfoldMemory", "to_chat_message", "to_chat_messages", "to_message", "to_messages"]


def to_messages(chat_messages: Sequence[ChatMessage]) -> list[Message]:
    """Our messages for LlamaIndex chat messages (lossless; see the module docs)."""
    return [to_message(m) for m in chat_messages]


def to_chat_messages(messages: Sequence[Message]) -> list[ChatMessage]:
    """LlamaIndex chat messages for ours (the recorded originals where unchanged)."""
    return from_chat_messages(messages)


class ContextfoldMemory(BaseMemory):
    """A LlamaIndex memory whose history lives in a contextfold store.

    Args:
        session_id: the conversation id in the store.
        store: a :class:`~contextfold.stores.base.Store` / ``AsyncStore`` or a store URL
            (default: a fresh in-memory store). A store opened from a URL is closed by
            :meth:`close` / :meth:`aclose`; a store passed in is the caller's.
        strategy: decides what :meth:`get` returns (default: every stored message).
        counter: counts tokens for the strategy (default: the approximate counter).

    ``set(messages)`` replaces the history: when the stored history is a prefix of
    ``messages`` (what an agent passing ``chat_history`` back usually sends) only the new
    messages are appended, so stored summaries stay valid; otherwise the conversation is
    deleted and written again. ``reset()`` deletes it.

    Raises:
        ConfigError: ``session_id`` is not a non-empty string, or ``store``, ``strategy`` or
            ``counter`` is of the wrong kind.
    """

    session_id: str
    _store: Any = PrivateAttr()
    _owns_store: bool = PrivateAttr(default=False)
    _strategy: Strategy | None = PrivateAttr(default=None)
    _memory: ConversationMemory = PrivateAttr()

    def __init__(
        self,
        session_id: str,
        store: Store | AsyncStore | str | None = None,
        *,
        strategy: Strategy | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        check_session_id(session_id)
        if strategy is not None:
            check_strategy(strategy)
        check_counter(counter)
        fields: dict[str, Any] = {"session_id": session_id}  # the pydantic field
        super().__init__(**fields)
        store, self._owns_store = resolve_store("memory://" if store is None else store)
        self._store = store
        self._strategy = strategy
        self._memory = ConversationMemory(
            store=store, conversation_id=session_id, strategy=strategy, counter=counter
        )

    @classmethod
    def class_name(cls) -> str:
        return "ContextfoldMemory"

    @classmethod
    def from_defaults(cls, **kwargs: Any) -> ContextfoldMemory:
        """``ContextfoldMemory(**kwargs)``; ``session_id`` defaults to ``"chat_history"``."""
        session_id = kwargs.pop("session_id", "chat_history")
        return cls(session_id, **kwargs)

    @property
    def memory(self) -> ConversationMemory:
        """The memory serving this history (stats of the last :meth:`get`, full reads)."""
        return self._memory

    # -- reads --------------------------------------------------------------------------

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """What to send now: the strategy's context (every message without a strategy)."""
        if self._strategy is None:
            return self.get_all()
        return to_chat_messages(self._memory.build_context().messages)

    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """Async form of :meth:`get`."""
        if self._strategy is None:
            return await self.aget_all()
        return to_chat_messages((await self._memory.abuild_context()).messages)

    def get_all(self) -> list[ChatMessage]:
        """Every stored message, oldest first."""
        return to_chat_messages(self._memory.read_messages())

    async def aget_all(self) -> list[ChatMessage]:
        """Async form of :meth:`get_all`."""
        return to_chat_messages(await self._memory.aread_messages())

    # -- writes -------------------------------------------------------------------------

    def put(self, message: ChatMessage) -> None:
        """Append one message."""
        self._memory.add(to_message(message))

    async def aput(self, message: ChatMessage) -> None:
        """Async form of :meth:`put`."""
        await self._memory.aadd(to_message(message))

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Append messages in one write."""
        self._memory.extend(to_messages(messages))

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Async form of :meth:`put_messages`."""
        await self._memory.aextend(to_messages(messages))

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the history with ``messages`` (see the class docs)."""
        new = to_messages(messages)
        keep = _common_prefix(self._memory.read_messages(), new)
        if keep is None:
            self._memory.clear()
            keep = 0
        self._memory.extend(new[keep:])

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Async form of :meth:`set`."""
        new = to_messages(messages)
        keep = _common_prefix(await self._memory.aread_messages(), new)
        if keep is None:
            await self._memory.aclear()
            keep = 0
        await self._memory.aextend(new[keep:])

    def reset(self) -> None:
        """Delete the history (messages and summaries)."""
        self._memory.clear()

    async def areset(self) -> None:
        """Async form of :meth:`reset`."""
        await self._memory.aclear()

    def close(self) -> None:
        """Close the store when this memory opened it."""
        if self._owns_store:
            self._store.close()

    async def aclose(self) -> None:
        """Async form of :meth:`close`."""
        if self._owns_store:
            if isinstance(self._store, AsyncMessageLog):
                await self._store.aclose()
            self._store.close()


def _common_prefix(stored: Sequence[Message], new: Sequence[Message]) -> int | None:
    """``len(stored)`` when ``new`` starts with the stored messages' content, else None."""
    if len(stored) > len(new):
        return None
    for old, candidate in zip(stored, new[: len(stored)], strict=True):
        if old.role != candidate.role or old.extra.get(RECORD) != candidate.extra.get(RECORD):
            return None
    return len(stored)
