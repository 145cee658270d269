"""The OpenAI Agents SDK integration, run by the SDK's own Runner against the local wire server.

The agent is a real ``Agent`` with a function tool and an ``OpenAIResponsesModel`` whose
``AsyncOpenAI`` client points at :mod:`tests.wire`. Each test asserts what the server received:
valid Responses input (checked with the ``openai`` SDK's own types), every tool call paired
with its output, within the strategy's budget, and the summary reused rather than recomputed.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from integration_helpers import require_framework
from tests.wire import Received, WireServer, serve
from tests.wire.openai_server import responses_call_reply, responses_text_reply

from contextfold import Hybrid, SlidingWindow, turns
from contextfold.errors import ConfigError
from contextfold.formats import openai_responses
from contextfold.integrations.openai_agents import (
    ContextfoldSession,
    InMemorySummaryCache,
    input_filter,
    pair_safe_tail,
)
from contextfold.messages import Message
from contextfold.stores import InMemoryStore
from contextfold.testing import FakeSummarizer
from contextfold.tokens import ApproxCounter

agents = require_framework("agents")
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from openai.types.responses import ResponseInputParam  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

agents.set_tracing_disabled(True)
COUNTER = ApproxCounter()
INSTRUCTIONS = "You are the order desk of Lumen Storage. Answer in one sentence."
ORDER_NOTE = "Order LS-48219: two drives, shipped from Tilburg, tracking pending. " * 6
INPUT_ITEMS: TypeAdapter[Any] = TypeAdapter(ResponseInputParam)


@function_tool
def lookup(q: str) -> str:
    """Look an order up in the order book."""
    return f"{q}: {ORDER_NOTE}"


@pytest.fixture(scope="module")
def wire() -> Iterator[WireServer]:
    yield from serve()


def make_agent(server: WireServer) -> Agent[Any]:
    client = AsyncOpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0)
    model = OpenAIResponsesModel(model="gpt-test-mini", openai_client=client)
    return Agent(name="desk", instructions=INSTRUCTIONS, tools=[lookup], model=model)


def run_sync(agent: Agent[Any], prompt: str, **kwargs: Any) -> Any:
    """``Runner.run_sync`` on a new default loop of its own.

    ``run_sync`` keeps the thread's default loop open between calls but runs
    ``shutdown_asyncgens()`` on it after each run, so a second call on the same loop makes the
    HTTP client schedule an async generator after that shutdown (a ``ResourceWarning``, an
    error under this suite's warning filter). A fresh loop per call is what a script that
    calls it once sees.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, prompt, **kwargs)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def model_calls(server: WireServer) -> list[Received]:
    return [r for r in server.requests if r.path.endswith("/responses")]


def check_request(body: dict[str, Any], budget: int, *, with_instructions: bool = True) -> str:
    """Assert the request is valid, pair-safe and inside ``budget``; return its summary text."""
    items = body["input"]
    INPUT_ITEMS.validate_python(items)  # the official SDK's input item types
    messages = openai_responses.load(items)
    turns.validate(messages)  # raises PairingError on an orphan call or output
    counted = [Message.system(body["instructions"])] if with_instructions else []
    assert COUNTER.count_messages(counted + messages) <= budget
    return next((m.text for m in messages if "summary of" in m.text), "")


def tool_turn_script(first: int, count: int, *, reasoning: bool = False) -> list[Any]:
    """One user turn: ``count`` tool calls in a row, then the answer."""
    replies: list[Any] = [
        responses_call_reply(n, arguments=f'{{"q": "LS-{n}"}}', reasoning=reasoning)
        for n in range(first, first + count)
    ]
    replies.append(responses_text_reply(first, f"Order answer {first}."))
    return replies


def hybrid(budget: int, summarizer: FakeSummarizer) -> Hybrid:
    return Hybrid(budget, keep_recent=4, chunk_size=6, summarizer=summarizer)


# -- input_filter: one long run -------------------------------------------------------------


