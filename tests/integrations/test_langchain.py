"""The LangChain v1 middleware in a real agent loop (conversion: test_langchain_messages.py).

The tests run LangChain's real ``create_agent`` loop with a real tool and a real
``ChatOpenAI`` model pointed at the local OpenAI wire server (``tests/wire``), and check what
the server received: valid Chat payloads, no orphaned tool message, within budget, one
summary written and then reused, and the agent state still holding every message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.wire import JSONReply, SSEReply, WireServer, serve
from tests.wire import openai_server as wire

from contextfold.errors import ConfigError
from contextfold.formats import openai_chat
from contextfold.strategies import SlidingWindow, Summarization
from contextfold.testing import FakeSummarizer
from contextfold.tokens import ApproxCounter
from contextfold.turns import validate

if os.environ.get("CI"):  # in CI the extra is installed: a missing one must fail, not skip
    import langchain  # noqa: F401
else:
    pytest.importorskip("langchain")
    pytest.importorskip("langchain_openai")

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from openai.types.chat import ChatCompletionMessageParam
from pydantic import TypeAdapter

from contextfold.integrations.langchain import (
    STATE_KEY,
    ContextfoldMiddleware,
    from_langchain,
)

CHAT_MESSAGES = TypeAdapter(list[ChatCompletionMessageParam])
SYSTEM = "You are the order desk. Look orders up before answering."
BUDGET = 450
# Five lookups overflow the budget once: the fourth call summarizes, the fifth and sixth reuse.
LOOKUPS = 5


def test_middleware_refuses_bad_arguments() -> None:
    for kwargs, argument in (
        ({"strategy": "sliding"}, "strategy"),
        ({"strategy": SlidingWindow(100), "counter": len}, "counter"),
        ({"strategy": SlidingWindow(100), "count_tools": 1}, "count_tools"),
    ):
        with pytest.raises(ConfigError) as info:
            ContextfoldMiddleware(**kwargs)
        assert info.value.argument == argument


# -- the agent loop -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[WireServer]:
    yield from serve()


@pytest.fixture
def srv(server: WireServer) -> WireServer:
    server.reset()
    return server


@tool
def lookup(order: str) -> str:
    """Look an order up by its number."""
    return f"order {order}: shipped on 2026-11-{len(order) + 20}, tracking TRK{order}. " + "-" * 300


def tool_reply(turn: int, n: int, stream: bool = False) -> JSONReply | SSEReply:
    arguments = json.dumps({"order": f"A{turn}{n}"})
    if stream:
        return SSEReply(wire.chat_tool_stream("lookup", arguments, call_id=f"call_{turn}_{n}"))
    call = wire.tool_call("lookup", arguments, call_id=f"call_{turn}_{n}")
    return JSONReply(wire.chat_completion(None, tool_calls=[call], finish_reason="tool_calls"))


def turn_replies(turn: int, lookups: int, stream: bool = False) -> list[JSONReply | SSEReply]:
    replies = [tool_reply(turn, n, stream) for n in range(lookups)]
    answer = f"Turn {turn}: all {lookups} orders shipped."
    replies.append(
        SSEReply(wire.chat_stream([answer])) if stream else JSONReply(wire.chat_completion(answer))
    )
    return replies


def make_agent(srv: WireServer, middleware: Any, *, stream: bool = False) -> Any:
    model = ChatOpenAI(
        model=wire.MODEL,
        base_url=srv.url + "/v1",
        api_key="test-key",  # type: ignore[arg-type]
        max_retries=0,
        streaming=stream,
    )
    return create_agent(
        model, [lookup], system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver()
    )


def check_requests(srv: WireServer, budget: int = BUDGET) -> list[list[dict[str, Any]]]:
    """Each request the model server got: valid, pair-safe and within ``budget``."""
    counter = ApproxCounter()
    sent = []
    for request in srv.requests:
        body = request.body
        CHAT_MESSAGES.validate_python(body["messages"])
        loaded = openai_chat.load(body["messages"])
        validate(loaded, allow_pending_tail=True)
        seen_calls = set()
        for m in body["messages"]:  # explicitly: no tool message before its call
            seen_calls.update(c["id"] for c in m.get("tool_calls") or ())
            if m["role"] == "tool":
                assert m["tool_call_id"] in seen_calls
        tokens = counter.count_messages(loaded) + counter.count_tools(body.get("tools") or ())
        assert tokens <= budget, tokens
        sent.append(body["messages"])
    return sent


def summaries_in(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if "conversation-summary" in str(m.get("content"))]


def full_history_tokens(state_messages: list[BaseMessage]) -> int:
    counter = ApproxCounter()
    return counter.count_messages(from_langchain([SystemMessage(SYSTEM), *state_messages]))


def run_checks(srv: WireServer, out: dict[str, Any], fake: FakeSummarizer, lookups: int) -> None:
    sent = check_requests(srv)
    assert len(sent) == lookups + 1
    # The state keeps every message: the question, each call and result, and the answer.
    assert len(out["messages"]) == 1 + 2 * lookups + 1
    assert isinstance(out["messages"][0], HumanMessage)
    assert full_history_tokens(out["messages"]) > BUDGET  # so compaction was needed
    assert STATE_KEY not in out  # private: not part of the agent's output
    # One summary, written once and then reused: the later requests carry the same text.
    assert fake.calls == 1
    carried = [s for messages in sent for s in summaries_in(messages)]
    assert len(carried) >= 2
    assert len(set(carried)) == 1


QUESTION = {"messages": [{"role": "user", "content": "Check orders A00 to A04 for me."}]}
THREAD = {"configurable": {"thread_id": "t1"}}


def test_agent_compacts_each_call_and_reuses_the_summary(srv: WireServer) -> None:
    fake = FakeSummarizer()
    middleware = ContextfoldMiddleware(Summarization(BUDGET, keep_recent=2, summarizer=fake))
    srv.script(*turn_replies(0, LOOKUPS))
    agent = make_agent(srv, middleware)
    out = agent.invoke(QUESTION, THREAD)
    run_checks(srv, out, fake, LOOKUPS)
    saved = agent.get_state(THREAD).values[STATE_KEY]
    assert saved["checkpoint"]["summary"] in summaries_in(srv.requests[-1].body["messages"])[0]


async def test_agent_async_and_streamed(srv: WireServer) -> None:
    fake = FakeSummarizer()
    middleware = ContextfoldMiddleware(Summarization(BUDGET, keep_recent=2, summarizer=fake))
    srv.script(*turn_replies(0, LOOKUPS, stream=True))
    agent = make_agent(srv, middleware, stream=True)
    out = await agent.ainvoke(QUESTION, THREAD)
    run_checks(srv, out, fake, LOOKUPS)


def test_agent_threads_share_the_middleware_not_their_summaries(srv: WireServer) -> None:
    fake = FakeSummarizer()
    middleware = ContextfoldMiddleware(Summarization(BUDGET, keep_recent=2, summarizer=fake))
    agent = make_agent(srv, middleware)
    srv.script(*turn_replies(0, LOOKUPS))
    agent.invoke(QUESTION, THREAD)
    assert fake.calls == 1
    other = {"configurable": {"thread_id": "t2"}}
    srv.script(*turn_replies(1, 1))
    agent.invoke({"messages": [{"role": "user", "content": "Is A10 late?"}]}, other)
    assert fake.calls == 1  # the short thread needs no summary, and sees none
    assert not summaries_in(srv.requests[-1].body["messages"])
    # The first thread goes on from its stored checkpoint: its summary is not written again.
    summary = agent.get_state(THREAD).values[STATE_KEY]["checkpoint"]["summary"]
    srv.script(*turn_replies(2, 1))
    out = agent.invoke({"messages": [{"role": "user", "content": "And A20?"}]}, THREAD)
    check_requests(srv)
    assert len(out["messages"]) == 2 + 2 * LOOKUPS + 4
    assert summary in summaries_in(srv.requests[0].body["messages"])[0]
    # The new lookup overflows the budget again: one more summary for the two calls.
    assert fake.calls == 2


def test_agent_falls_back_when_the_summarizer_fails(srv: WireServer) -> None:
    fake = FakeSummarizer(fail="error")
    middleware = ContextfoldMiddleware(
        Summarization(BUDGET, keep_recent=2, summarizer=fake, max_failed_compactions=2)
    )
    srv.script(*turn_replies(0, LOOKUPS))
    agent = make_agent(srv, middleware)
    out = agent.invoke(QUESTION, THREAD)
    sent = check_requests(srv)  # the fallback window is pair-safe and within budget too
    assert not any(summaries_in(messages) for messages in sent)
    assert len(out["messages"]) == 2 + 2 * LOOKUPS
    # The failure streak is kept per thread: after two failures the summarizer rests.
    assert fake.calls == 2
    assert agent.get_state(THREAD).values[STATE_KEY]["strategy_state"]["failed_compactions"] >= 2


def test_agent_sends_everything_while_it_fits(srv: WireServer) -> None:
    middleware = ContextfoldMiddleware(SlidingWindow(100_000))
    srv.script(*turn_replies(0, 2))
    agent = make_agent(srv, middleware)
    out = agent.invoke(QUESTION, THREAD)
    last = srv.requests[-1].body["messages"]
    assert len(last) == 1 + len(out["messages"]) - 1  # system + every message but the answer
    # No checkpoint to record, only where the cache-stable window begins: the first message.
    recorded = agent.get_state(THREAD).values[STATE_KEY]
    assert recorded["checkpoint"] is None
    assert recorded["strategy_state"]["window"]["start_id"] == out["messages"][0].id


def test_comparison_bench_replays_a_recorded_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import integrations_langchain as bench

    monkeypatch.setattr(bench, "OUT", tmp_path / "figures.json")
    figures = bench.main(["--tiny"])["figures"]
    ours = figures["ContextfoldMiddleware(Summarization(budget))"]
    alone = figures["no middleware"]
    assert ours["calls"] == alone["calls"] > 0
    assert ours["over_budget"] == 0 < alone["over_budget"]
    assert ours["broken_pairs"] == 0
    assert ours["state_messages"] == alone["state_messages"]  # the state keeps every message
    assert 0 < ours["summary_calls"] < ours["calls"]
    assert json.loads((tmp_path / "figures.json").read_text())["figures"] == figures
