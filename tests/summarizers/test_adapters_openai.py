"""OpenAISummarizer through the real ``openai`` SDK against a local OpenAI wire server."""

from __future__ import annotations

import dataclasses
import itertools
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.wire import Call, Drop, JSONReply, Pause, Raw, SSEReply, TextReply, WireServer, serve
from tests.wire import openai_server as wire

from contextfold.errors import MissingExtraError
from contextfold.messages import Message
from contextfold.summarizers.base import CancelToken, SummarizationResult, SummaryRequest
from contextfold.summarizers.openai import OpenAISummarizer
from contextfold.summarizers.settings import SummarizerSettings

openai = pytest.importorskip("openai")

HOW = pytest.mark.parametrize("how", ["sync", "async"])
# One event loop and one pair of SDK clients per module: building clients is the slow part.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def server() -> Iterator[WireServer]:
    yield from serve()


@pytest.fixture
def srv(server: WireServer) -> WireServer:
    server.reset()
    return server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def clients(server: WireServer) -> AsyncIterator[tuple[Any, Any]]:
    sync = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0, timeout=5)
    aio = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0, timeout=5)
    yield sync, aio
    sync.close()
    await aio.close()


SETTING_NAMES = frozenset(f.name for f in dataclasses.fields(SummarizerSettings))


def split_settings(kwargs: dict[str, Any]) -> SummarizerSettings:
    """Take the shared options out of ``kwargs`` into a :class:`SummarizerSettings`."""
    return SummarizerSettings(**{k: kwargs.pop(k) for k in list(kwargs) if k in SETTING_NAMES})


def make(clients: tuple[Any, Any], **kwargs: Any) -> OpenAISummarizer:
    kwargs.setdefault("model", wire.MODEL)
    settings = split_settings(kwargs)
    return OpenAISummarizer(clients[0], async_client=clients[1], settings=settings, **kwargs)


def request(**kwargs: Any) -> SummaryRequest:
    messages = (
        Message.user("Please rename the file src/app.py to src/main.py", id="u1"),
        Message.assistant("Renamed. The tests in tests/test_app.py still pass.", id="a1"),
        Message.user("Great, now bump the version to 2.4.1", id="u2"),
    )
    return SummaryRequest(messages, **kwargs)


async def run(summarizer: OpenAISummarizer, req: SummaryRequest, how: str) -> SummarizationResult:
    if how == "sync":
        return summarizer.summarize(req)
    return await summarizer.asummarize(req)


# -- Chat Completions ---------------------------------------------------------------------------


@HOW
async def test_chat_success_parses_text_usage_and_sends_isolated_prompt(
    srv: WireServer, clients: Any, how: str
) -> None:
    usage = wire.chat_usage(prompt=321, completion=45, cached=100)
    srv.script(JSONReply(wire.chat_completion("  Renamed app.py; version 2.4.1.  ", usage=usage)))
    s = make(clients, max_output_tokens=900, temperature=0.2)
    res = await run(s, request(max_output_tokens=500), how)

    assert res.ok, res.reason
    assert res.text == "Renamed app.py; version 2.4.1."
    assert res.model == wire.MODEL
    assert res.usage is not None
    assert (res.usage.input_tokens, res.usage.output_tokens) == (321, 45)
    assert res.usage.cache_read_tokens == 100

    got = srv.last
    assert got.path == "/v1/chat/completions"
    body = got.body
    assert body["model"] == wire.MODEL
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    user_text = body["messages"][1]["content"]
    assert "<conversation>" in user_text
    assert "src/app.py" in user_text
    assert "2.4.1" in user_text
    assert body["max_tokens"] == 500  # the smaller of request and adapter caps
    assert "max_completion_tokens" not in body  # a compatible server, not api.openai.com
    assert body["temperature"] == 0.2
    assert "stream" not in body
    assert body["prompt_cache_key"].startswith("contextfold-summary-")
    assert got.headers["authorization"] == "Bearer test"


async def test_isolated_calls_get_a_fresh_cache_key_each_time(
    srv: WireServer, clients: Any
) -> None:
    srv.script(JSONReply(wire.chat_completion()), JSONReply(wire.chat_completion()))
    s = make(clients)
    assert s.summarize(request()).ok
    assert (await s.asummarize(request())).ok
    keys = [r.body["prompt_cache_key"] for r in srv.requests]
    assert len(set(keys)) == 2


async def test_isolate_cache_off_sends_no_cache_key(srv: WireServer, clients: Any) -> None:
    srv.script(JSONReply(wire.chat_completion()))
    assert make(clients, isolate_cache=False).summarize(request()).ok
    assert "prompt_cache_key" not in srv.last.body


