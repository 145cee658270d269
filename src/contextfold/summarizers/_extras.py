"""Optional SDK imports: fail early with the extra to install, import late.

A constructor calls :func:`ensure_installed` so a missing SDK is reported where the adapter
is built, with an actionable message, while :func:`import_extra` keeps the real (slow)
import for the first call, so importing contextfold never imports a provider SDK.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from contextfold.errors import MissingExtraError

__all__ = ["ensure_installed", "import_extra"]


def ensure_installed(module: str, feature: str, extra: str) -> None:
    """Raise :class:`MissingExtraError` now if ``module`` cannot be imported later.

    Only the import machinery's finder runs (no import, no I/O), so constructors can fail
    early with an actionable message while the real import stays lazy.
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingExtraError(feature, extra)


def import_extra(module: str, feature: str, extra: str) -> Any:
    """Import ``module`` or raise :class:`MissingExtraError` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(feature, extra) from exc
