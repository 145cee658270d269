"""A LangChain agent whose model calls stay inside a token budget, offline.

Runs LangChain's real ``create_agent`` loop with a scripted chat model, so it needs no key
and no network: the model looks five orders up one by one, then answers.
``ContextfoldMiddleware`` builds what each model call is sent: everything while it fits, then
a summary of the older lookups plus the newest ones. The summary is written once and reused
by the next calls; the agent's state keeps every message. Needs the ``langchain`` extra::

    pip install 'contextfold[langchain]'
    python examples/langchain_agent.py
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from contextfold.integrations.langchain import ContextfoldMiddleware, from_langchain
from contextfold.messages import Message
from contextfold.strategies import Summarization
from contextfold.summarizers import FunctionSummarizer
from contextfold.tokens import ApproxCounter

ORDERS = ["LS-48213", "LS-48219", "LS-48231", "LS-48240", "LS-48252"]
SENT: list[int] = []  # tokens of each model call, as the model received it
SUMMARIES: list[int] = []


@tool
def lookup(order: str) -> str:
    """Look an order up by its number."""
    return f"{order}: shipped, tracking TRK{order[3:]}, carrier notes: " + "on schedule. " * 20


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model, able to take tools, and counting what it is sent."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        SENT.append(ApproxCounter().count_messages(from_langchain(messages)))
        return super()._generate(messages, *args, **kwargs)


def order_lines(messages: Sequence[Message], previous: str | None) -> str:
    """A stand-in summarizer: one line per order a tool result mentions."""
    SUMMARIES.append(len(messages))
    lines = [previous] if previous else []
    for m in messages:
        for result in m.tool_results:
            lines.extend(re.findall(r"LS-\d+: \w+", result.text))
    return "Orders checked so far: " + "; ".join(lines)


def main() -> None:
    script = [
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"order": o}, "id": f"call_{i}"}])
        for i, o in enumerate(ORDERS)
    ]
    script.append(AIMessage("All five orders have shipped and are on schedule."))
    strategy = Summarization(
        500, keep_recent=2, summarizer=FunctionSummarizer(order_lines), reserve_tokens=50
    )
    agent = create_agent(
        ScriptedModel(messages=iter(script)),
        [lookup],
        system_prompt="You are the order desk. Look orders up before answering.",
        middleware=[ContextfoldMiddleware(strategy)],
        checkpointer=InMemorySaver(),
    )
    question = {"role": "user", "content": "Have my five orders shipped?"}
    out = agent.invoke({"messages": [question]}, {"configurable": {"thread_id": "demo"}})
    print("tokens sent per model call:", SENT)
    print("summaries written:", len(SUMMARIES))
    print("messages in the agent state:", len(out["messages"]))
    print("answer:", out["messages"][-1].content)


if __name__ == "__main__":
    main()
