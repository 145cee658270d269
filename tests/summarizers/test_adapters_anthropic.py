"""AnthropicSummarizer through the real ``anthropic`` SDK against a local Messages API server."""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.wire import Call, JSONReply, Pause, Raw, SSEReply, TextReply, WireServer, serve
from tests.wire import anthropic_server as wire

from contextfold.errors import MissingExtraError
from contextfold.messages import Message
from contextfold.summarizers.anthropic import AnthropicSummarizer
from contextfold.summarizers.base import CancelToken, SummarizationResult, SummaryRequest
from contextfold.summarizers.settings import SummarizerSettings

anthropic = pytest.importorskip("anthropic")

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
    sync = anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0, timeout=5)
    aio = anthropic.AsyncAnthropic(base_url=server.url, api_key="test", max_retries=0, timeout=5)
    yield sync, aio
    sync.close()
    await aio.close()


SETTING_NAMES = frozenset(f.name for f in dataclasses.fields(SummarizerSettings))


def split_settings(kwargs: dict[str, Any]) -> SummarizerSettings:
    """Take the shared options out of ``kwargs`` into a :class:`SummarizerSettings`."""
    return SummarizerSettings(**{k: kwargs.pop(k) for k in list(kwargs) if k in SETTING_NAMES})


def make(clients: tuple[Any, Any], **kwargs: Any) -> AnthropicSummarizer:
    kwargs.setdefault("model", wire.MODEL)
    settings = split_settings(kwargs)
    return AnthropicSummarizer(clients[0], async_client=clients[1], settings=settings, **kwargs)


def request(**kwargs: Any) -> SummaryRequest:
    messages = (
        Message.user("Deploy the service to eu-west-3 on Friday 14 March", id="u1"),
        Message.assistant("Scheduled. Rollback plan: tag v7.2.0.", id="a1"),
    )
    return SummaryRequest(messages, **kwargs)


