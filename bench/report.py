"""Run every benchmark and write ``BENCHMARKS.md`` with tables, charts and the machine.

Run ``python -m bench.report`` (what ``make bench`` does) or ``--tiny`` to check that every
benchmark still runs (seconds each; the figures are then not meaningful).

Each benchmark module (``bench/bench_*.py``, ``bench/retention.py``, ``bench/recall.py``,
``bench/replay.py`` and ``bench/lower_mark.py``) runs in its own
process, one after the other, so they do not disturb each other's timings. Its Markdown
tables (stdout) go into the report as they are, and its raw figures
(``bench/out/<name>.json``) feed the PNG charts written to ``docs/bench/``. The report also
records the machine (CPU, cores, memory, Python), the versions of the peer libraries measured
alongside, and the exact commands, so anyone can rerun them.

Each run's tables and status are kept in ``bench/out/<name>.md`` and ``<name>.run.json``, so
``--only NAME`` (repeatable) reruns some benchmarks and rebuilds the report with the saved
results of the others, and ``--no-run`` rebuilds it from the saved results alone.
``--output PATH`` and ``--charts DIR`` write the report and the charts elsewhere.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
OUT = BENCH / "out"
CHARTS = ROOT / "docs" / "bench"
REPORT = ROOT / "BENCHMARKS.md"

PEERS = (
    "contextfold",
    "langchain-core",
    "openai-agents",
    "tiktoken",
    "redis",
    "psycopg",
    "matplotlib",
)


def discover() -> list[str]:
    """Module names of every benchmark, in a stable order."""
    names = sorted(p.stem for p in BENCH.glob("bench_*.py"))
    extra = ("retention", "recall", "replay", "lower_mark")
    names += [name for name in extra if (BENCH / f"{name}.py").exists()]
    return names


def short_name(module: str) -> str:
    """``bench_window`` -> ``window``: the name of its ``bench/out`` file."""
    return module.removeprefix("bench_")


@dataclass
class Outcome:
    """What one benchmark run produced."""

    module: str
    command: str
    seconds: float
    returncode: int
    stdout: str
    stderr: str
    tiny: bool = False
    charts: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run_module(module: str, *, tiny: bool, timeout: float | None = None) -> Outcome:
    """Run ``python -m bench.<module>`` in a fresh process and capture its output."""
    args = [sys.executable, "-m", f"bench.{module}", *(["--tiny"] if tiny else [])]
    command = " ".join(["python", *args[1:]])
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            args, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
        )
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, stdout, stderr = -1, _text(exc.stdout), f"timed out after {timeout} s"
    return Outcome(module, command, time.perf_counter() - start, code, stdout, stderr, tiny)


def save(outcome: Outcome) -> None:
    """Keep a run's tables and status next to its figures, so the report can be rebuilt."""
    OUT.mkdir(parents=True, exist_ok=True)
    name = short_name(outcome.module)
    (OUT / f"{name}.md").write_text(outcome.stdout)
    meta = {
        "command": outcome.command,
        "seconds": outcome.seconds,
        "returncode": outcome.returncode,
        "tiny": outcome.tiny,
        "stderr_tail": "\n".join(outcome.stderr.splitlines()[-30:]),
    }
    (OUT / f"{name}.run.json").write_text(json.dumps(meta, indent=2))


def load_saved(module: str) -> Outcome | None:
    """The outcome :func:`save` kept for ``module``, or None when it never ran here."""
    name = short_name(module)
    try:
        meta = json.loads((OUT / f"{name}.run.json").read_text())
        stdout = (OUT / f"{name}.md").read_text()
    except (OSError, json.JSONDecodeError):
        return None
    return Outcome(
        module,
        str(meta.get("command", f"python -m bench.{module}")),
        float(meta.get("seconds", 0.0)),
        int(meta.get("returncode", 0)),
        stdout,
        str(meta.get("stderr_tail", "")),
        bool(meta.get("tiny", False)),
    )


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


# -- machine and versions ------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """CPU model, cores, memory and Python, read without third-party packages."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 0
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gb": memory_gb,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
    }


def versions() -> dict[str, str]:
    """Installed versions of contextfold and of the peers benchmarked alongside it."""
    out = {}
    for name in PEERS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


