"""The shape of the source tree, as figures: the review rules of docs/architecture.md.

    python -m bench.shape            # a table for src/contextfold
    python -m bench.shape --json

Counts:

* modules over 450 lines;
* functions (and methods) over 60 lines, decorators and docstrings included;
* hand-written generator driver loops (``except StopIteration`` handlers) outside
  ``_drive.py``, the one driver module;
* private names imported across packages: a ``_name`` imported from outside the module that
  defines it, or a ``_module`` imported from outside the package that holds it;
* ``isinstance`` checks on a concrete strategy class outside ``strategies/``;
* the pairs the ``duplicates`` command reports in ``src/`` (when it is on ``PATH``).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = SRC / "contextfold"

MODULE_LIMIT = 450
FUNCTION_LIMIT = 60
STRATEGY_CLASSES = {
    "SlidingWindow",
    "Summarization",
    "Hybrid",
    "Checkpoint",
    "PruneToolOutputs",
    "Pipeline",
    "SummaryCompactor",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _inside(importer: str, owner: str) -> bool:
    return importer == owner or importer.startswith(owner + ".")


def _private_owner(module: str, name: str | None) -> str | None:
    """The module or package a private import belongs to, or None when nothing is private."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    if name is not None and name.startswith("_") and not name.startswith("__"):
        return module
    return None


def measure() -> dict[str, object]:
    files = sorted(PACKAGE.rglob("*.py"))
    long_modules: list[tuple[str, int]] = []
    long_functions: list[tuple[str, int]] = []
    drivers: list[str] = []
    private_imports: list[str] = []
    strategy_checks: list[str] = []
    for path in files:
        text = path.read_text()
        rel = str(path.relative_to(SRC))
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        if lines > MODULE_LIMIT:
            long_modules.append((rel, lines))
        tree = ast.parse(text)
        importer = _module_name(path)
        in_strategies = importer.startswith("contextfold.strategies")
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                size = (node.end_lineno or node.lineno) - first + 1
                if size > FUNCTION_LIMIT:
                    long_functions.append((f"{rel}:{node.lineno} {node.name}", size))
            elif isinstance(node, ast.ExceptHandler) and path.name != "_drive.py":
                kind = node.type
                names = kind.elts if isinstance(kind, ast.Tuple) else [kind]
                if any(isinstance(n, ast.Name) and n.id == "StopIteration" for n in names):
                    drivers.append(f"{rel}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if not node.module.startswith("contextfold"):
                    continue
                for alias in node.names:
                    owner = _private_owner(node.module, alias.name)
                    if owner is not None and not _inside(package, owner):
                        private_imports.append(f"{rel}:{node.lineno} {node.module}.{alias.name}")
            elif (
                not in_strategies
                and isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance"
                and len(node.args) == 2
            ):
                kinds = node.args[1]
                names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
                if any(isinstance(n, ast.Name) and n.id in STRATEGY_CLASSES for n in names):
                    strategy_checks.append(f"{rel}:{node.lineno}")
    duplicates: int | None = None
    if shutil.which("duplicates"):
        out = subprocess.run(
            ["duplicates", "--repo", str(SRC), "--seconds", "60"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        first = out.splitlines()[0] if out else ""
        match = re.match(r"(\d+) pairs", first)
        duplicates = int(match.group(1)) if match else (0 if "no duplicates" in first else None)
    return {
        "modules": len(files),
        "lines": sum(p.read_text().count("\n") for p in files),
        "modules_over_450": sorted(long_modules, key=lambda x: -x[1]),
        "functions_over_60": sorted(long_functions, key=lambda x: -x[1]),
        "driver_loops": drivers,
        "private_imports_across_packages": private_imports,
        "strategy_isinstance_outside_strategies": strategy_checks,
        "duplicate_pairs": duplicates,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--list", action="store_true", help="list every place counted")
    args = parser.parse_args()
    figures = measure()
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{figures['modules']} modules, {figures['lines']} lines in src/contextfold")
    for key in (
        "modules_over_450",
        "functions_over_60",
        "driver_loops",
        "private_imports_across_packages",
        "strategy_isinstance_outside_strategies",
    ):
        items = figures[key]
        assert isinstance(items, list)
        print(f"{key}: {len(items)}")
        if args.list:
            for item in items:
                print("   ", *item) if isinstance(item, tuple) else print("   ", item)
    print(f"duplicate_pairs: {figures['duplicate_pairs']}")


if __name__ == "__main__":
    main()
