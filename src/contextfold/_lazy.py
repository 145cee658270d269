"""Lazy exports: names a package lists in ``__all__`` but imports only on first access.

The provider adapters and the optional stores import an SDK or a driver, so their packages
must import without them. Python's module ``__getattr__`` (PEP 562) does that; this is the
one implementation both packages use, so they look them up, cache them and list them in
``dir()`` the same way.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``.

    Args:
        package: the ``__name__`` of the package that exports the names.
        names: each lazily exported name, mapped to the module that defines it.

    Use it as::

        __getattr__, __dir__ = lazy_exports(__name__, {"RedisStore": "contextfold.stores.redis"})

    The first access imports the module and stores the value in the package, so later
    accesses are plain attribute reads.
    """

    def __getattr__(name: str) -> Any:
        module_name = names.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_name), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
