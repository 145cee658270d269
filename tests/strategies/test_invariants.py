"""Property tests: every DESIGN.md invariant, on the transforms and the sliding window.

Conversations are generated with a system prefix, user turns, assistant text, tool calls
(single, parallel, and Responses-style consecutive call messages), results as ``tool``
messages or inside a user message (Anthropic), and the occasional later system message.
The same invariants are then checked on the real data sets.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategy_checks import least_window_tokens

from contextfold import Recall, formats
from contextfold.errors import BudgetError
from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart
from contextfold.strategies.run import run
from contextfold.strategies.sliding import SlidingWindow, fit_window
from contextfold.testing import FixedCounter
from contextfold.tokens.approx import ApproxCounter
from contextfold.tokens.base import TokenCounter
from contextfold.transforms import keep_last_messages, keep_last_with_summary, trim_to_token_budget
from contextfold.turns import (
    group_turns,
    is_request,
    newest_request,
    prefix_length,
    units,
    validate,
)
from semantic_helpers import ConceptEmbedder
from shared_data import claude_code_main_sessions, claude_code_payload, swe_agent_openai

T = TypeVar("T")
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
COUNTERS: list[TokenCounter] = [ApproxCounter(), FixedCounter(5, per_char=0)]

WORDS = ["alpha", "order 48213", "refund", "flight AA12", "ok", "x" * 60, "</summary>"]


@st.composite
def conversations(draw: st.DrawFn, *, leading_orphans: bool = False) -> list[Message]:
    """A valid conversation (or one with orphaned results right after the prefix)."""
    seq = iter(range(10_000))

    def mid() -> str:
        return f"m{next(seq)}"

    def text() -> str:
        return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))

    out: list[Message] = []
    for _ in range(draw(st.integers(0, 2))):
        role = draw(st.sampled_from(["system", "developer"]))
        out.append(Message(role, (TextPart(text()),), id=mid()))
    if leading_orphans:
        for k in range(draw(st.integers(0, 2))):
            out.append(Message.tool_result(f"gone{k}", text(), id=mid()))
    calls = iter(range(10_000))
    for _ in range(draw(st.integers(0, 6))):
        if out and draw(st.integers(0, 9)) == 0:
            out.append(Message.system("note: " + text(), id=mid()))
        out.append(Message.user(text(), id=mid()))
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["text", "tools", "tools", "anthropic", "responses"]))
            if kind == "text":
                out.append(Message.assistant(text(), id=mid()))
                continue
            ids = [f"call{next(calls)}" for _ in range(draw(st.integers(1, 3)))]
            if kind == "responses":
                for cid in ids:
                    out.append(Message.assistant(tool_calls=[ToolCallPart(cid, "f")], id=mid()))
            else:
                say = text() if draw(st.booleans()) else None
                out.append(
                    Message.assistant(
                        say, tool_calls=[ToolCallPart(c, "f", '{"q": 1}') for c in ids], id=mid()
                    )
                )
            if kind == "anthropic":
                out.append(Message.user([ToolResultPart(c, text()) for c in ids], id=mid()))
            else:
                out.extend(Message.tool_result(c, text(), id=mid()) for c in ids)
        if draw(st.booleans()):
            out.append(Message.assistant(text(), id=mid()))
    return out


def attempt(build: Callable[[], T]) -> tuple[T | None, BudgetError | None]:
    """Run ``build``; return its result, or the BudgetError it raised."""
    try:
        return build(), None
    except BudgetError as exc:
        return None, exc


def snapshot(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in messages]


def is_summary(m: Message) -> bool:
    return m.extra.get("contextfold") == "summary"


def check_common(history: list[Message], before: list[dict[str, Any]], out: Sequence[Message]):
    """Invariants 1-3 and the tail shape shared by every transform; returns the tail.

    What is kept after the prefix is a verbatim suffix of the input, or the newest turn's
    request followed by one (the request is never dropped). And when anything was dropped,
    the kept part holds a user request if the history has one after the prefix.
    """
    assert snapshot(history) == before  # 1: the input is not modified
    p = prefix_length(history)
    assert list(out[:p]) == history[:p]  # 2: leading system/developer kept, in order
    validate(out)  # 3: no orphaned result, no call without all its results
    kept = [m for m in out[p:] if not is_summary(m)]
    request, tail = split_request(history, kept)
    if tail:  # a verbatim suffix of the input
        assert history[len(history) - len(tail) :] == tail
    if request is not None:
        assert request == newest_request(history, p, len(history) - len(tail))
    has_request = newest_request(history, p, len(history)) is not None
    if kept and len(kept) < len(history) - p and has_request:
        assert any(is_request(m) for m in kept)
    return tail


def split_request(history: list[Message], kept: list[Message]) -> tuple[int | None, list[Message]]:
    """``(index of a request kept apart from the suffix, the suffix)`` of the kept part."""
    if not kept or history[len(history) - len(kept) :] == kept:
        return None, kept
    positions = {m.id: i for i, m in enumerate(history)}
    return positions[kept[0].id], kept[1:]


# -- SlidingWindow --------------------------------------------------------------------------


@SETTINGS
@given(
    conversations(),
    st.integers(1, 400),
    st.sampled_from(COUNTERS),
    st.booleans(),
)
def test_sliding_window_invariants(
    history: list[Message], budget: int, counter: TokenCounter, with_tools: bool
) -> None:
    before = snapshot(history)
    tools = [{"name": "lookup", "parameters": {"type": "object"}}] if with_tools else None
    window = SlidingWindow(budget, tools=tools, compact_to=1.0)  # the classic window's rules
    tool_cost = window.tool_tokens(counter)
    p = prefix_length(history)
    result, err = attempt(lambda: run(window, history, counter=counter))
    if err is not None:
        # 4: the error is honest: the prefix, the request and the newest unit are over, and
        # that much budget works.
        prefix_cost = counter.count_messages(history[:p]) + tool_cost
        assert err.budget == budget
        assert err.required is not None
        assert err.required > budget
        assert err.required == prefix_cost + least_window_tokens(history, counter, p)
        run(SlidingWindow(err.required, tools=tools, compact_to=1.0), history, counter=counter)
        assert snapshot(history) == before
        return
    assert result is not None
    tail = check_common(history, before, result.messages)
    assert result.tokens == counter.count_messages(result.messages)
    assert result.tokens + tool_cost <= budget  # 4: within budget
    assert not any(is_summary(m) for m in result.messages)  # 5: never a summary
    start = len(history) - len(tail)
    kept = list(result.messages[p:])
    if start > p and newest_request(history, p, len(history)) is not None:
        assert is_request(kept[0])  # never opens on an assistant message or a tool result
    request, _ = split_request(history, kept)
    if request is None:
        assert result.dropped_ranges == (((p, start),) if start > p else ())
    else:  # the newest turn did not fit whole: its request, the newest units, two gaps
        assert result.dropped_ranges == tuple(
            (a, b) for a, b in ((p, request), (request + 1, start)) if b > a
        )
        assert start > request + 1
        assert any("opening user message" in n for n in result.notes)
        return
    if tail:
        assert tail[0].role != "tool"
        assert not tail[0].is_tool_result_only
    # Whole turns while the newest turn fits, and as many as fit.
    turns = group_turns(history)
    starts = [t.start for t in turns]
    if (
        turns
        and counter.count_messages(history[turns[-1].start :])
        + result.tokens
        - (counter.count_messages(tail))
        + tool_cost
        <= budget
    ):
        assert start in starts or start == len(history)
        earlier = [s for s in starts if s < start]
        if earlier:
            grown = counter.count_messages(history[:p]) + counter.count_messages(
                history[earlier[-1] :]
            )
            assert grown + tool_cost > budget
    again = run(window, history, counter=counter)
    assert again.messages == result.messages  # 7: deterministic
    assert snapshot(history) == before


@SETTINGS
@given(conversations(), st.integers(20, 300), st.integers(0, 6))
def test_fit_window_min_start_never_reaches_back(
    history: list[Message], budget: int, back: int
) -> None:
    counter = ApproxCounter()
    cuts = [a for a, _ in units(history, prefix_length(history))]
    if not cuts:
        return
    floor = cuts[max(0, len(cuts) - 1 - back)]
    fit, err = attempt(lambda: fit_window(history, budget, counter, min_start=floor, reserved=7))
    if fit is None:
        assert err is not None
        assert err.required is not None
        assert err.required > budget
        return
    assert fit.start >= floor
    assert fit.tokens + 7 <= budget
    validate(fit.messages(history))


# -- transforms -----------------------------------------------------------------------------


@SETTINGS
@given(conversations(leading_orphans=True), st.integers(0, 30))
def test_keep_last_messages_invariants(history: list[Message], count: int) -> None:
    before = snapshot(history)
    out = keep_last_messages(history, count)
    tail = check_common(history, before, out)
    p = prefix_length(history)
    assert len(tail) <= count
    orphans = sum(1 for _ in _leading_orphans(history, p))
    if count >= len(history) - p and orphans == 0:
        assert out is history  # nothing changed: the same object
    else:
        assert out is not history or tail == history[p:]
    # The window starts at the first point at or after "the last count" that splits no pair;
    # when that holds no request, the newest request takes the place of one of them.
    request, expected = expected_last_window(history, p + orphans, count)
    assert len(history) - len(tail) == expected
    assert split_request(history, list(out[p:]))[0] == request
    assert keep_last_messages(history, count) == out  # deterministic


def expected_last_window(history: list[Message], lo: int, count: int) -> tuple[int | None, int]:
    """``(kept request, tail start)`` that ``keep_last_messages`` should pick."""
    n = len(history)
    cuts = [a for a, _ in units(history, lo)] + [n]
    start = min(c for c in cuts if c >= max(lo, n - count))
    if count == 0 or newest_request(history, start, n) is not None:
        return None, start
    request = newest_request(history, lo, start)
    if request is None:
        return None, start
    return request, min(c for c in cuts if c >= max(n - count + 1, request + 1))


def _leading_orphans(history: list[Message], p: int):
    i = p
    while i < len(history) and history[i].is_tool_result_only:
        yield history[i]
        i += 1


@SETTINGS
@given(
    conversations(leading_orphans=True),
    st.integers(0, 30),
    st.sampled_from(["facts so far", "   ", "", "</summary> forged"]),
    st.sampled_from(["system", "user"]),
)
def test_keep_last_with_summary_invariants(
    history: list[Message], count: int, text: str, role: str
) -> None:
    before = snapshot(history)
    calls: list[int] = []

    def source() -> str:
        calls.append(1)
        return text

    out = keep_last_with_summary(history, source, count, role=role)  # type: ignore[arg-type]
    p = prefix_length(history)
    orphans = sum(1 for _ in _leading_orphans(history, p))
    tail_plain = keep_last_messages(history, count)
    kept_real = len(tail_plain) - p
    real_dropped = kept_real < len(history) - p - orphans
    assert snapshot(history) == before
    # 5: the summary only when something real was dropped, and only if it is not blank.
    assert bool(calls) == real_dropped
    injected = real_dropped and bool(text.strip())
    if not injected:
        assert out == tail_plain
        if tail_plain is history:
            assert out is history
        return
    assert len(calls) == 1
    validate(out)
    assert list(out[:p]) == history[:p]
    if role == "system":
        assert is_summary(out[p])
        assert out[p].role == "system"
        assert out[p].text.endswith(text.strip())
        assert list(out[p + 1 :]) == list(tail_plain[p:])
    else:  # a user summary is a message of its own or merged into the first kept user turn
        assert text.strip() in out[p].text
        assert len(out) in (len(tail_plain), len(tail_plain) + 1)
    assert keep_last_with_summary(history, source, count, role=role) == out  # type: ignore[arg-type]


@SETTINGS
@given(conversations(leading_orphans=True), st.integers(1, 400), st.sampled_from(COUNTERS))
def test_trim_to_token_budget_invariants(
    history: list[Message], budget: int, counter: TokenCounter
) -> None:
    before = snapshot(history)
    p = prefix_length(history)
    out, err = attempt(lambda: trim_to_token_budget(history, budget, counter=counter))
    if err is not None:
        assert err.required is not None
        assert err.required > budget
        assert snapshot(history) == before
        return
    assert out is not None
    tail = check_common(history, before, out)
    assert counter.count_messages(out) <= budget
    orphans = sum(1 for _ in _leading_orphans(history, p))
    if orphans == 0 and counter.count_messages(history) <= budget:
        assert out is history
    # As many whole units as fit (after the kept request, if any): one more would go over.
    start = len(history) - len(tail)
    request, _ = split_request(history, list(out[p:]))
    lo = p + orphans if request is None else request + 1
    fixed = counter.count_messages(history[:p])
    if request is not None:
        fixed += counter.count_message(history[request])
    earlier = [c for c, _ in units(history, lo) if c < start]
    if earlier:
        assert fixed + counter.count_messages(history[earlier[-1] :]) > budget
    assert trim_to_token_budget(history, budget, counter=counter) == out


# -- the real data sets ---------------------------------------------------------------------


def _real_conversations(data_dir: Path) -> list[tuple[str, list[Message]]]:
    out: list[tuple[str, list[Message]]] = []
    runs = json.loads((data_dir / "tau-bench" / "gpt-4o-airline.json").read_text())
    for k, item in enumerate(runs[:8]):
        out.append((f"tau-{k}", formats.openai_chat.load(item["traj"])))
    for path in claude_code_main_sessions():
        payload = claude_code_payload(path)
        out.append((path.stem[:8], formats.anthropic.load({"messages": payload})))
    for path in sorted((data_dir / "swe-agent-trajectories").glob("*.traj"))[:3]:
        try:
            payload = swe_agent_openai(path)
            out.append((path.stem[:20], formats.openai_chat.load(payload)))
        except (KeyError, TypeError):
            continue  # a text-action trajectory: no function-calling history
    return out


@pytest.mark.parametrize("fraction", [0.02, 0.1, 0.5])
def test_real_data_sliding_and_trim(data_dir: Path, fraction: float) -> None:
    counter = ApproxCounter()
    for name, history in _real_conversations(data_dir):
        validate(history, allow_pending_tail=True)
        if history and history[-1].tool_calls:
            continue  # ends while tools run: nothing to send yet
        before = snapshot(history)
        total = counter.count_messages(history)
        budget = max(1, int(total * fraction))
        for build in (
            lambda h, b: list(run(SlidingWindow(b), h, counter=counter).messages),
            lambda h, b: trim_to_token_budget(h, b, counter=counter),
        ):
            out, err = attempt(partial(build, history, budget))
            if err is not None:
                assert err.required is not None
                assert err.required > budget, name
                continue
            assert out is not None
            check_common(history, before, out)
            assert counter.count_messages(out) <= budget, name
            assert out == build(history, budget), name
        kept = keep_last_with_summary(history, "earlier work", 20)
        check_common(history, before, kept)


# -- Recall ----------------------------------------------------------------------------------


@SETTINGS
@given(
    conversations(),
    st.integers(60, 400),
    st.sampled_from(["alpha refund", "flight AA12?", "order 48213 dog"]),
    st.booleans(),
    st.sampled_from([0.0, 0.8]),
)
def test_recall_invariants(
    history: list[Message], budget: int, question: str, semantic: bool, spread: float
) -> None:
    history = [*history, Message.user(question, id="question")]
    before = snapshot(history)
    counter = ApproxCounter()
    embedder = ConceptEmbedder() if semantic else None
    strategy = Recall(SlidingWindow(budget), embedder=embedder, spread=spread)
    result, err = attempt(lambda: run(strategy, history, counter=counter))
    if err is not None:
        assert err.required is not None
        assert err.required > budget
        assert snapshot(history) == before
        return
    assert result is not None
    assert snapshot(history) == before  # 1: the input is not modified
    p = prefix_length(history)
    assert list(result.messages[:p]) == history[:p]  # 2: the prefix, in order
    validate(result.messages)  # 3: no orphaned result, no call without its results
    assert result.tokens == counter.count_messages(result.messages)
    assert result.tokens <= budget  # 4: within budget
    assert all(0 <= i < len(history) - 1 for i in result.recalled)  # only earlier messages
    assert result.messages[-1].parts[-1].text == question  # the question closes the context
    again = run(strategy, history, counter=counter)
    assert again.messages == result.messages  # 7: deterministic
