"""The same LlamaIndex agent run, with LlamaIndex's own memory and with ours.

One scripted order-desk conversation (``--turns`` user turns; in each, the model calls a tool
twice, in parallel, then answers; every tool output is a long order record) runs through
LlamaIndex's real ``FunctionAgent``, once per memory, all with the same history budget:

* ``ChatMemoryBuffer``: keeps the newest messages inside ``token_limit``, cutting only in front
  of a user message;
* ``Memory``: the newer FIFO memory; past ``token_limit * chat_history_token_ratio`` it flushes
  the oldest messages (``token_flush_size`` at a time, whole turns) out of the queue (ratio 1.0
  here, no memory blocks, so the whole budget goes to the history);
* ``ContextfoldMemory``, once with ``SlidingWindow(budget)`` and once with
  ``Checkpoint(ExtractiveSummarizer(), max_tokens=budget)``.

The LLM is a scripted ``FunctionCallingLLM`` that records every request the agent sends it
(system prompt, what ``memory.aget()`` returned, and the run's own tool calls and results). For
each request it counts the tokens with the approximate counter (the LlamaIndex memories get it
as their ``tokenizer_fn``, though each applies it to its own idea of a message) and checks that
every tool result comes with its call and every call with its result. It also counts the
history part of each run's first request (what the memory returned), and checks whether the
last request still names the first turn's order (verbatim or in a summary).

Offline, deterministic, no key. Run: ``python -m bench.integrations_llama_index [--tiny]``;
prints a Markdown table and writes ``bench/out/integrations_llama_index.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, LLMMetadata
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import ToolSelection
from llama_index.core.memory import ChatMemoryBuffer, Memory
from llama_index.core.tools import FunctionTool
from pydantic import PrivateAttr

from contextfold import turns
from contextfold.errors import PairingError
from contextfold.integrations.llama_index import ContextfoldMemory, to_messages
from contextfold.strategies import Checkpoint, SlidingWindow
from contextfold.summarizers import ExtractiveSummarizer
from contextfold.summarizers.base import SummarizationResult, SummaryRequest
from contextfold.tokens.approx import ApproxCounter

OUT = Path(__file__).parent / "out" / "integrations_llama_index.json"
BUDGET = 2000
COUNTER = ApproxCounter()
SYSTEM = "You are the order desk of Lumen Storage. Answer in one sentence."
RECORD = (
    "status shipped; carrier PostNL; parcel {n}A-77{n}; two 4 TB drives; warehouse Tilburg; "
    "refund RF-77{n} pending review; customer note: deliver after 17:00. "
) * 4
SETUPS = (
    "LlamaIndex ChatMemoryBuffer",
    "LlamaIndex Memory",
    "contextfold SlidingWindow",
    "contextfold Checkpoint",
)


class CountingSummarizer:
    """The extractive summarizer, counting its calls."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.calls = 0

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        self.calls += 1
        return self.inner.summarize(request)


def order_record(order: str) -> str:
    """The full record of an order."""
    return f"{order}: " + RECORD.format(n=order[-2:])


