"""Properties of every budgeted window: the request stays, retries at ``required`` work.

For random histories (tool calls, parallel calls, Anthropic's results-in-a-user-message,
histories with no user message at all), random budgets and every strategy that ends in the
sliding window (SlidingWindow, PruneToolOutputs, and Summarization / Hybrid / Checkpoint
with a failing summarizer, so they take the sliding fallback, and with a working one):

(a) when a build raises :class:`BudgetError`, a build at its ``required`` budget succeeds;
(b) after the system prefix the context never starts on an assistant message or a tool
    result when the history has a user request after the prefix;
(c) the context is within budget, pair-safe (``turns.validate``) and keeps every DESIGN.md
    invariant (``strategy_checks.check_invariants``).

The same is checked on τ-bench runs cut right after every batch of tool results (what an
agent loop sends), at tight budgets.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategy_checks import check_invariants, snapshot

from contextfold import formats
from contextfold.errors import BudgetError
from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.strategies import (
    Checkpoint,
    Hybrid,
    PruneToolOutputs,
    SlidingWindow,
    Strategy,
    StrategyResult,
    Summarization,
)
from contextfold.strategies.run import run
from contextfold.testing import FakeSummarizer, FixedCounter
from contextfold.tokens.approx import ApproxCounter
from contextfold.tokens.base import TokenCounter
from contextfold.turns import newest_request, prefix_length, validate

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"

words = st.text(alphabet="abcdefgh ", min_size=0, max_size=30)

Maker = Callable[[int], Strategy]


def makers() -> dict[str, Maker]:
    """Every strategy that falls back to the sliding window, by name, for a budget."""

    def failing() -> FakeSummarizer:
        return FakeSummarizer(fail="error")

    def working() -> FakeSummarizer:
        return FakeSummarizer("s")

    out: dict[str, Maker] = {
        "sliding": lambda b: SlidingWindow(b),
        "prune": lambda b: PruneToolOutputs(keep_recent=1, max_tokens=b),
    }
    for label, make in (("fail", failing), ("ok", working)):
        out[f"summary-{label}"] = lambda b, m=make: Summarization(  # type: ignore[misc]
            b, keep_recent=2, summarizer=m()
        )
        out[f"hybrid-{label}"] = lambda b, m=make: Hybrid(  # type: ignore[misc]
            b, keep_recent=2, chunk_size=3, summarizer=m()
        )
        out[f"checkpoint-{label}"] = lambda b, m=make: Checkpoint(  # type: ignore[misc]
            m(), max_tokens=b
        )
    return out


MAKERS = makers()


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """A valid history: turns of tool work, sometimes no user message at all."""
    out: list[Message] = []
    for i in range(draw(st.integers(0, 2))):
        out.append(Message.system(draw(words) or "sys", id=f"s{i}"))
    agent_only = draw(st.integers(0, 9)) == 0
    n = 0
    for t in range(draw(st.integers(1, 5))):
        if not agent_only:
            out.append(Message.user((draw(words) or "q") * draw(st.integers(1, 8)), id=f"u{t}"))
        for _ in range(draw(st.integers(0, 4))):
            n += 1
            k = draw(st.integers(0, 3))  # 0: plain text, 2-3: parallel calls
            if k == 0:
                out.append(Message.assistant(draw(words) or "a", id=f"a{n}"))
                continue
            calls = [ToolCallPart(f"c{n}_{j}", "f", '{"q": 1}') for j in range(k)]
            out.append(Message.assistant(draw(words) or None, tool_calls=calls, id=f"a{n}"))
            bodies = [(draw(words) or "r") * draw(st.integers(1, 12)) for _ in range(k)]
            if draw(st.booleans()):  # Anthropic: every result in one user message
                parts = [ToolResultPart(c.id, b) for c, b in zip(calls, bodies, strict=True)]
                out.append(Message.user(parts, id=f"r{n}"))
            else:
                for j, (c, b) in enumerate(zip(calls, bodies, strict=True)):
                    out.append(Message.tool_result(c.id, b, id=f"r{n}_{j}"))
        if draw(st.booleans()):
            out.append(Message.assistant(draw(words) or "done", id=f"b{t}"))
    if len(out) == prefix_length(out):
        out.append(Message.user("q", id="u-last"))
    return out


def build(
    name: str, history: list[Message], budget: int, counter: TokenCounter
) -> tuple[StrategyResult, int]:
    """Run ``name`` at ``budget``; on BudgetError, once more at its ``required`` (a).

    Returns the result and the budget it was built within.
    """
    try:
        return run(MAKERS[name](budget), history, counter=counter), budget
    except BudgetError as exc:
        retry = exc.required
    assert retry is not None
    assert retry > budget
    # (a) the error's required budget is one that works
    return run(MAKERS[name](retry), history, counter=counter), retry


def opens_on_work(history: list[Message], result: StrategyResult) -> bool:
    """(b) fails: the context opens on an assistant message or a tool result after the
    prefix, though the history has a user request after the prefix."""
    p = prefix_length(history)
    if newest_request(history, p, len(history)) is None or len(result.messages) <= p:
        return False
    first = result.messages[p]
    return first.role in ("assistant", "tool") or first.is_tool_result_only


def check(name: str, history: list[Message], budget: int, counter: TokenCounter) -> None:
    before = snapshot(history)
    result, used = build(name, history, budget, counter)
    check_invariants(history, before, result, counter=counter, max_tokens=used)  # (c)
    validate(result.messages)
    assert result.tokens <= used
    assert not opens_on_work(history, result), [m.id for m in result.messages]  # (b)


@SETTINGS
@given(
    history=histories(),
    name=st.sampled_from(sorted(MAKERS)),
    share=st.floats(0.0, 1.2),
    per_message=st.integers(1, 5),
)
def test_every_window_keeps_the_request_and_honest_errors(
    history: list[Message], name: str, share: float, per_message: int
) -> None:
    counter = FixedCounter(per_message, per_char=1)
    budget = max(1, int(counter.count_messages(history) * share))
    check(name, history, budget, counter)


@SETTINGS
@given(history=histories(), share=st.floats(0.0, 1.0))
def test_sliding_window_split_turn_shape(history: list[Message], share: float) -> None:
    """A split turn is the request, then a pair-safe suffix; the gaps are the two ranges."""
    counter = ApproxCounter()
    budget = max(1, int(counter.count_messages(history) * share))
    result, _ = build("sliding", history, budget, counter)
    p = prefix_length(history)
    kept = list(result.messages[p:])
    positions = {m.id: i for i, m in enumerate(history)}
    order = [positions[m.id] for m in kept]
    gaps = [(a + 1, b) for a, b in zip([p - 1, *order], order, strict=False) if b > a + 1]
    assert tuple(gaps) == result.dropped_ranges
    assert len(gaps) <= 2
    if len(gaps) == 2:  # only ever around the newest turn's request
        request = order[0]
        assert request == newest_request(history, p, order[1])
        assert any("opening user message" in note for note in result.notes)


# -- τ-bench, cut after every tool result ---------------------------------------------------


def tau_cuts(limit: int | None = None) -> list[list[Message]]:
    """τ-bench histories cut right after each batch of tool results (what an agent sends)."""
    path = DATA / "tau-bench" / "gpt-4o-airline.json"
    if not path.is_file():
        pytest.skip(f"τ-bench data not found at {path}")
    runs: list[dict[str, Any]] = json.loads(path.read_text())
    out: list[list[Message]] = []
    for record in runs[:limit]:
        history = formats.openai_chat.load(record["traj"])
        for i, m in enumerate(history):
            last_of_batch = i + 1 == len(history) or history[i + 1].role != "tool"
            if m.role == "tool" and last_of_batch:
                out.append(history[: i + 1])
    return out


@pytest.mark.parametrize("name", ["sliding", "prune", "hybrid-fail", "checkpoint-fail"])
def test_tau_bench_agent_loop_cuts_never_open_on_work(name: str) -> None:
    counter = ApproxCounter()
    cuts = tau_cuts(limit=12)
    assert cuts
    opened_on_work = 0
    for history in cuts:
        prefix = counter.count_messages(history[: prefix_length(history)])
        rest = counter.count_messages(history) - prefix
        for share in (0.05, 0.2, 0.5):  # of what follows the (large) system prompt
            result, used = build(name, history, prefix + max(1, int(rest * share)), counter)
            assert result.tokens <= used
            validate(result.messages)
            opened_on_work += opens_on_work(history, result)
    # Before the request was kept, over half of these contexts opened on an assistant
    # message at such budgets; now none does.
    assert opened_on_work == 0
