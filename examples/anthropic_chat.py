"""A coding-agent session folded into a structured checkpoint written by Claude.

The Anthropic SDK reads ``ANTHROPIC_API_KEY`` (and ``ANTHROPIC_BASE_URL`` for a proxy)::

    ANTHROPIC_API_KEY=sk-ant-... python examples/anthropic_chat.py

``CONTEXTFOLD_MODEL`` picks the model (default ``claude-haiku-4-5``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from contextfold import formats
from contextfold.strategies import Checkpoint, run
from contextfold.summarizers import AnthropicSummarizer

HERE = Path(__file__).parent


def main() -> int:
    if not os.environ.get("ANTHROPIC_API_KEY"):
        print("set ANTHROPIC_API_KEY first (or try `contextfold compact`, which runs offline)")
        return 1
    import anthropic

    client = anthropic.Anthropic()
    model = os.environ.get("CONTEXTFOLD_MODEL", "claude-haiku-4-5")
    session = json.loads((HERE / "coding_session.json").read_text())
    history = formats.load(session)

    # The checkpoint keeps the goal, decisions, files and next steps in named sections, so
    # the agent knows where it was after the older turns are gone.
    strategy = Checkpoint(AnthropicSummarizer(client, model=model), max_tokens=1200)
    result = run(strategy, history)
    body = formats.dump(list(result.messages), "anthropic")

    answer = client.messages.create(model=model, max_tokens=512, **body)
    print("".join(block.text for block in answer.content if block.type == "text"))
    print(
        f"\nsent {result.tokens} of {result.tokens_before} tokens; "
        f"summarized {result.summarized_count} messages; fallback: {result.fallback}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
