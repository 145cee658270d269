"""A pydantic-ai agent whose history stays inside a token budget, on a SQLite store.

Each run asks the agent about two parcels; it calls its ``track`` tool for both at once and
answers. After a few runs the history no longer fits the small budget, so the processor
writes a summary once, stores it with the full transcript in SQLite, and sends
``summary + recent turns`` on every later request.

Offline by default: a pydantic-ai ``FunctionModel`` stands in for the LLM. With
``OPENAI_API_KEY`` set it talks to OpenAI (``OPENAI_BASE_URL`` for a proxy or a local
server; ``CONTEXTFOLD_MODEL`` picks the model, default ``gpt-4o-mini``)::

    python examples/pydantic_ai_agent.py [DB]
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextfold.integrations.pydantic_ai import history_processor
from contextfold.strategies import Checkpoint
from contextfold.summarizers import ExtractiveSummarizer


def offline_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call ``track`` for the parcels of the newest question, then answer from the results."""
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(" ".join(str(p.content) for p in returns))])
    prompt = next(p for p in reversed(last.parts) if isinstance(p, UserPromptPart))
    # A summary may be merged in front of the question: read only the question itself.
    question = prompt.content if isinstance(prompt.content, str) else str(prompt.content[-1])
    parcels = re.findall(r"P-\d+", question)
    return ModelResponse(parts=[ToolCallPart("track", {"parcel": p}) for p in parcels])


def pick_model() -> Model:
    if not os.environ.get("OPENAI_API_KEY"):
        return FunctionModel(offline_model)
    from pydantic_ai.models.openai import OpenAIChatModel

    return OpenAIChatModel(os.environ.get("CONTEXTFOLD_MODEL", "gpt-4o-mini"))


async def main(db: str) -> int:
    summarizer = ExtractiveSummarizer()  # offline; OpenAISummarizer etc. work the same way
    strategy = Checkpoint(summarizer, max_tokens=400, keep_recent_tokens=120, max_output_tokens=120)
    processor = history_processor(strategy, store=f"sqlite:///{db}", conversation_id="parcels")
    agent = Agent(
        pick_model(),
        system_prompt="You track parcels. Quote parcel ids exactly.",
        capabilities=[ProcessHistory(processor)],
    )

    @agent.tool_plain
    def track(parcel: str) -> str:
        """Where a parcel is."""
        return f"{parcel} left depot D-{parcel[-1]} and arrives Friday."

    history: list[ModelMessage] = []
    for day in range(1, 7):
        asked = f"Where are parcels P-{day}1 and P-{day}2?"
        result = await agent.run(asked, message_history=history)
        history = result.all_messages()
        print(f"run {day}: {result.output}")
    await processor.arecord(history, conversation_id="parcels")  # the last answer, too

    full = await processor.aread_transcript("parcels")
    print(f"pydantic-ai holds {len(history)} messages; the store holds all {len(full)}")
    summary = "condensed" in str(history[0].parts)
    print(f"the history starts with a summary: {summary}")
    await processor.aclose()
    return 0


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else str(Path(tempfile.mkdtemp()) / "agent.db")
    sys.exit(asyncio.run(main(path)))
