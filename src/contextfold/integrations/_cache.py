"""Where a per-call filter keeps a conversation's summary between model calls.

A framework hook that sees the whole model input on every call (the OpenAI Agents SDK's
``call_model_input_filter``) has no memory of its own. The filter object is configuration,
shared by every run of a server, so what one conversation carries from a call to the next (its
checkpoint and strategy state) lives in a cache object keyed by conversation, passed in
explicitly. An entry is used only when the input still holds, unchanged, the messages its
summary covers (:func:`covered_fingerprint`), so a key shared by two conversations costs a
recomputed summary, never a foreign one.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConfigError
from contextfold.messages import Message
from contextfold.strategies.base import StrategyState

__all__ = ["CachedSummary", "InMemorySummaryCache", "SummaryCache", "covered_fingerprint"]


@dataclass(frozen=True, slots=True)
class CachedSummary:
    """What one conversation carries from a model call to the next.

    Attributes:
        checkpoint: the summary the last call built on or made, if any.
        state: the strategy state (failure streaks) the last call returned.
        fingerprint: :func:`covered_fingerprint` of the messages ``checkpoint`` covers.
    """

    checkpoint: CheckpointRecord | None
    state: StrategyState
    fingerprint: str | None


@runtime_checkable
class SummaryCache(Protocol):
    """A mapping from conversation key to :class:`CachedSummary`, safe across threads."""

    def get(self, key: str, /) -> CachedSummary | None:
        """The entry for ``key``, or None."""
        ...

    def put(self, key: str, entry: CachedSummary, /) -> None:
        """Store (or replace) the entry for ``key``."""
        ...


class InMemorySummaryCache:
    """A bounded, thread-safe :class:`SummaryCache` in this process.

    Args:
        max_entries: conversations kept; the least recently used one is forgotten first
            (it then pays one summary call again, nothing else).

    Raises:
        ConfigError: ``max_entries`` is not a positive integer.
    """

    def __init__(self, *, max_entries: int = 1024) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ConfigError(
                f"max_entries must be a positive integer, got {max_entries!r}",
                argument="max_entries",
            )
        self._max = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, CachedSummary] = OrderedDict()

    def get(self, key: str, /) -> CachedSummary | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: str, entry: CachedSummary, /) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def covered_fingerprint(messages: Sequence[Message], last_covered_id: str) -> str | None:
    """A hash of the ids of ``messages`` up to ``last_covered_id``, None when it is absent.

    Message ids loaded from a payload are the provider's item ids or hashes of position and
    content, so equal fingerprints mean the same covered messages.
    """
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message.id.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
        if message.id == last_covered_id:
            return digest.hexdigest()
    return None
