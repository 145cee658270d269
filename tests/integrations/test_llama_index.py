"""The LlamaIndex integration, run by LlamaIndex's own agent and chat engine.

The LLM is a small ``FunctionCallingLLM`` (below) that talks to the local wire server through
the ``openai`` SDK, storing tool calls in ``additional_kwargs`` as LlamaIndex's OpenAI LLM does
(that package pins an older ``openai`` and is not installed here). The tests assert what the
server received: valid Chat Completions messages for the SDK's own types, every tool call
answered, the history inside the budget, and the summary reused rather than recomputed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from integration_helpers import require_framework
from tests.wire import JSONReply, WireServer, serve
from tests.wire.openai_server import chat_completion

from contextfold import Hybrid, turns
from contextfold.errors import ConfigError
from contextfold.formats import openai_chat
from contextfold.stores import InMemoryStore
from contextfold.testing import FakeSummarizer
from contextfold.tokens import ApproxCounter

require_framework("llama_index.core")
from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.base.llms.types import (  # noqa: E402
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    ImageBlock,
    LLMMetadata,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.chat_engine import SimpleChatEngine  # noqa: E402
from llama_index.core.llms.function_calling import FunctionCallingLLM  # noqa: E402
from llama_index.core.llms.llm import ToolSelection  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402
from openai import AsyncOpenAI, OpenAI  # noqa: E402
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionMessageToolCall  # noqa: E402
from pydantic import PrivateAttr, TypeAdapter  # noqa: E402

from contextfold.integrations.llama_index import (  # noqa: E402
    ContextfoldMemory,
    to_chat_messages,
    to_messages,
)

# The workflow engine reads deprecated pydantic attributes when it collects an agent's
# steps: the framework's warning, not ours.
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")
COUNTER = ApproxCounter()
MESSAGES: TypeAdapter[Any] = TypeAdapter(list[ChatCompletionMessageParam])
SYSTEM = "You are the order desk of Lumen Storage."
ORDER_NOTE = "Order LS-48219: two drives, shipped from Tilburg, tracking pending. " * 5


def openai_message(message: ChatMessage) -> dict[str, Any]:
    """A Chat Completions message, as LlamaIndex's OpenAI LLM writes one."""
    out: dict[str, Any] = {"role": message.role.value, "content": message.content or ""}
    calls = message.additional_kwargs.get("tool_calls")
    if calls:
        out["tool_calls"] = [c if isinstance(c, dict) else c.model_dump() for c in calls]
    if message.role.value == "tool":
        out["tool_call_id"] = message.additional_kwargs["tool_call_id"]
    return out


class WireLLM(FunctionCallingLLM):
    """A function-calling LLM on the wire server, through the ``openai`` SDK."""

    base_url: str
    _sync: Any = PrivateAttr()
    _async: Any = PrivateAttr()

    def __init__(self, base_url: str) -> None:
        super().__init__(base_url=base_url)
        self._sync = OpenAI(base_url=base_url, api_key="test-key", max_retries=0)
        self._async = AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            model_name="gpt-test-mini", is_chat_model=True, is_function_calling_model=True
        )

    def _request(self, messages: Sequence[ChatMessage], kwargs: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": "gpt-test-mini",
            "messages": [openai_message(m) for m in messages],
        }
        if kwargs.get("tools"):
            body["tools"] = kwargs["tools"]
        return body

    @staticmethod
    def _response(completion: Any) -> ChatResponse:
        choice = completion.choices[0].message
        extra = {"tool_calls": choice.tool_calls} if choice.tool_calls else {}
        message = ChatMessage(role="assistant", content=choice.content, additional_kwargs=extra)
        return ChatResponse(message=message, raw=completion)

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._response(self._sync.chat.completions.create(**self._request(messages, kwargs)))

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        body = self._request(messages, kwargs)
        return self._response(await self._async.chat.completions.create(**body))

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: Any = None,
        chat_history: list[ChatMessage] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        messages = list(chat_history or [])
        if user_msg is not None:
            messages.append(ChatMessage(role="user", content=str(user_msg)))
        specs = [t.metadata.to_openai_tool() for t in tools]
        return {"messages": messages, "tools": specs}

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        calls = response.message.additional_kwargs.get("tool_calls") or []
        return [
            ToolSelection(
                tool_id=c.id,
                tool_name=c.function.name,
                tool_kwargs=json.loads(c.function.arguments),
            )
            for c in calls
        ]

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        raise NotImplementedError

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        raise NotImplementedError

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


def lookup(q: str) -> str:
    """Look an order up in the order book."""
    return f"{q}: {ORDER_NOTE}"


@pytest.fixture(scope="module")
def wire() -> Iterator[WireServer]:
    yield from serve()