def test_filter_compacts_every_call_of_a_long_run_and_reuses_the_summary(wire: WireServer) -> None:
    summarizer = FakeSummarizer()
    budget = 600
    flt = input_filter(hybrid(budget, summarizer))
    calls_before: list[int] = []

    async def spy(data: Any) -> Any:
        out = await flt(data)
        calls_before.append(summarizer.calls)
        return out

    wire.script(*tool_turn_script(1, 12, reasoning=True))
    result = run_sync(
        make_agent(wire),
        "Where are my orders?",
        run_config=RunConfig(call_model_input_filter=spy),
        max_turns=20,
    )
    assert result.final_output == "Order answer 1."
    requests = model_calls(wire)
    assert len(requests) == 13
    summaries = [check_request(r.body, budget) for r in requests]
    # The uncompacted input would have overrun the budget: the filter had work to do.
    full = openai_responses.load(result.to_input_list())
    assert COUNTER.count_messages(full) > 2 * budget
    assert summaries[-1]
    # Reuse: the summarizer ran far fewer times than there were model calls, and some call
    # sent the very summary of the call before without a summarizer call in between.
    assert 0 < summarizer.calls < len(requests) // 2
    assert any(
        a and a == b and calls_before[i] == calls_before[i + 1]
        for i, (a, b) in enumerate(itertools.pairwise(summaries))
    )
    # The run's own result is untouched: the filter edits only what is sent.
    sent_calls = [i["call_id"] for i in result.to_input_list() if i.get("type") == "function_call"]
    assert sent_calls == [f"call_{n}" for n in range(1, 13)]


def test_filter_keeps_short_inputs_as_they_are(wire: WireServer) -> None:
    flt = input_filter(SlidingWindow(4000))
    wire.script(*tool_turn_script(1, 1))
    run_sync(make_agent(wire), "Hello", run_config=RunConfig(call_model_input_filter=flt))
    first, second = (r.body["input"] for r in model_calls(wire))
    assert first == [{"role": "user", "content": "Hello"}]
    assert [i.get("type") for i in second] == [None, "function_call", "function_call_output"]
    assert second[1]["id"] == "fc_1"
    assert second[2]["call_id"] == "call_1"


async def test_filter_cache_never_applies_a_summary_to_another_conversation() -> None:
    summarizer = FakeSummarizer()
    cache = InMemorySummaryCache()
    flt = input_filter(hybrid(600, summarizer), cache=cache, key=lambda data: "one-key")
    from agents.run_config import CallModelData, ModelInputData

    def data(topic: str) -> Any:
        items = []
        for n in range(12):
            items.append({"role": "user", "content": f"{topic} question {n} " * 8})
            items.append({"role": "assistant", "content": f"{topic} answer {n} " * 8})
        return CallModelData(ModelInputData(items, INSTRUCTIONS), agent=None, context=None)  # type: ignore[arg-type]

    first = await flt(data("refunds"))
    first_calls = summarizer.calls
    second = await flt(data("shipping"))
    assert "summary of" in str(first.input[0])
    assert "refunds" in str(first.input[0])
    assert "refunds" not in str(second.input)  # the shared key did not leak the summary
    # The second conversation was summarized from scratch, as much work as the first.
    assert first_calls > 0
    assert summarizer.calls == 2 * first_calls
    assert len(cache) == 1
    # The same conversation again reuses its entry: no summarizer call at all.
    again = await flt(data("shipping"))
    assert again.input == second.input
    assert summarizer.calls == 2 * first_calls


def test_input_filter_rejects_bad_arguments() -> None:
    with pytest.raises(ConfigError) as info:
        input_filter("hybrid")  # type: ignore[arg-type]
    assert info.value.argument == "strategy"
    with pytest.raises(ConfigError) as info:
        input_filter(SlidingWindow(100), cache={})  # type: ignore[arg-type]
    assert info.value.argument == "cache"
    with pytest.raises(ConfigError) as info:
        input_filter(SlidingWindow(100), key="id")  # type: ignore[arg-type]
    assert info.value.argument == "key"
    with pytest.raises(ConfigError) as info:
        input_filter(SlidingWindow(100), counter=len)  # type: ignore[arg-type]
    assert info.value.argument == "counter"
    with pytest.raises(ConfigError) as info:
        InMemorySummaryCache(max_entries=0)
    assert info.value.argument == "max_entries"


def test_filter_falls_back_to_the_window_when_the_summarizer_fails(wire: WireServer) -> None:
    summarizer = FakeSummarizer(fail="error")
    budget = 600
    cache = InMemorySummaryCache()
    flt = input_filter(hybrid(budget, summarizer), cache=cache, key=lambda data: "run")
    wire.script(*tool_turn_script(1, 8))
    result = run_sync(make_agent(wire), "Where are my orders?",
                      run_config=RunConfig(call_model_input_filter=flt))  # fmt: skip
    assert result.final_output == "Order answer 1."
    summaries = [check_request(r.body, budget) for r in model_calls(wire)]
    assert not any(summaries)  # no summary was invented; the window kept every call in budget
    entry = cache.get("run")
    assert entry is not None
    assert entry.checkpoint is None
    # The failure streak is carried from call to call: the loop guard stops calling a
    # summarizer that keeps failing, so it ran fewer times than there were model calls.
    assert entry.state.failed_compactions >= 1
    assert 0 < summarizer.calls < len(summaries)


