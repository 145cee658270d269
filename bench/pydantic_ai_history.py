"""One pydantic-ai agent session under four history treatments, side by side.

The agent answers ten questions; each makes two parallel ``track`` calls with long outputs.
A ``FunctionModel`` stands in for the LLM (offline, deterministic) and counts the tokens of
every request it is sent. The table is in ``docs/integrations/pydantic-ai.md``::

    python -m bench.pydantic_ai_history
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

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
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextfold import turns
from contextfold.errors import PairingError
from contextfold.integrations.pydantic_ai import from_model_messages, history_processor
from contextfold.strategies import Checkpoint, SlidingWindow
from contextfold.testing import FakeSummarizer
from contextfold.tokens import ApproxCounter

TURNS = 10
BUDGET = 1500
COUNTER = ApproxCounter()


class Tally:
    """What one session sent, and how many processor outputs broke a tool pair."""

    def __init__(self) -> None:
        self.sent: list[int] = []
        self.broken = 0

    def model(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.sent.append(COUNTER.count_messages(from_model_messages(messages)))
        last = messages[-1]
        if any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart("Both are in transit.")])
        prompt = next(p for p in reversed(last.parts) if isinstance(p, UserPromptPart))
        text = prompt.content if isinstance(prompt.content, str) else str(prompt.content[-1])
        parcels = re.findall(r"P-\d+", text)
        return ModelResponse(parts=[ToolCallPart("track", {"parcel": p}) for p in parcels])

    def keep_last_five(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The usual hand-written processor: the newest five messages."""
        out = messages[-5:]
        try:
            turns.validate(from_model_messages(out), allow_pending_tail=True)
        except PairingError:
            self.broken += 1
        return out


async def session(tally: Tally, processor: Callable[..., Any] | None) -> None:
    capabilities = [ProcessHistory(processor)] if processor is not None else []
    agent = Agent(
        FunctionModel(tally.model), system_prompt="You track parcels.", capabilities=capabilities
    )

    @agent.tool_plain
    def track(parcel: str) -> str:
        return f"{parcel}: in transit. " + "scan event at depot. " * 30

    history: list[ModelMessage] = []
    for t in range(TURNS):
        result = await agent.run(f"Where are P-{t}1 and P-{t}2?", message_history=history)
        history = result.all_messages()


def main() -> None:
    print("| history | tokens sent, all requests | largest request | pairs broken | summaries |")
    print("|---|---|---|---|---|")
    for name in ("none", "keep last 5", "SlidingWindow", "Checkpoint"):
        tally, summarizer = Tally(), FakeSummarizer()
        processor: Callable[..., Any] | None = {
            "none": None,
            "keep last 5": tally.keep_last_five,
            "SlidingWindow": history_processor(SlidingWindow(BUDGET)),
            "Checkpoint": history_processor(Checkpoint(summarizer, max_tokens=BUDGET)),
        }[name]
        asyncio.run(session(tally, processor))
        print(
            f"| {name} | {sum(tally.sent):,} | {max(tally.sent):,} | "
            f"{tally.broken} of {len(tally.sent)} | {summarizer.calls} |"
        )


if __name__ == "__main__":
    main()
