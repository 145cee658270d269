"""Helpers for the strategy tests: small conversations and the DESIGN.md invariant checks."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from contextfold.messages import Message, TextPart, ToolCallPart
from contextfold.strategies.base import StrategyResult
from contextfold.tokens.base import TokenCounter
from contextfold.turns import is_request, newest_request, prefix_length, units, validate


def chat(turns: int, *, system: bool = True, tools: bool = False, size: int = 0) -> list[Message]:
    """``turns`` user/assistant exchanges with stable ids (``u3``, ``a3`` ...).

    With ``tools`` every turn has one tool call (``c3``) and its result (``t3``) between the
    user message and the final assistant answer (``b3``). ``size`` pads texts.
    """
    out: list[Message] = [Message.system("You are terse.", id="s")] if system else []
    pad = "x" * size
    for i in range(turns):
        out.append(Message.user(f"question {i} {pad}", id=f"u{i}"))
        if tools:
            call = ToolCallPart(f"c{i}", "lookup", f'{{"q": {i}}}')
            out.append(Message.assistant(None, tool_calls=[call], id=f"a{i}"))
            out.append(Message.tool_result(f"c{i}", f"result {i} {pad}", id=f"t{i}"))
            out.append(Message.assistant(f"answer {i}", id=f"b{i}"))
        else:
            out.append(Message.assistant(f"answer {i} {pad}", id=f"a{i}"))
    return out


def least_window_tokens(
    history: Sequence[Message], counter: TokenCounter, floor: int | None = None
) -> int:
    """Tokens any window after ``floor`` (the prefix) must hold, the prefix not included.

    The newest indivisible unit, and the newest turn's request when the unit does not open
    with one: a window never drops the user's request.
    """
    lo = prefix_length(history) if floor is None else floor
    spans = units(history, lo)
    if not spans:
        return 0
    start = spans[-1][0]
    need = counter.count_messages(history[start:])
    request = None if is_request(history[start]) else newest_request(history, lo, start)
    return need + (counter.count_message(history[request]) if request is not None else 0)


def snapshot(history: Sequence[Message]) -> list[tuple[int, dict[str, Any]]]:
    """Identity and content of every message, to prove nothing was mutated."""
    return [(id(m), m.to_dict()) for m in history]


def is_summary_message(m: Message) -> bool:
    return m.extra.get("contextfold") == "summary"


def carries_summary(m: Message, marker: str) -> bool:
    return any(isinstance(p, TextPart) and marker in p.text for p in m.parts)


def check_invariants(
    history: Sequence[Message],
    before: list[tuple[int, dict[str, Any]]],
    result: StrategyResult,
    *,
    counter: TokenCounter,
    max_tokens: int | None = None,
    tool_tokens: int = 0,
    reserve_tokens: int = 0,
) -> None:
    """Assert the DESIGN.md invariants on one strategy result.

    ``tool_tokens`` is what the request's tool schemas cost and ``reserve_tokens`` what the
    strategy keeps free: the messages and they together must fit ``max_tokens``, and the
    notes must say what each took.
    """
    # 1. the caller's list and messages are untouched
    assert snapshot(history) == before
    # 2. the leading system/developer messages are kept, in order, first
    p = prefix_length(history)
    assert list(result.messages[:p]) == list(history[:p])
    # 3. pairing holds in the context
    validate(result.messages, allow_pending_tail=True)
    # 4. the reported tokens are right and within budget
    assert result.tokens == counter.count_messages(result.messages)
    if max_tokens is not None:
        assert result.tokens + tool_tokens + reserve_tokens <= max_tokens
    if tool_tokens:
        assert any(f"tool schemas cost {tool_tokens} tokens" in note for note in result.notes)
    if reserve_tokens:
        assert any(f"reserved {reserve_tokens} tokens" in note for note in result.notes)
    # 5. a summary only when something was covered, and never empty
    ids = {m.id for m in history}
    foreign = [m for m in result.messages if m.id not in ids]
    for m in foreign:
        assert is_summary_message(m), f"unexpected message {m.id}"
        assert m.text.strip()
    if foreign:
        assert result.summarized_ranges
    # ranges are inside the history and disjoint
    spans = sorted([*result.summarized_ranges, *result.dropped_ranges])
    for (_, b), (c, _) in itertools.pairwise(spans):
        assert b <= c
    for a, b in spans:
        assert p <= a <= b <= len(history)
    # kept and verbatim messages are history messages in their original order
    positions = {m.id: i for i, m in enumerate(history)}
    order = [positions[m.id] for m in result.messages if m.id in positions]
    assert order == sorted(order)
    # nothing both kept and dropped/summarized
    gone = set(result.dropped) | set(result.summarized)
    assert not gone & {m.id for m in result.messages if not is_summary_message(m)}


def ids(result: StrategyResult) -> list[str]:
    return [m.id for m in result.messages]


def dump(result: StrategyResult) -> list[dict[str, Any]]:
    return [m.to_dict() for m in result.messages]


def root_conftest() -> ModuleType:
    """The shared data helpers module (``tests/shared_data.py``)."""
    import shared_data

    return shared_data
