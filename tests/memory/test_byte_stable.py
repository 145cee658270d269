"""The same stored messages dump to the same bytes, in any process.

A provider's prompt cache matches the request's bytes. So the context built from a stored
conversation must serialize identically however often, and in whichever process, it is
built: key order, summary placement and framing, tool-call ids. Two fresh interpreters with
different hash seeds open the same SQLite file and build the context with every provider
dump; the bytes must be equal, and equal to a third build in this process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from contextfold.messages import Message, ToolCallPart
from contextfold.stores.sqlite import SQLiteStore

SCRIPT = r"""
import hashlib, json, sys
from contextfold import ConversationMemory
from contextfold.stores.sqlite import SQLiteStore
from contextfold.strategies import Checkpoint, PruneToolOutputs, Pipeline
from contextfold.summarizers.extractive import ExtractiveSummarizer

store = SQLiteStore(f"sqlite:///{sys.argv[1]}")
strategy = Pipeline(
    [PruneToolOutputs(min_savings=50), Checkpoint(ExtractiveSummarizer(), max_tokens=900)],
    max_tokens=900,
)
memory = ConversationMemory.open(store, conversation_id="c", strategy=strategy)
ctx = memory.build_context()
for dump in (ctx.to_openai(), ctx.to_anthropic(), ctx.to_responses()):
    print(hashlib.sha256(json.dumps(dump).encode()).hexdigest())
store.close()
"""


def _history() -> list[Message]:
    out = [Message.system("You help with orders. Be brief.")]
    for i in range(30):
        out.append(Message.user(f"Where is order A{i:03d}? It was due on the {i + 1}th."))
        call = ToolCallPart(f"call_{i}", "lookup_order", f'{{"order": "A{i:03d}", "n": {i}}}')
        out.append(Message.assistant(None, tool_calls=[call]))
        out.append(Message.tool_result(f"call_{i}", f"A{i:03d}: shipped, tracking 1Z{i:06d} " * 4))
        out.append(Message.assistant(f"Order A{i:03d} has shipped; tracking 1Z{i:06d}."))
    return out


def _digests(path: Path, seed: int) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return out.stdout.split()


def test_stored_conversations_dump_to_the_same_bytes_in_every_process(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    store = SQLiteStore(f"sqlite:///{path}")
    store.append("c", _history())
    store.close()
    first = _digests(path, 1)
    second = _digests(path, 2)
    assert len(first) == 3
    assert first == second
    assert _digests(path, 3) == first
