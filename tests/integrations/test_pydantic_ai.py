"""The pydantic-ai integration: message conversion, and a real Agent run kept in budget.

The agent runs pydantic-ai's own loop (``Agent.run``) with a tool, through
``OpenAIChatModel`` and the OpenAI SDK, against the local Chat Completions server in
``tests/wire``. The tests assert what that server received.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from tests.wire import JSONReply, WireServer, serve
from tests.wire.openai_server import chat_completion

from contextfold import formats, turns
from contextfold.errors import ConfigError, FormatError
from contextfold.integrations.pydantic_ai import (
    TAG,
    from_model_messages,
    history_processor,
    to_model_messages,
)
from contextfold.messages import Message
from contextfold.messages import ToolResultPart as OurToolResult
from contextfold.strategies import Checkpoint, PruneToolOutputs, SlidingWindow
from contextfold.testing import FakeSummarizer
from contextfold.tokens import ApproxCounter

BUDGET = 700


def dumped(messages: list[ModelMessage]) -> Any:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def sample_history() -> list[ModelMessage]:
    """Every part kind the conversion handles, parallel calls and retries included."""
    return [
        ModelRequest(
            parts=[
                SystemPromptPart("You track parcels."),
                UserPromptPart(
                    [
                        "Where are these?",
                        ImageUrl("https://example.com/label.png"),
                        BinaryContent(b"\x89PNG\r\n", media_type="image/png"),
                        AudioUrl("https://example.com/note.mp3"),
                    ]
                ),
            ],
            instructions="Answer briefly.",
            run_id="run-1",
        ),
        ModelResponse(
            parts=[
                ThinkingPart("Two parcels: look both up.", signature="sig-1"),
                TextPart("Checking."),
                ToolCallPart("track", {"parcel": "P-1"}, "call_a"),
                ToolCallPart("track", '{"parcel": "P-2"}', "call_b"),
                ToolCallPart("track", None, "call_c"),
                NativeToolCallPart("web_search", {"q": "carrier"}, "ws_1", provider_name="openai"),
            ],
            model_name="gpt-test-mini",
            provider_response_id="chatcmpl-9",
            metadata={"mine": 1},
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("track", {"status": "in transit", "eta": "Friday"}, "call_a"),
                RetryPromptPart("parcel id is malformed", tool_name="track", tool_call_id="call_b"),
                ToolReturnPart("track", "carrier unreachable", "call_c", outcome="failed"),
            ]
        ),
        ModelResponse(parts=[TextPart("P-1 arrives Friday.")]),
        ModelRequest(
            parts=[
                RetryPromptPart(
                    [{"type": "missing", "loc": ("eta",), "msg": "Field required", "input": {}}]
                ),
                UserPromptPart("And P-2?"),
            ]
        ),
    ]


# -- conversion ---------------------------------------------------------------------------


def test_round_trip_is_lossless() -> None:
    history = sample_history()
    ours = from_model_messages(history)
    assert dumped(to_model_messages(ours)) == dumped(history)
    # ...also through our serialization, as a store keeps it.
    stored = [Message.from_dict(json.loads(json.dumps(m.to_dict()))) for m in ours]
    assert dumped(to_model_messages(stored)) == dumped(history)


def test_conversion_maps_parts_to_ours() -> None:
    ours = from_model_messages(sample_history())
    assert [m.role for m in ours] == [
        "system", "user", "assistant", "tool", "tool", "tool", "assistant", "user", "user",
    ]  # fmt: skip
    kinds = [p.kind for p in ours[1].parts]
    assert kinds == ["text", "image", "image", "text"]
    assert ours[1].parts[1].url == "https://example.com/label.png"  # type: ignore[union-attr]
    assert "[audio-url]" in ours[1].parts[3].text  # type: ignore[union-attr]
    calls = ours[2].tool_calls
    assert [c.id for c in calls] == ["call_a", "call_b", "call_c"]
    assert json.loads(calls[0].arguments) == {"parcel": "P-1"}
    assert calls[1].arguments == '{"parcel": "P-2"}'
    assert ours[2].parts[0].kind == "thinking"
    results = [m.tool_results[0] for m in ours[3:6]]
    assert [r.call_id for r in results] == ["call_a", "call_b", "call_c"]
    assert [r.is_error for r in results] == [False, True, True]
    assert "Fix the errors" in results[1].text
    turns.validate(ours)  # parallel calls and the retry pair up


def test_changed_content_wins_over_the_kept_original() -> None:
    ours = from_model_messages(sample_history())
    result = ours[3].tool_results[0]
    pruned = OurToolResult(result.call_id, "[output cleared]", name=result.name, extra=result.extra)
    ours[3] = ours[3].replace(parts=(pruned,))
    back = to_model_messages(ours)
    part = back[2].parts[0]
    assert isinstance(part, ToolReturnPart)
    assert part.content == "[output cleared]"
    assert part.tool_call_id == "call_a"


def test_messages_made_by_hand_become_plain_parts() -> None:
    ours = [
        Message.system("Be brief."),
        Message.user("<conversation-summary>earlier</conversation-summary>"),
        Message.assistant("ok", tool_calls=[]),
        Message.tool_result("c9", "done", name="track"),
    ]
    back = to_model_messages(ours)
    assert [m.kind for m in back] == ["request", "request", "response", "request"]
    assert isinstance(back[0].parts[0], SystemPromptPart)
    assert isinstance(back[1].parts[0], UserPromptPart)
    ret = back[3].parts[0]
    assert isinstance(ret, ToolReturnPart)
    assert (ret.tool_call_id, ret.content) == ("c9", "done")


def test_foreign_objects_are_a_format_error() -> None:
    with pytest.raises(FormatError):
        from_model_messages([{"role": "user"}])  # type: ignore[list-item]


def test_bad_arguments_raise_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        history_processor(object())  # type: ignore[arg-type]
    assert info.value.argument == "strategy"
    with pytest.raises(ConfigError) as info:
        history_processor(SlidingWindow(100), conversation_id="")
    assert info.value.argument == "conversation_id"
    with pytest.raises(ConfigError) as info:
        history_processor(SlidingWindow(100), store=42)  # type: ignore[arg-type]
    assert info.value.argument == "store"


# -- a real agent run ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def srv() -> Any:
    yield from serve()


def tool_calls(*calls: tuple[str, str]) -> JSONReply:
    """A chat completion asking for the given (call id, parcel) lookups in parallel."""
    body = chat_completion(
        None,
        finish_reason="tool_calls",
        tool_calls=[
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "track", "arguments": json.dumps({"parcel": parcel})},
            }
            for call_id, parcel in calls
        ],
    )
    return JSONReply(body)


def make_agent(provider: OpenAIProvider, processor: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(
        OpenAIChatModel("gpt-test-mini", provider=provider),
        system_prompt="You track parcels for customers. Quote parcel ids exactly.",
        capabilities=[ProcessHistory(processor)],
    )

    @agent.tool_plain
    def track(parcel: str) -> str:
        """Look up a parcel."""
        return f"Parcel {parcel}: in transit via depot D-{parcel[-1]}, " + "scan log line. " * 25

    return agent


def received(srv: WireServer) -> list[list[Message]]:
    """What the server received, as our messages (the SDK's wire payloads, parsed)."""
    return [formats.load(r.body["messages"], "openai_chat", strict=True) for r in srv.requests]


async def run_session(srv: WireServer, processor: Any, turns_: int) -> list[ModelMessage]:
    """``turns_`` agent runs, each asking for two parallel tool calls and then answering."""
    replies: list[JSONReply] = []
    for t in range(turns_):
        replies += [
            tool_calls((f"call_{t}a", f"P-{t}1"), (f"call_{t}b", f"P-{t}2")),
            JSONReply(chat_completion(f"Parcels P-{t}1 and P-{t}2 are in transit.")),
        ]
    srv.script(*replies)
    provider = OpenAIProvider(base_url=srv.url + "/v1", api_key="test-key")
    agent = make_agent(provider, processor)
    history: list[ModelMessage] = []
    try:
        for t in range(turns_):
            prompt = f"Where are parcels P-{t}1 and P-{t}2?"
            result = await agent.run(prompt, message_history=history)
            assert result.output == f"Parcels P-{t}1 and P-{t}2 are in transit."
            history = result.all_messages()
    finally:
        await provider.client.close()
    assert srv.pending == 0
    return history


async def test_agent_run_stays_in_budget_pair_safe_and_reuses_the_summary(srv: WireServer) -> None:
    summarizer = FakeSummarizer(text=lambda r: f"Summary of {len(r.messages)} messages: parcels.")
    strategy = Checkpoint(summarizer, max_tokens=BUDGET, keep_recent_tokens=300)
    processor = history_processor(strategy)
    history = await run_session(srv, processor, 5)
    counter = ApproxCounter()
    sent = received(srv)
    assert len(sent) == 10
    for messages in sent:
        turns.validate(messages)  # no tool message without its call, no call unanswered
        assert counter.count_messages(messages) <= BUDGET
        assert messages[0].role == "system"
    # Compaction happened, and later requests carry the summary without a new call each time.
    with_summary = [i for i, m in enumerate(sent) if "Summary of" in str([x.text for x in m])]
    assert with_summary, "the budget forced a summary"
    assert summarizer.calls < len(with_summary)
    # Without compaction the last request would have been over the budget.
    conversation_id = history[-1].conversation_id
    assert conversation_id
    # The last answer comes after the last model request: the processor has not seen it.
    assert len(await processor.aread_transcript(conversation_id)) == 4 * 5 - 1
    await processor.arecord(history, conversation_id=conversation_id)
    transcript = await processor.aread_transcript(conversation_id)
    # Every message once, none of the processor's own output (no summary) stored back.
    assert len(transcript) == 4 * 5
    assert "Summary of" not in str(transcript)
    full = from_model_messages(transcript)
    assert counter.count_messages(full) > 2 * BUDGET
    # The full transcript is in the store; pydantic-ai holds the compacted view.
    assert len(full) > len(from_model_messages(history))
    assert all(TAG in (m.metadata or {}) for m in history[:-1])


async def test_summarizer_failure_falls_back_within_budget(srv: WireServer) -> None:
    summarizer = FakeSummarizer(fail="error")
    strategy = Checkpoint(summarizer, max_tokens=BUDGET, keep_recent_tokens=300)
    await run_session(srv, history_processor(strategy), 4)
    assert summarizer.calls >= 1
    for messages in received(srv):
        turns.validate(messages)
        assert ApproxCounter().count_messages(messages) <= BUDGET
        assert "Summary of" not in str([m.text for m in messages])


async def test_one_processor_serves_conversations_apart(srv: WireServer) -> None:
    processor = history_processor(SlidingWindow(BUDGET))
    first = await run_session(srv, processor, 1)
    second = await run_session(srv, processor, 1)
    a, b = first[-1].conversation_id, second[-1].conversation_id
    assert a
    assert b
    assert a != b
    assert len(processor.read_transcript(a)) == len(processor.read_transcript(b)) == 3


async def test_pruning_strategy_reaches_the_server(srv: WireServer) -> None:
    strategy = PruneToolOutputs(keep_recent=2, min_savings=10)
    await run_session(srv, history_processor(strategy), 3)
    last = received(srv)[-1]
    outputs = [r.text for m in last for r in m.tool_results]
    assert len(outputs) == 6
    assert [("scan log line" in o) for o in outputs] == [False] * 4 + [True] * 2
    turns.validate(last)


def test_sync_and_async_process_agree() -> None:
    history = sample_history()
    strategy = Checkpoint(FakeSummarizer(), max_tokens=120, keep_recent_tokens=40)
    sync_out = history_processor(strategy).process(history, conversation_id="c1")
    async_out = asyncio.run(history_processor(strategy).aprocess(history, conversation_id="c1"))

    def plain(ms: list[ModelMessage]) -> Any:
        return [[(type(p).__name__, getattr(p, "content", None)) for p in m.parts] for m in ms]

    assert plain(sync_out) == plain(async_out)
    assert isinstance(sync_out[-1], ModelRequest)
    turns.validate(from_model_messages(sync_out))


def test_store_url_and_transcript(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'pai.db'}"
    processor = history_processor(SlidingWindow(80), store=url, conversation_id="fixed")
    history = sample_history()
    out = processor.process(history, conversation_id="fixed")
    assert len(dumped(out)) <= len(history)
    processor.record([ModelResponse(parts=[TextPart("P-2 too.")])], conversation_id="fixed")
    processor.close()
    again = history_processor(SlidingWindow(80), store=url)
    transcript = again.read_transcript("fixed")
    assert all(m.metadata and TAG in m.metadata for m in transcript)  # read: not new again
    assert dumped(untagged(transcript[: len(history)])) == dumped(history)
    assert transcript[-1].parts[0].content == "P-2 too."  # type: ignore[union-attr]
    again.close()


def untagged(messages: list[ModelMessage]) -> list[ModelMessage]:
    """``messages`` without our tag in their metadata (as they were before we stored them)."""
    out = []
    for m in messages:
        meta = {k: v for k, v in (m.metadata or {}).items() if k != TAG}
        out.append(dataclasses.replace(m, metadata=meta or None))
    return out


def counting_agent(processor: Any, seen: list[int]) -> Agent[None, str]:
    """An agent whose model answers every request, noting how many messages it was sent."""
    from pydantic_ai.models.function import FunctionModel

    def model(messages: list[ModelMessage], info: Any) -> ModelResponse:
        seen.append(len(messages))
        return ModelResponse(parts=[TextPart(f"answer {len(seen)}")])

    return Agent(FunctionModel(model), capabilities=[ProcessHistory(processor)])


def test_recording_each_run_then_continuing_from_it_stores_every_message_once() -> None:
    processor = history_processor(SlidingWindow(4000), conversation_id="chat-1")
    seen: list[int] = []
    agent = counting_agent(processor, seen)
    history: list[ModelMessage] = []
    for question in ("q1", "q2", "q3"):
        # asyncio.run, not run_sync: that leaves its event loop open for the collector
        history = asyncio.run(agent.run(question, message_history=history)).all_messages()
        processor.record(history, conversation_id="chat-1")
    transcript = processor.read_transcript("chat-1")
    texts = [getattr(p, "content", None) for m in transcript for p in m.parts]
    assert texts == ["q1", "answer 1", "q2", "answer 2", "q3", "answer 3"]
    assert seen == [1, 3, 5]  # each answer sent once, not twice


def test_a_run_resumed_from_the_transcript_in_another_process_does_not_store_it_again(
    tmp_path: Any,
) -> None:
    url = f"sqlite:///{tmp_path / 'pai.db'}"
    first = history_processor(SlidingWindow(4000), store=url, conversation_id="c")
    seen: list[int] = []
    result = asyncio.run(counting_agent(first, seen).run("first question"))
    first.record(result.all_messages(), conversation_id="c")
    first.close()
    second = history_processor(SlidingWindow(4000), store=url, conversation_id="c")
    agent = counting_agent(second, seen)
    asyncio.run(agent.run("second question", message_history=second.read_transcript("c")))
    assert seen == [1, 3]
    assert len(second.read_transcript("c")) == 3  # two questions and the first answer
    second.close()


def test_without_the_extra_the_error_names_it() -> None:
    code = textwrap.dedent(
        """
        import sys

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "pydantic_ai":
                    raise ImportError("blocked")
                return None

        sys.meta_path.insert(0, Blocker())
        import contextfold.integrations  # the package itself needs no framework
        from contextfold.errors import MissingExtraError
        try:
            import contextfold.integrations.pydantic_ai
        except MissingExtraError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert "pip install 'contextfold[pydantic-ai]'" in out.stdout, out.stderr


@pytest.mark.parametrize("bad", [["not a message"], [{"role": "user"}], "text"])
def test_process_and_record_refuse_what_is_not_pydantic_ai_messages(bad: Any) -> None:
    processor = history_processor(SlidingWindow(400), conversation_id="c")
    with pytest.raises(FormatError):
        processor.process(bad, conversation_id="c")
    with pytest.raises(FormatError):
        processor.record(bad, conversation_id="c")