@HOW
async def test_chat_stream_success_joins_deltas_and_reads_usage(
    srv: WireServer, clients: Any, how: str
) -> None:
    usage = wire.chat_usage(prompt=77, completion=9, cached=64)
    srv.script(SSEReply(wire.chat_stream(["The user ", "renamed ", "app.py."], usage=usage)))
    res = await run(make(clients, stream=True), request(), how)
    assert res.ok, res.reason
    assert res.text == "The user renamed app.py."
    assert res.usage is not None
    assert (res.usage.input_tokens, res.usage.output_tokens, res.usage.cache_read_tokens) == (
        77,
        9,
        64,
    )
    body = srv.last.body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@HOW
@pytest.mark.parametrize(("status", "code"), [(500, "http_error"), (503, "http_error")])
async def test_chat_server_error_is_http_error_with_status(
    srv: WireServer, clients: Any, how: str, status: int, code: str
) -> None:
    srv.script(wire.error_reply(status, "upstream exploded"))
    res = await run(make(clients), request(), how)
    assert not res.ok
    assert res.code == code
    assert str(status) in (res.reason or "")
    assert len(srv.requests) == 1  # max_retries=0 on the client: no silent retries


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_chat_429_is_rate_limited(
    srv: WireServer, clients: Any, how: str, stream: bool
) -> None:
    srv.script(wire.error_reply(429, "slow down", type="rate_limit_exceeded"))
    res = await run(make(clients, stream=stream), request(), how)
    assert (res.ok, res.code) == (False, "rate_limited")
    assert "429" in (res.reason or "")


@HOW
async def test_chat_timeout_from_adapter_timeout(srv: WireServer, clients: Any, how: str) -> None:
    srv.script(JSONReply(wire.chat_completion(), delay=1.0))
    start = time.monotonic()
    res = await run(make(clients, timeout=0.1), request(), how)
    assert res.code == "timeout"
    assert time.monotonic() - start < 0.8  # the server answers only after 1 s


@HOW
async def test_chat_deadline_becomes_request_timeout(
    srv: WireServer, clients: Any, how: str
) -> None:
    srv.script(JSONReply(wire.chat_completion(), delay=1.0))
    start = time.monotonic()
    res = await run(make(clients), request(deadline=time.monotonic() + 0.1), how)
    assert res.code == "timeout"
    assert time.monotonic() - start < 0.8  # the server answers only after 1 s


