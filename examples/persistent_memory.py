"""A conversation that outlives the process: SQLite store, checkpoint reused across runs.

Runs offline with the extractive summarizer. Run it twice: the second run appends one more
message and reuses the stored checkpoint instead of summarizing again::

    python examples/persistent_memory.py /tmp/chats.db
    python examples/persistent_memory.py /tmp/chats.db
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from contextfold import formats
from contextfold.memory import ConversationMemory
from contextfold.messages import Message
from contextfold.strategies import Hybrid
from contextfold.summarizers import ExtractiveSummarizer

HERE = Path(__file__).parent


def main(db: str) -> None:
    strategy = Hybrid(
        max_tokens=500,
        keep_recent=6,
        chunk_size=20,
        max_output_tokens=120,  # leave most of the budget to the recent messages
        summarizer=ExtractiveSummarizer(),
    )
    with ConversationMemory.open(
        f"sqlite:///{db}", conversation_id="maria-okafor", strategy=strategy
    ) as memory:
        if not memory.read_messages():
            history = formats.load(json.loads((HERE / "support_chat.json").read_text()))
            memory.extend(history)
        memory.add(Message.user("Is refund RF-7720 still on track?"))
        ctx = memory.build_context()
        # On a rerun this memory did not write the stored history, so the stats leave its
        # total unknown (None) rather than read the whole log; count it explicitly.
        s = memory.count_totals(ctx.stats)
        state = "new" if s.compacted else "reused"
        print(
            f"{s.message_count} stored messages -> {s.context_message_count} sent, "
            f"{s.current_tokens}/{s.total_tokens} tokens, checkpoint {state}: {s.checkpoint_id}"
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "contextfold-example.db")