def key_of(headers: dict[str, str]) -> str | None:
    """The API key a request carried (SDK versions differ in the header they use)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth.removeprefix("Bearer ") if auth else None


async def run(
    summarizer: AnthropicSummarizer, req: SummaryRequest, how: str
) -> SummarizationResult:
    if how == "sync":
        return summarizer.summarize(req)
    return await summarizer.asummarize(req)


@HOW
async def test_success_joins_text_blocks_ignores_thinking_and_reads_cache_usage(
    srv: WireServer, clients: Any, how: str
) -> None:
    use = wire.usage(input=40, output=60, cache_read=1000, cache_write=200)
    body = wire.message(
        ["Deploy to eu-west-3 on 14 March.", "Rollback tag v7.2.0."],
        thinking="private reasoning that must not leak",
        usage_=use,
    )
    srv.script(JSONReply(body))
    res = await run(make(clients, max_output_tokens=800), request(max_output_tokens=600), how)

    assert res.ok, res.reason
    assert res.text == "Deploy to eu-west-3 on 14 March.\nRollback tag v7.2.0."
    assert "private reasoning" not in res.text
    assert res.model == wire.MODEL
    assert res.usage is not None
    assert res.usage.input_tokens == 40 + 1000 + 200  # every prompt token, cached or not
    assert res.usage.output_tokens == 60
    assert res.usage.cache_read_tokens == 1000
    assert res.usage.cache_write_tokens == 200

    got = srv.last
    assert got.path == "/v1/messages"
    assert key_of(got.headers) == "test"
    assert "anthropic-version" in got.headers
    sent = got.body
    assert sent["model"] == wire.MODEL
    assert sent["max_tokens"] == 600
    assert isinstance(sent["system"], str)
    assert "condense" in sent["system"].lower()
    assert [m["role"] for m in sent["messages"]] == ["user"]
    assert "<conversation>" in sent["messages"][0]["content"]
    assert "eu-west-3" in sent["messages"][0]["content"]
    assert "cache_control" not in got.raw.decode()  # isolated: no cache writes
    assert "stream" not in sent


@HOW
async def test_stream_success_with_thinking_and_two_text_blocks(
    srv: WireServer, clients: Any, how: str
) -> None:
    items = wire.message_stream(
        [["Deploy to ", "eu-west-3."], ["Rollback ", "v7.2.0."]],
        thinking=["hmm, ", "let me think"],
        usage_=wire.usage(input=10, output=33, cache_read=500),
    )
    srv.script(SSEReply(items))
    res = await run(make(clients, stream=True), request(), how)
    assert res.ok, res.reason
    assert res.text == "Deploy to eu-west-3.\nRollback v7.2.0."
    assert res.usage is not None
    assert (res.usage.input_tokens, res.usage.output_tokens) == (510, 33)
    assert res.usage.cache_read_tokens == 500
    assert srv.last.body["stream"] is True


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_max_tokens_stop_is_truncated(
    srv: WireServer, clients: Any, how: str, stream: bool
) -> None:
    if stream:
        srv.script(SSEReply(wire.message_stream([["Deploy to"]], stop_reason="max_tokens")))
    else:
        srv.script(JSONReply(wire.message(["Deploy to"], stop_reason="max_tokens")))
    res = await run(make(clients, stream=stream), request(), how)
    assert (res.ok, res.code) == (False, "truncated")
    assert "max_tokens" in (res.reason or "")


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_answer_over_the_output_cap_fails_too_long(
    srv: WireServer, clients: Any, how: str, stream: bool
) -> None:
    # A proxy that drops max_tokens lets the model write on: by the provider's own count the
    # answer is longer than asked, so it is no summary of the size planned for.
    usage = wire.usage(output=300)
    if stream:
        srv.script(SSEReply(wire.message_stream([["Deploy on Friday. " * 30]], usage_=usage)))
    else:
        srv.script(JSONReply(wire.message(["Deploy on Friday. " * 30], usage_=usage)))
    res = await run(make(clients, stream=stream), request(max_output_tokens=120), how)
    assert (res.ok, res.code) == (False, "too_long"), res.reason
    assert "300" in (res.reason or "")
    assert "120" in (res.reason or "")
    assert res.usage is not None
    assert res.usage.output_tokens == 300


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_tool_use_is_tool_call(srv: WireServer, clients: Any, how: str, stream: bool) -> None:
    if stream:
        srv.script(
            SSEReply(wire.message_stream([["Let me look."]], stop_reason="tool_use", tool_use=True))
        )
    else:
        srv.script(JSONReply(wire.message(["Let me look."], stop_reason="tool_use", tool_use=True)))
    res = await run(make(clients, stream=stream), request(), how)
    assert (res.ok, res.code) == (False, "tool_call")


@HOW
@pytest.mark.parametrize(
    ("status", "err_type", "code"),
    [
        (500, "api_error", "http_error"),
        (529, "overloaded_error", "http_error"),
        (429, "rate_limit_error", "rate_limited"),
    ],
)
async def test_http_errors(
    srv: WireServer, clients: Any, how: str, status: int, err_type: str, code: str
) -> None:
    srv.script(wire.error_reply(status, err_type, "nope"))
    res = await run(make(clients), request(), how)
    assert (res.ok, res.code) == (False, code)
    assert str(status) in (res.reason or "")
    assert len(srv.requests) == 1


@HOW
async def test_error_event_mid_stream(srv: WireServer, clients: Any, how: str) -> None:
    items = wire.message_stream([["Deploy ", "to"]], stop=False)
    srv.script(SSEReply([*items, wire.stream_error("overloaded_error", "Overloaded")]))
    res = await run(make(clients, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "http_error")
    assert "overloaded" in (res.reason or "").lower()


@HOW
async def test_rate_limit_error_event_mid_stream(srv: WireServer, clients: Any, how: str) -> None:
    srv.script(SSEReply([wire.stream_error("rate_limit_error", "too many")]))
    res = await run(make(clients, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "rate_limited")


@HOW
async def test_stream_without_message_stop_is_truncated(
    srv: WireServer, clients: Any, how: str
) -> None:
    srv.script(SSEReply(wire.message_stream([["Deploy ", "to"]], stop=False)))
    res = await run(make(clients, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "truncated")


@HOW
async def test_connection_cut_mid_stream_is_truncated(
    srv: WireServer, clients: Any, how: str
) -> None:
    srv.script(SSEReply(wire.message_stream([["Deploy ", "to"]], stop=False), cut=True))
    res = await run(make(clients, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "truncated")


@HOW
async def test_malformed_event_data_is_error(srv: WireServer, clients: Any, how: str) -> None:
    broken = Raw(b'event: content_block_delta\ndata: {"type": "content_block_delta", "ind\n\n')
    srv.script(SSEReply(wire.message_stream([["Deploy ", "to"]], between=[broken])))
    res = await run(make(clients, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "error")


@HOW
@pytest.mark.parametrize("stream", [False, True])
async def test_empty_answer(srv: WireServer, clients: Any, how: str, stream: bool) -> None:
    if stream:
        srv.script(SSEReply(wire.message_stream([["  "]], thinking=["only thoughts"])))
    else:
        srv.script(JSONReply(wire.message([], thinking="only thoughts")))
    res = await run(make(clients, stream=stream), request(), how)
    assert (res.ok, res.code) == (False, "empty")


@HOW
@pytest.mark.parametrize(
    "reply",
    [JSONReply(["not", "a", "message"]), TextReply("<html>502 Bad Gateway</html>")],
    ids=["json-list", "html-page"],
)
async def test_answer_that_is_not_a_message_is_error(
    srv: WireServer, clients: Any, how: str, reply: Any
) -> None:
    srv.script(reply)
    res = await run(make(clients), request(), how)
    assert (res.ok, res.code) == (False, "error")


@HOW
async def test_streamed_call_answered_with_an_html_page_is_an_error_naming_it(
    srv: WireServer, clients: Any, how: str
) -> None:
    srv.script(TextReply("<html><body>502 Bad Gateway</body></html>"))
    res = await run(make(clients, stream=True), request(), how)
    assert (res.ok, res.code) == (False, "error"), res.reason
    assert "not an event stream" in (res.reason or "")
    assert "text/html" in (res.reason or "")
    assert "502 Bad Gateway" in (res.reason or "")


@HOW
async def test_timeout(srv: WireServer, clients: Any, how: str) -> None:
    srv.script(JSONReply(wire.message(["late"]), delay=1.0))
    start = time.monotonic()
    res = await run(make(clients, timeout=0.1), request(), how)
    assert res.code == "timeout"
    assert time.monotonic() - start < 0.8  # the server answers only after 1 s


@HOW
async def test_deadline_bounds_the_call(srv: WireServer, clients: Any, how: str) -> None:
    srv.script(JSONReply(wire.message(["late"]), delay=1.0))
    res = await run(make(clients), request(deadline=time.monotonic() + 0.1), how)
    assert res.code == "timeout"


@HOW
async def test_stream_stopped_before_the_deadline_is_kept_when_it_ends_after_it(
    srv: WireServer, clients: Any, how: str
) -> None:
    # message_stop came in time; only the end of the HTTP stream is late. The answer is
    # whole, so sync and async both keep it rather than call it a timeout.
    srv.script(SSEReply([*wire.message_stream([["Deploy ", "on Friday."]]), Pause(1.0)]))
    res = await run(make(clients, stream=True), request(deadline=time.monotonic() + 0.4), how)
    assert res.ok, res.reason
    assert res.text == "Deploy on Friday."
    assert res.usage is not None
    assert res.usage.output_tokens == 25


@HOW
async def test_cancel_mid_stream(srv: WireServer, clients: Any, how: str) -> None:
    token = CancelToken()
    pause = 0.05 if how == "sync" else 2.0
    between = [Call(lambda: token.cancel("stop now")), Pause(pause)]
    srv.script(SSEReply(wire.message_stream([["a ", "b ", "c"]], between=between)))
    start = time.monotonic()
    res = await run(make(clients, stream=True), request(cancel=token), how)
    assert (res.code, res.aborted) == ("aborted", True)
    assert "stop now" in (res.reason or "")
    if how == "async":
        assert time.monotonic() - start < 1.0


async def test_lazy_client_from_settings(srv: WireServer) -> None:
    s = AnthropicSummarizer(
        model=wire.MODEL,
        base_url=srv.url,
        api_key="k-9",
        settings=SummarizerSettings(max_retries=0),
    )
    assert s.clients.client is None
    assert srv.requests == []
    srv.script(JSONReply(wire.message(["one"])), JSONReply(wire.message(["two"])))
    assert s.summarize(request()).text == "one"
    assert (await s.asummarize(request())).text == "two"
    assert [key_of(r.headers) for r in srv.requests] == ["k-9", "k-9"]
    await s.aclose()
    assert s.clients.client is None
    assert s.clients.async_client is None


async def test_missing_anthropic_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingExtraError, match=r"'anthropic' extra"):
        AnthropicSummarizer(model="m")


async def test_request_body_is_json_serializable_without_cache_control() -> None:
    s = AnthropicSummarizer(object(), async_client=object(), model="m")
    kwargs = s.build_request(request(previous_summary="Earlier: picked eu-west-3."))
    kwargs.pop("timeout", None)
    text = json.dumps(kwargs)
    assert "cache_control" not in text
    assert "<previous-summary>" in kwargs["messages"][0]["content"]


# -- cache-aligned mode ---------------------------------------------------------------------------

CONVERSATION: dict[str, Any] = {
    "system": [
        {
            "type": "text",
            "text": "You are ACME's ops agent.",
            "cache_control": {"type": "ephemeral"},
        }
    ],
    "messages": [
        {"role": "user", "content": "Deploy to eu-west-3 on Friday 14 March"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking the calendar."},
                {"type": "tool_use", "id": "toolu_7", "name": "calendar", "input": {"day": 14}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_7",
                    "content": "free",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
        {"role": "assistant", "content": "Scheduled. Rollback tag v7.2.0."},
        {"role": "user", "content": "Thanks, summarize when needed."},
        {"role": "assistant", "content": "Will do."},
    ],
}
TOOL = {
    "name": "calendar",
    "description": "Check a day",
    "input_schema": {"type": "object", "properties": {"day": {"type": "integer"}}},
}


@HOW
async def test_cache_aligned_replays_system_tools_and_cache_markers(
    srv: WireServer, clients: Any, how: str
) -> None:
    from contextfold.formats import anthropic as anthropic_format

    loaded = anthropic_format.load(CONVERSATION)
    system, rest = tuple(loaded[:1]), tuple(loaded[1:])
    req = SummaryRequest(
        rest[2:],
        prefix=rest[:2],
        system=system,
        tools=(TOOL,),
        mode="cache_aligned",
        kind="checkpoint",
    )
    srv.script(
        JSONReply(wire.message(["## Primary request and intent\n- deploy"])),
        JSONReply(wire.message(["## Primary request and intent\n- deploy"])),
    )
    res = await run(make(clients), req, how)
    assert res.ok, res.reason
    sent = srv.last.body
    own = CONVERSATION["messages"]
    # The conversation as it was sent, cache_control markers included, then the instruction.
    assert sent["system"] == CONVERSATION["system"]
    assert sent["messages"][:-2] == own[:-1]
    # Anthropic reads its cache only at breakpoints: the replay's last block carries one.
    assert sent["messages"][-2] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Will do.", "cache_control": {"type": "ephemeral"}}],
    }
    assert sent["messages"][-1]["role"] == "user"
    assert "Primary request and intent" in json.dumps(sent["messages"][-1]["content"])
    assert sent["tools"] == [TOOL]
    assert json.dumps(sent).count("cache_control") == 3

    res = await run(make(clients, cache_breakpoint=False), req, how)
    assert res.ok, res.reason
    assert srv.last.body["messages"][:-1] == own  # byte-for-byte replay, no marker added


async def test_breakpoint_goes_before_a_merged_instruction_and_respects_the_limit() -> None:
    from contextfold.summarizers.anthropic import mark_replay_end

    marked = {"type": "ephemeral"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": f"q{i}", "cache_control": marked}]}
        if i % 2 == 0
        else {"role": "assistant", "content": f"a{i}"}
        for i in range(10)
    ]
    tail = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
            {"type": "text", "text": "INSTRUCTION"},
        ],
    }
    original = json.loads(json.dumps([*messages, tail]))
    kwargs: dict[str, Any] = {
        "system": [{"type": "text", "text": "S", "cache_control": marked}],
        "messages": [*messages, tail],
    }
    mark_replay_end(kwargs)
    sent = kwargs["messages"]
    # The instruction was merged into the last user message: the mark goes on the block
    # before it, and the instruction block stays unmarked.
    assert sent[-1]["content"][0]["cache_control"] == marked
    assert "cache_control" not in sent[-1]["content"][1]
    # Five message markers + system + ours would be seven: the oldest ones were dropped.
    assert json.dumps(kwargs).count("cache_control") == 4
    assert ["cache_control" in m["content"][0] for m in sent[:10:2]] == [
        False,
        False,
        False,
        True,
        True,
    ]
    assert [*messages, tail] == original  # the caller's structures were not modified


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.text(
        alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80
    ).filter(str.strip),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=6),
)
async def test_any_split_into_deltas_streams_to_the_plain_answer(
    srv: WireServer, clients: Any, text: str, cuts: list[int]
) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    srv.script(SSEReply(wire.message_stream([pieces])), JSONReply(wire.message([text])))
    streamed = make(clients, stream=True).summarize(request())
    plain = make(clients).summarize(request())
    assert streamed.ok, streamed.reason
    assert streamed.text == plain.text == text.strip()


async def test_a_deadline_is_not_outrun_by_the_sdks_own_retries(srv: WireServer) -> None:
    summarizer = AnthropicSummarizer(model=wire.MODEL, base_url=srv.url, api_key="k")
    srv.script(*[JSONReply(wire.message(), delay=1.0) for _ in range(3)])
    span = (Message.user("rename a.py", id="u1"), Message.assistant("done", id="a1"))
    result = summarizer.summarize(SummaryRequest(span, deadline=time.monotonic() + 0.4))
    assert result.code == "timeout"
    time.sleep(1.5)  # time for any retry to reach the server
    assert len(srv.requests) == 1
    summarizer.close()
