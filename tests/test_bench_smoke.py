"""Every benchmark still runs: each module once at ``--tiny`` size, then the report.

The figures of a tiny run mean nothing; what is checked is that each benchmark exits cleanly,
prints a Markdown table and writes its raw figures, so none of them rots between real runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench import report

from shared_data import ROOT

MODULES = report.discover()


def test_every_benchmark_is_discovered() -> None:
    for expected in ("bench_window", "bench_memory", "bench_stores", "retention"):
        assert expected in MODULES


@pytest.mark.parametrize("module", MODULES)
def test_benchmark_runs_tiny(module: str) -> None:
    out = ROOT / "bench" / "out" / f"{report.short_name(module)}.json"
    before = out.stat().st_mtime if out.exists() else 0.0
    outcome = report.run_module(module, tiny=True, timeout=300)
    assert outcome.ok, outcome.stderr[-3000:]
    assert "|" in outcome.stdout
    assert "---" in outcome.stdout
    assert out.exists()
    assert out.stat().st_mtime > before
    json.loads(out.read_text())


def test_report_renders_tables_charts_machine_and_failures(tmp_path: Path) -> None:
    # Rebuild from whatever figures bench/out holds (the tiny runs above, or a real run).
    target = tmp_path / "BENCHMARKS.md"
    charts = tmp_path / "charts"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.report",
            "--no-run",
            "--output",
            str(target),
            "--charts",
            str(charts),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    text = target.read_text()
    for section in ("## Reproduce", "## Machine", "## Versions", "langchain-core", "openai-agents"):
        assert section in text
    for module in MODULES:
        assert f"python -m bench.{module}" in text
    pngs = sorted(charts.glob("*.png"))
    assert pngs, proc.stderr
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"charts/{png.name}" in text

    failed = report.Outcome(
        "bench_x", "python -m bench.bench_x", 1.0, 2, "", "boom\nValueError: bad"
    )
    page = report.render([failed], tiny=True, machine_info=report.machine())
    assert "**Failed** (exit code 2)" in page
    assert "ValueError: bad" in page
    assert "--tiny" in page
