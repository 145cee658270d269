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


def test_public_names_report_the_public_module() -> None:
    # Reprs, tracebacks and docs show `contextfold.ConversationMemory`, not the private module.
    for name in contextfold.__all__:
        if name.startswith("__"):
            continue
        assert getattr(contextfold, name).__module__ == "contextfold", name
    assert repr(contextfold.ConversationMemory) == "<class 'contextfold.ConversationMemory'>"


def test_root_exports_what_strategies_and_summarizers_speak() -> None:
    from contextfold.errors import ConfigError
    from contextfold.strategies import SummaryCall
    from contextfold.summarizers import AsyncSummarizer

    assert contextfold.SummaryCall is SummaryCall
    assert contextfold.AsyncSummarizer is AsyncSummarizer
    assert contextfold.ConfigError is ConfigError


def test_lazy_exports_share_one_mechanism() -> None:
    code = textwrap.dedent(
        """
        import sys
        import contextfold.stores as stores
        import contextfold.summarizers as summarizers
        for package, name, module in (
            (stores, "PostgresStore", "contextfold.stores.postgres"),
            (summarizers, "OpenAISummarizer", "contextfold.summarizers.openai"),
        ):
            assert name in dir(package) and name in package.__all__
            assert module not in sys.modules, module
            value = getattr(package, name)
            assert value is getattr(sys.modules[module], name)
            assert vars(package)[name] is value  # cached: later reads are plain lookups
        try:
            stores.NoSuchStore
        except AttributeError as exc:
            assert "contextfold.stores" in str(exc) and "NoSuchStore" in str(exc)
        else:
            raise AssertionError("no AttributeError")
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


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