@HOW
async def test_chat_stream_cut_mid_answer_is_truncated(
    srv: WireServer, clients: Any, how: str
) -> None:
    srv.script(wire.chat_stream_reply(["The user ", "renamed"], finish_reason=None, cut=True))
    res = await run(make(clients, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "truncated")


@HOW
async def test_chat_stream_ending_without_finish_reason_is_truncated(
    srv: WireServer, clients: Any, how: str
) -> None:
    srv.script(wire.chat_stream_reply(["The user ", "renamed"], finish_reason=None, done=False))
    res = await run(make(clients, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "truncated")
    assert "ended before" in (res.reason or "")


@HOW
async def test_chat_stream_malformed_event_is_error(
    srv: WireServer, clients: Any, how: str
) -> None:
    items = wire.chat_stream(["Half "], between=[Raw(b'data: {"id": "chatcmpl-1", "choi\n\n')])
    srv.script(SSEReply(items))
    res = await run(make(clients, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "error")
    assert "malformed" in (res.reason or "")


@HOW
@pytest.mark.parametrize(
    ("error", "code"),
    [
        ({"message": "model crashed", "type": "server_error"}, "error"),
        ({"message": "slow down", "type": "rate_limit_exceeded"}, "rate_limited"),
    ],
)
async def test_chat_error_object_mid_stream(
    srv: WireServer, clients: Any, how: str, error: dict[str, str], code: str
) -> None:
    # Some compatible servers and routers report failures as a data event mid-stream.
    items = wire.chat_stream(["Half "], finish_reason=None, done=False)
    srv.script(SSEReply([*items, {"error": error}]))
    res = await run(make(clients, stream=True), request(), how)
    assert (res.ok, res.code) == (False, code), res.reason
    assert error["message"] in (res.reason or "")


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_chat_empty_answer_is_empty(
    srv: WireServer, clients: Any, how: str, stream: bool
) -> None:
    if stream:
        srv.script(SSEReply(wire.chat_stream(["", "  "])))
    else:
        srv.script(JSONReply(wire.chat_completion("   ")))
    res = await run(make(clients, stream=stream), request(), how)
    assert (res.ok, res.code) == (False, "empty")


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_chat_length_finish_is_truncated(
    srv: WireServer, clients: Any, how: str, stream: bool
) -> None:
    if stream:
        srv.script(SSEReply(wire.chat_stream(["A summary that stops mid"], finish_reason="length")))
    else:
        srv.script(
            JSONReply(wire.chat_completion("A summary that stops mid", finish_reason="length"))
        )
    res = await run(make(clients, stream=stream), request(), how)
    assert (res.ok, res.code) == (False, "truncated")
    assert res.usage is not None  # the cost is reported even for a failed call


def _answer_reply(api: str, stream: bool, text: str, output: int, reasoning: int) -> Any:
    """A whole answer of ``text`` whose usage counts ``output`` tokens, ``reasoning`` of them."""
    if api == "chat":
        usage = wire.chat_usage(completion=output, reasoning=reasoning)
        if stream:
            return SSEReply(wire.chat_stream([text], usage=usage))
        return JSONReply(wire.chat_completion(text, usage=usage))
    usage = wire.responses_usage(output=output, reasoning=reasoning)
    body = wire.response_object(text, usage=usage)
    if stream:
        return SSEReply(wire.responses_stream([text], final_response=body))
    return JSONReply(body)


@HOW
@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True])
async def test_answer_over_the_output_cap_fails_too_long_its_reasoning_aside(
    srv: WireServer, clients: Any, how: str, api: str, stream: bool
) -> None:
    # A server that ignores the cap (or knows it by another name) writes on: by its own
    # count the answer is longer than asked, so it is no summary of the size planned for.
    s = make(clients, api=api, stream=stream)
    srv.script(_answer_reply(api, stream, "Renamed app.py. " * 40, output=400, reasoning=0))
    res = await run(s, request(max_output_tokens=100), how)
    assert (res.ok, res.code) == (False, "too_long"), res.reason
    assert "400" in (res.reason or "")
    assert "100" in (res.reason or "")
    assert res.usage is not None  # the cost is reported even for a failed call
    assert res.usage.output_tokens == 400
    # Reasoning tokens are no part of the answer text (a cap may leave them out).
    srv.script(_answer_reply(api, stream, "Renamed app.py.", output=400, reasoning=350))
    res = await run(s, request(max_output_tokens=100), how)
    assert res.ok, res.reason


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_chat_tool_call_instead_of_text(
    srv: WireServer, clients: Any, how: str, stream: bool
) -> None:
    if stream:
        srv.script(SSEReply(wire.chat_tool_stream()))
    else:
        srv.script(
            JSONReply(
                wire.chat_completion(
                    None, finish_reason="tool_calls", tool_calls=[wire.tool_call()]
                )
            )
        )
    res = await run(make(clients, stream=stream), request(), how)
    assert (res.ok, res.code) == (False, "tool_call")


@HOW
async def test_chat_stream_cancel_between_chunks_aborts(
    srv: WireServer, clients: Any, how: str
) -> None:
    token = CancelToken()
    pause = 0.05 if how == "sync" else 2.0
    items = wire.chat_stream(
        ["First ", "second ", "third."],
        between=[Call(lambda: token.cancel("user left")), Pause(pause)],
    )
    srv.script(SSEReply(items))
    start = time.monotonic()
    res = await run(make(clients, stream=True), request(cancel=token), how)
    assert (res.ok, res.code, res.aborted) == (False, "aborted", True)
    assert "user left" in (res.reason or "")
    if how == "async":
        # The async path closes the stream at once instead of waiting for the next chunk.
        assert time.monotonic() - start < 1.0


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_leading_think_block_is_dropped(
    srv: WireServer, clients: Any, how: str, stream: bool
) -> None:
    # Reasoning models behind Ollama or vLLM put their reasoning in the answer text.
    if stream:
        pieces = ["<thi", "nk>The user wants", " a rename.</think>\n\n", "Renamed app.py."]
        srv.script(SSEReply(wire.chat_stream(pieces)))
    else:
        srv.script(JSONReply(wire.chat_completion("<think>reasoning</think>\nRenamed app.py.")))
    res = await run(make(clients, stream=stream), request(), how)
    assert res.ok, res.reason
    assert res.text == "Renamed app.py."


async def test_answer_that_is_only_thinking_is_empty(srv: WireServer, clients: Any) -> None:
    srv.script(JSONReply(wire.chat_completion("<think>still thinking when the answer ended")))
    res = make(clients).summarize(request())
    assert (res.ok, res.code) == (False, "empty")


@HOW
async def test_cancelled_before_start_sends_nothing(
    srv: WireServer, clients: Any, how: str
) -> None:
    token = CancelToken()
    token.cancel()
    res = await run(make(clients), request(cancel=token), how)
    assert res.code == "aborted"
    assert srv.requests == []


@HOW
async def test_dropped_connection_is_error(srv: WireServer, clients: Any, how: str) -> None:
    srv.script(Drop())
    res = await run(make(clients), request(), how)
    assert (res.ok, res.code) == (False, "error")


@HOW
@pytest.mark.parametrize(
    "reply",
    [
        JSONReply("not an object"),
        TextReply("<html><body>502 Bad Gateway</body></html>"),
        TextReply('{"choices": [', content_type="application/json"),
    ],
    ids=["json-string", "html-page", "broken-json"],
)
async def test_answer_that_is_not_a_completion_is_error(
    srv: WireServer, clients: Any, how: str, reply: Any
) -> None:
    srv.script(reply)
    res = await run(make(clients), request(), how)
    assert (res.ok, res.code) == (False, "error")


@HOW
@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    ("reply", "kind", "quoted"),
    [
        (TextReply("<html><body>502 Bad Gateway</body></html>"), "text/html", "502 Bad Gateway"),
        (JSONReply(wire.chat_completion("Renamed.")), "application/json", "chatcmpl-1"),
    ],
    ids=["html-page", "plain-json"],
)
async def test_streamed_call_answered_with_no_event_stream_is_an_error_naming_it(
    srv: WireServer, clients: Any, how: str, api: str, reply: Any, kind: str, quoted: str
) -> None:
    # A proxy's error page (or a server ignoring stream=True) answers 200: read as events
    # it ends before any, which is no truncated summary but an answer of the wrong kind.
    srv.script(reply)
    res = await run(make(clients, api=api, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "error"), res.reason
    assert "not an event stream" in (res.reason or "")
    assert kind in (res.reason or "")
    assert quoted in (res.reason or "")


# -- Responses API ------------------------------------------------------------------------------


@HOW
async def test_responses_success_and_request_shape(srv: WireServer, clients: Any, how: str) -> None:
    usage = wire.responses_usage(input=400, output=50, cached=256)
    srv.script(JSONReply(wire.response_object("Renamed app.py to main.py.", usage=usage)))
    res = await run(make(clients, api="responses", max_output_tokens=300), request(), how)
    assert res.ok, res.reason
    assert res.text == "Renamed app.py to main.py."
    assert res.usage is not None
    assert (res.usage.input_tokens, res.usage.output_tokens, res.usage.cache_read_tokens) == (
        400,
        50,
        256,
    )
    got = srv.last
    assert got.path == "/v1/responses"
    body = got.body
    assert body["model"] == wire.MODEL
    assert "condense" in body["instructions"].lower()
    assert body["input"][0]["role"] == "user"
    assert "<conversation>" in body["input"][0]["content"]
    assert body["max_output_tokens"] == 300
    assert body["store"] is False
    assert "stream" not in body


@HOW
async def test_responses_stream_success(srv: WireServer, clients: Any, how: str) -> None:
    srv.script(SSEReply(wire.responses_stream(["Renamed ", "app.py."])))
    res = await run(make(clients, api="responses", stream=True), request(), how)
    assert res.ok, res.reason
    assert res.text == "Renamed app.py."
    assert res.usage is not None
    assert res.usage.input_tokens == 200
    assert srv.last.body["stream"] is True
    assert "stream_options" not in srv.last.body


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_responses_incomplete_max_output_tokens_is_truncated(
    srv: WireServer, clients: Any, how: str, stream: bool
) -> None:
    if stream:
        srv.script(SSEReply(wire.responses_stream(["Partial "], final="response.incomplete")))
    else:
        srv.script(
            JSONReply(
                wire.response_object(
                    "Partial", status="incomplete", incomplete_reason="max_output_tokens"
                )
            )
        )
    res = await run(make(clients, api="responses", stream=stream), request(), how)
    assert (res.ok, res.code) == (False, "truncated")
    assert "max_output_tokens" in (res.reason or "")


@HOW
async def test_responses_stream_without_completed_event_is_truncated(
    srv: WireServer, clients: Any, how: str
) -> None:
    srv.script(SSEReply(wire.responses_stream(["Partial "], final=None), cut=True))
    res = await run(make(clients, api="responses", stream=True), request(), how)
    assert (res.ok, res.code) == (False, "truncated")


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_responses_function_call_is_tool_call(
    srv: WireServer, clients: Any, how: str, stream: bool
) -> None:
    if stream:
        srv.script(SSEReply(wire.responses_tool_stream()))
    else:
        srv.script(JSONReply(wire.response_object(None, output=[wire.function_call_item()])))
    res = await run(make(clients, api="responses", stream=stream), request(), how)
    assert (res.ok, res.code) == (False, "tool_call")


@HOW
async def test_responses_failed_and_error_event(srv: WireServer, clients: Any, how: str) -> None:
    failed = wire.response_object(
        None, status="failed", error={"code": "server_error", "message": "model crashed"}
    )
    error_event = ("error", {"type": "error", "sequence_number": 9, "code": "server_error",
                             "message": "stream broke", "param": None})  # fmt: skip
    srv.script(
        JSONReply(failed),
        SSEReply([*wire.responses_stream(["Half "], final=None), error_event]),
    )
    plain = await run(make(clients, api="responses"), request(), how)
    assert (plain.ok, plain.code) == (False, "error")
    assert "model crashed" in (plain.reason or "")
    streamed = await run(make(clients, api="responses", stream=True), request(), how)
    assert (streamed.ok, streamed.code) == (False, "error")
    assert "stream broke" in (streamed.reason or "")


@HOW
async def test_responses_429_and_500(srv: WireServer, clients: Any, how: str) -> None:
    srv.script(wire.error_reply(429, "slow down"), wire.error_reply(500, "down"))
    s = make(clients, api="responses")
    assert (await run(s, request(), how)).code == "rate_limited"
    assert (await run(s, request(), how)).code == "http_error"


# -- construction, clients, extras -------------------------------------------------------------


async def test_client_is_created_lazily_from_settings(srv: WireServer) -> None:
    s = OpenAISummarizer(
        model=wire.MODEL,
        base_url=srv.url + "/v1",
        api_key="k-123",
        settings=SummarizerSettings(max_retries=0, timeout=2),
    )
    assert s.clients.client is None
    assert s.clients.async_client is None
    assert srv.requests == []
    srv.script(wire.error_reply(500), JSONReply(wire.chat_completion("ok summary")))
    assert s.summarize(request()).code == "http_error"
    assert len(srv.requests) == 1  # max_retries=0 reached the SDK
    res = await s.asummarize(request())
    assert res.ok
    assert res.text == "ok summary"
    assert srv.last.headers["authorization"] == "Bearer k-123"
    await s.aclose()
    assert s.clients.client is None
    assert s.clients.async_client is None


async def test_async_client_alone_is_mirrored_for_sync_calls(srv: WireServer) -> None:
    aio = openai.AsyncOpenAI(base_url=srv.url + "/v1", api_key="mirror", max_retries=0)
    s = OpenAISummarizer(aio, model=wire.MODEL)
    srv.script(JSONReply(wire.chat_completion("from sync")))
    res = s.summarize(request())
    assert res.text == "from sync"
    assert srv.last.headers["authorization"] == "Bearer mirror"
    s.close()
    await aio.close()


async def test_official_endpoint_uses_max_completion_tokens() -> None:
    client = openai.OpenAI(api_key="unused", max_retries=0)
    try:
        s = OpenAISummarizer(
            client, model="gpt-4o-mini", settings=SummarizerSettings(max_output_tokens=256)
        )
        kwargs = s.build_request(request(), client=client)
        assert kwargs["max_completion_tokens"] == 256
        assert "max_tokens" not in kwargs
        forced = OpenAISummarizer(client, model="m", max_tokens_param="max_tokens")
        assert (
            forced.build_request(request(max_output_tokens=64), client=client)["max_tokens"] == 64
        )
    finally:
        client.close()


async def test_deadline_and_extra_body_reach_the_call() -> None:
    s = OpenAISummarizer(
        object(),
        async_client=object(),
        model="m",
        settings=SummarizerSettings(extra_body={"top_k": 5}),
    )
    kwargs = s.build_request(request(deadline=time.monotonic() + 3))
    assert 0 < kwargs["timeout"] <= 3
    assert kwargs["extra_body"] == {"top_k": 5}


async def test_missing_openai_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingExtraError, match=r"'openai' extra"):
        OpenAISummarizer(model="m")