def call_reply(n: int) -> JSONReply:
    call = {"id": f"call_{n}", "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"q": f"LS-{n}"})}}  # fmt: skip
    return JSONReply(chat_completion(None, tool_calls=[call], finish_reason="tool_calls"))


def check_request(body: dict[str, Any], budget: int, scratch: int) -> str:
    """Assert valid, pair-safe and (history part) within budget; return the summary text."""
    MESSAGES.validate_python(body["messages"])
    messages = openai_chat.load(body["messages"])
    turns.validate(messages)
    history = messages[1 : len(messages) - scratch]  # after the system prompt
    assert COUNTER.count_messages(history) <= budget
    return next((m.text for m in messages if "summary of" in m.text), "")


async def test_function_agent_runs_on_the_compacted_memory(
    wire: WireServer, any_store: Any
) -> None:
    summarizer = FakeSummarizer()
    budget = 600
    strategy = Hybrid(budget, keep_recent=4, chunk_size=6, summarizer=summarizer)
    memory = ContextfoldMemory("desk", any_store, strategy=strategy)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(lookup)], llm=WireLLM(wire.url + "/v1"),
                          system_prompt=SYSTEM, streaming=False)  # fmt: skip
    summaries = []
    for t in range(6):
        wire.script(call_reply(t), JSONReply(chat_completion(f"Answer {t}.")))
        answer = await agent.run(f"Turn {t}: where is order LS-{t}?", memory=memory)
        assert str(answer) == f"Answer {t}."
        first, second = (r.body for r in wire.requests)
        summaries.append(check_request(first, budget, 0))
        check_request(second, budget, 2)  # the run's tool call and result come on top
        assert first["messages"][0] == {"role": "system", "content": SYSTEM}
    stored = await memory.aget_all()
    assert [m.content for m in stored if m.role.value == "user"] == [
        f"Turn {t}: where is order LS-{t}?" for t in range(6)
    ]
    assert [m.additional_kwargs["tool_call_id"] for m in stored if m.role.value == "tool"] == [
        f"call_{t}" for t in range(6)
    ]
    assert summaries[-1]
    assert 0 < summarizer.calls < 6  # folded chunk by chunk, reused between runs
    calls = summarizer.calls
    view = [m.model_dump(mode="json") for m in await memory.aget()]
    assert [m.model_dump(mode="json") for m in memory.get()] == view
    assert summarizer.calls == calls


def test_simple_chat_engine_with_the_sync_api(wire: WireServer, tmp_path: Any) -> None:
    memory = ContextfoldMemory("chat", f"sqlite:///{tmp_path / 'chat.db'}")
    engine = SimpleChatEngine.from_defaults(llm=WireLLM(wire.url + "/v1"), memory=memory,
                                            system_prompt=SYSTEM)  # fmt: skip
    wire.script(JSONReply(chat_completion("Hello!")), JSONReply(chat_completion("Still here.")))
    assert str(engine.chat("Hi")) == "Hello!"
    assert str(engine.chat("Are you there?")) == "Still here."
    assert wire.last.body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Are you there?"},
    ]
    memory.close()


def rich_history() -> list[ChatMessage]:
    sdk_call = ChatCompletionMessageToolCall(
        id="call_a", type="function", function={"name": "lookup", "arguments": '{"q": "a"}'}
    )
    return [
        ChatMessage(role="system", content=SYSTEM),
        ChatMessage(role="user", blocks=[
            TextBlock(text="Compare these"),
            ImageBlock(image=b"\x89PNG\r\n\x1a\n0000", image_mimetype="image/png"),
            ImageBlock(url="https://example.test/a.png", detail="low"),
        ]),
        ChatMessage(role="assistant", blocks=[
            ThinkingBlock(content="two lookups", additional_information={"signature": "sig"}),
            TextBlock(text="Looking both up."),
        ], additional_kwargs={"tool_calls": [sdk_call]}),
        ChatMessage(role="tool", content="A", additional_kwargs={"tool_call_id": "call_a"}),
        ChatMessage(role="assistant", blocks=[
            ToolCallBlock(tool_call_id="call_b", tool_name="lookup", tool_kwargs={"q": "b"}),
        ]),
        ChatMessage(role="tool", content="B", additional_kwargs={"tool_call_id": "call_b"}),
        ChatMessage(role="assistant", content="A is larger."),
    ]  # fmt: skip


async def test_messages_round_trip_through_every_store(any_store: Any) -> None:
    history = rich_history()
    memory = ContextfoldMemory("rich", any_store)
    await memory.aput_messages(history[:3])
    for message in history[3:]:
        await memory.aput(message)
    expected = [m.model_dump(mode="json") for m in history]
    assert [m.model_dump(mode="json") for m in await memory.aget_all()] == expected
    assert [m.model_dump(mode="json") for m in memory.get_all()] == expected
    # Our side sees the tool pairs, so strategies keep them together.
    ours = to_messages(history)
    turns.validate(ours)
    assert [c.id for m in ours for c in m.tool_calls] == ["call_a", "call_b"]
    assert [r.call_id for m in ours for r in m.tool_results] == ["call_a", "call_b"]
    assert ours[2].parts[0].kind == "thinking"


