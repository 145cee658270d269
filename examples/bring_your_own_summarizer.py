"""Plug in your own summarizer: any function from messages to text.

Runs offline. Here the "summary" keeps every line that mentions an order, ticket or amount,
a stand-in for whatever model or rule set you already use.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from contextfold import formats
from contextfold.messages import Message
from contextfold.strategies import Summarization, run
from contextfold.summarizers import FunctionSummarizer

HERE = Path(__file__).parent
IMPORTANT = re.compile(r"\b(LS-\d+|RF-\d+|\$\d[\d,.]*)")


def keep_key_facts(messages: Sequence[Message], previous: str | None) -> str:
    """One line per message that carries an order number, ticket or amount."""
    lines = [previous] if previous else []
    for m in messages:
        for sentence in re.split(r"(?<=[.!?])\s+", m.text):
            if IMPORTANT.search(sentence):
                lines.append(f"- {m.role}: {sentence.strip()}")
    return "\n".join(lines)


def main() -> None:
    history = formats.load(json.loads((HERE / "support_chat.json").read_text()))
    strategy = Summarization(
        max_tokens=450, keep_recent=4, summarizer=FunctionSummarizer(keep_key_facts)
    )
    result = run(strategy, history)
    print(result.messages[1].text)
    print(f"\n{result.tokens} of {result.tokens_before} tokens, fallback: {result.fallback}")


if __name__ == "__main__":
    main()