async def test_bad_api_name_is_rejected() -> None:
    from contextfold.errors import ConfigError

    with pytest.raises(ConfigError, match="api must be"):
        OpenAISummarizer(model="m", api="completions")  # type: ignore[arg-type]


# -- cache-aligned mode -------------------------------------------------------------------------

CHAT_TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Find an order",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}


def aligned_request(**kwargs: Any) -> SummaryRequest:
    from contextfold.messages import ToolCallPart

    system = (Message.system("You are the release assistant for ACME.", id="s1"),)
    prefix = (
        Message.user("Which branch ships?", id="p1"),
        Message.assistant("release/2.4", id="p2"),
    )
    call = ToolCallPart("call_9", "lookup", '{"q": "2.4.1"}')
    messages = (
        Message.user("Bump the version to 2.4.1", id="u1"),
        Message.assistant("Checking.", tool_calls=[call], id="a1"),
        Message.tool_result("call_9", "version file: VERSION", id="t1"),
        Message.assistant("Done: VERSION now says 2.4.1", id="a2"),
    )
    return SummaryRequest(
        messages,
        mode="cache_aligned",
        system=system,
        prefix=prefix,
        tools=(CHAT_TOOL,),
        kind="checkpoint",
        **kwargs,
    )


@HOW
async def test_chat_cache_aligned_replays_the_conversation_verbatim(
    srv: WireServer, clients: Any, how: str
) -> None:
    from contextfold.formats import openai_chat

    req = aligned_request()
    srv.script(JSONReply(wire.chat_completion("## Primary request and intent\n- bump")))
    res = await run(make(clients, cache_key="conv-42"), req, how)
    assert res.ok, res.reason
    body = srv.last.body
    conversation = openai_chat.dump([*req.system, *req.prefix, *req.messages])
    # Every message before the instruction is the conversation's own, byte for byte, so the
    # provider's prefix cache covers them.
    assert body["messages"][:-1] == conversation
    last = body["messages"][-1]
    assert last["role"] == "user"
    assert "Primary request and intent" in last["content"]
    assert body["tools"] == [CHAT_TOOL]
    assert body["prompt_cache_key"] == "conv-42"  # the conversation's key, not a fresh one


