"""A store that cannot be written: the memory still builds, with the documented fallback.

A read-only SQLite file opens for reading, and on a full disk or a read-only database
``build_context`` returns the plain sliding window with the reason in its stats, as when a
summarizer fails, instead of raising from the compaction lock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextfold.errors import StoreError
from contextfold.memory import ConversationMemory
from contextfold.messages import Message
from contextfold.stores import SQLiteStore
from contextfold.strategies.hybrid import Hybrid
from contextfold.testing import FakeSummarizer

SUMMARY = "The user asked about their order; every question was answered."
SRC = Path(__file__).resolve().parents[2] / "src"


def chat(n_turns: int) -> list[Message]:
    out = [Message.system("You are a support agent.")]
    for i in range(n_turns):
        out.append(Message.user(f"question {i}: " + "about my order " * 6))
        out.append(Message.assistant(f"answer {i}: " + "here is the status " * 5))
    return out


def hybrid() -> Hybrid:
    return Hybrid(
        400, keep_recent=4, chunk_size=4, summarizer=FakeSummarizer(SUMMARY), max_chunks=64
    )


# What a process that may not write the file does (run as an unprivileged user when the
# tests run as root, who may write any file).
_READER = textwrap.dedent(
    """
    import json, os, sys
    from contextfold.errors import StoreError
    from contextfold.memory import ConversationMemory
    from contextfold.messages import Message
    from contextfold.stores import SQLiteStore
    from contextfold.strategies.hybrid import Hybrid
    from contextfold.testing import FakeSummarizer
    if os.geteuid() == 0:
        os.setgid(65534)
        os.setuid(65534)
    store = SQLiteStore(sys.argv[1])
    out = {"read_only": store.read_only, "count": len(store.read("c"))}
    try:
        store.append("c", [Message.user("more")])
        out["append"] = "stored"
    except StoreError as exc:
        out["append"] = str(exc)
    strategy = Hybrid(400, keep_recent=4, chunk_size=4, summarizer=FakeSummarizer("s"),
                      max_chunks=64)
    memory = ConversationMemory(strategy=strategy, store=store, conversation_id="c")
    stats = memory.build_context().stats
    out["fallback"] = stats.fallback
    out["reason"] = stats.fallback_reason
    out["compacted"] = stats.compacted
    out["tokens"] = stats.current_tokens
    print(json.dumps(out))
    """
)


def test_a_read_only_sqlite_file_opens_for_reading_and_builds_the_window() -> None:
    # Not under pytest's tmp_path, whose folders only their owner may enter.
    with tempfile.TemporaryDirectory(prefix="cf-ro-") as top:
        os.chmod(top, 0o755)
        _read_only_case(Path(top) / "ro")


def _read_only_case(folder: Path) -> None:
    folder.mkdir()
    path = folder / "chats.db"
    store = SQLiteStore(path)
    store.append("c", chat(30))
    store.close()
    os.chmod(path, 0o444)
    os.chmod(folder, 0o555)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _READER, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(SRC)},
            check=False,
        )
    finally:
        os.chmod(folder, 0o755)
        os.chmod(path, 0o644)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["read_only"] is True
    assert out["count"] == 61
    assert "readonly" in out["append"]
    assert out["fallback"] is True
    assert out["reason"].startswith("the store could not take the compaction lock")
    assert out["compacted"] is False
    assert 0 < out["tokens"] <= 400


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs: a real file system that runs out of space."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        if os.environ.get("CI") and os.geteuid() == 0:
            pytest.fail(f"cannot mount a tmpfs in CI: {done.stderr!r}")
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> None:
    """Write a file until the file system has no byte left."""
    fd = os.open(folder / f"filler-{uuid.uuid4().hex}", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (65536, 1):
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                continue
    finally:
        os.close(fd)


def test_on_a_full_disk_build_context_returns_the_window_with_the_reason(
    full_disk: Path,
) -> None:
    store = SQLiteStore(full_disk / "chats.db")
    memory = ConversationMemory(strategy=hybrid(), store=store, conversation_id="c")
    memory.extend(chat(30))
    _fill(full_disk)
    with pytest.raises(StoreError, match="full"):
        store.append("c", [Message.user("one more")])
    ctx = memory.build_context()
    assert ctx.stats.fallback
    assert ctx.stats.fallback_reason is not None
    assert ctx.stats.fallback_reason.startswith("the store could not take the compaction lock")
    assert "full" in ctx.stats.fallback_reason
    assert not ctx.stats.compacted
    assert ctx.stats.current_tokens <= 400
    assert ctx.messages[0].text == "You are a support agent."
    assert ctx.messages[-1].text.startswith("answer 29")
    assert store.checkpoints("c") == []
    store.close()


async def test_on_a_full_disk_abuild_context_returns_the_window_too(full_disk: Path) -> None:
    store = SQLiteStore(full_disk / "chats.db")
    memory = ConversationMemory(strategy=hybrid(), store=store, conversation_id="c")
    await memory.aextend(chat(30))
    _fill(full_disk)
    ctx = await memory.abuild_context()
    assert ctx.stats.fallback
    assert "compaction lock" in (ctx.stats.fallback_reason or "")
    assert not ctx.stats.compacted
    store.close()