# -- charts --------------------------------------------------------------------------------


def _load(name: str) -> Any | None:
    path = OUT / f"{name}.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return None


def _figure(title: str, xlabel: str, ylabel: str) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


_chart_dir = CHARTS


def _save(fig: Any, name: str) -> Path:
    import matplotlib.pyplot as plt

    _chart_dir.mkdir(parents=True, exist_ok=True)
    path = _chart_dir / f"{name}.png"
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path


def chart_window(data: Any) -> list[Path]:
    rows = data["rows"]
    sizes = [r["messages"] for r in rows]
    fig, ax = _figure("Sliding window vs trim_messages", "messages in history", "ms per call")
    ax.plot(sizes, [r["sliding"]["steady_s"] * 1e3 for r in rows], "o-", label="SlidingWindow")
    trim = [(r["messages"], r["trim_messages"]) for r in rows]
    ok = [(n, t["per_call_s"] * 1e3) for n, t in trim if not t.get("skipped") and "per_call_s" in t]
    if ok:
        ax.plot(*zip(*ok, strict=True), "s--", label="langchain trim_messages")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.legend()
    return [_save(fig, "window")]


def chart_memory(data: Any) -> list[Path]:
    labels, values = [], []
    for size, row in data.get("sizes", {}).items():
        labels.append(f"SQLite {int(size):,}")
        values.append(row["steady_median_ms"])
    for store, row in (data.get("stores") or {}).items():
        labels.append(store)
        values.append(row["steady_median_ms"])
    session = data.get("sqlite_session") or {}
    if "get_items_median_ms" in session:
        items = session.get("items", session.get("messages", 0))
        labels.append(f"agents SQLiteSession.get_items()\n{items:,} items")
        values.append(session["get_items_median_ms"])
    fig, ax = _figure("build_context after one append (median)", "ms", "")
    ax.barh(labels, values)
    ax.set_xscale("log")
    return [_save(fig, "memory")]


def chart_stores(data: Any) -> list[Path]:
    results = data["results"]
    names = list(results)
    fig, ax = _figure(
        f"Appends, {data.get('messages', 0):,}-message conversation", "", "messages/s"
    )
    single = [results[n].get("single_per_s", 0) for n in names]
    batched = [results[n].get("batched_per_s", 0) for n in names]
    pos = range(len(names))
    ax.barh([p + 0.2 for p in pos], single, height=0.4, label="one per call")
    ax.barh([p - 0.2 for p in pos], batched, height=0.4, label="batched")
    ax.set_yticks(list(pos), names, fontsize=7)
    ax.set_xscale("log")
    ax.legend()
    return [_save(fig, "stores")]


def chart_strategies(data: Any) -> list[Path]:
    by: dict[str, list[tuple[int, float]]] = {}
    for row in data["builds"]:
        by.setdefault(row["strategy"], []).append((row["messages"], row["steady_ms"]))
    fig, ax = _figure("Steady build with checkpoint reuse", "messages in history", "ms per build")
    for name, points in sorted(by.items()):
        ax.plot(*zip(*sorted(points), strict=True), "o-", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    return [_save(fig, "strategies")]


def chart_formats(data: Any) -> list[Path]:
    by: dict[str, list[tuple[int, float]]] = {}
    for row in data["rows"]:
        by.setdefault(row["format"], []).append(
            (row["messages"], (row["load_s"] + row["dump_s"]) * 1e3)
        )
    fig, ax = _figure("load + dump", "messages", "ms")
    for name, points in sorted(by.items()):
        ax.plot(*zip(*sorted(points), strict=True), "o-", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    return [_save(fig, "formats")]


def chart_retention(data: Any) -> list[Path]:
    paths = []
    retention = (data.get("locomo") or {}).get("retention") or {}
    if retention:
        budgets = list(next(iter(retention.values())))
        fig, ax = _figure("LoCoMo facts kept, by budget (share of the conversation)", "", "")
        width = 0.8 / max(1, len(retention))
        for i, (name, by_budget) in enumerate(retention.items()):
            xs = [j + i * width for j in range(len(budgets))]
            ax.bar(xs, [by_budget.get(b, 0) for b in budgets], width=width, label=name)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(budgets))], budgets)
        ax.set_ylabel("share of evidence facts in the context")
        ax.legend(fontsize=7)
        paths.append(_save(fig, "retention_locomo"))
    sessions = (data.get("claude_code") or {}).get("sessions") or []
    if sessions:
        fig, ax = _figure("Paths kept after compaction (Claude Code sessions)", "", "share")
        names = [s["session"] for s in sessions]
        pos = range(len(names))
        ax.bar(
            [p - 0.2 for p in pos], [s["claude_code"] for s in sessions], 0.4, label="Claude Code"
        )
        ax.bar([p + 0.2 for p in pos], [s["ours"] for s in sessions], 0.4, label="contextfold")
        ax.set_xticks(list(pos), names)
        ax.legend()
        paths.append(_save(fig, "retention_claude_code"))
    return paths


