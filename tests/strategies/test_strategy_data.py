"""Every summarizing strategy, pruning and the pipeline on the real conversations.

τ-bench airline runs (OpenAI tool calls), Claude Code sessions (Anthropic blocks, parallel
calls, results inside user messages, thinking), SWE-agent trajectories and one LoCoMo chat.
Each result must keep every DESIGN.md invariant, and be deterministic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from strategy_checks import check_invariants, dump, least_window_tokens, root_conftest, snapshot

from contextfold.formats import anthropic, openai_chat
from contextfold.messages import Message
from contextfold.strategies import (
    Hybrid,
    Pipeline,
    PruneToolOutputs,
    Strategy,
    StrategyResult,
    Summarization,
    SummaryCompactor,
)
from contextfold.strategies._chars import char_size
from contextfold.strategies.run import run
from contextfold.summarizers import ExtractiveSummarizer
from contextfold.testing import FakeSummarizer
from contextfold.tokens.approx import ApproxCounter
from contextfold.turns import prefix_length, units

_conftest = root_conftest()
claude_code_main_sessions = _conftest.claude_code_main_sessions
claude_code_payload = _conftest.claude_code_payload
require_data = _conftest.require_data
swe_agent_openai = _conftest.swe_agent_openai

COUNTER = ApproxCounter()

Make = Callable[[int, Any], Strategy]

STRATEGIES: dict[str, Make] = {
    "summary": lambda b, s: Summarization(b, keep_recent=6, summarizer=s),
    "hybrid": lambda b, s: Hybrid(b, keep_recent=6, chunk_size=8, summarizer=s, max_chunks=4),
    "prune": lambda b, s: PruneToolOutputs(keep_recent=3, min_savings=200, max_tokens=b),
    "pipeline": lambda b, s: Pipeline(
        [
            PruneToolOutputs(keep_recent=3, min_savings=200),
            Hybrid(b, keep_recent=6, chunk_size=8, summarizer=s, max_chunks=4),
        ],
        max_tokens=b,
    ),
}


def floor_tokens(history: list[Message]) -> int:
    """Tokens of the prefix, the user's request and the newest unit: what any context needs."""
    p = prefix_length(history)
    return COUNTER.count_messages(history[:p]) + least_window_tokens(history, COUNTER)


def floor_chars(history: list[Message]) -> int:
    """Characters of the prefix plus the newest indivisible unit."""
    p = prefix_length(history)
    spans = units(history, p)
    return char_size(history[:p]) + (char_size(history[spans[-1][0] :]) if spans else 0)


def budget_for(history: list[Message], share: float) -> int:
    return max(int(COUNTER.count_messages(history) * share), floor_tokens(history) + 400)


def check(
    name: str, history: list[Message], share: float, summarizer: Callable[[], Any]
) -> StrategyResult:
    budget = budget_for(history, share)
    before = snapshot(history)
    result = run(STRATEGIES[name](budget, summarizer()), history, counter=COUNTER)
    check_invariants(history, before, result, counter=COUNTER, max_tokens=budget)
    again = run(STRATEGIES[name](budget, summarizer()), history, counter=COUNTER)
    assert dump(again) == dump(result)  # deterministic
    return result


# -- τ-bench --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_tau_bench_runs(name: str, tau_runs: list[dict[str, Any]]) -> None:
    compacted = 0
    for record in tau_runs[::8]:
        history = openai_chat.load(record["traj"])
        result = check(name, history, 0.4, ExtractiveSummarizer)
        compacted += result.tokens < result.tokens_before
    assert compacted > 0


