"""ExtractiveSummarizer on real conversations: the demo chat (directly and as ``make demo``
runs it), Claude Code sessions at Claude Code's own summary length, and LoCoMo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from summary_sections import sections

from contextfold.formats import load
from contextfold.messages import Message
from contextfold.summarizers import ExtractiveSummarizer, SummaryRequest
from contextfold.tokens.approx import ApproxCounter
from shared_data import ROOT, claude_code_main_sessions, require_data


def demo_chat() -> tuple[Message, ...]:
    return tuple(load(json.loads((ROOT / "examples" / "support_chat.json").read_text())))


DEMO_FACTS = (
    "$119.00",
    "LS-48213",
    "LS-48219",
    "RF-7720",
    "4417",
    "accounts@okafor-design.example",
    "5.2.3",
)


def test_demo_chat_summary_keeps_amounts_ids_card_email_and_version() -> None:
    """One summary of the whole demo chat at a tenth of its size keeps its facts."""
    history = demo_chat()
    counter = ApproxCounter()
    budget = counter.count_messages(history) // 10
    result = ExtractiveSummarizer(max_output_tokens=budget).summarize(SummaryRequest(history[1:]))
    assert result.ok
    assert counter.count_text(result.text) <= budget
    for fact in DEMO_FACTS:
        assert fact in result.text, fact
    assert "(none)" not in result.text
    assert next(iter(sections(result.text))) == "Requests"


def test_make_demo_keeps_the_facts_through_its_running_summary(tmp_path: Path) -> None:
    """What ``make demo`` runs: ``compact --budget 500`` on the demo chat, stored in SQLite.

    The running summary is rebuilt chunk by chunk at a quarter of the budget, so every fact
    must survive several merges in the room the lower mark leaves it.
    """
    exe = Path(sys.executable).parent / "contextfold"
    proc = subprocess.run(
        [
            str(exe),
            "compact",
            str(ROOT / "examples" / "support_chat.json"),
            "--budget",
            "500",
            "--store",
            f"sqlite:///{tmp_path / 'demo.db'}",
            "--conversation",
            "demo",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    context = json.loads(proc.stdout)["context"]
    summary = next(
        b["text"]
        for m in context
        if m["role"] == "user"
        for b in m["content"]
        if "summary" in b["text"]
    )
    for fact in DEMO_FACTS:
        assert fact in summary, fact
    assert "(none)" not in summary


def test_summary_fills_the_room_it_is_given() -> None:
    history = demo_chat()[1:]
    counter = ApproxCounter()
    for budget in (80, 150, 300):
        text = (
            ExtractiveSummarizer(max_output_tokens=budget).summarize(SummaryRequest(history)).text
        )
        used = counter.count_text(text)
        assert budget * 0.8 <= used <= budget, (budget, used)


def test_claude_code_sessions_keep_their_paths_at_claude_codes_own_length() -> None:
    """Over the main sessions: at least 95% of the paths mentioned twice or more survive in a
    summary as long as Claude Code's own, and at least 90% of the paths listed are real."""
    require_data()
    from bench.claude_code_paths import (
        claude_code_session,
        context_text,
        is_real_path,
        listed_paths,
        paths_mentioned,
        tool_text,
    )

    counter = ApproxCounter()
    wanted_total = kept = listed_total = real = 0
    for path in claude_code_main_sessions():
        span, own_summary, cwd = claude_code_session(path)
        budget = counter.count_text(own_summary)
        result = ExtractiveSummarizer(max_output_tokens=budget).summarize(
            SummaryRequest(tuple(span), kind="checkpoint")
        )
        assert result.ok
        assert counter.count_text(result.text) <= budget
        wanted = [p for p, c in paths_mentioned(context_text(span), cwd).items() if c >= 2]
        wanted_total += len(wanted)
        kept += sum(1 for p in wanted if p in result.text)
        listed = listed_paths(result.text)
        tools = tool_text(span)
        listed_total += len(listed)
        real += sum(1 for p in listed if is_real_path(p, tools))
    assert kept / wanted_total >= 0.95
    assert real / listed_total >= 0.90


def test_locomo_dates_and_names_survive() -> None:
    data: Path = require_data()
    from bench.retention import locomo_messages

    sample = json.loads((data / "locomo" / "locomo10.json").read_text())[0]
    result = ExtractiveSummarizer(max_output_tokens=1500).summarize(
        SummaryRequest(tuple(locomo_messages(sample)))
    )
    assert result.ok
    assert ApproxCounter().count_text(result.text) <= 1500
    for needle in ("8 May, 2023", "Sweden", "Caroline", "Melanie", "adoption agency"):
        assert needle in result.text
    assert "## Requests" not in result.text  # two people talking: no one requests of the other