def chart_recall(data: Any) -> list[Path]:
    """One row per strategy, a marker per budget: a dozen rows read better than grouped bars."""
    retention = (data.get("retention") or {}).get("retention") or {}
    if not retention:
        return []
    budgets = list(next(iter(retention.values())))
    fig, ax = _figure(
        "Answers in the context, question as the newest message",
        "share of LoCoMo questions answered by the context",
        "",
    )
    fig.set_size_inches(8, 0.4 * len(retention) + 1.5)
    names = list(retention)
    rows = range(len(names) - 1, -1, -1)  # the table's first row on top
    for y, name in zip(rows, names, strict=True):
        values = [retention[name].get(b, 0) for b in budgets]
        ax.plot([min(values), max(values)], [y, y], color="0.75", linewidth=1, zorder=1)
    for budget, marker in zip(budgets, "o^sD", strict=False):
        values = [retention[name].get(budget, 0) for name in names]
        ax.scatter(values, list(rows), marker=marker, label=f"budget {budget}", zorder=2)
    ax.set_yticks(list(rows), names, fontsize=7)
    ax.set_xlim(0, 1)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return [_save(fig, "recall_locomo")]


def chart_adapters(data: Any) -> list[Path]:
    rows = data["modes"]
    groups = list(dict.fromkeys(r["data"] for r in rows))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    fig, ax = _figure(
        "Summary call input cost (cache reads at 10%)", "", "cost relative to isolated"
    )
    width = 0.8 / max(1, len(modes))
    for i, mode in enumerate(modes):
        values = [
            next((r["cost_vs_isolated"] for r in rows if r["data"] == g and r["mode"] == mode), 0)
            for g in groups
        ]
        ax.bar([j + i * width for j in range(len(groups))], values, width=width, label=mode)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))], groups, fontsize=8)
    ax.legend()
    return [_save(fig, "adapters")]


CHARTERS: dict[str, Callable[[Any], list[Path]]] = {
    "adapters": chart_adapters,
    "window": chart_window,
    "memory": chart_memory,
    "stores": chart_stores,
    "strategies": chart_strategies,
    "formats": chart_formats,
    "retention": chart_retention,
    "recall": chart_recall,
}


def make_charts(name: str) -> tuple[list[Path], str | None]:
    """Charts for one benchmark's figures; never fails the report (returns the reason)."""
    data = _load(name)
    charter = CHARTERS.get(name)
    if data is None or charter is None:
        return [], None if charter is None else f"no figures in bench/out/{name}.json"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return [], "matplotlib is not installed (pip install -e '.[bench]')"
    try:
        return charter(data), None
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        return [], f"chart skipped: the figures have an unexpected shape ({exc!r})"


# -- the report ----------------------------------------------------------------------------


def _summary(module: str) -> str:
    """The first paragraph of a benchmark module's docstring."""
    path = BENCH / f"{module}.py"
    try:
        text = path.read_text()
    except OSError:
        return ""
    if not text.startswith('"""'):
        return ""
    doc = text[3 : text.find('"""', 3)]
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ")