def test_tau_bench_compactor(tau_runs: list[dict[str, Any]]) -> None:
    for record in tau_runs[::8]:
        history = openai_chat.load(record["traj"])
        budget = max(char_size(history) // 2, floor_chars(history) + 1500)
        before = snapshot(history)
        result = run(
            SummaryCompactor(ExtractiveSummarizer(), keep_recent_turns=2, budget_chars=budget),
            history,
            counter=COUNTER,
        )
        check_invariants(history, before, result, counter=COUNTER)
        assert char_size(result.messages) <= budget


# -- Claude Code sessions --------------------------------------------------------------------


@pytest.fixture(scope="module")
def sessions() -> list[list[Message]]:
    return [
        anthropic.load({"messages": claude_code_payload(p, include_compact_summary=False)})
        for p in claude_code_main_sessions()
    ]


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_claude_code_sessions(name: str, sessions: list[list[Message]]) -> None:
    for history in sessions:
        result = check(name, history, 0.15, ExtractiveSummarizer)
        assert result.tokens < result.tokens_before


def test_claude_code_compactor(sessions: list[list[Message]]) -> None:
    for history in sessions:
        budget = max(char_size(history) // 5, floor_chars(history) + 1500)
        before = snapshot(history)
        fake = FakeSummarizer()
        result = run(
            SummaryCompactor(fake, keep_recent_turns=3, budget_chars=budget),
            history,
            counter=COUNTER,
        )
        check_invariants(history, before, result, counter=COUNTER)
        assert char_size(result.messages) <= budget


def test_claude_code_pipeline_skips_the_summarizer_only_when_pruning_suffices(
    sessions: list[list[Message]],
) -> None:
    for history in sessions:
        prune = PruneToolOutputs(keep_recent=3, min_savings=200)
        pruned = run(prune, history, counter=COUNTER)
        assert pruned.pruned  # agent sessions are mostly tool output
        assert pruned.tokens < COUNTER.count_messages(history)
        for budget, calls_expected in ((pruned.tokens, False), (pruned.tokens - 1, True)):
            fake = FakeSummarizer()
            pipe = Pipeline(
                [prune, Hybrid(budget, keep_recent=6, chunk_size=8, summarizer=fake)],
                max_tokens=budget,
            )
            result = run(pipe, history, counter=COUNTER)
            assert (fake.calls > 0) is calls_expected
            assert result.tokens <= budget
            check_invariants(history, snapshot(history), result, counter=COUNTER, max_tokens=budget)


def test_claude_code_every_failure_falls_back(sessions: list[list[Message]]) -> None:
    history = sessions[0]
    budget = budget_for(history, 0.2)
    for code in ("http_error", "timeout", "truncated", "empty", "tool_call", "invalid"):
        result = run(
            Summarization(budget, keep_recent=6, summarizer=FakeSummarizer(fail=code)),  # type: ignore[arg-type]
            history,
            counter=COUNTER,
        )
        assert result.failure_code == code
        assert result.checkpoint is None
        assert result.tokens <= budget


# -- SWE-agent and LoCoMo --------------------------------------------------------------------


def test_swe_agent_trajectories() -> None:
    base = require_data() / "swe-agent-trajectories"
    for path in sorted(base.glob("*function_calling*.traj")):
        history = openai_chat.load(swe_agent_openai(path))
        for name in STRATEGIES:
            check(name, history, 0.5, FakeSummarizer)


def locomo_messages(sample: dict[str, Any], sessions: int) -> list[Message]:
    conv = sample["conversation"]
    a = conv["speaker_a"]
    keys = sorted(
        (int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k)),
    )[:sessions]
    out = [Message.system(f"A chat between {a} and {conv['speaker_b']}.", id="sys")]
    for n in keys:
        for turn in conv[f"session_{n}"]:
            text = f"[{conv[f'session_{n}_date_time']}] {turn['speaker']}: {turn['text']}"
            if turn["speaker"] == a:
                out.append(Message.user(text, id=turn["dia_id"]))
            else:
                out.append(Message.assistant(text, id=turn["dia_id"]))
    return out


def test_locomo_conversation() -> None:
    path: Path = require_data() / "locomo" / "locomo10.json"
    sample = json.loads(path.read_text())[1]
    history = locomo_messages(sample, 8)
    budget = budget_for(history, 0.1)
    # chat lines are short: a chunk must be long enough for a structured summary to be smaller
    for strategy in (
        Summarization(budget, keep_recent=6, summarizer=ExtractiveSummarizer()),
        Hybrid(budget, keep_recent=6, chunk_size=60, summarizer=ExtractiveSummarizer()),
    ):
        result = run(strategy, history, counter=COUNTER)
        check_invariants(history, snapshot(history), result, counter=COUNTER, max_tokens=budget)
        assert result.is_summarized
        assert result.fallback is None
    compactor = SummaryCompactor(ExtractiveSummarizer(), keep_recent_turns=4)
    result = run(compactor, history, counter=COUNTER)
    check_invariants(history, snapshot(history), result, counter=COUNTER)
    assert result.is_summarized
