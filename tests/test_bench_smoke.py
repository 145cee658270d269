"""Every benchmark still runs: each module once at ``--tiny`` size, then the report.

The figures of a tiny run mean nothing; what is checked is that each benchmark exits cleanly,
prints a Markdown table and writes its raw figures, so none of them rots between real runs.
Figures of an earlier real run in ``bench/out`` are put back after each tiny run.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
from bench import report

from shared_data import DATA, ROOT, require_data

PEERS = ("langchain_core", "agents", "matplotlib")
_HAVE_PEERS = all(importlib.util.find_spec(name) is not None for name in PEERS)

# The peers come with the `bench` extra, not the `test` one. In CI they are installed, so a
# missing peer fails there instead of skipping.
pytestmark = pytest.mark.skipif(
    not _HAVE_PEERS and not os.environ.get("CI"),
    reason="the benchmark peers are not installed: pip install -e '.[bench]' (make bench does)",
)

MODULES = report.discover()
_RUNS: dict[str, report.Outcome] = {}


def tiny_run(module: str) -> report.Outcome:
    """Run ``module`` at tiny size once per session; restore the figures it replaced."""
    if module in _RUNS:
        return _RUNS[module]
    out = ROOT / "bench" / "out" / f"{report.short_name(module)}.json"
    saved = out.read_bytes() if out.exists() else None
    before = out.stat().st_mtime if out.exists() else 0.0
    try:
        outcome = report.run_module(module, tiny=True, timeout=300)
        if not outcome.ok and not DATA.is_dir():
            require_data()  # skips outside CI: the benchmarks read the shared data sets
        assert outcome.ok, outcome.stderr[-3000:]
        assert out.exists()
        assert out.stat().st_mtime > before, "the benchmark did not write its figures"
        json.loads(out.read_text())
    finally:
        if saved is not None:
            out.write_bytes(saved)
    _RUNS[module] = outcome
    return outcome


def test_every_benchmark_is_discovered() -> None:
    for expected in ("bench_window", "bench_memory", "bench_stores", "retention"):
        assert expected in MODULES


@pytest.mark.parametrize("module", MODULES)
def test_benchmark_runs_tiny(module: str) -> None:
    outcome = tiny_run(module)
    assert outcome.tiny
    assert "|" in outcome.stdout  # a Markdown table
    assert "---" in outcome.stdout


def test_report_renders_tables_charts_machine_and_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "_chart_dir", tmp_path / "charts")
    outcomes = []
    for module in MODULES:
        outcome = tiny_run(module)
        outcome.charts, problem = report.make_charts(report.short_name(module))
        assert problem is None, problem
        outcomes.append(outcome)
    text = report.render(outcomes, tiny=True, machine_info=report.machine(), base=tmp_path)
    for section in ("## Reproduce", "## Machine", "## Versions", "langchain-core", "openai-agents"):
        assert section in text
    assert "`--tiny` runs" in text
    for module in MODULES:
        assert f"python -m bench.{module} --tiny" in text
    pngs = sorted((tmp_path / "charts").glob("*.png"))
    charted = [m for m in MODULES if report.short_name(m) in report.CHARTERS]
    assert len(pngs) >= len(charted)
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](charts/{png.name})" in text

    failed = report.Outcome(
        "bench_x", "python -m bench.bench_x", 1.0, 2, "", "boom\nValueError: bad"
    )
    page = report.render([failed], tiny=False, machine_info=report.machine())
    assert "**Failed** (exit code 2)" in page
    assert "ValueError: bad" in page
    assert "`--tiny` runs" not in page