def render(
    outcomes: list[Outcome],
    *,
    tiny: bool,
    machine_info: dict[str, Any],
    base: Path = ROOT,
) -> str:
    """The Markdown of ``BENCHMARKS.md``; chart links are relative to ``base``."""
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `python -m bench.report` on {now}. "
        "Every benchmark ran in its own process, one after the other.",
    ]
    if tiny:
        lines += [
            "",
            "**Some results below come from `--tiny` runs** (marked): those only check that "
            "the benchmark still works. Run `make bench` for the real sizes.",
        ]
    lines += [
        "",
        "## Reproduce",
        "",
        "```sh",
        "make bench                     # installs the bench extras, runs everything, writes this file",
        "python -m bench.report         # the same, in an environment that has them",
    ]
    lines += [o.command for o in outcomes]
    lines += [
        "```",
        "",
        "Real data sets are read from `../shared/data` (see each benchmark). Redis and "
        "PostgreSQL rows appear when `CONTEXTFOLD_TEST_REDIS_URL` / "
        "`CONTEXTFOLD_TEST_POSTGRES_URL` point at servers.",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
    ]
    labels = {
        "cpu": "CPU",
        "cores": "cores",
        "usable_cores": "cores usable by this process",
        "memory_gb": "memory (GB)",
        "os": "OS",
        "python": "Python",
        "implementation": "implementation",
    }
    lines += [f"| {labels[k]} | {v} |" for k, v in machine_info.items()]
    lines += ["", "Shared machines give noisy absolute times; compare rows of one table.", ""]
    lines += ["## Versions", "", "| package | version |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in versions().items()]
    lines += ["", "## Results", ""]
    for o in outcomes:
        lines += [f"### {o.module}", ""]
        summary = _summary(o.module)
        if summary:
            lines += [summary, ""]
        size = ", tiny size: figures not comparable" if o.tiny else ""
        lines += [f"Command: `{o.command}` ({o.seconds:.1f} s{size})", ""]
        if not o.ok:
            tail = "\n".join(o.stderr.strip().splitlines()[-15:])
            lines += [f"**Failed** (exit code {o.returncode}):", "", "```", tail, "```", ""]
            continue
        body = o.stdout.strip()
        if body:
            lines += [_demote_headings(body), ""]
        for chart in o.charts:
            rel = os.path.relpath(chart, base).replace(os.sep, "/")
            lines += [f"![{chart.stem}]({rel})", ""]
    return "\n".join(lines).rstrip() + "\n"


def _demote_headings(markdown: str) -> str:
    """Keep a benchmark's own headings below this report's ``###`` level."""
    out = []
    for line in markdown.splitlines():
        if line.startswith("#"):
            line = "####" + line.lstrip("#")
            if not line.startswith("#### "):
                line = "#### " + line[4:]
        out.append(line)
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="every benchmark at a tiny size")
    parser.add_argument(
        "--only", action="append", metavar="NAME", help="run only this benchmark (repeatable)"
    )
    parser.add_argument(
        "--no-run", action="store_true", help="rebuild the report from existing bench/out figures"
    )
    parser.add_argument("--output", type=Path, default=REPORT, help="where to write the report")
    parser.add_argument(
        "--charts", type=Path, default=CHARTS, help="folder for the PNG charts (docs/bench)"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds allowed per benchmark")
    args = parser.parse_args(argv)
    global _chart_dir
    _chart_dir = args.charts

    modules = discover()
    if args.only:
        wanted = {n.removeprefix("bench.") for n in args.only}
        unknown = wanted - set(modules) - {short_name(m) for m in modules}
        if unknown:
            parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
        modules = [m for m in modules if m in wanted or short_name(m) in wanted]

    outcomes = []
    for module in discover():
        if args.no_run or module not in modules:
            outcome = load_saved(module)  # figures of an earlier run, if any
            if outcome is None:
                continue
        else:
            print(f"running bench.{module} ...", file=sys.stderr, flush=True)
            outcome = run_module(module, tiny=args.tiny, timeout=args.timeout)
            save(outcome)
            status = "ok" if outcome.ok else f"FAILED ({outcome.returncode})"
            print(f"  {status} in {outcome.seconds:.1f} s", file=sys.stderr, flush=True)
        if outcome.ok:
            outcome.charts, problem = make_charts(short_name(module))
            if problem:
                print(f"  {problem}", file=sys.stderr)
        outcomes.append(outcome)

    tiny = any(o.tiny for o in outcomes)
    report = render(outcomes, tiny=tiny, machine_info=machine(), base=args.output.resolve().parent)
    args.output.write_text(report)
    print(f"wrote {args.output}", file=sys.stderr)
    failed = [o.module for o in outcomes if not o.ok]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
