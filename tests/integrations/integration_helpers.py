"""Helpers for the framework integration tests (kept out of ``conftest.py``, see shared_data)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

IN_CI = bool(os.environ.get("CI"))


def require_framework(module: str) -> ModuleType:
    """Import ``module``; skip when it is missing outside CI, fail in CI."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if IN_CI:
            pytest.fail(f"{module} is not installed in CI: {exc}")
        pytest.skip(f"{module} is not installed")
