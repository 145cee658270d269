"""A cache-stable window survives a process restart: its position is saved with the log.

The conversation is replayed through ``ConversationMemory`` on a SQLite file, half in one
process and half in another. The context the second process builds first must start with
the last context of the first process (the window kept appending), which only holds when
the window's anchor was persisted rather than recomputed from scratch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import json, sys
from contextfold import ConversationMemory
from contextfold.messages import Message
from contextfold.stores.sqlite import SQLiteStore
from contextfold.strategies import SlidingWindow

path, start, stop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = SQLiteStore(f"sqlite:///{path}")
memory = ConversationMemory.open(store, conversation_id="chat", strategy=SlidingWindow(600))
contexts = []
for turn in range(start, stop):
    memory.add(Message.user(f"question {turn}: " + "about the order and its refund " * 3))
    contexts.append([m.to_dict() for m in memory.build_context().messages])
    memory.add(Message.assistant(f"answer {turn}: " + "the refund went out today " * 3))
store.close()
print(json.dumps(contexts))
"""


def _run(path: Path, start: int, stop: int) -> list[list[dict[str, object]]]:
    env = {**os.environ, "PYTHONHASHSEED": str(start + 1)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path), str(start), str(stop)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _appends(previous: list[dict[str, object]], current: list[dict[str, object]]) -> bool:
    return current[: len(previous)] == previous


def test_the_window_keeps_appending_across_a_process_restart(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    first = _run(path, 0, 24)
    second = _run(path, 24, 30)
    # The first process went over budget and moved its window at least once ...
    moves = [i for i in range(1, len(first)) if not _appends(first[i - 1], first[i])]
    assert moves
    # ... and the second one, started after that, extends the last context it saw.
    assert _appends(first[-1], second[0])
    assert len(second[0]) == len(first[-1]) + 2  # the last answer and the new question


def test_a_store_without_state_still_builds(tmp_path: Path) -> None:
    """A bare message log (no state ability) keeps the state in the process only."""
    from contextfold import ConversationMemory
    from contextfold.messages import Message
    from contextfold.stores import InMemoryStore
    from contextfold.stores.partial import as_store
    from contextfold.strategies import SlidingWindow

    class Log:
        def __init__(self) -> None:
            self.inner = InMemoryStore()

        def append(self, cid, messages):  # type: ignore[no-untyped-def]
            return self.inner.append(cid, messages)

        def read(self, cid, *, after_seq=0, limit=None):  # type: ignore[no-untyped-def]
            return self.inner.read(cid, after_seq=after_seq, limit=limit)

        def last_seq(self, cid):  # type: ignore[no-untyped-def]
            return self.inner.last_seq(cid)

        def list_conversations(self):  # type: ignore[no-untyped-def]
            return self.inner.list_conversations()

        def delete(self, cid):  # type: ignore[no-untyped-def]
            self.inner.delete(cid)

        def close(self) -> None:
            self.inner.close()

    memory = ConversationMemory(strategy=SlidingWindow(200), store=as_store(Log()))
    previous: list[Message] = []
    for turn in range(12):
        memory.add(Message.user(f"q{turn} " * 10))
        context = list(memory.build_context().messages)
        assert context
        previous = context
    assert memory.strategy_state.window is not None
    assert previous
