"""The strategies ``bench.replay`` compares, each a builder of one context per request.

The full history; ``SlidingWindow`` and LangChain ``trim_messages`` (with our counter) on
the growing history; ``Hybrid`` and ``Checkpoint`` with ``ExtractiveSummarizer`` through
``ConversationMemory``, so a checkpoint is reused between requests as in production.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bench._replay_data import Replay
from contextfold import ConversationMemory
from contextfold.errors import ContextfoldError
from contextfold.messages import Message
from contextfold.strategies.base import StrategyState
from contextfold.strategies.checkpoint import Checkpoint
from contextfold.strategies.hybrid import Hybrid
from contextfold.strategies.run import run
from contextfold.strategies.sliding import SlidingWindow
from contextfold.summarizers.extractive import ExtractiveSummarizer
from contextfold.tokens.approx import ApproxCounter

COUNTER = ApproxCounter()

# None: no request could be sent (the strategy raised, or kept no message at all).
Context = Sequence[Message] | None
Builder = Callable[[Replay], Iterator[Context]]


def full_history(replay: Replay) -> Iterator[Context]:
    for i, _ in replay.requests:
        yield replay.messages[: i + 1]


def stateless(build: Callable[[Sequence[Message]], Sequence[Message]]) -> Builder:
    """A strategy that sees only the growing history (no state between requests)."""

    def contexts(replay: Replay) -> Iterator[Context]:
        for i, _ in replay.requests:
            try:
                context = build(replay.messages[: i + 1])
            except ContextfoldError:
                context = None
            yield context or None  # an empty context cannot be sent either

    return contexts


def with_state(strategy: Any) -> Builder:
    """A strategy run on the growing history, its state carried from request to request."""

    def contexts(replay: Replay) -> Iterator[Context]:
        state = StrategyState()
        for i, _ in replay.requests:
            try:
                result = run(strategy, replay.messages[: i + 1], counter=COUNTER, state=state)
            except ContextfoldError:
                yield None
                continue
            state = result.state
            yield result.messages or None

    return contexts


def through_memory(make: Callable[[], Any]) -> Builder:
    """A strategy run by ``ConversationMemory``: messages appended, one build per request."""

    def contexts(replay: Replay) -> Iterator[Context]:
        memory = ConversationMemory(strategy=make(), counter=COUNTER)
        done = 0
        for i, _ in replay.requests:
            memory.extend(replay.messages[done : i + 1])
            done = i + 1
            try:
                yield memory.build_context().messages
            except ContextfoldError:
                yield None

    return contexts


def langchain_trim(budget: int) -> Callable[[Sequence[Message]], Sequence[Message]]:
    """LangChain ``trim_messages`` (last, include system, start on human), our counter."""
    from langchain_core.messages import trim_messages

    def build(history: Sequence[Message]) -> Sequence[Message]:
        lc, owner = to_langchain(history)

        def count(ms: list[Any]) -> int:
            return sum(COUNTER.count_message(history[i]) for i in {owner[m.id] for m in ms})

        kept = trim_messages(
            lc,
            max_tokens=budget,
            token_counter=count,
            strategy="last",
            include_system=True,
            start_on="human",
        )
        parts = dict.fromkeys(owner.values(), 0)
        for m in lc:
            parts[owner[m.id]] += 1
        for m in kept:
            parts[owner[m.id]] -= 1
        # A message split into several LangChain messages counts only if all were kept.
        seen = {owner[m.id] for m in kept}
        return [history[i] for i in sorted(seen) if parts[i] == 0]

    return build


def to_langchain(history: Sequence[Message]) -> tuple[list[Any], dict[str, int]]:
    """LangChain messages for ``history``; a tool-result message becomes one per result."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    owner: dict[str, int] = {}
    for i, m in enumerate(history):
        made: list[Any] = []
        if m.role == "system":
            made.append(SystemMessage(m.text))
        elif m.tool_results:
            made += [ToolMessage(r.text, tool_call_id=r.call_id) for r in m.tool_results]
        elif m.role == "user":
            made.append(HumanMessage(m.text))
        else:
            calls = [{"id": c.id, "name": c.name, "args": _args(c.arguments)} for c in m.tool_calls]
            made.append(AIMessage(m.text, tool_calls=calls))
        for k, lm in enumerate(made):
            lm.id = f"{i}:{k}"
            owner[lm.id] = i
        out += made
    return out, owner


def _args(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {"input": text}
    return value if isinstance(value, dict) else {"input": value}


def strategies(budget: int) -> dict[str, Builder]:
    def extractive() -> ExtractiveSummarizer:
        return ExtractiveSummarizer()  # its default summary length

    out: dict[str, Builder] = {
        "full history": full_history,
        "SlidingWindow": with_state(SlidingWindow(budget)),
        "SlidingWindow per turn": with_state(SlidingWindow(budget, compact_to=1.0)),
        "Hybrid+Extractive": through_memory(
            lambda: Hybrid(
                budget,
                keep_recent=8,
                chunk_size=16,
                summarizer=extractive(),
                max_output_tokens=int(budget * 0.7),
            )
        ),
        "Checkpoint+Extractive": through_memory(
            lambda: Checkpoint(extractive(), max_tokens=budget, keep_recent_tokens=budget // 5)
        ),
    }
    with contextlib.suppress(ImportError):
        out["langchain trim_messages"] = stateless(langchain_trim(budget))
    return out