def test_importing_the_module_does_not_import_the_sdk() -> None:
    code = (
        "import sys, contextfold.integrations.openai_agents as m; "
        "assert 'agents' not in sys.modules, 'agents imported'; print(m.pair_safe_tail([], 1))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# -- ContextfoldSession ------------------------------------------------------------------------


async def run_turns(server: WireServer, session: ContextfoldSession, turns_: int) -> None:
    agent = make_agent(server)
    for t in range(turns_):
        server.script(*tool_turn_script(10 * t + 1, 1))
        result = await Runner.run(agent, f"Turn {t}: where is order LS-{t}?", session=session)
        assert result.final_output == f"Order answer {10 * t + 1}."
        first, second = model_calls(server)
        for request, new_items in ((first, 1), (second, 3)):
            items = request.body["input"]
            INPUT_ITEMS.validate_python(items)
            turns.validate(openai_responses.load(items))
            # The session's view is budgeted; the turn's new items come on top of it.
            assert COUNTER.count_messages(openai_responses.load(items[:-new_items])) <= 700


async def test_session_over_every_store_keeps_everything_and_sends_the_compacted_view(
    wire: WireServer, any_store: Any
) -> None:
    summarizer = FakeSummarizer()
    session = ContextfoldSession("desk-1", any_store, strategy=hybrid(700, summarizer))
    assert isinstance(session, agents.memory.Session)  # the SDK's own protocol check
    await run_turns(wire, session, 6)
    # Everything is stored, in order, exactly once: read it back without a strategy.
    plain = ContextfoldSession("desk-1", any_store)
    stored = await plain.get_items()
    assert [i["content"] for i in stored if i.get("role") == "user"] == [
        f"Turn {t}: where is order LS-{t}?" for t in range(6)
    ]
    assert [i["call_id"] for i in stored if i.get("type") == "function_call"] == [
        f"call_{10 * t + 1}" for t in range(6)
    ]
    view = await session.get_items()
    assert await session.get_items(limit=3) == pair_safe_tail(view, 3)
    assert len(view) < len(stored)
    assert "summary of" in str(view[:2])
    # Summaries are committed to the store and reused by later runs, not redone each run.
    assert 0 < summarizer.calls < 6
    calls = summarizer.calls
    assert await session.get_items() == view
    assert summarizer.calls == calls


def test_session_with_run_sync(wire: WireServer, tmp_path: Any) -> None:
    session = ContextfoldSession("s", f"sqlite:///{tmp_path / 'agents.db'}")
    agent = make_agent(wire)
    for t in range(2):
        wire.script(*tool_turn_script(t + 1, 1))
        run_sync(agent, f"question {t}", session=session)
    # The second run's first request carries the whole first turn from the store.
    first = model_calls(wire)[0].body["input"]
    assert [i.get("role") or i["type"] for i in first] == [
        "user", "function_call", "function_call_output", "assistant", "user",
    ]  # fmt: skip
    session.close()


RICH_ITEMS: list[dict[str, Any]] = [
    {"role": "developer", "content": "Use the order book."},
    {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Compare these"},
        {"type": "input_image", "image_url": "https://example.test/a.png", "detail": "low"},
    ]},
    {"type": "reasoning", "id": "rs_9", "summary": [{"type": "summary_text", "text": "two"}],
     "encrypted_content": "enc"},
    {"type": "function_call", "id": "fc_a", "call_id": "call_a", "name": "lookup",
     "arguments": '{"q": "a"}', "status": "completed"},
    {"type": "function_call", "id": "fc_b", "call_id": "call_b", "name": "lookup",
     "arguments": '{"q": "b"}', "status": "completed"},
    {"type": "function_call_output", "call_id": "call_a", "output": "A"},
    {"type": "function_call_output", "call_id": "call_b", "output": "B"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed",
     "action": {"type": "search", "query": "drives"}},
    {"id": "msg_7", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "A is larger.", "annotations": []}]},
]  # fmt: skip


async def test_session_items_round_trip_losslessly(any_store: Any) -> None:
    session = ContextfoldSession("rich", any_store)
    await session.add_items(RICH_ITEMS[:3])
    await session.add_items(RICH_ITEMS[3:])
    assert await session.get_items() == RICH_ITEMS
    assert await session.get_items(limit=6) == RICH_ITEMS[-6:]
    # A cut between the calls and their outputs leaves the orphan outputs out.
    assert await session.get_items(limit=4) == RICH_ITEMS[-2:]
    assert await session.get_items(limit=5) == [RICH_ITEMS[4], *RICH_ITEMS[-3:]]
    assert await session.get_items(limit=0) == []


