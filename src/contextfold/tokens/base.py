"""The token-counting contract.

A :class:`TokenCounter` counts a text, one message, a list of messages and tool schemas.
Counts are additive by contract: ``count_messages(ms) == sum(count_message(m) for m in ms)``,
so strategies can budget message by message without recounting.

:class:`BaseCounter` implements the per-message accounting (role overhead, tool calls,
tool results, images, thinking) on top of a single ``count_text`` method and caches each
message's count on the message itself: messages are immutable, so a message is counted once
in its life per counter configuration.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from contextfold.messages import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["BaseCounter", "TokenCounter", "tally_name"]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way a model would see them."""

    @property
    def cache_key(self) -> Hashable:
        """Identifies the configuration; equal keys must give equal counts."""
        ...

    def count_text(self, text: str, /) -> int:
        """Tokens in a bare string."""
        ...

    def count_message(self, message: Message, /) -> int:
        """Tokens one message costs in a request, overhead included."""
        ...

    def count_messages(self, messages: Sequence[Message], /) -> int:
        """Tokens a list of messages costs: the sum of :meth:`count_message`."""
        ...

    def count_tools(self, tools: Sequence[Mapping[str, Any]], /) -> int:
        """Tokens the tool schemas cost when sent with a request."""
        ...


class BaseCounter(ABC):
    """Message accounting over ``count_text``, with a per-message cache.

    Args:
        message_overhead: tokens every message costs for its role and framing.
        tool_call_overhead: tokens each tool call costs beyond its name and arguments.
        tool_result_overhead: tokens each tool result costs beyond its content.
        image_tokens: fixed cost of one image.
    """

    def __init__(
        self,
        *,
        message_overhead: int = 3,
        tool_call_overhead: int = 8,
        tool_result_overhead: int = 4,
        image_tokens: int = 800,
    ) -> None:
        self.message_overhead = message_overhead
        self.tool_call_overhead = tool_call_overhead
        self.tool_result_overhead = tool_result_overhead
        self.image_tokens = image_tokens
        self._key: Hashable = (
            type(self).__qualname__,
            self._config_key(),
            message_overhead,
            tool_call_overhead,
            tool_result_overhead,
            image_tokens,
        )

    @abstractmethod
    def _config_key(self) -> Hashable:
        """What, besides the overheads, makes two counters count differently."""

    @abstractmethod
    def count_text(self, text: str, /) -> int:
        """Tokens in a bare string."""

    @property
    def cache_key(self) -> Hashable:
        return self._key

    def count_message(self, message: Message, /) -> int:
        """Tokens one message costs, overhead included; one dict lookup once counted.

        This is the fast path the window walker calls for every message it passes: the count
        is cached on the message (messages are immutable) under this counter's
        configuration, so a steady-state build costs a lookup per kept message and callers
        never need to read the cache themselves.
        """
        cached = message._token_cache.get(self._key)
        if cached is not None:
            return cached
        total = self.message_overhead
        if message.name:
            total += self.count_text(message.name) + 1
        for part in message.parts:
            total += self._count_part(part)
        message._token_cache[self._key] = total
        return total

    def count_messages(self, messages: Sequence[Message], /) -> int:
        count = self.count_message
        return sum(count(m) for m in messages)

    def count_tools(self, tools: Sequence[Mapping[str, Any]], /) -> int:
        if not tools:
            return 0
        return sum(
            self.count_text(json.dumps(t, sort_keys=True, default=str)) + self.tool_call_overhead
            for t in tools
        )

    def _count_part(self, part: Part) -> int:
        if isinstance(part, TextPart):
            return self.count_text(part.text)
        if isinstance(part, ToolCallPart):
            return (
                self.count_text(part.name)
                + self.count_text(part.arguments)
                + self.tool_call_overhead
            )
        if isinstance(part, ToolResultPart):
            if isinstance(part.content, str):
                body = self.count_text(part.content)
            else:
                body = sum(self._count_part(p) for p in part.content)
            return body + self.tool_result_overhead
        if isinstance(part, ImagePart):
            return self.image_tokens
        if isinstance(part, ThinkingPart):
            if part.redacted:
                return self.count_text(part.data or "")
            return self.count_text(part.text)
        return 0  # pragma: no cover - the Part union is closed


def tally_name(counter: TokenCounter) -> str | None:
    """A name for ``counter``'s configuration that another process computes the same way.

    A store keeps a conversation's running token total under this name (see
    :class:`~contextfold.stores.base.TallyLog`), so the name must mean the same counts on every
    machine: it is derived from :attr:`TokenCounter.cache_key` when the key is plain data
    (strings, numbers, booleans, None and tuples of them), and is None otherwise (a key
    holding an object, whose text could name a memory address), in which case no total is
    stored for it.
    """
    key = counter.cache_key
    if not _plain(key):
        return None
    text = repr(key)
    if len(text) <= 120:
        return text
    import hashlib

    return f"{text[:80]}#{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}"


def _plain(value: object) -> bool:
    if value is None or type(value) in (str, int, float, bool):
        return True
    return type(value) is tuple and all(_plain(v) for v in value)
