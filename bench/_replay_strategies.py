"""The strategies ``bench.replay`` compares, each a builder of one context per request.

The full history (always, or until it no longer fits); LangChain ``trim_messages`` (with our
counter) on the growing history and ``SummarizationMiddleware``'s trigger/keep semantics;
``SlidingWindow`` with its state carried from request to request; ``Hybrid``,
``Summarization`` and ``Checkpoint`` with ``ExtractiveSummarizer`` through
``ConversationMemory``, so checkpoints and states are reused between requests as in
production. "per turn" rows set ``compact_to=1.0``: the behaviour before the lower mark.
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
from contextfold.strategies.summarization import Summarization
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


def full_until_over(budget: int) -> Builder:
    """The whole history while it fits the budget, then the per-turn window (a naive app)."""
    window = SlidingWindow(budget, compact_to=1.0)

    def contexts(replay: Replay) -> Iterator[Context]:
        for i, _ in replay.requests:
            history = replay.messages[: i + 1]
            if COUNTER.count_messages(history) <= budget:
                yield history
                continue
            try:
                yield run(window, history, counter=COUNTER).messages or None
            except ContextfoldError:
                yield None

    return contexts


def summarization_middleware(budget: int, keep: int = 20) -> Builder:
    """LangChain ``SummarizationMiddleware`` semantics: once the state's messages reach the
    trigger (``("tokens", budget)``), everything but the last ``keep`` messages (moved back
    to a safe cut) is replaced in the state by one summary message; the state is what is
    sent. The summary is written by the same offline extractive summarizer as ours."""
    from contextfold.summarizers.base import SummaryRequest
    from contextfold.turns import safe_cut_points

    summarizer = ExtractiveSummarizer()

    def contexts(replay: Replay) -> Iterator[Context]:
        state: list[Message] = []
        done = 0
        for i, _ in replay.requests:
            state.extend(replay.messages[done : i + 1])
            done = i + 1
            if COUNTER.count_messages(state) >= budget:
                p = 1 if state and state[0].role == "system" else 0
                cuts = [c for c in safe_cut_points(state) if p < c <= len(state) - keep]
                if cuts:
                    cut = cuts[-1]
                    result = summarizer.summarize(
                        SummaryRequest(tuple(state[p:cut]), max_output_tokens=budget // 4)
                    )
                    if result.ok:
                        note = Message.user(
                            f"Here is a summary of the conversation to date:\n\n{result.text}"
                        )
                        state = [*state[:p], note, *state[cut:]]
            yield list(state)

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
        "full history until over budget": full_until_over(budget),
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
        "Hybrid+Extractive per turn": through_memory(
            lambda: Hybrid(
                budget,
                keep_recent=8,
                chunk_size=16,
                summarizer=extractive(),
                max_output_tokens=int(budget * 0.7),
                compact_to=1.0,
            )
        ),
        "Summarization+Extractive": through_memory(
            lambda: Summarization(budget, keep_recent=8, summarizer=extractive())
        ),
        "Checkpoint+Extractive": through_memory(
            lambda: Checkpoint(extractive(), max_tokens=budget)
        ),
        "Checkpoint+Extractive per turn": through_memory(
            lambda: Checkpoint(extractive(), max_tokens=budget, compact_to=1.0)
        ),
    }
    with contextlib.suppress(ImportError):
        import langchain_core  # noqa: F401  (the peers are the bench extra)

        out["LangChain SummarizationMiddleware semantics"] = summarization_middleware(budget)
    with contextlib.suppress(ImportError):
        out["langchain trim_messages"] = stateless(langchain_trim(budget))
    return out