async def test_cache_aligned_without_key_sends_none(srv: WireServer, clients: Any) -> None:
    srv.script(JSONReply(wire.chat_completion("ok")))
    assert make(clients).summarize(aligned_request()).ok
    assert "prompt_cache_key" not in srv.last.body


@HOW
async def test_responses_cache_aligned_replays_items_and_converts_tools(
    srv: WireServer, clients: Any, how: str
) -> None:
    from contextfold.formats import openai_responses

    req = aligned_request()
    srv.script(JSONReply(wire.response_object("## Current work\n- bump")))
    res = await run(make(clients, api="responses"), req, how)
    assert res.ok, res.reason
    body = srv.last.body
    items = openai_responses.dump([*req.system, *req.prefix, *req.messages])
    assert body["input"][:-1] == items
    assert body["input"][-1]["role"] == "user"
    assert "instructions" not in body
    assert body["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Find an order",
            "parameters": CHAT_TOOL["function"]["parameters"],  # type: ignore[index]
        }
    ]


async def test_tool_schema_conversion_between_shapes() -> None:
    from contextfold.formats.tools import (
        tools_for_anthropic,
        tools_for_openai_chat,
        tools_for_openai_responses,
    )

    anthropic_tool = {
        "name": "lookup",
        "description": "Find an order",
        "input_schema": CHAT_TOOL["function"]["parameters"],  # type: ignore[index]
    }
    assert tools_for_openai_chat([anthropic_tool]) == [CHAT_TOOL]
    assert tools_for_anthropic([CHAT_TOOL]) == [anthropic_tool]
    responses_tool = tools_for_openai_responses([anthropic_tool])[0]
    assert tools_for_anthropic([responses_tool]) == [anthropic_tool]
    assert tools_for_openai_chat([responses_tool]) == [CHAT_TOOL]
    server_tool = {"type": "web_search_20250305", "name": "web_search"}
    assert tools_for_anthropic([server_tool]) == [server_tool]  # provider tools pass through