def test_changed_messages_are_built_from_their_parts() -> None:
    ours = to_messages(rich_history())
    changed = [m.replace(name="edited") if m.role == "assistant" else m for m in ours]
    back = to_chat_messages(changed)
    assert back[2].additional_kwargs["tool_calls"] == [
        {"id": "call_a", "type": "function",
         "function": {"name": "lookup", "arguments": '{"q": "a"}'}},
    ]  # fmt: skip
    assert back[4].additional_kwargs["tool_calls"][0]["id"] == "call_b"
    assert back[2].blocks[0].content == "two lookups"
    assert back[3].model_dump(mode="json") == rich_history()[3].model_dump(mode="json")


async def test_set_keeps_a_stored_prefix_and_rewrites_otherwise() -> None:
    store = InMemoryStore()
    memory = ContextfoldMemory("s", store)
    history = rich_history()
    await memory.aset(history[:4])
    seqs_before = [m.seq for m in store.read("s")]
    await memory.aset(history)  # the stored four are a prefix: only three are appended
    assert [m.seq for m in store.read("s")][:4] == seqs_before
    assert len(await memory.aget_all()) == 7
    memory.set(history[2:4])  # not an extension: rewritten
    assert [m.content for m in memory.get_all()] == [history[2].content, "A"]
    memory.reset()
    assert memory.get_all() == []
    await memory.areset()


def test_a_summary_merged_into_a_message_keeps_its_documents_and_kwargs() -> None:
    """The summary is placed in front of the first kept user message's text: rebuilt from
    its parts, that message lost the PDF attached to it and its additional_kwargs."""
    import base64

    from llama_index.core.base.llms.types import DocumentBlock

    from contextfold import ExtractiveSummarizer

    strategy = Hybrid(300, keep_recent=2, chunk_size=4, summarizer=ExtractiveSummarizer())
    memory = ContextfoldMemory("doc-chat", strategy=strategy)
    for n in range(8):
        memory.put(ChatMessage(role="user", content=f"Question {n} about refund RF-77{n}. " * 3))
        memory.put(ChatMessage(role="assistant", content=f"Answer {n}: RF-77{n} in review. " * 3))
    pdf = base64.b64encode(b"%PDF-1.4 invoice LS-48219")
    memory.put(
        ChatMessage(
            role="user",
            blocks=[
                TextBlock(text="Here is the invoice, what is the total?"),
                DocumentBlock(data=pdf, document_mimetype="application/pdf", title="invoice.pdf"),
            ],
            additional_kwargs={"custom": "kept"},
        )
    )
    memory.put(ChatMessage(role="assistant", content="The total is $119.00."))
    sent = memory.get()
    asked = next(m for m in sent if m.role.value == "user" and "invoice" in (m.content or ""))
    assert "summary" in (asked.content or "")  # the case under test: the summary merged in
    assert [type(b).__name__ for b in asked.blocks][-1] == "DocumentBlock"
    assert asked.additional_kwargs == {"custom": "kept"}


def test_memory_rejects_bad_arguments() -> None:
    with pytest.raises(ConfigError) as info:
        ContextfoldMemory("")
    assert info.value.argument == "session_id"
    with pytest.raises(ConfigError) as info:
        ContextfoldMemory("s", object())  # type: ignore[arg-type]
    assert info.value.argument == "store"
    with pytest.raises(ConfigError) as info:
        ContextfoldMemory("s", strategy="window")  # type: ignore[arg-type]
    assert info.value.argument == "strategy"
    with pytest.raises(ConfigError) as info:
        ContextfoldMemory("s", counter="approx")  # type: ignore[arg-type]
    assert info.value.argument == "counter"
    assert ContextfoldMemory.from_defaults().session_id == "chat_history"


def test_a_turn_answering_several_calls_becomes_one_tool_message_per_result() -> None:
    from contextfold import formats
    from contextfold.integrations.llama_index import to_chat_messages, to_messages

    payload = {
        "messages": [
            {"role": "user", "content": "check both"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "a", "name": "f", "input": {}},
                    {"type": "tool_use", "id": "b", "name": "g", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "ra"},
                    {"type": "tool_result", "tool_use_id": "b", "content": "rb"},
                    {"type": "text", "text": "and what now?"},
                ],
            },
        ]
    }
    chats = to_chat_messages(formats.load(payload, "anthropic"))
    assert [(c.role.value, c.additional_kwargs.get("tool_call_id")) for c in chats] == [
        ("user", None), ("assistant", None), ("tool", "a"), ("tool", "b"), ("user", None),
    ]  # fmt: skip
    assert [b.text for b in chats[2].blocks] == ["ra"]
    assert [b.text for b in chats[4].blocks] == ["and what now?"]
    back = to_messages(chats)
    turns.validate(back)  # every call answered
    assert [r.call_id for m in back for r in m.tool_results] == ["a", "b"]
