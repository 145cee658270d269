"""Shared fixtures over the real data sets (helpers live in ``shared_data.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shared_data import require_data


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return require_data()


@pytest.fixture(scope="session")
def tau_runs(data_dir: Path) -> list[dict[str, Any]]:
    return json.loads((data_dir / "tau-bench" / "gpt-4o-airline.json").read_text())
