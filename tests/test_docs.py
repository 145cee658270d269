"""The documentation runs: every Python block in README.md and docs/, every example script,
and every command's ``--help``.

Blocks of one page run in order in one namespace, in a scratch directory holding a copy of
``examples/``, so a page reads like a session. The README's blocks run in an empty scratch
directory, twice, and must print the same both times: a reader may paste them anywhere.
A block preceded by the line ``<!-- not-executed: <reason> -->`` is skipped; the reason
must say why it cannot run here (for example, it needs a real API key or the network).
Blocks that talk to a provider run against the local wire servers in ``tests/wire``
through the SDKs' standard environment variables.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.wire import JSONReply, WireServer
from tests.wire import anthropic_server as anthropic_wire
from tests.wire.openai_server import chat_completion

from contextfold.cli import build_parser, main
from shared_data import ROOT

PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "integrations").glob("*.md")),
]
OPEN = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)")
SKIP = re.compile(r"<!-- not-executed: (.+?) -->\s*$")
PYTHON = {"python", "py", "python3", "pycon"}
NOT_CODE = {"", "sh", "bash", "console", "text", "json", "jsonl", "toml", "yaml"}


def fenced_blocks(page: Path) -> list[tuple[int, str, str, str]]:
    """(line, language, code, line before) for every fenced block of ``page``.

    A line scanner rather than one regular expression, so no Python block hides from the
    test by its language tag (``py``, ``python3``), its indentation or a ``~~~`` fence.
    """
    lines = page.read_text().split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        before = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        out.append((start + 1, m["info"].lower(), "\n".join(body) + "\n", before))
        i += 1
    return out


def python_blocks(page: Path) -> list[tuple[int, str, str | None]]:
    """(line, code, skip reason) for each Python block of ``page``."""
    out = []
    for line, language, code, before in fenced_blocks(page):
        if language in PYTHON:
            skip = SKIP.search(before)
            out.append((line, code, skip.group(1) if skip else None))
    return out


def test_every_fenced_block_is_python_or_not_code() -> None:
    for page in PAGES:
        for line, language, _, _ in fenced_blocks(page):
            assert language in PYTHON | NOT_CODE, f"{page.name}:{line}: fence {language!r}"
    readme = python_blocks(ROOT / "README.md")
    assert readme, "the README quick start is collected"
    assert sum(len(python_blocks(p)) for p in PAGES) >= 24  # every block as of this writing


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A scratch working directory with the examples, and provider env vars on local servers."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    with WireServer() as openai_srv, WireServer() as anthropic_srv:
        openai_srv.script(*[JSONReply(chat_completion("The refund RF-7720 is on track."))] * 20)
        anthropic_srv.script(
            *[JSONReply(anthropic_wire.message(["## Goal\nFix the tax rounding."]))] * 20
        )
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", openai_srv.url + "/v1")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_srv.url)
        yield tmp_path


def test_every_page_has_executed_examples() -> None:
    names = {p.name for p in PAGES}
    for page in (
        "messages-and-formats.md",
        "token-counting.md",
        "strategies.md",
        "summarizers.md",
        "memory-and-stores.md",
        "cli.md",
        "scaling.md",
    ):
        assert page in names, page
    for page in PAGES:
        blocks = python_blocks(page)
        if page.name in ("cli.md",):
            continue
        assert any(skip is None for _, _, skip in blocks), f"{page.name} runs no example"
    skipped = [(p.name, line) for p in PAGES for line, _, skip in python_blocks(p) if skip]
    assert len(skipped) <= 3, f"keep not-executed blocks rare: {skipped}"


def run_page(page: Path) -> None:
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for line, code, skip in python_blocks(page):
        if skip is not None:
            compile(code, f"{page.name}:{line}", "exec")  # still must be valid Python
            continue
        exec(compile(code, f"{page.name}:{line}", "exec"), namespace)


@pytest.mark.parametrize("page", PAGES[1:], ids=lambda p: p.name)
def test_page_examples_run(page: Path, sandbox: Path) -> None:
    if page.parent.name == "integrations" and not os.environ.get("CI"):
        module = page.stem.replace("-", "_")  # llama-index.md documents ...llama_index
        pytest.importorskip(f"contextfold.integrations.{module}", exc_type=ImportError)
    run_page(page)


def test_readme_runs_anywhere_and_twice_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # empty: no examples/ next to it
    outputs = []
    for _ in range(2):
        run_page(ROOT / "README.md")
        outputs.append(capsys.readouterr().out)
    assert outputs[0].strip()
    assert outputs[0] == outputs[1]


# -- the example scripts -------------------------------------------------------------------


def run_script(name: str, *args: str, env: dict[str, str] | None = None, expect: int = 0) -> str:
    full_env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full_env,
        check=False,
    )
    assert proc.returncode == expect, proc.stderr
    return proc.stdout + proc.stderr


def test_bring_your_own_summarizer_runs_offline() -> None:
    out = run_script("bring_your_own_summarizer.py")
    assert "RF-7720" in out
    assert "fallback: None" in out


def test_langchain_agent_example_runs_offline() -> None:
    if not os.environ.get("CI"):
        pytest.importorskip("contextfold.integrations.langchain", exc_type=ImportError)
    out = run_script("langchain_agent.py")
    assert "summaries written: 1" in out
    assert "messages in the agent state: 12" in out
    sent = [int(n) for n in out.split("tokens sent per model call: [")[1].split("]")[0].split(",")]
    assert max(sent) <= 500
    assert sent[4] < sent[3]  # the fifth call carries the summary instead of the first lookups


def test_persistent_memory_reuses_its_checkpoint_across_runs(tmp_path: Path) -> None:
    db = str(tmp_path / "chats.db")
    first = run_script("persistent_memory.py", db)
    second = run_script("persistent_memory.py", db)
    assert "checkpoint new" in first
    assert "checkpoint reused" in second
    ckpt = first.rsplit(": ", 1)[1].strip()
    assert ckpt in second


def test_openai_script_against_local_server() -> None:
    with WireServer() as srv:
        srv.script(
            JSONReply(chat_completion("Refund RF-7720 for $119.00 on order LS-48219.")),
            JSONReply(chat_completion("Ticket RF-7720, $119.00.")),
        )
        env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": srv.url + "/v1"}
        out = run_script("openai_chat.py", env=env)
        assert "Ticket RF-7720, $119.00." in out
        assert "summary: True" in out
        # The answer request carried the summary the first call wrote.
        assert "LS-48219" in str(srv.requests[1].body["messages"])


def test_openai_script_without_key_says_what_to_set() -> None:
    assert "OPENAI_API_KEY" in run_script("openai_chat.py", expect=1)


def test_anthropic_script_against_local_server() -> None:
    with WireServer() as srv:
        srv.script(
            JSONReply(anthropic_wire.message(["## Goal\nFix rounding in apply_tax."])),
            JSONReply(anthropic_wire.message(["Rounding invoice_total next."])),
        )
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": srv.url}
        out = run_script("anthropic_chat.py", env=env)
        assert "Rounding invoice_total next." in out
        assert "fallback: None" in out
        assert "Fix rounding in apply_tax." in str(srv.requests[1].body)


def test_litellm_script_against_local_server() -> None:
    with WireServer() as srv:
        srv.script(JSONReply(chat_completion("Refund RF-7720 for $119.00 on LS-48219.")))
        env = {
            "OPENAI_API_KEY": "test-key",
            "OPENAI_BASE_URL": srv.url + "/v1",
            "CONTEXTFOLD_MODEL": "openai/gpt-test-mini",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch from the network
        }
        out = run_script("litellm_chat.py", env=env)
        assert "Refund RF-7720 for $119.00 on LS-48219." in out
        assert srv.requests[0].body["model"] == "gpt-test-mini"


def test_openai_agents_script_against_local_server() -> None:
    if not os.environ.get("CI"):  # in CI a missing framework fails the test
        pytest.importorskip("agents")
    from tests.wire.openai_server import responses_call_reply, responses_text_reply

    with WireServer() as srv:
        replies = []
        for n in range(4):
            replies += [
                responses_call_reply(2 * n, name="order_record", arguments='{"order": "LS-48219"}'),
                responses_call_reply(2 * n + 1, name="order_record",
                                     arguments='{"order": "LS-48221"}'),
                responses_text_reply(n, f"Answer {n}: shipped from Tilburg."),
            ]  # fmt: skip
        srv.script(*replies)
        env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": srv.url + "/v1"}
        out = run_script("openai_agents_session.py", env=env)
        assert "Answer 3: shipped from Tilburg." in out
        assert "summary: True" in out
        # The filter folded the old tool outputs: the last call carried a summary.
        assert "summary" in str(srv.requests[-1].body["input"][0])
        assert len(srv.requests) == 12


def test_openai_agents_script_without_key_says_what_to_set() -> None:
    assert "OPENAI_API_KEY" in run_script("openai_agents_session.py", expect=1)


def test_llama_index_script_runs_offline() -> None:
    if not os.environ.get("CI"):
        pytest.importorskip("llama_index.core")
    out = run_script("llama_index_memory.py")
    assert "stored 60 messages" in out
    assert "summary: True" in out


# -- --help of every command ---------------------------------------------------------------


def _commands() -> list[list[str]]:
    parser = build_parser()
    out: list[list[str]] = [[]]
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, child in sub.choices.items():  # type: ignore[union-attr]
        out.append([name])
        for action in child._actions:
            if getattr(action, "dest", None) == "log_command":
                out.extend([name, inner] for inner in action.choices)  # type: ignore[union-attr]
    return out


@pytest.mark.parametrize("command", _commands(), ids=lambda c: " ".join(c) or "contextfold")
def test_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: contextfold")
    assert "exit codes:" in out
    assert "3  the summarizer failed" in out


def test_help_lists_every_command() -> None:
    names = {tuple(c) for c in _commands()}
    for expected in ("compact", "plan", "stats", "convert", "log"):
        assert (expected,) in names
    for inner in ("append", "show", "list", "context"):
        assert ("log", inner) in names


def test_installed_entry_point_help() -> None:
    exe = Path(sys.executable).parent / "contextfold"
    proc = subprocess.run(
        [str(exe), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0
    for name in ("compact", "plan", "stats", "convert", "log"):
        assert name in proc.stdout


# -- integration pages and their examples --------------------------------------------------

INTEGRATION_PAGES = sorted((ROOT / "docs" / "integrations").glob("*.md"))


def test_integration_pages_are_indexed_and_run_examples() -> None:
    index = (ROOT / "docs" / "integrations.md").read_text()
    for page in INTEGRATION_PAGES:
        assert f"integrations/{page.name}" in index, f"{page.name} is not in docs/integrations.md"
        assert any(skip is None for _, _, skip in python_blocks(page)), f"{page.name} runs none"


def test_pydantic_ai_example_runs_offline_and_compacts(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    out = run_script("pydantic_ai_agent.py", str(tmp_path / "agent.db"))
    assert "run 6: P-61 left depot D-1 and arrives Friday." in out
    assert "the history starts with a summary: True" in out
    assert "the store holds all 24" in out


def test_pydantic_ai_example_against_local_server(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    from tests.wire.openai_server import tool_call

    with WireServer() as srv:
        replies = []
        for day in range(1, 7):
            calls = []
            for n in (1, 2):  # two parallel calls, as the offline model makes
                call = tool_call("track", json.dumps({"parcel": f"P-{day}{n}"}))
                call["id"] = f"call_{day}{n}"
                calls.append(call)
            replies += [
                JSONReply(chat_completion(None, finish_reason="tool_calls", tool_calls=calls)),
                JSONReply(chat_completion(f"P-{day}1 and P-{day}2 arrive Friday.")),
            ]
        srv.script(*replies)
        env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": srv.url + "/v1"}
        out = run_script("pydantic_ai_agent.py", str(tmp_path / "agent.db"), env=env)
        assert "run 6: P-61 and P-62 arrive Friday." in out
        assert srv.pending == 0
        last = srv.requests[-1].body["messages"]
        assert last[0]["role"] == "system"
        assert "condensed" in json.dumps(last)  # the summary, sent instead of the old turns
