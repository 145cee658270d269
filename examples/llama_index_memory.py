"""A LlamaIndex chat engine whose memory is a contextfold store with a strategy.

Thirty questions go through ``SimpleChatEngine``; its ``ContextfoldMemory`` keeps all of them
in SQLite and hands the engine a summary plus the newest messages, inside 400 tokens. The LLM
is LlamaIndex's offline ``MockLLM``, so this runs without a key; any LlamaIndex LLM plugs in
the same way (``llama_index.llms.openai.OpenAI(model="gpt-4o-mini")`` ...)::

    python examples/llama_index_memory.py [DB]

Without ``DB`` the memory lives in a temporary file, so every run starts fresh.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from contextfold import ExtractiveSummarizer, Hybrid
from contextfold.integrations.llama_index import ContextfoldMemory


def main(db: Path) -> int:
    from llama_index.core.chat_engine import SimpleChatEngine
    from llama_index.core.llms import MockLLM

    strategy = Hybrid(
        max_tokens=400, keep_recent=6, chunk_size=12, summarizer=ExtractiveSummarizer()
    )
    memory = ContextfoldMemory("maria", f"sqlite:///{db}", strategy=strategy)
    engine = SimpleChatEngine.from_defaults(
        llm=MockLLM(max_tokens=16),
        memory=memory,
        system_prompt="You are the support assistant of Lumen Storage.",
    )
    for day in range(1, 16):
        engine.chat(f"Day {day}: any news on refund RF-7720 for order LS-48219?")
        engine.chat(f"Day {day}: and is ticket T-{day:03d} still open?")
    sent = memory.get()
    stats = memory.memory.stats
    print(f"stored {len(memory.get_all())} messages; the engine is sent {len(sent)}:")
    for message in sent[:2]:
        print(f"  {message.role.value}: {(message.content or '')[:72]}")
    if stats is not None:
        print(f"{stats.current_tokens} tokens sent, summary: {stats.is_summarized}")
    memory.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1:
        raise SystemExit(main(Path(sys.argv[1])))
    with tempfile.TemporaryDirectory() as tmp:
        code = main(Path(tmp) / "llama.db")
    raise SystemExit(code)
