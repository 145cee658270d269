"""pydantic-ai: a history processor that keeps every model request inside a token budget.

:func:`history_processor` returns a callable for pydantic-ai's history hook
(``Agent(capabilities=[ProcessHistory(p)])``, or ``Agent(history_processors=[p])`` in the
releases that still take that argument). Before each model request pydantic-ai hands it the
run's messages; it stores the ones it has not seen in our store, under the conversation's id,
builds the context with the strategy, and returns that context as pydantic-ai messages.

Why the store: pydantic-ai keeps what a processor returns as the run's history (it replaces
``ctx.messages``), so a compacted history is all the run, and ``result.all_messages()``, holds
afterwards. The store keeps the whole transcript and the checkpoint, so nothing is lost and a
summary is written once and reused by every later request of the conversation, from any
process sharing the store. :meth:`ContextfoldHistory.read_transcript` gives the full
transcript back as pydantic-ai messages.

The processor holds configuration only (strategy, store, counter): one object can serve every
conversation of a server. Messages it returns carry ``metadata["contextfold"]`` naming their
conversation, which is how it tells them from new ones on the next request (pydantic-ai does
not send ``metadata`` to the model).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from contextfold.errors import ConfigError, FormatError, MissingExtraError

try:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        ToolReturnPart,
    )
    from pydantic_ai.tools import RunContext
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise MissingExtraError("contextfold.integrations.pydantic_ai", "pydantic-ai") from exc

from contextfold.integrations._pydantic_ai_messages import (
    NAMESPACE,
    from_model_messages,
    to_model_messages,
)
from contextfold.memory import Context, ConversationMemory
from contextfold.messages import Message
from contextfold.stores import open_store
from contextfold.stores.base import AsyncStore, Store
from contextfold.strategies.base import Strategy
from contextfold.tokens.base import TokenCounter

__all__ = [
    "NAMESPACE",
    "TAG",
    "ContextfoldHistory",
    "from_model_messages",
    "history_processor",
    "to_model_messages",
]

#: The ``metadata`` key of the messages the processor returns.
TAG = "contextfold"

ConversationKey = Callable[[RunContext[Any]], str]


class ContextfoldHistory:
    """A pydantic-ai history processor backed by a strategy and a store.

    Made by :func:`history_processor` (see it for the arguments). Calling it is what
    pydantic-ai does; :meth:`process` and :meth:`aprocess` do the same without a
    ``RunContext``, for code that drives pydantic-ai messages itself.
    """

    def __init__(
        self,
        strategy: Strategy,
        *,
        store: Store | AsyncStore | str | None = None,
        counter: TokenCounter | None = None,
        conversation_id: str | ConversationKey | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        if not isinstance(strategy, Strategy):
            raise ConfigError(
                f"strategy must be a contextfold Strategy, got {type(strategy).__name__}",
                argument="strategy",
            )
        if conversation_id is not None and not (
            (isinstance(conversation_id, str) and conversation_id) or callable(conversation_id)
        ):
            raise ConfigError(
                "conversation_id must be a non-empty string or a function of the RunContext, "
                f"got {conversation_id!r}",
                argument="conversation_id",
            )
        self._owns_store = isinstance(store, str)
        if isinstance(store, str):
            store = open_store(store)
        elif store is None:
            from contextfold.stores.memory import InMemoryStore

            store = InMemoryStore()
        elif not isinstance(store, (Store, AsyncStore)):
            raise ConfigError(
                f"store must be a Store, an AsyncStore or a URL, got {type(store).__name__}",
                argument="store",
            )
        self.strategy = strategy
        self.store: Store | AsyncStore = store
        self.counter = counter
        self.tools = tuple(tools or ())
        self._conversation_id = conversation_id

    def __repr__(self) -> str:
        return f"ContextfoldHistory(strategy={self.strategy!r}, store={type(self.store).__name__})"

    # -- the processor ------------------------------------------------------------------

    async def __call__(
        self, ctx: RunContext[Any], messages: list[ModelMessage]
    ) -> list[ModelMessage]:
        """What pydantic-ai calls before each model request (async, with the run context)."""
        return await self.aprocess(messages, conversation_id=self.conversation_of(ctx))

    def conversation_of(self, ctx: RunContext[Any]) -> str:
        """The conversation id a run belongs to: the configured one, else pydantic-ai's.

        Raises:
            ConfigError: none was configured and the run has none.
        """
        key = self._conversation_id
        if isinstance(key, str):
            return key
        if key is not None:
            return key(ctx)
        found = ctx.conversation_id
        if not found:
            raise ConfigError(
                "this pydantic-ai run has no conversation_id: pass "
                "history_processor(..., conversation_id=...)",
                argument="conversation_id",
            )
        return found

    def process(
        self, messages: Sequence[ModelMessage], *, conversation_id: str
    ) -> list[ModelMessage]:
        """Store what is new in ``messages`` and return the context to send (sync)."""
        memory = self._memory(conversation_id)
        new = self._untracked(messages, conversation_id)
        if new:
            memory.extend(new)
        return self._tagged(memory.build_context(), conversation_id)

    async def aprocess(
        self, messages: Sequence[ModelMessage], *, conversation_id: str
    ) -> list[ModelMessage]:
        """Async form of :meth:`process`."""
        memory = self._memory(conversation_id)
        new = self._untracked(messages, conversation_id)
        if new:
            await memory.aextend(new)
        return self._tagged(await memory.abuild_context(), conversation_id)

    # -- the transcript -----------------------------------------------------------------

    def record(self, messages: Sequence[ModelMessage], *, conversation_id: str) -> None:
        """Store messages the processor has not seen, without building a context.

        The last answer of a run comes after its last model request, so the processor never
        sees it unless the next run starts from ``result.all_messages()``; this stores it.
        The messages it stores are tagged as the processor's returns are (their
        ``metadata``), so a next run starting from them does not store them again.
        """
        fresh = self._fresh(messages, conversation_id)
        if fresh:
            self._memory(conversation_id).extend(from_model_messages(fresh))
            _tag(fresh, conversation_id)

    async def arecord(self, messages: Sequence[ModelMessage], *, conversation_id: str) -> None:
        """Async form of :meth:`record`."""
        fresh = self._fresh(messages, conversation_id)
        if fresh:
            await self._memory(conversation_id).aextend(from_model_messages(fresh))
            _tag(fresh, conversation_id)

    def read_transcript(self, conversation_id: str) -> list[ModelMessage]:
        """Every stored message of the conversation, as pydantic-ai messages, oldest first.

        They are tagged as stored: a run resumed from them (``message_history=``), in this
        process or another sharing the store, does not store them again.
        """
        messages = to_model_messages(self._memory(conversation_id).read_messages())
        return _tag(messages, conversation_id)

    async def aread_transcript(self, conversation_id: str) -> list[ModelMessage]:
        """Async form of :meth:`read_transcript`."""
        messages = to_model_messages(await self._memory(conversation_id).aread_messages())
        return _tag(messages, conversation_id)

    def close(self) -> None:
        """Close the store when it was opened from a URL here."""
        if self._owns_store and isinstance(self.store, Store):
            self._owns_store = False
            self.store.close()

    async def aclose(self) -> None:
        """Async form of :meth:`close`."""
        if self._owns_store:
            self._owns_store = False
            if isinstance(self.store, AsyncStore):
                await self.store.aclose()
            else:
                self.store.close()

    # -- helpers ------------------------------------------------------------------------

    def _memory(self, conversation_id: str) -> ConversationMemory:
        """A memory for one call: the processor keeps no per-conversation state itself."""
        return ConversationMemory(
            strategy=self.strategy,
            store=self.store,
            counter=self.counter,
            conversation_id=conversation_id,
            tools=self.tools,
        )

    def _fresh(self, messages: Sequence[ModelMessage], conversation_id: str) -> list[ModelMessage]:
        """The messages this processor has not returned, recorded or read for the conversation.

        Raises:
            FormatError: an item is not a pydantic-ai ModelRequest or ModelResponse.
        """
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise FormatError(f"expected a list of pydantic-ai messages, got {messages!r:.80}")
        for i, m in enumerate(messages):
            if not isinstance(m, (ModelRequest, ModelResponse)):
                raise FormatError(
                    f"expected a pydantic-ai ModelRequest or ModelResponse, got {type(m).__name__}",
                    index=i,
                )
        return [m for m in messages if not _is_ours(m, conversation_id)]

    def _untracked(self, messages: Sequence[ModelMessage], conversation_id: str) -> list[Message]:
        """Our form of the messages this processor has not returned for the conversation."""
        fresh = self._fresh(messages, conversation_id)
        return from_model_messages(fresh) if fresh else []

    def _tagged(self, context: Context, conversation_id: str) -> list[ModelMessage]:
        return _tag(_merged_requests(to_model_messages(context.messages)), conversation_id)


def _tag(messages: list[ModelMessage], conversation_id: str) -> list[ModelMessage]:
    """``messages``, each marked as stored for the conversation (in its ``metadata``)."""
    for message in messages:
        message.metadata = {**(message.metadata or {}), TAG: {"conversation_id": conversation_id}}
    return messages


def _merged_requests(messages: list[ModelMessage]) -> list[ModelMessage]:
    """Consecutive requests joined into one, as pydantic-ai itself joins them.

    At the start of every run pydantic-ai merges consecutive requests into new objects
    without their ``metadata``, so our tag would be lost and the next request would store
    the context (a summary and all) as new messages. Returning the shape it would make, by its
    rule (same or no instructions; tool returns and retries first), leaves it nothing to do.
    """
    out: list[ModelMessage] = []
    for message in messages:
        last = out[-1] if out else None
        if (
            isinstance(message, ModelRequest)
            and isinstance(last, ModelRequest)
            and (
                not last.instructions
                or not message.instructions
                or last.instructions == message.instructions
            )
        ):
            parts = sorted(
                [*last.parts, *message.parts],
                key=lambda p: 0 if isinstance(p, (ToolReturnPart, RetryPromptPart)) else 1,
            )
            out[-1] = dataclasses.replace(
                message,
                parts=parts,
                instructions=last.instructions or message.instructions,
                timestamp=message.timestamp or last.timestamp,
            )
        else:
            out.append(message)
    return out


def _is_ours(message: ModelMessage, conversation_id: str) -> bool:
    tag = (message.metadata or {}).get(TAG)
    return isinstance(tag, Mapping) and tag.get("conversation_id") == conversation_id


def history_processor(
    strategy: Strategy,
    *,
    store: Store | AsyncStore | str | None = None,
    counter: TokenCounter | None = None,
    conversation_id: str | ConversationKey | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> ContextfoldHistory:
    """A history processor for ``Agent(capabilities=[ProcessHistory(...)])``.

    Args:
        strategy: decides what each model request carries; its budget is in ``counter``'s
            tokens, over the messages (pydantic-ai sends the agent's instructions and tool
            definitions besides; count the tools with ``tools``).
        store: where the transcript and checkpoints live, per conversation: a store, or a
            URL for :func:`~contextfold.stores.open_store`. Default: a fresh in-memory store
            (the transcript lives as long as the processor). Use a persistent one when runs
            span processes.
        counter: counts tokens. Default: :class:`~contextfold.tokens.approx.ApproxCounter`.
        conversation_id: the conversation's key in the store: a string, a function of the
            ``RunContext``, or (default) pydantic-ai's own ``ctx.conversation_id``, which
            carries over when a run starts from the previous run's messages.
        tools: tool schemas (OpenAI function format) counted against the budget.

    Raises:
        ConfigError: an argument is of the wrong kind (``argument`` names it).
    """
    return ContextfoldHistory(
        strategy, store=store, counter=counter, conversation_id=conversation_id, tools=tools
    )