# -- end to end: a strategy driving the adapter on a real conversation ------------------------


@HOW
async def test_checkpoint_strategy_on_a_tau_bench_conversation(
    srv: WireServer, clients: Any, how: str, tau_runs: list[dict[str, Any]]
) -> None:
    from contextfold.formats import openai_chat
    from contextfold.strategies.checkpoint import Checkpoint
    from contextfold.strategies.run import arun, run
    from contextfold.tokens.approx import ApproxCounter
    from contextfold.turns import validate

    traj = tau_runs[0]["traj"]
    history = openai_chat.load(traj)
    before = list(history)
    budget = ApproxCounter().count_messages(history) // 2
    strategy = Checkpoint(make(clients), max_tokens=budget, mode="cache_aligned")

    async def plan() -> Any:
        return run(strategy, history) if how == "sync" else await arun(strategy, history)

    summary = "## Primary request and intent\n- The user wants to change reservation X1Y2Z3."
    srv.script(JSONReply(wire.chat_completion(summary)))
    ok = await plan()
    assert ok.fallback is None
    assert ok.summary_calls == 1
    assert any("X1Y2Z3" in m.text for m in ok.messages)
    assert ok.tokens <= budget
    validate(ok.messages)
    sent = srv.last.body["messages"]
    assert sent[:-1] == traj[: len(sent) - 1]  # the conversation's own payload, replayed

    srv.script(wire.error_reply(500, "upstream down"))
    failed = await plan()
    assert failed.failure_code == "http_error"
    assert failed.fallback is not None
    assert failed.tokens <= budget
    assert not any("X1Y2Z3" in m.text for m in failed.messages)
    validate(failed.messages)
    assert history == before  # the caller's list is untouched


