"""The installed ``contextfold`` command, run as a subprocess on the examples and real data.

Every test checks what a user relies on: the output loads back with ``contextfold.formats``,
the invariants hold (pairing valid, system prompt first, within budget under the same
counter), the stats are right, and each kind of bad input gives its exit code and a message
that says what to fix.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contextfold import formats, turns
from contextfold.messages import Message
from contextfold.tokens.approx import ApproxCounter
from shared_data import (
    ROOT,
    claude_code_main_sessions,
    claude_code_payload,
    require_data,
    swe_agent_openai,
)

EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent / "contextfold"
EXE = str(BIN) if BIN.exists() else shutil.which("contextfold")


def cli(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> Any:
    """Run the installed entry point; returns the CompletedProcess."""
    assert EXE, "the contextfold entry point is not installed"
    full_env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    full_env.pop("OPENAI_BASE_URL", None)
    full_env.update(env or {})
    return subprocess.run(
        [EXE, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=full_env,
        check=False,
    )


def loaded(payload: Any, fmt: str) -> list[Message]:
    name = {"openai": "openai_chat", "anthropic": "anthropic", "responses": "openai_responses"}
    return formats.load(payload, name[fmt])


def check_context(out: list[Message], original: list[Message], budget: int) -> None:
    """The invariants a compacted context must keep."""
    turns.validate(out, allow_pending_tail=True)
    assert ApproxCounter().count_messages(out) <= budget
    n = turns.prefix_length(original)
    assert [m.text for m in out[:n]] == [m.text for m in original[:n]]


# -- compact on the shipped examples ------------------------------------------------------

EXAMPLE_CASES = [
    ("support_chat.json", "openai", 400),
    ("agent_run.json", "openai", 2000),
    ("coding_session.json", "anthropic", 1000),
]


@pytest.mark.parametrize(
    ("name", "fmt", "budget", "strategy"),
    [
        *[(*case, "sliding") for case in EXAMPLE_CASES],
        *[(*case, "hybrid") for case in EXAMPLE_CASES],
        (*EXAMPLE_CASES[0], "summary"),
    ],
)
def test_compact_examples_keep_invariants_and_report_true_stats(
    name: str, fmt: str, budget: int, strategy: str
) -> None:
    path = EXAMPLES / name
    original = loaded(json.loads(path.read_text()), fmt)
    proc = cli("compact", str(path), "--budget", str(budget), "--strategy", strategy, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    out = loaded(data["context"], fmt)
    check_context(out, original, budget)
    stats = data["stats"]
    before = ApproxCounter().count_messages(original)
    assert stats["tokens_before"] == before
    assert stats["tokens_after"] <= budget
    assert stats["tokens_saved"] == before - stats["tokens_after"]
    assert stats["compression_ratio"] == pytest.approx(stats["tokens_after"] / before, abs=1e-3)
    assert stats["messages_before"] == len(original)
    assert stats["format"] == fmt
    assert stats["fallback"] is None
    if strategy == "sliding":
        assert stats["messages_dropped"] > 0
        assert not stats["summarized"]
    else:
        assert stats["summarized"]
        assert stats["messages_summarized"] > 0
        assert stats["summarizer_tokens"] == 0  # the offline summarizer calls no model


def test_compact_writes_same_format_to_file_and_stats_table_to_stderr(tmp_path: Path) -> None:
    out = tmp_path / "ctx.json"
    proc = cli("compact", str(EXAMPLES / "coding_session.json"), "--budget", "900", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    payload = json.loads(out.read_text())
    assert set(payload) == {"system", "messages"}  # Anthropic in, Anthropic out
    assert formats.detect(payload) == "anthropic"
    for label in ("tokens before", "tokens after", "tokens saved", "compression ratio"):
        assert label in proc.stderr
    assert "fallback" in proc.stderr


def test_compact_reads_stdin_and_keeps_request_body_fields() -> None:
    body = {
        "model": "gpt-4o",
        "temperature": 0,
        "messages": json.loads((EXAMPLES / "support_chat.json").read_text()),
    }
    proc = cli(
        "compact", "-", "--budget", "300", "--strategy", "sliding", "-q", stdin=json.dumps(body)
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["model"] == "gpt-4o"
    assert out["temperature"] == 0
    assert len(out["messages"]) < len(body["messages"])
    assert out["messages"][0] == body["messages"][0]


def test_plan_lists_every_message_and_calls_no_summarizer() -> None:
    path = EXAMPLES / "support_chat.json"
    # A provider summarizer is never needed for a plan, so no API key is asked for.
    proc = cli("plan", str(path), "--budget", "400", "--strategy", "hybrid", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    rows = data["messages"]
    original = loaded(json.loads(path.read_text()), "openai")
    assert [r["index"] for r in rows] == list(range(len(original)))
    assert rows[0]["action"] == "kept"
    assert "system" in rows[0]["reason"]
    counts = data["plan"]["counts"]
    assert counts.get("summarized", 0) > 0
    assert sum(counts.values()) == len(original)
    assert data["plan"]["projected_tokens"] <= 400
    # The last message is always kept verbatim.
    assert rows[-1]["action"] == "kept"


def test_plan_table_explains_actions() -> None:
    proc = cli(
        "plan", str(EXAMPLES / "support_chat.json"), "--budget", "400", "--strategy", "sliding"
    )
    assert proc.returncode == 0, proc.stderr
    assert "dropped" in proc.stdout
    assert "projected" in proc.stdout


def test_stats_json_breakdown_adds_up() -> None:
    path = EXAMPLES / "coding_session.json"
    proc = cli("stats", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    original = loaded(json.loads(path.read_text()), "anthropic")
    counter = ApproxCounter()
    assert s["messages"] == len(original)
    assert s["tokens"] == counter.count_messages(original)
    assert sum(v["tokens"] for v in s["by_role"].values()) == s["tokens"]
    assert sum(t["tokens"] for t in s["turns"]) + s["by_role"]["system"]["tokens"] == s["tokens"]
    assert s["by_tool"]["Edit"]["calls"] == 4
    assert s["by_tool"]["Bash"]["calls"] == 4
    sizes = [m["tokens"] for m in s["largest"]]
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[0] == max(counter.count_message(m) for m in original)
    windows = {w["tokens"]: w["fits"] for w in s["windows"]}
    assert windows[8_192] is True
    assert list(windows) == [8_192, 32_768, 128_000, 200_000, 1_000_000]


def test_stats_many_files_gives_one_entry_each() -> None:
    paths = [str(EXAMPLES / n) for n, _, _ in EXAMPLE_CASES]
    proc = cli("stats", *paths, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [d["format"] for d in data] == ["openai", "openai", "anthropic"]


def test_convert_openai_to_anthropic_and_back_keeps_text() -> None:
    path = EXAMPLES / "support_chat.json"
    original = json.loads(path.read_text())
    to_anthropic = cli("convert", str(path), "--to", "anthropic")
    assert to_anthropic.returncode == 0, to_anthropic.stderr
    body = json.loads(to_anthropic.stdout)
    assert body["system"] == original[0]["content"]
    back = cli("convert", "-", "--to", "openai", stdin=to_anthropic.stdout)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout) == original


def test_convert_tool_calls_stay_paired() -> None:
    proc = cli("convert", str(EXAMPLES / "coding_session.json"), "--to", "openai")
    assert proc.returncode == 0, proc.stderr
    messages = formats.load(json.loads(proc.stdout), "openai_chat")
    turns.validate(messages)
    assert sum(len(m.tool_calls) for m in messages) == 12


# -- the store: compact --store and log ---------------------------------------------------


def test_compact_with_store_persists_and_reuses_the_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chats.db'}"
    args = ("compact", str(EXAMPLES / "support_chat.json"), "--budget", "400", "--json")
    first = json.loads(cli(*args, "--store", url).stdout)
    assert first["stats"]["compacted"] is True
    assert first["stats"]["summarizer_tokens"] == 0  # offline: no model was called
    assert first["stats"]["store"]["appended"] == 41
    second = json.loads(cli(*args, "--store", url).stdout)
    assert second["stats"]["store"]["appended"] == 0
    assert second["stats"]["compacted"] is False
    assert second["stats"]["summarizer_tokens"] == 0
    assert second["stats"]["checkpoint_id"] == first["stats"]["checkpoint_id"]
    assert second["context"] == first["context"]

    listed = json.loads(cli("log", "list", "--store", url, "--json").stdout)
    assert listed == [{"conversation": "support_chat", "messages": 41}]
    shown = json.loads(
        cli("log", "show", "--store", url, "--conversation", "support_chat", "--json").stdout
    )
    assert [m["seq"] for m in shown["messages"]] == list(range(1, 42))
    assert len(shown["checkpoints"]) == 1


def test_compact_with_store_refuses_another_conversation_under_the_same_id(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'chats.db'}"

    def chat(folder: str, who: str, n: int) -> Path:
        path = tmp_path / folder / "chat.json"  # the same file name: the same default id
        path.parent.mkdir()
        turns = [{"role": "system", "content": "Be brief."}]
        for i in range(n):
            turns.append({"role": "user", "content": f"{who} asks question {i}"})
            turns.append({"role": "assistant", "content": f"{who} gets answer {i}"})
        path.write_text(json.dumps(turns))
        return path

    alice, bob = chat("a", "Alice", 5), chat("b", "Bob", 8)
    assert cli("compact", str(alice), "--budget", "200", "--store", url).returncode == 0
    proc = cli("compact", str(bob), "--budget", "200", "--store", url, "--json")
    assert proc.returncode == 1
    assert "differs from the file at message 2" in proc.stderr
    shown = cli("log", "show", "--store", url, "--conversation", "chat", "--json")
    assert len(json.loads(shown.stdout)["messages"]) == 11  # nothing of Bob's was appended
    again = cli("compact", str(alice), "--budget", "200", "--store", url, "--json")
    assert json.loads(again.stdout)["stats"]["store"]["appended"] == 0


def test_log_append_show_and_context(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'log.db'}"
    base = ("--store", url, "--conversation", "c1")
    chat = tmp_path / "chat.json"
    chat.write_text(
        json.dumps(
            [{"role": "system", "content": "Be brief."}]
            + [
                m
                for i in range(12)
                for m in (
                    {"role": "user", "content": f"fact {i}: code {1000 + i} " * 5},
                    {"role": "assistant", "content": f"Noted fact {i}."},
                )
            ]
        )
    )
    assert cli("log", "append", *base, str(chat)).returncode == 0
    proc = cli("log", "append", *base, "--role", "user", "--text", "What was fact 11?")
    assert proc.returncode == 0, proc.stderr
    assert "seq 26..26" in proc.stdout
    shown = cli("log", "show", *base)
    assert shown.returncode == 0
    assert "fact 11" in shown.stdout
    proc = cli("log", "context", *base, "--budget", "150", "--strategy", "sliding", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    ctx = formats.load(data["context"], "openai_chat")
    assert ctx[0].text == "Be brief."
    assert ctx[-1].text == "What was fact 11?"
    assert ApproxCounter().count_messages(ctx) <= 150
    assert data["stats"]["messages_before"] == 26
    assert data["stats"]["messages_dropped"] > 0


def test_log_append_file_then_list(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    proc = cli(
        "log", "append", "--store", url, "--conversation", "agent", str(EXAMPLES / "agent_run.json")
    )
    assert proc.returncode == 0, proc.stderr
    assert "appended 16 message(s)" in proc.stdout


# -- real data --------------------------------------------------------------------------


def test_tau_bench_run_wrapped_and_bare(tmp_path: Path, tau_runs: list[dict[str, Any]]) -> None:
    def reuses_ids(run: dict[str, Any]) -> bool:
        ids = [c["id"] for m in run["traj"] for c in m.get("tool_calls") or []]
        return len(ids) != len(set(ids))

    # The longest run whose agent reuses a call id once it was answered: providers accept
    # that, and so must the command.
    run = max((r for r in tau_runs if reuses_ids(r)), key=lambda r: len(r["traj"]))
    wrapped = tmp_path / "run.json"
    wrapped.write_text(json.dumps(run))
    original = formats.load(run["traj"], "openai_chat")
    before = ApproxCounter().count_messages(original)
    budget = before // 2
    proc = cli("compact", str(wrapped), "--budget", str(budget), "--strategy", "hybrid", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    out = formats.load(data["context"], "openai_chat")
    check_context(out, original, budget)
    assert data["stats"]["tokens_before"] == before
    assert data["stats"]["summarized"]
    stats = json.loads(cli("stats", str(wrapped), "--json").stdout)
    assert stats["tokens"] == before
    calls = sum(len(m.tool_calls) for m in original)
    assert sum(v["calls"] for v in stats["by_tool"].values()) == calls


def test_claude_code_session_jsonl_and_merged(tmp_path: Path) -> None:
    session = claude_code_main_sessions()[0]
    payload = claude_code_payload(session)
    original = formats.load(payload, "anthropic")
    merged = tmp_path / "session.json"
    merged.write_text(json.dumps(payload))
    budget = 40_000
    for source in (merged, session):  # a merged file, and the raw log merged by the CLI
        proc = cli(
            "compact", str(source), "--budget", str(budget), "--strategy", "sliding", "--json"
        )
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        out = formats.load(data["context"], "anthropic")
        turns.validate(out, allow_pending_tail=True)
        assert ApproxCounter().count_messages(out) <= budget
        assert data["stats"]["messages_before"] == len(original)
        assert data["stats"]["tokens_before"] == ApproxCounter().count_messages(original)


def test_hybrid_on_a_long_session_folds_everything_or_says_what_stopped_it() -> None:
    """A first build over a long real session summarizes the whole older span."""
    session = max(claude_code_main_sessions(), key=lambda p: p.stat().st_size)
    proc = cli("compact", str(session), "--strategy", "hybrid", "--budget", "20000", "--json")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)["stats"]
    assert stats["tokens_after"] <= 20000
    assert stats["messages_summarized"] > 150
    assert stats["messages_dropped"] == 0
    assert stats["limit_reached"] is None
    assert any("folded" in note for note in stats["notes"])


def test_stats_table_names_the_limit_that_stopped_a_build() -> None:
    import io

    from contextfold.cli._report import print_stats, result_stats
    from contextfold.strategies import Hybrid
    from contextfold.strategies.run import run
    from contextfold.testing import FakeSummarizer, FixedCounter

    history = [
        Message.user(f"question {i}") if i % 2 == 0 else Message.assistant("answer")
        for i in range(40)
    ]
    strategy = Hybrid(
        100, keep_recent=2, chunk_size=2, summarizer=FakeSummarizer("S"), max_chunks=3
    )
    result = run(strategy, history, counter=FixedCounter(10, per_char=0))
    stats = result_stats(result, budget=100, messages_in=len(history))
    assert stats["messages_dropped"] > 0
    assert stats["limit_reached"] == result.limit_reached
    assert any("max_chunks" in note for note in stats["notes"])
    out = io.StringIO()
    print_stats(stats, title="contextfold compact", stream=out)
    row = next(line for line in out.getvalue().splitlines() if "stopped by a limit" in line)
    assert f"{stats['messages_dropped']} older messages trimmed without a summary" in row


def test_swe_agent_trajectory(tmp_path: Path) -> None:
    path = require_data() / "swe-agent-trajectories" / "marshmallow-1867__function_calling.traj"
    original = formats.load(swe_agent_openai(path), "openai_chat")
    before = ApproxCounter().count_messages(original)
    budget = before // 3
    proc = cli("compact", str(path), "--budget", str(budget), "--strategy", "summary", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    out = formats.load(data["context"], "openai_chat")
    check_context(out, original, budget)
    assert data["stats"]["tokens_before"] == before


# -- errors a person can act on -----------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    proc = cli("compact", str(tmp_path / "nope.json"), "--budget", "100")
    assert proc.returncode == 1
    assert "no such file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        '[\n  {"role": "user", "content": "hi"},\n  {"role": "assistant" "content": 1}\n]\n'
    )
    proc = cli("stats", str(bad))
    assert proc.returncode == 1
    assert "line 3, column 24" in proc.stderr


def test_invalid_jsonl_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "a"}\n{"role": "assistant", "content": }\n')
    proc = cli("stats", str(bad))
    assert proc.returncode == 1
    assert "line 2" in proc.stderr


@pytest.mark.parametrize("command", ["stats", "compact", "plan", "convert"])
def test_json_nested_too_deeply_is_an_input_error(tmp_path: Path, command: str) -> None:
    n = 3000
    deep = tmp_path / "deep.json"
    deep.write_text('[{"role": "user", "content": "hi", "x": ' + "[" * n + "]" * n + "}]")
    lines = tmp_path / "deep.jsonl"
    lines.write_text('{"role": "user", "content": "hi"}\n{"x": ' + "[" * n + "]" * n + "}\n")
    extra = {"compact": ["--budget", "100"], "plan": ["--budget", "100"]}.get(command, [])
    if command == "convert":
        extra = ["--to", "anthropic"]
    for path in (deep, lines):
        proc = cli(command, str(path), *extra)
        assert proc.returncode == 1, proc.stderr
        assert "nested too deeply" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_unknown_format(tmp_path: Path) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"conversation": []}))
    proc = cli("compact", str(odd), "--budget", "100")
    assert proc.returncode == 1
    assert "'messages'" in proc.stderr
    mixed = tmp_path / "mixed.json"
    mixed.write_text(
        json.dumps(
            [
                {"role": "tool", "tool_call_id": "a", "content": "x"},
                {"type": "function_call_output", "call_id": "b", "output": "y"},
            ]
        )
    )
    proc = cli("compact", str(mixed), "--budget", "100")
    assert proc.returncode == 1
    assert "format" in proc.stderr


def test_orphaned_tool_result_names_the_message_and_repair_fixes_it(tmp_path: Path) -> None:
    orphan = tmp_path / "orphan.json"
    orphan.write_text(
        json.dumps(
            [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "call_9", "content": "stale output"},
                {"role": "assistant", "content": "hello"},
            ]
        )
    )
    proc = cli("compact", str(orphan), "--budget", "200")
    assert proc.returncode == 1
    assert "call_9" in proc.stderr
    assert "message 2" in proc.stderr
    assert "--repair" in proc.stderr
    fixed = cli("compact", str(orphan), "--budget", "200", "--repair", "drop", "-q")
    assert fixed.returncode == 0, fixed.stderr
    assert all(m["role"] != "tool" for m in json.loads(fixed.stdout))


def test_budget_below_system_prompt() -> None:
    proc = cli(
        "compact", str(EXAMPLES / "agent_run.json"), "--budget", "500", "--strategy", "sliding"
    )
    assert proc.returncode == 1
    assert "budget" in proc.stderr
    assert "raise --budget to at least" in proc.stderr
    assert proc.stdout == ""


def test_missing_api_key_names_the_variable() -> None:
    args = ("compact", str(EXAMPLES / "support_chat.json"), "--budget", "400")
    proc = cli(*args, "--summarizer", "openai:gpt-4o-mini")
    assert proc.returncode == 1
    assert "OPENAI_API_KEY" in proc.stderr
    proc = cli(*args, "--summarizer", "anthropic:claude-haiku-4-5")
    assert proc.returncode == 1
    assert "ANTHROPIC_API_KEY" in proc.stderr


def test_missing_extra_names_the_extra(tmp_path: Path) -> None:
    # Hide tiktoken from the interpreter, as on a machine without the extra.
    code = (
        "import sys; sys.modules['tiktoken'] = None\n"
        "from contextfold.cli import main\n"
        f"sys.exit(main(['stats', {str(EXAMPLES / 'support_chat.json')!r}, "
        "'--counter', 'tiktoken:cl100k_base']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 1
    assert "pip install 'contextfold[tiktoken]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_usage_errors_exit_2() -> None:
    assert cli("compact", str(EXAMPLES / "support_chat.json")).returncode == 2  # no --budget
    assert cli("compact", "x.json", "--budget", "-5").returncode == 2
    assert cli("frobnicate").returncode == 2
    proc = cli(
        "compact", str(EXAMPLES / "support_chat.json"), "--budget", "400", "--summarizer", "magic"
    )
    assert proc.returncode == 2
    assert "extractive" in proc.stderr


def test_summarizer_failure_falls_back_or_exits_3_with_no_fallback() -> None:
    from tests.wire import WireServer
    from tests.wire.openai_server import error_reply

    with WireServer() as server:
        env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": server.url + "/v1"}
        args = (
            "compact",
            str(EXAMPLES / "support_chat.json"),
            "--budget",
            "400",
            "--strategy",
            "summary",
        )
        server.script(*[error_reply(400, "bad request")] * 4)
        fallback = cli(*args, "--summarizer", "openai:gpt-test-mini", "--json", env=env)
        assert fallback.returncode == 0, fallback.stderr
        stats = json.loads(fallback.stdout)["stats"]
        assert stats["fallback"]
        assert not stats["summarized"]
        assert stats["tokens_after"] <= 400
        server.script(*[error_reply(400, "bad request")] * 4)
        strict = cli(*args, "--summarizer", "openai:gpt-test-mini", "--no-fallback", env=env)
        assert strict.returncode == 3
        assert "--no-fallback" in strict.stderr
        assert strict.stdout == ""
        assert server.requests, "the summarizer should have called the local server"


def test_openai_summarizer_against_local_server() -> None:
    from tests.wire import JSONReply, WireServer
    from tests.wire.openai_server import chat_completion

    with WireServer() as server:
        env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": server.url + "/v1"}
        server.script(JSONReply(chat_completion("Maria was refunded via ticket RF-7720.")))
        proc = cli(
            "compact",
            str(EXAMPLES / "support_chat.json"),
            "--budget",
            "400",
            "--strategy",
            "summary",
            "--summarizer",
            "openai:gpt-test-mini",
            "--json",
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["stats"]["summarized"]
        assert "RF-7720" in json.dumps(data["context"])
        assert server.requests[0].body["model"] == "gpt-test-mini"


def test_responses_format_round_trip_through_compact(tmp_path: Path) -> None:
    items = cli("convert", str(EXAMPLES / "coding_session.json"), "--to", "responses")
    assert items.returncode == 0, items.stderr
    path = tmp_path / "items.json"
    path.write_text(items.stdout)
    original = formats.load(json.loads(items.stdout), "openai_responses")
    proc = cli("compact", str(path), "--budget", "900", "--strategy", "checkpoint", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["stats"]["format"] == "responses"
    assert formats.detect(data["context"]) == "openai_responses"
    check_context(formats.load(data["context"], "openai_responses"), original, 900)


@pytest.mark.parametrize("name", [case[0] for case in EXAMPLE_CASES])
def test_compact_within_budget_gives_back_the_input_unchanged(name: str) -> None:
    path = EXAMPLES / name
    proc = cli("compact", str(path), "--budget", "100000", "-q")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(path.read_text())


def test_budget_holds_under_the_counter_chosen() -> None:
    path = EXAMPLES / "support_chat.json"
    original = loaded(json.loads(path.read_text()), "openai")
    counter = ApproxCounter(3.0)  # denser than the default: more tokens per text
    proc = cli("compact", str(path), "--budget", "500", "--counter", "approx:3", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    out = loaded(data["context"], "openai")
    assert counter.count_messages(out) <= 500
    assert data["stats"]["tokens_before"] == counter.count_messages(original)
    assert data["stats"]["tokens_before"] > ApproxCounter().count_messages(original)


@pytest.mark.parametrize("strategy", ["hybrid", "checkpoint"])
def test_the_offline_summary_is_sized_in_the_counter_chosen(strategy: str) -> None:
    """The strategy caps the summary in ``--counter`` tokens; the summarizer counted in its
    own, so under a denser counter the summary ran past the cap (4,235 tokens for 2,000)."""
    import re

    session = max(claude_code_main_sessions(), key=lambda p: p.stat().st_size)
    budget = 8000
    proc = cli(
        "compact", str(session), "--budget", str(budget), "--strategy", strategy,
        "--counter", "approx:2", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = json.dumps(json.loads(proc.stdout)["context"])
    body = re.search(r"<((?:conversation|compacted)-summary)(-\w+)?>(.*?)</\1\2>", text)
    assert body is not None
    summary = json.loads(f'"{body[3]}"').strip()
    assert ApproxCounter(2.0).count_text(summary) <= budget // 4


def test_store_errors_are_explained(tmp_path: Path) -> None:
    proc = cli("log", "list", "--store", "ftp://example.com/x")
    assert proc.returncode == 2  # an option value the library refuses (ConfigError)
    assert "sqlite:///" in proc.stderr
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    proc = cli("log", "show", "--store", url, "--conversation", "nobody")
    assert proc.returncode == 1
    assert "no conversation 'nobody'" in proc.stderr
    proc = cli("log", "append", "--store", url, "--conversation", "c")
    assert proc.returncode == 2
    assert "--text" in proc.stderr


# -- options, titles, stores and strategies from the first review -------------------------


def _parsers(parser: Any) -> list[Any]:
    """``parser`` and every sub-parser under it, depth first."""
    import argparse

    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                out.extend(_parsers(child))
    return out


def test_every_option_of_every_command_has_help() -> None:
    import argparse

    from contextfold.cli import build_parser

    missing = [
        f"{p.prog} {'/'.join(a.option_strings) or a.dest}"
        for p in _parsers(build_parser())
        for a in p._actions
        if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
        and not (a.help and a.help != argparse.SUPPRESS)
    ]
    assert missing == []


def test_log_context_table_is_titled_after_its_command(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'log.db'}"
    base = ("--store", url, "--conversation", "c1")
    assert cli("log", "append", *base, str(EXAMPLES / "support_chat.json")).returncode == 0
    proc = cli("log", "context", *base, "--budget", "400", "--strategy", "sliding")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("contextfold log context\n")
    assert "contextfold compact" not in proc.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("list",),
        ("show", "--conversation", "c1"),
        ("context", "--conversation", "c1", "--budget", "400"),
    ],
)
def test_reading_a_missing_sqlite_store_fails_without_creating_it(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    missing = tmp_path / "missing.db"
    proc = cli("log", command[0], "--store", f"sqlite:///{missing}", *command[1:])
    assert proc.returncode == 1
    assert "does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not missing.exists()


def test_pipeline_prunes_first_and_summarizes_only_when_still_over() -> None:
    path = EXAMPLES / "coding_session.json"
    original = loaded(json.loads(path.read_text()), "anthropic")
    args = ("compact", str(path), "--strategy", "pipeline", "--keep-recent", "2", "--json")
    pruned = cli(*args, "--budget", "1500")
    assert pruned.returncode == 0, pruned.stderr
    stats = json.loads(pruned.stdout)["stats"]
    assert stats["strategy"] == "pipeline"
    assert stats["messages_pruned"] > 0
    assert stats["summary_calls"] == 0  # pruning was enough: no summarizer call
    check_context(loaded(json.loads(pruned.stdout)["context"], "anthropic"), original, 1500)
    summarized = cli(*args, "--budget", "1000")
    assert summarized.returncode == 0, summarized.stderr
    data = json.loads(summarized.stdout)
    assert data["stats"]["summarized"]
    check_context(loaded(data["context"], "anthropic"), original, 1000)
    plan = cli("plan", str(path), "--strategy", "pipeline", "--budget", "1000", "--json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["plan"]["strategy"] == "pipeline"


def test_strategy_help_offers_pipeline_and_says_why_not_compactor() -> None:
    proc = cli("compact", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "pipeline" in text
    assert "SummaryCompactor is not offered: it budgets in characters" in text


def test_config_error_is_a_usage_error_with_its_message(capsys: pytest.CaptureFixture[str]) -> None:
    from contextfold.cli import EXIT_USAGE, report_error
    from contextfold.errors import ConfigError

    code = report_error(ConfigError("keep_recent must be at least 1, got 0", argument="x"))
    assert code == EXIT_USAGE
    assert capsys.readouterr().err == "contextfold: error: keep_recent must be at least 1, got 0\n"


@pytest.mark.parametrize(
    "option", [("--counter", "approx:nan"), ("--counter", "approx:inf"), ("--conversation", "")]
)
def test_bad_option_values_exit_2_without_traceback(option: tuple[str, str]) -> None:
    proc = cli("compact", str(EXAMPLES / "support_chat.json"), "--budget", "400", *option)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_prices_estimate_a_stored_conversations_cost(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'p.db'}"
    chat = str(EXAMPLES / "support_chat.json")
    args = ("compact", chat, "--budget", "500", "--store", store)
    proc = cli(*args, "--prices", "claude-sonnet-4-5")
    assert proc.returncode == 0, proc.stderr
    assert "estimated input cost" in proc.stderr  # the table; the context is on stdout
    assert "full history: $" in proc.stderr


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["compact", "{chat}", "--budget", "500", "--store", "{store}"], "--prices nope"),
        (["compact", "{chat}", "--budget", "500"], "--prices needs --store"),
        (
            ["log", "context", "--store", "{store}", "--conversation", "c1", "--budget", "400"],
            "--prices nope",
        ),
    ],
)
def test_a_bad_prices_option_is_a_usage_error(
    tmp_path: Path, command: list[str], message: str
) -> None:
    values = {
        "chat": str(EXAMPLES / "support_chat.json"),
        "store": f"sqlite:///{tmp_path / 'p.db'}",
    }
    proc = cli(*(part.format(**values) for part in command), "--prices", "nope")
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "--store sqlite" not in proc.stderr  # the store is not blamed
    assert "Traceback" not in proc.stderr
