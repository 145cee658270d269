"""Context (what to send) and ContextPlan (what a build would do)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, overload

from contextfold.checkpoints import CheckpointRecord
from contextfold.memory._stats import MemoryStats
from contextfold.messages import Message


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