async def test_azure_client_needs_its_async_twin_and_uses_max_completion_tokens(
    srv: WireServer,
) -> None:
    azure = openai.AzureOpenAI(
        api_key="az", api_version="2024-10-21", azure_endpoint=srv.url, max_retries=0
    )
    try:
        s = OpenAISummarizer(
            azure, model="my-deployment", settings=SummarizerSettings(max_output_tokens=128)
        )
        assert s.build_request(request(), client=azure)["max_completion_tokens"] == 128
        res = await s.asummarize(request())
        assert (res.ok, res.code) == (False, "error")
        assert "async_client" in (res.reason or "")
        assert srv.requests == []
    finally:
        azure.close()


async def test_adapter_modules_import_no_sdk_and_construct_without_io() -> None:
    import subprocess
    import textwrap

    code = textwrap.dedent(
        """
        import sys
        from contextfold.summarizers import AnthropicSummarizer, LiteLLMSummarizer
        from contextfold.summarizers import OpenAISummarizer
        OpenAISummarizer(model="m", base_url="http://127.0.0.1:9/v1")
        AnthropicSummarizer(model="m", base_url="http://127.0.0.1:9")
        LiteLLMSummarizer(model="openai/m", api_base="http://127.0.0.1:9/v1")
        loaded = {"openai", "anthropic", "litellm", "httpx"} & set(sys.modules)
        assert not loaded, loaded
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr


async def test_adapters_satisfy_both_protocols() -> None:
    from contextfold.summarizers import AnthropicSummarizer, LiteLLMSummarizer
    from contextfold.summarizers.base import AsyncSummarizer, Summarizer

    for summarizer in (
        OpenAISummarizer(object(), async_client=object(), model="m"),
        AnthropicSummarizer(object(), async_client=object(), model="m"),
        LiteLLMSummarizer(model="openai/m"),
    ):
        assert isinstance(summarizer, Summarizer)
        assert isinstance(summarizer, AsyncSummarizer)


async def test_sdk_retries_are_used_when_allowed(srv: WireServer) -> None:
    s = OpenAISummarizer(
        model=wire.MODEL,
        base_url=srv.url + "/v1",
        api_key="k",
        settings=SummarizerSettings(max_retries=1, timeout=2),
    )
    flaky = JSONReply(wire.error_body("blip"), status=500, headers={"retry-after-ms": "5"})
    srv.script(flaky, JSONReply(wire.chat_completion("after a retry")))
    res = s.summarize(request())
    assert res.text == "after a retry"
    assert len(srv.requests) == 2
    s.close()


@HOW
async def test_stream_that_stalls_past_the_deadline_times_out(
    srv: WireServer, clients: Any, how: str
) -> None:
    srv.script(SSEReply(wire.chat_stream(["First ", "second"], between=[Pause(1.0)])))
    start = time.monotonic()
    res = await run(make(clients, stream=True), request(deadline=time.monotonic() + 0.15), how)
    assert (res.ok, res.code) == (False, "timeout"), res.reason
    assert time.monotonic() - start < 0.8  # the next chunk comes only after 1 s


@HOW
async def test_stream_finished_before_the_deadline_is_kept_when_done_comes_after_it(
    srv: WireServer, clients: Any, how: str
) -> None:
    # The finish and usage chunks came in time; only the closing [DONE] is late. The answer
    # is whole, so sync and async both keep it rather than call it a timeout.
    items = wire.chat_stream(["Renamed ", "app.py."], usage=wire.chat_usage(prompt=90))
    srv.script(SSEReply([*items[:-1], Pause(1.0), items[-1]]))
    res = await run(make(clients, stream=True), request(deadline=time.monotonic() + 0.4), how)
    assert res.ok, res.reason
    assert res.text == "Renamed app.py."
    assert res.usage is not None
    assert res.usage.input_tokens == 90


@HOW
async def test_stream_finished_before_the_deadline_is_kept_when_a_chunk_comes_after_it(
    srv: WireServer, clients: Any, how: str
) -> None:
    # Each read is within the call's timeout, but the chunk after the finish chunk arrives
    # past the deadline: the answer was complete before it, so it is no timeout.
    items = wire.chat_stream(["Renamed ", "app.py."])
    late = [Pause(0.3), wire.chunk({}), Pause(0.3)]
    srv.script(SSEReply([*items[:-2], *late, *items[-2:]]))
    res = await run(make(clients, stream=True), request(deadline=time.monotonic() + 0.45), how)
    assert res.ok, res.reason
    assert res.text == "Renamed app.py."


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"),
        min_size=1,
        max_size=80,
    ).filter(lambda t: t.strip() and not t.lstrip().startswith("<")),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=6),
)
async def test_any_split_into_deltas_streams_to_the_plain_answer(
    srv: WireServer, clients: Any, text: str, cuts: list[int]
) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    srv.script(SSEReply(wire.chat_stream(pieces)), JSONReply(wire.chat_completion(text)))
    streamed = make(clients, stream=True).summarize(request())
    plain = make(clients).summarize(request())
    assert streamed.ok, streamed.reason
    assert streamed.text == plain.text == text.strip()


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"api": "completions"}, "api"),
        ({"max_tokens_param": "max_output"}, "max_tokens_param"),
        ({"settings": {"stream": True}}, "settings"),
        ({"model": ""}, "model"),
    ],
)
async def test_misuse_raises_config_error_naming_the_argument(
    kwargs: dict[str, Any], argument: str
) -> None:
    from contextfold.errors import ConfigError

    kwargs = {"model": "m", **kwargs}
    with pytest.raises(ConfigError) as caught:
        OpenAISummarizer(object(), async_client=object(), **kwargs)
    assert caught.value.argument == argument


async def test_one_settings_object_serves_both_adapters() -> None:
    from contextfold.summarizers import AnthropicSummarizer

    shared = SummarizerSettings(max_output_tokens=321, temperature=0.1, stream=True)
    oa = OpenAISummarizer(object(), async_client=object(), model="m", settings=shared)
    an = AnthropicSummarizer(object(), async_client=object(), model="c", settings=shared)
    oa_kwargs = oa.build_request(request(), client=object())
    an_kwargs = an.build_request(request())
    assert oa_kwargs["max_completion_tokens"] == an_kwargs["max_tokens"] == 321
    assert oa_kwargs["stream"] is an_kwargs["stream"] is True
    assert oa.settings is an.settings is shared


async def test_a_deadline_is_not_outrun_by_the_sdks_own_retries(srv: WireServer) -> None:
    # A summarizer that makes its own client gets the SDK's default of two retries; with a
    # deadline, a sync call given up on would keep retrying unseen, each attempt billed.
    summarizer = OpenAISummarizer(model=wire.MODEL, base_url=srv.url + "/v1", api_key="k")
    srv.script(*[JSONReply(wire.chat_completion(), delay=1.0) for _ in range(3)])
    span = (Message.user("rename a.py", id="u1"), Message.assistant("done", id="a1"))
    result = summarizer.summarize(SummaryRequest(span, deadline=time.monotonic() + 0.4))
    assert result.code == "timeout"
    time.sleep(1.5)  # time for any retry to reach the server
    assert len(srv.requests) == 1
    summarizer.close()


async def test_a_call_cancelled_after_its_answer_came_still_reports_what_it_cost(
    srv: WireServer,
) -> None:
    import threading

    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="k", max_retries=0, timeout=5)
    span = (Message.user("rename a.py", id="u1"), Message.assistant("done", id="a1"))
    # Plain: cancelled while the request is in flight; the answer with its usage comes after.
    token = CancelToken()
    srv.script(JSONReply(wire.chat_completion(), delay=0.3))
    threading.Timer(0.1, token.cancel).start()
    plain = OpenAISummarizer(client, model="m").summarize(SummaryRequest(span, cancel=token))
    assert plain.code == "aborted"
    assert plain.usage is not None
    assert plain.usage.input_tokens == 120
    client.close()
