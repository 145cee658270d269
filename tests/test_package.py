"""Package-level guarantees: explicit exports, and importing does no I/O and needs no extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import contextfold

OPTIONAL = ("openai", "anthropic", "litellm", "tiktoken", "tokenizers", "redis", "psycopg", "rich")


def test_all_is_sorted_and_complete() -> None:
    names = contextfold.__all__
    assert list(names) == sorted(names)
    for name in names:
        assert hasattr(contextfold, name), name
    public = {n for n in vars(contextfold) if not n.startswith("_")} - {"annotations"}
    # Every public attribute of the root is either exported or a subpackage/module.
    import types

    for name in public - set(names):
        assert isinstance(getattr(contextfold, name), types.ModuleType), name


def test_import_needs_no_optional_dependency() -> None:
    code = textwrap.dedent(
        f"""
        import importlib, sys
        blocked = {OPTIONAL!r}

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in blocked:
                    raise ImportError("blocked for the test: " + name)
                return None

        sys.meta_path.insert(0, Blocker())
        import contextfold
        for mod in ("messages", "errors", "turns", "transforms", "tokens", "formats",
                    "strategies", "summarizers", "stores", "memory", "testing", "prompts"):
            importlib.import_module("contextfold." + mod)
        from contextfold.summarizers import ExtractiveSummarizer
        from contextfold.stores import open_store
        store = open_store("sqlite:///:memory:")
        store.close()
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in blocked)
        assert not loaded, loaded
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_missing_extra_names_the_extra() -> None:
    code = textwrap.dedent(
        """
        import sys

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "redis":
                    raise ImportError("blocked")
                return None

        sys.meta_path.insert(0, Blocker())
        from contextfold.errors import MissingExtraError
        from contextfold.stores import open_store
        try:
            open_store("redis://127.0.0.1:1/0")
        except MissingExtraError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert "pip install 'contextfold[redis]'" in out.stdout, out.stderr


def test_import_does_not_read_the_environment_or_files() -> None:
    code = textwrap.dedent(
        """
        import builtins, os, sys
        opened = []
        real_open = builtins.open
        def spy(file, *a, **k):
            opened.append(str(file))
            return real_open(file, *a, **k)
        builtins.open = spy
        import contextfold
        import contextfold.memory, contextfold.strategies, contextfold.summarizers
        src = [f for f in opened if "contextfold" in f and not f.endswith((".py", ".pyc"))]
        print(src)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