class ScriptedLLM(FunctionCallingLLM):
    """Calls ``order_record`` for each order the last user message names, then answers."""

    _sent: list[list[ChatMessage]] = PrivateAttr(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            model_name="scripted", is_chat_model=True, is_function_calling_model=True
        )

    @property
    def sent(self) -> list[list[ChatMessage]]:
        return self._sent

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self._sent.append(list(messages))
        if messages[-1].role.value == "tool":
            text = re.findall(r"LS-\d+", messages[-1].content or "")[0]
            reply = ChatMessage(role="assistant", content=f"Order {text} ships today.")
            return ChatResponse(message=reply)
        orders = re.findall(r"LS-\d+", messages[-1].content or "")
        calls = [
            {"id": f"call_{o}", "type": "function",
             "function": {"name": "order_record", "arguments": json.dumps({"order": o})}}
            for o in orders
        ]  # fmt: skip
        reply = ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": calls})
        return ChatResponse(message=reply)

    def _prepare_chat_with_tools(
        self, tools: Sequence[Any], user_msg: Any = None, chat_history: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        messages = list(chat_history or [])
        if user_msg is not None:
            messages.append(ChatMessage(role="user", content=str(user_msg)))
        return {"messages": messages}

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        calls = response.message.additional_kwargs.get("tool_calls") or []
        return [
            ToolSelection(tool_id=c["id"], tool_name=c["function"]["name"],
                          tool_kwargs=json.loads(c["function"]["arguments"]))
            for c in calls
        ]  # fmt: skip

    def chat(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    complete = acomplete = stream_chat = astream_chat = chat
    stream_complete = astream_complete = chat


def _tokens(text: str) -> list[int]:
    """LlamaIndex's ``tokenizer_fn`` on our approximate counter."""
    return [0] * COUNTER.count_text(text)


def _memory(setup: str, summarizer: CountingSummarizer) -> Any:
    if setup == "LlamaIndex ChatMemoryBuffer":
        return ChatMemoryBuffer.from_defaults(token_limit=BUDGET, tokenizer_fn=_tokens)
    if setup == "LlamaIndex Memory":
        flush = BUDGET // 10
        return Memory.from_defaults(
            token_limit=BUDGET,
            chat_history_token_ratio=1.0,
            token_flush_size=flush,
            tokenizer_fn=_tokens,
        )
    if setup == "contextfold SlidingWindow":
        return ContextfoldMemory(setup, strategy=SlidingWindow(BUDGET), counter=COUNTER)
    strategy = Checkpoint(summarizer, max_tokens=BUDGET)
    return ContextfoldMemory(setup, strategy=strategy, counter=COUNTER)


def _measure(request: list[ChatMessage]) -> tuple[int, bool]:
    messages = to_messages(request)
    tokens = COUNTER.count_messages(messages)
    try:
        turns.validate(messages)
    except PairingError:
        return tokens, False
    return tokens, True


async def _run(setup: str, turns_: int) -> dict[str, Any]:
    summarizer = CountingSummarizer()
    memory = _memory(setup, summarizer)
    llm = ScriptedLLM()
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(order_record)], llm=llm,
                          system_prompt=SYSTEM, streaming=False)  # fmt: skip
    for turn in range(turns_):
        await agent.run(f"Turn {turn}: where are orders LS-{turn}0 and LS-{turn}1?", memory=memory)
    sent = [_measure(r) for r in llm.sent]
    # A run's first request is the system prompt plus what ``memory.aget()`` returned.
    reads = [COUNTER.count_messages(to_messages(r[1:])) for r in llm.sent if r[-1].role == "user"]
    last = " ".join(m.content or "" for m in llm.sent[-1])
    return {
        "setup": setup,
        "model_calls": len(sent),
        "tokens_sent": sum(t for t, _ in sent),
        "largest_request": max(t for t, _ in sent),
        "largest_history": max(reads),
        "requests_with_broken_pairs": sum(1 for _, ok in sent if not ok),
        "summary_calls": summarizer.calls,
        "first_turn_visible_at_end": "LS-00" in last,
    }


def run(turns_: int, *, out: Path | None = OUT) -> list[dict[str, Any]]:
    """Every memory on the same run; writes the figures to ``out`` when given."""
    rows = [asyncio.run(_run(setup, turns_)) for setup in SETUPS]
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"turns": turns_, "budget": BUDGET, "rows": rows}, indent=2))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of the docs."""
    head = ("| memory | model calls | tokens sent | largest request | largest history read "
            "| requests with broken pairs | summary calls | first turn still visible |\n"
            "|---|---|---|---|---|---|---|---|")  # fmt: skip
    lines = [
        f"| {r['setup']} | {r['model_calls']} | {r['tokens_sent']:,} | {r['largest_request']:,} "
        f"| {r['largest_history']:,} | {r['requests_with_broken_pairs']} | {r['summary_calls']} "
        f"| {'yes' if r['first_turn_visible_at_end'] else 'no'} |"
        for r in rows
    ]
    return "\n".join([head, *lines])


def main(argv: list[str] | None = None, *, emit: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tiny", action="store_true", help="a short run (for the smoke test)")
    parser.add_argument("--turns", type=int, default=12, help="user turns in the run")
    args = parser.parse_args(argv)
    turns_ = 3 if args.tiny else args.turns
    rows = run(turns_)
    emit(f"{turns_} turns; history budget {BUDGET} tokens for every memory.\n")
    emit(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
