"""Any provider LiteLLM supports, through one summarizer.

LiteLLM reads each provider's usual key variable. For an OpenAI-compatible server (a proxy,
vLLM, Ollama ...) set ``OPENAI_BASE_URL`` and use an ``openai/`` model name::

    OPENAI_API_KEY=sk-... python examples/litellm_chat.py
    export CONTEXTFOLD_MODEL=anthropic/claude-haiku-4-5 ANTHROPIC_API_KEY=...
    python examples/litellm_chat.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from contextfold import formats
from contextfold.strategies import Summarization, run
from contextfold.summarizers import LiteLLMSummarizer

HERE = Path(__file__).parent


def main() -> int:
    model = os.environ.get("CONTEXTFOLD_MODEL", "openai/gpt-4o-mini")
    history = formats.load(json.loads((HERE / "support_chat.json").read_text()))
    summarizer = LiteLLMSummarizer(model=model, api_base=os.environ.get("OPENAI_BASE_URL"))
    result = run(Summarization(max_tokens=500, keep_recent=4, summarizer=summarizer), history)
    if result.fallback:
        # Nothing is lost: the sliding window was used and the stats say why.
        print(f"summarizer failed ({result.fallback}); sent the newest messages only")
    else:
        print(result.messages[1].text)
    print(f"\n{result.tokens} of {result.tokens_before} tokens", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