async def test_pop_item_removes_the_newest_item_and_keeps_older_summaries(any_store: Any) -> None:
    summarizer = FakeSummarizer()
    session = ContextfoldSession("pop", any_store, strategy=hybrid(500, summarizer))
    history = []
    for n in range(10):
        history += [
            {"role": "user", "content": f"Question {n} about order LS-{n} " * 5},
            {"role": "assistant", "content": f"Answer {n} about order LS-{n} " * 5},
        ]
    await session.add_items(history)
    await session.add_items(RICH_ITEMS[2:7])
    await session.get_items()  # commits a summary
    calls = summarizer.calls
    committed = [c.id for c in await any_store.acheckpoints("pop")]
    assert calls > 0
    assert committed
    assert await session.pop_item() == RICH_ITEMS[6]
    assert await session.pop_item() == RICH_ITEMS[5]
    plain = ContextfoldSession("pop", any_store)
    assert await plain.get_items() == history + RICH_ITEMS[2:5]
    # The summaries of older messages were committed again, not lost: no new summary call.
    assert [c.id for c in await any_store.acheckpoints("pop")] == committed
    assert "summary of" in str(await session.get_items())
    assert summarizer.calls == calls
    await session.clear_session()
    assert await session.pop_item() is None
    assert await plain.get_items() == []


def test_session_rejects_bad_arguments() -> None:
    with pytest.raises(ConfigError) as info:
        ContextfoldSession("", InMemoryStore())
    assert info.value.argument == "session_id"
    with pytest.raises(ConfigError) as info:
        ContextfoldSession("s", object())  # type: ignore[arg-type]
    assert info.value.argument == "store"
    with pytest.raises(ConfigError) as info:
        ContextfoldSession("s", InMemoryStore(), strategy="sliding")  # type: ignore[arg-type]
    assert info.value.argument == "strategy"
    session = ContextfoldSession("s", InMemoryStore())
    with pytest.raises(ConfigError) as info:
        asyncio.run(session.get_items(limit=-1))
    assert info.value.argument == "limit"


def test_pair_safe_tail() -> None:
    items = RICH_ITEMS[3:7]
    assert pair_safe_tail(items, 2) == []
    assert pair_safe_tail(items, 4) == items
    assert pair_safe_tail(items, 3) == [items[1], items[3]]


def test_comparison_benchmark_runs_tiny() -> None:
    from bench import integrations_openai_agents as bench

    rows = {r["setup"]: r for r in bench.run(3, out=None)}
    assert set(rows) == set(bench.SETUPS)
    ours, plain = rows["contextfold"], rows["SDK SQLiteSession"]
    assert ours["model_calls"] == plain["model_calls"] == 6
    assert ours["requests_with_broken_pairs"] == 0
    assert ours["largest_request"] <= min(bench.BUDGET, plain["largest_request"])
    assert "| contextfold | 6 |" in bench.table(list(rows.values()))


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
async def test_session_stores_every_turn_when_prompts_and_item_ids_repeat(
    wire: WireServer, api: str
) -> None:
    from agents import OpenAIChatCompletionsModel
    from tests.wire import JSONReply
    from tests.wire.openai_server import chat_completion

    client = AsyncOpenAI(base_url=wire.url + "/v1", api_key="test-key", max_retries=0)
    model: Any
    if api == "responses":
        model = OpenAIResponsesModel(model="gpt-test-mini", openai_client=client)
    else:  # the SDK gives every Chat Completions output item the id "__fake_id__"
        model = OpenAIChatCompletionsModel(model="gpt-test-mini", openai_client=client)
    agent = Agent(name="desk", instructions=INSTRUCTIONS, model=model)
    session = ContextfoldSession("repeats", InMemoryStore())
    prompts = ["yes", "tell me more", "yes"]  # the same short answer twice
    for n, prompt in enumerate(prompts, 1):
        if api == "responses":
            wire.script(responses_text_reply(1, f"answer {n}"))  # the same item id each time
        else:
            wire.script(JSONReply(chat_completion(f"answer {n}")))
        result = await Runner.run(agent, prompt, session=session)
        assert result.final_output == f"answer {n}"
    stored = await session.get_items()
    said = [(i.get("role"), i["content"] if i.get("role") == "user" else None) for i in stored]
    assert said == [
        ("user", "yes"), ("assistant", None),
        ("user", "tell me more"), ("assistant", None),
        ("user", "yes"), ("assistant", None),
    ]  # fmt: skip
    texts = [c["text"] for i in stored if i.get("role") == "assistant" for c in i["content"]]
    assert texts == ["answer 1", "answer 2", "answer 3"]
    INPUT_ITEMS.validate_python(stored)
