"""LiteLLMSummarizer through real ``litellm`` calls against the local OpenAI wire server.

LiteLLM is pointed at the server as an OpenAI-compatible endpoint (model ``openai/<name>``,
``api_base`` = the server URL), so its own OpenAI provider code, exception mapping and stream
wrapper all run for real.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.wire import Call, JSONReply, Pause, Raw, SSEReply, TextReply, WireServer, serve
from tests.wire import openai_server as wire

from contextfold.errors import MissingExtraError
from contextfold.messages import Message
from contextfold.summarizers.base import CancelToken, SummarizationResult, SummaryRequest
from contextfold.summarizers.litellm import LiteLLMSummarizer
from contextfold.summarizers.settings import SummarizerSettings

# LiteLLM downloads its model price map at import unless told not to; tests stay offline.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")

HOW = pytest.mark.parametrize("how", ["sync", "async"])
pytestmark = [
    # One event loop per module: LiteLLM caches its HTTP clients per loop.
    pytest.mark.asyncio(loop_scope="module"),
    # LiteLLM's lazily imported auth types trip a pydantic notice on first use.
    pytest.mark.filterwarnings(
        r"ignore:Items? .* on TypedDict class .* using the `ReadOnly` qualifier:UserWarning"
    ),
    # Its stream wrapper reads a pydantic attribute that pydantic 2.11 deprecated.
    pytest.mark.filterwarnings(
        r"ignore:Accessing the 'model_(computed_)?fields' attribute on the instance"
        ":DeprecationWarning"
    ),
]


@pytest.fixture(scope="module")
def server() -> Iterator[WireServer]:
    quiet = litellm.suppress_debug_info
    litellm.suppress_debug_info = True  # no "Give Feedback" banner on every expected failure
    yield from serve()
    litellm.suppress_debug_info = quiet


@pytest.fixture
def srv(server: WireServer) -> WireServer:
    server.reset()
    return server


SETTING_NAMES = frozenset(f.name for f in dataclasses.fields(SummarizerSettings))


def make(srv: WireServer, **kwargs: Any) -> LiteLLMSummarizer:
    kwargs.setdefault("timeout", 5)
    shared = {k: kwargs.pop(k) for k in list(kwargs) if k in SETTING_NAMES}
    return LiteLLMSummarizer(
        model="openai/" + wire.MODEL,
        api_base=srv.url + "/v1",
        api_key="test-key",
        settings=SummarizerSettings(**shared),
        num_retries=0,
        max_retries=0,
        **kwargs,
    )


def request(**kwargs: Any) -> SummaryRequest:
    messages = (
        Message.user("Order #88412 arrived broken; refund to the Visa ending 4242", id="u1"),
        Message.assistant("Refund of $129.99 issued, 3-5 business days.", id="a1"),
    )
    return SummaryRequest(messages, **kwargs)


async def run(summarizer: LiteLLMSummarizer, req: SummaryRequest, how: str) -> SummarizationResult:
    if how == "sync":
        return summarizer.summarize(req)
    return await summarizer.asummarize(req)


@HOW
async def test_success_text_usage_and_request_shape(srv: WireServer, how: str) -> None:
    usage = wire.chat_usage(prompt=210, completion=22, cached=128)
    srv.script(JSONReply(wire.chat_completion("Refund $129.99 for order #88412.", usage=usage)))
    res = await run(make(srv, max_output_tokens=400), request(max_output_tokens=250), how)
    assert res.ok, res.reason
    assert res.text == "Refund $129.99 for order #88412."
    assert res.usage is not None
    assert (res.usage.input_tokens, res.usage.output_tokens) == (210, 22)
    assert res.usage.cache_read_tokens == 128
    got = srv.last
    assert got.path == "/v1/chat/completions"
    assert got.headers["authorization"] == "Bearer test-key"
    assert got.body["model"] == wire.MODEL  # LiteLLM strips the "openai/" routing prefix
    assert [m["role"] for m in got.body["messages"]] == ["system", "user"]
    assert "#88412" in got.body["messages"][1]["content"]
    assert got.body["max_tokens"] == 250
    assert not got.body.get("stream")


@HOW
async def test_stream_success(srv: WireServer, how: str) -> None:
    srv.script(SSEReply(wire.chat_stream(["Refund ", "issued ", "for #88412."])))
    res = await run(make(srv, stream=True), request(), how)
    assert res.ok, res.reason
    assert res.text == "Refund issued for #88412."
    assert res.usage is not None
    assert res.usage.input_tokens == 120
    assert srv.last.body["stream"] is True
    assert srv.last.body["stream_options"] == {"include_usage": True}


@HOW
@pytest.mark.parametrize(("status", "code"), [(500, "http_error"), (429, "rate_limited")])
async def test_http_errors(srv: WireServer, how: str, status: int, code: str) -> None:
    srv.script(wire.error_reply(status, "nope"))
    res = await run(make(srv), request(), how)
    assert (res.ok, res.code) == (False, code)
    assert str(status) in (res.reason or "")
    assert len(srv.requests) == 1


@HOW
async def test_html_page_instead_of_a_completion_fails(srv: WireServer, how: str) -> None:
    srv.script(TextReply("<html>502 Bad Gateway</html>"))
    res = await run(make(srv), request(), how)
    # LiteLLM itself reports an unusable 200 answer as an InternalServerError (HTTP 500).
    assert (res.ok, res.code) == (False, "http_error"), res.reason
    assert "502 Bad Gateway" in (res.reason or "")


@HOW
async def test_streamed_call_answered_with_an_html_page_is_an_error_naming_it(
    srv: WireServer, how: str
) -> None:
    # LiteLLM's stream wrapper makes up a finish chunk for a body with no events.
    srv.script(TextReply("<html>502 Bad Gateway</html>"))
    res = await run(make(srv, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "error"), res.reason
    assert "not an event stream" in (res.reason or "")
    assert "text/html" in (res.reason or "")
    assert "502 Bad Gateway" in (res.reason or "")


@HOW
async def test_timeout(srv: WireServer, how: str) -> None:
    srv.script(JSONReply(wire.chat_completion("late"), delay=1.0))
    res = await run(make(srv, timeout=0.1), request(), how)
    assert res.code == "timeout"


@HOW
@pytest.mark.parametrize("cut", [True, False])
async def test_stream_without_finish_is_truncated(srv: WireServer, how: str, cut: bool) -> None:
    items = wire.chat_stream(["Refund ", "iss"], finish_reason=None, done=not cut)
    srv.script(SSEReply(items, cut=cut))
    res = await run(make(srv, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "truncated")


@HOW
async def test_malformed_stream_is_error(srv: WireServer, how: str) -> None:
    items = wire.chat_stream(["Refund "], between=[Raw(b'data: {"id": "x", "cho\n\n')])
    srv.script(SSEReply(items))
    res = await run(make(srv, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "error")
    assert "malformed" in (res.reason or "")


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_empty_answer(srv: WireServer, how: str, stream: bool) -> None:
    if stream:
        srv.script(SSEReply(wire.chat_stream([" "])))
    else:
        srv.script(JSONReply(wire.chat_completion("")))
    res = await run(make(srv, stream=stream), request(), how)
    assert (res.ok, res.code) == (False, "empty")


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_answer_over_the_output_cap_fails_too_long(
    srv: WireServer, how: str, stream: bool
) -> None:
    usage = wire.chat_usage(completion=400)
    text = "Refund issued for order 88412. " * 30
    if stream:
        srv.script(SSEReply(wire.chat_stream([text], usage=usage)))
    else:
        srv.script(JSONReply(wire.chat_completion(text, usage=usage)))
    res = await run(make(srv, stream=stream), request(max_output_tokens=100), how)
    assert (res.ok, res.code) == (False, "too_long"), res.reason
    assert (res.reason or "").startswith("litellm: ")


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_length_is_truncated(srv: WireServer, how: str, stream: bool) -> None:
    if stream:
        srv.script(SSEReply(wire.chat_stream(["Refund of"], finish_reason="length")))
    else:
        srv.script(JSONReply(wire.chat_completion("Refund of", finish_reason="length")))
    res = await run(make(srv, stream=stream), request(), how)
    assert (res.ok, res.code) == (False, "truncated")
    assert (res.reason or "").startswith("litellm: ")


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_tool_call(srv: WireServer, how: str, stream: bool) -> None:
    if stream:
        srv.script(SSEReply(wire.chat_tool_stream()))
    else:
        body = wire.chat_completion(None, finish_reason="tool_calls", tool_calls=[wire.tool_call()])
        srv.script(JSONReply(body))
    res = await run(make(srv, stream=stream), request(), how)
    assert (res.ok, res.code) == (False, "tool_call")


@HOW
async def test_cancel_mid_stream(srv: WireServer, how: str) -> None:
    token = CancelToken()
    pause = 0.05 if how == "sync" else 2.0
    between = [Call(lambda: token.cancel("caller gave up")), Pause(pause)]
    srv.script(SSEReply(wire.chat_stream(["a ", "b ", "c"], between=between)))
    start = time.monotonic()
    res = await run(make(srv, stream=True), request(cancel=token), how)
    assert (res.code, res.aborted) == ("aborted", True)
    if how == "async":
        assert time.monotonic() - start < 1.0


async def test_extra_options_are_passed_through(srv: WireServer) -> None:
    srv.script(JSONReply(wire.chat_completion("ok")))
    res = make(srv, temperature=0.3, seed=7).summarize(request())
    assert res.ok
    assert srv.last.body["temperature"] == 0.3
    assert srv.last.body["seed"] == 7


async def test_missing_litellm_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)
    with pytest.raises(MissingExtraError, match=r"'litellm' extra"):
        LiteLLMSummarizer(model="openai/x")


async def test_cache_aligned_replays_the_conversation(srv: WireServer) -> None:
    from contextfold.formats import openai_chat
    from contextfold.messages import ToolCallPart

    system = (Message.system("You are the refunds assistant.", id="s1"),)
    call = ToolCallPart("call_3", "refund", '{"order": "88412"}')
    span = (
        Message.user("Refund order #88412", id="u1"),
        Message.assistant(None, tool_calls=[call], id="a1"),
        Message.tool_result("call_3", "refunded 129.99", id="t1"),
        Message.assistant("Refunded $129.99.", id="a2"),
    )
    tool = {"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}}
    req = SummaryRequest(span, mode="cache_aligned", system=system, tools=(tool,))
    srv.script(JSONReply(wire.chat_completion("ok")), JSONReply(wire.chat_completion("Done.")))
    # The conversation's own request, sent through LiteLLM as the application would send it.
    litellm.completion(
        model="openai/" + wire.MODEL,
        api_base=srv.url + "/v1",
        api_key="test-key",
        messages=openai_chat.dump([*system, *span]),
        tools=[tool],
        num_retries=0,
        max_retries=0,
    )
    own = srv.last.body
    res = make(srv).summarize(req)
    assert res.ok, res.reason
    body = srv.last.body
    # LiteLLM normalizes both requests alike, so the summary call's prefix is the
    # conversation's own request, message for message.
    assert body["messages"][:-1] == own["messages"]
    assert body["messages"][-1]["role"] == "user"
    assert body["tools"] == own["tools"]


@pytest.mark.parametrize(
    ("settings", "argument"),
    [
        (SummarizerSettings(max_retries=2), "settings"),
        (SummarizerSettings(extra_body={"top_k": 5}), "settings"),
        (SummarizerSettings(cache_key="conv"), "settings"),
        ({"stream": True}, "settings"),
    ],
)
async def test_settings_litellm_cannot_send_are_refused(settings: Any, argument: str) -> None:
    from contextfold.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        LiteLLMSummarizer(model="openai/x", settings=settings)
    assert caught.value.argument == argument


async def test_temperature_given_twice_is_refused() -> None:
    from contextfold.errors import ConfigError

    with pytest.raises(ConfigError, match="temperature"):
        LiteLLMSummarizer(
            model="openai/x", settings=SummarizerSettings(temperature=0.1), temperature=0.2
        )
