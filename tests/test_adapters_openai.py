"""OpenAISummarizer through the real ``openai`` SDK against a local OpenAI wire server."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from tests.wire import Call, Drop, JSONReply, Pause, Raw, SSEReply, WireServer, serve
from tests.wire import openai_server as wire

from contextfold.errors import MissingExtraError
from contextfold.messages import Message
from contextfold.summarizers.base import CancelToken, SummarizationResult, SummaryRequest
from contextfold.summarizers.openai import OpenAISummarizer

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


def make(clients: tuple[Any, Any], **kwargs: Any) -> OpenAISummarizer:
    kwargs.setdefault("model", wire.MODEL)
    return OpenAISummarizer(clients[0], async_client=clients[1], **kwargs)


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
    srv.script(JSONReply(wire.chat_completion(), delay=0.4))
    start = time.monotonic()
    res = await run(make(clients, timeout=0.1), request(), how)
    assert res.code == "timeout"
    assert time.monotonic() - start < 0.35


@HOW
async def test_chat_deadline_becomes_request_timeout(
    srv: WireServer, clients: Any, how: str
) -> None:
    srv.script(JSONReply(wire.chat_completion(), delay=0.4))
    start = time.monotonic()
    res = await run(make(clients), request(deadline=time.monotonic() + 0.1), how)
    assert res.code == "timeout"
    assert time.monotonic() - start < 0.35


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


async def test_plain_answer_not_json_is_error(srv: WireServer, clients: Any) -> None:
    srv.script(JSONReply("not an object"))
    res = make(clients).summarize(request())
    assert not res.ok
    assert res.code in ("error", "empty")


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
        model=wire.MODEL, base_url=srv.url + "/v1", api_key="k-123", max_retries=0, timeout=2
    )
    assert s._client is None
    assert s._async_client is None
    assert srv.requests == []
    srv.script(wire.error_reply(500), JSONReply(wire.chat_completion("ok summary")))
    assert s.summarize(request()).code == "http_error"
    assert len(srv.requests) == 1  # max_retries=0 reached the SDK
    res = await s.asummarize(request())
    assert res.ok
    assert res.text == "ok summary"
    assert srv.last.headers["authorization"] == "Bearer k-123"
    await s.aclose()
    assert s._client is None
    assert s._async_client is None


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
        s = OpenAISummarizer(client, model="gpt-4o-mini", max_output_tokens=256)
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
    s = OpenAISummarizer(object(), async_client=object(), model="m", extra_body={"top_k": 5})
    kwargs = s.build_request(request(deadline=time.monotonic() + 3))
    assert 0 < kwargs["timeout"] <= 3
    assert kwargs["extra_body"] == {"top_k": 5}


async def test_missing_openai_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingExtraError, match=r"'openai' extra"):
        OpenAISummarizer(model="m")


async def test_bad_api_name_is_rejected() -> None:
    from contextfold.errors import ContextfoldError

    with pytest.raises(ContextfoldError, match="api must be"):
        OpenAISummarizer(model="m", api="completions")  # type: ignore[arg-type]
