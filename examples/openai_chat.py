"""Keep a long support chat inside a token budget, with an OpenAI model writing the summary.

Run it with a key (the OpenAI SDK reads ``OPENAI_API_KEY`` and, for a proxy or a local
server, ``OPENAI_BASE_URL``)::

    OPENAI_API_KEY=sk-... python examples/openai_chat.py

``CONTEXTFOLD_MODEL`` picks the model for both the summary and the answer (default
``gpt-4o-mini``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from contextfold import formats
from contextfold.memory import ConversationMemory
from contextfold.messages import Message
from contextfold.strategies import Hybrid
from contextfold.summarizers import OpenAISummarizer

HERE = Path(__file__).parent


def main() -> int:
    if not os.environ.get("OPENAI_API_KEY"):
        print("set OPENAI_API_KEY first (or try `contextfold compact`, which runs offline)")
        return 1
    import openai

    client = openai.OpenAI()
    model = os.environ.get("CONTEXTFOLD_MODEL", "gpt-4o-mini")
    history = formats.load(json.loads((HERE / "support_chat.json").read_text()))

    strategy = Hybrid(
        max_tokens=600,  # tiny on purpose, so this short example needs a summary
        keep_recent=6,
        chunk_size=40,
        summarizer=OpenAISummarizer(client, model=model),
    )
    with ConversationMemory(strategy=strategy) as memory:
        memory.extend(history)
        memory.add(Message.user("Remind me: which refund ticket did you open, and for how much?"))
        ctx = memory.build_context()

        answer = client.chat.completions.create(model=model, messages=ctx.to_openai())
        reply = answer.choices[0].message.content or ""
        memory.add(Message.assistant(reply))

    print(reply)
    s = ctx.stats  # complete: this memory appended every message, so it knows the total
    print(
        f"\nsent {s.current_tokens} of {s.total_tokens} tokens "
        f"(saved {s.tokens_saved}, summary: {s.is_summarized}, fallback: {s.fallback_reason})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
