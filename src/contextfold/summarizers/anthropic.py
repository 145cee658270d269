"""Summaries from Claude models through the ``anthropic`` SDK (Messages API).

:class:`AnthropicSummarizer` sends one Messages request, plain or streamed (SSE), and turns
the answer into a :class:`SummarizationResult`. It fails closed: ``stop_reason=max_tokens``
is ``truncated``, an answer whose ``output_tokens`` exceed the ``max_tokens`` sent (a proxy
that dropped it) is ``too_long``, ``tool_use`` is ``tool_call``, a stream that never sends
``message_stop`` is ``truncated``, HTTP 429 is ``rate_limited``, 5xx and ``overloaded_error``
(529, also when it arrives as an ``error`` event inside a stream) are ``http_error``, and a
200 answer that is no message or, to a streamed call, no event stream (a proxy's HTML page)
is ``error``.
Thinking blocks are ignored; the text blocks are joined.

Cache use. An *isolated* call writes no ``cache_control`` anywhere, so it never pays for a
cache entry nobody will read. A *cache-aligned* call replays the conversation's system
prompt, tools and messages exactly as they were sent (``cache_control`` markers included,
as :mod:`contextfold.formats.anthropic` keeps them) and puts a cache breakpoint on the last
replayed block, because Anthropic looks its cache up only at breakpoints; the call then reads
the conversation's cached prefix.

Usage. Anthropic reports uncached input apart from cache reads and writes; the result's
``input_tokens`` adds the three up (every prompt token, like OpenAI's ``prompt_tokens``), and
``cache_read_tokens`` / ``cache_write_tokens`` say how many of them were cache reads and
writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextfold.errors import ConfigError
from contextfold.formats.tools import tools_for_anthropic
from contextfold.summarizers._provider import SDKSummarizer
from contextfold.summarizers._template import StreamAccumulator
from contextfold.summarizers._wire import (
    Finish,
    as_int,
    clamp_tokens,
    field,
    finish_result,
    not_an_answer,
)
from contextfold.summarizers.base import SummarizationResult, SummaryRequest, Usage
from contextfold.summarizers.prompts import build_cache_aligned_messages, build_isolated_prompt
from contextfold.summarizers.settings import SummarizerSettings

__all__ = ["AnthropicSummarizer"]

DEFAULT_MAX_OUTPUT_TOKENS = 4096

_STOP: dict[str, Finish] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "pause_turn": "length",
    "tool_use": "tool",
    "refusal": "refused",
}
_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


class AnthropicSummarizer(SDKSummarizer):
    """A summarizer backed by the ``anthropic`` SDK.

    Args:
        client: an ``anthropic.Anthropic`` (or ``AsyncAnthropic``) client. When omitted, one
            is created on first use from ``base_url``, ``api_key`` and the settings'
            ``timeout`` and ``max_retries`` (the SDK reads ``ANTHROPIC_API_KEY`` itself
            otherwise).
        model: the Claude model that writes summaries.
        base_url: another endpoint (a proxy or a compatible server).
        api_key: the key for a client created here.
        async_client: an ``anthropic.AsyncAnthropic`` client for :meth:`asummarize`; when
            omitted, one is created from the same settings as the sync client (for other
            client classes, such as Bedrock's or Vertex's, pass both).
        settings: what every adapter shares (see
            :class:`~contextfold.summarizers.SummarizerSettings`). Anthropic requires an
            output cap, so ``max_output_tokens=None`` means 4096; stream for very large caps.
            ``cache_key`` is OpenAI's and is not sent.
        cache_breakpoint: in cache-aligned mode, mark the end of the replayed conversation
            with ``cache_control`` so the cached prefix is actually read (Anthropic looks
            up its cache only at breakpoints, and stored histories rarely keep the markers
            an application adds at request time).

    Raises:
        MissingExtraError: the ``anthropic`` package is not installed.
        ConfigError: an argument is invalid.
    """

    provider = "anthropic"
    sdk = ("anthropic", "AnthropicSummarizer", "anthropic")
    client_classes = ("Anthropic", "AsyncAnthropic")

    def __init__(
        self,
        client: Any = None,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        async_client: Any = None,
        settings: SummarizerSettings | None = None,
        cache_breakpoint: bool = True,
    ) -> None:
        if not isinstance(cache_breakpoint, bool):
            raise ConfigError(
                f"cache_breakpoint must be True or False, not {cache_breakpoint!r}",
                argument="cache_breakpoint",
            )
        super().__init__(
            client,
            async_client=async_client,
            model=model,
            base_url=base_url,
            api_key=api_key,
            settings=settings,
        )
        self.cache_breakpoint = cache_breakpoint

    @property
    def max_output_tokens(self) -> int:
        """The output cap sent when the request has none smaller (Anthropic needs one)."""
        return self.settings.max_output_tokens or DEFAULT_MAX_OUTPUT_TOKENS

    def __repr__(self) -> str:
        return f"AnthropicSummarizer(model={self.model!r}, stream={self.stream})"

    # -- clients -----------------------------------------------------------------------

    def _mirror_settings(self, other: Any) -> dict[str, Any]:
        return {
            "base_url": str(other.base_url),
            "api_key": other.api_key,
            "auth_token": getattr(other, "auth_token", None),
            "max_retries": other.max_retries,
            "timeout": other.timeout,
        }

    # -- request -----------------------------------------------------------------------

    def _output_cap(self, request: SummaryRequest) -> int:
        """``max_tokens`` for ``request``: the smaller cap, never none (the API needs one)."""
        return (
            clamp_tokens(request.max_output_tokens, self.max_output_tokens)
            or DEFAULT_MAX_OUTPUT_TOKENS
        )

    def build_request(self, request: SummaryRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for ``request``.

        Isolated mode: our system prompt as plain text and one user message with the
        serialized transcript, no ``cache_control``. Cache-aligned mode: the conversation's
        own system, tools and messages, then the instruction as the last user message, with a
        cache breakpoint at the end of the replay (see :func:`mark_replay_end`).
        """
        kwargs: dict[str, Any] = {"model": self.model}
        kwargs["max_tokens"] = self._output_cap(request)
        if request.mode == "cache_aligned":
            from contextfold.formats import anthropic as anthropic_format

            system, messages, tools = build_cache_aligned_messages(
                request, prompts=self.settings.prompts
            )
            body = anthropic_format.dump([*system, *messages])
            if "system" in body:
                kwargs["system"] = body["system"]
            kwargs["messages"] = body["messages"]
            if tools:
                kwargs["tools"] = tools_for_anthropic(tools)
            if self.cache_breakpoint:
                mark_replay_end(kwargs)
        else:
            system_text, user_text = build_isolated_prompt(
                request,
                prompts=self.settings.prompts,
                tool_result_limit=self.settings.tool_result_limit,
            )
            kwargs["system"] = system_text
            kwargs["messages"] = [{"role": "user", "content": user_text}]
        self._add_call_options(kwargs, request)
        return kwargs

    def _send(self, client: Any, request: SummaryRequest) -> Any:
        return client.messages.create(**self.build_request(request))

    # -- answers -----------------------------------------------------------------------

    def _parse(self, response: Any, cap: int | None) -> SummarizationResult:
        answered_by = field(response, "model") or self.model
        if isinstance(response, (str, bytes)) or field(response, "content") is None:
            return not_an_answer(response, "message", provider=self.provider, model=answered_by)
        texts: list[str] = []
        tool_called = False
        for block in field(response, "content") or []:
            kind = field(block, "type")
            if kind == "text":
                texts.append(str(field(block, "text") or ""))
            elif kind in _TOOL_BLOCKS:
                tool_called = True
        reason = field(response, "stop_reason")
        finish = _STOP.get(str(reason), "stop") if reason is not None else "stop"
        usage = anthropic_usage(field(response, "usage"))
        return finish_result(
            "\n".join(t for t in texts if t),
            finish,
            provider=self.provider,
            model=answered_by,
            usage=usage,
            tool_called=tool_called,
            detail=f"stop_reason={reason}" if finish != "stop" else None,
            cap=cap,
            tokens=_answer_tokens(usage),
        )

    def _accumulator(self, cap: int | None) -> StreamAccumulator:
        return _MessageStream(self.model, cap)


MAX_CACHE_BREAKPOINTS = 4  # the Messages API rejects requests with more
_NO_CACHE_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def _marked(block: Any) -> bool:
    return isinstance(block, Mapping) and "cache_control" in block


def _replay_end(messages: list[Any]) -> tuple[int, int | None] | None:
    """``(message, end)`` of the replay's last message; ``end`` is the instruction block.

    The instruction is either merged into the last message (its last block) or a message of
    its own (``end`` None, the replay ends one message earlier).
    """
    last_content = messages[-1].get("content") if isinstance(messages[-1], Mapping) else None
    if isinstance(last_content, list) and len(last_content) >= 2:
        return len(messages) - 1, len(last_content) - 1
    if len(messages) >= 2:
        return len(messages) - 2, None
    return None


def _cacheable(block: Any) -> bool:
    """A block a breakpoint can go on: not thinking, not an empty text."""
    return (
        isinstance(block, Mapping)
        and block.get("type") not in _NO_CACHE_BLOCKS
        and not (block.get("type") == "text" and not block.get("text"))
    )


def _unmark_oldest(
    messages: list[Any], holder: int, blocks: list[Any], message: dict[str, Any], *, keep: int
) -> None:
    """Drop the oldest message markers beyond ``keep``, on copies (``blocks``: the holder's)."""
    spots = [
        (i, j)
        for i, m in enumerate(messages)
        if isinstance(m, Mapping) and isinstance(m.get("content"), list)
        for j, b in enumerate(m["content"])
        if _marked(b)
    ]
    for i, j in spots[: max(len(spots) - keep, 0)]:
        row = message if i == holder else dict(messages[i])
        row_blocks = blocks if i == holder else list(row["content"])
        stripped = dict(row_blocks[j])
        del stripped["cache_control"]
        row_blocks[j] = stripped
        if i == holder:
            continue
        row["content"] = row_blocks
        messages[i] = row


def mark_replay_end(kwargs: dict[str, Any]) -> None:
    """Put a cache breakpoint on the last replayed block of a cache-aligned request.

    Anthropic reads its prompt cache only at ``cache_control`` breakpoints (looking back a
    few blocks from each), so a replay without one pays full price for a prefix that is
    probably cached. The breakpoint goes on the conversation's last block before the
    instruction. Markers the replay already carries are kept, except that the oldest
    message markers are dropped when the request would otherwise exceed the API's limit of
    four. Only copies are changed: the lists and blocks on the way to a change are copied.
    """
    messages: list[Any] = list(kwargs.get("messages") or [])
    found = _replay_end(messages) if messages else None
    if found is None:
        return
    holder, end = found
    message = dict(messages[holder])
    content = message.get("content")
    blocks: list[Any] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    )
    candidates = range((len(blocks) if end is None else end) - 1, -1, -1)
    target = next((i for i in candidates if _cacheable(blocks[i])), None)
    if target is None or _marked(blocks[target]):
        return
    system = kwargs.get("system")
    fixed = sum(_marked(b) for b in system) if isinstance(system, list) else 0
    fixed += sum(_marked(t) for t in kwargs.get("tools") or [])
    if fixed >= MAX_CACHE_BREAKPOINTS:
        return  # system and tools use every breakpoint already
    _unmark_oldest(messages, holder, blocks, message, keep=MAX_CACHE_BREAKPOINTS - fixed - 1)
    marked = dict(blocks[target])
    marked["cache_control"] = {"type": "ephemeral"}
    blocks[target] = marked
    message["content"] = blocks
    messages[holder] = message
    kwargs["messages"] = messages


def anthropic_usage(usage: Any, base: Usage | None = None) -> Usage | None:
    """Usage from an Anthropic ``usage`` object; fields it lacks are taken from ``base``.

    ``input_tokens`` in the result counts every prompt token: uncached input plus cache
    reads plus cache writes.
    """
    if usage is None:
        return base
    prior = base or Usage()

    def pick(name: str, fallback: int) -> int:
        value = field(usage, name)
        return as_int(value) if value is not None else fallback

    uncached = pick("input_tokens", prior.uncached_input_tokens)
    read = pick("cache_read_input_tokens", prior.cache_read_tokens)
    write = pick("cache_creation_input_tokens", prior.cache_write_tokens)
    return Usage(
        input_tokens=uncached + read + write,
        output_tokens=pick("output_tokens", prior.output_tokens),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def _answer_tokens(usage: Usage | None) -> int | None:
    """The answer's tokens by Anthropic's count: its output, thinking included (as
    ``max_tokens`` includes it); None when no usage came."""
    return usage.output_tokens if usage is not None else None


class _MessageStream:
    """Folds Messages streaming events up to ``message_stop``."""

    def __init__(self, model: str, cap: int | None) -> None:
        self.model = model
        self.cap = cap
        self.events = 0
        self.blocks: dict[int, list[str]] = {}
        self.tool_called = False
        self.stop_reason: str | None = None
        self.stopped = False
        self.usage: Usage | None = None

    @property
    def complete(self) -> bool:
        return self.stopped

    def feed(self, event: Any) -> SummarizationResult | None:
        self.events += 1
        kind = field(event, "type")
        if kind == "message_start":
            message = field(event, "message")
            self.model = field(message, "model") or self.model
            self.usage = anthropic_usage(field(message, "usage"), self.usage)
        elif kind == "content_block_start":
            block = field(event, "content_block")
            block_kind = field(block, "type")
            if block_kind in _TOOL_BLOCKS:
                self.tool_called = True
            elif block_kind == "text":
                self.blocks[as_int(field(event, "index"))] = [str(field(block, "text") or "")]
        elif kind == "content_block_delta":
            delta = field(event, "delta")
            delta_kind = field(delta, "type")
            if delta_kind == "text_delta":
                index = as_int(field(event, "index"))
                self.blocks.setdefault(index, []).append(str(field(delta, "text") or ""))
            elif delta_kind == "input_json_delta":
                self.tool_called = True
        elif kind == "message_delta":
            reason = field(field(event, "delta"), "stop_reason")
            if reason is not None:
                self.stop_reason = str(reason)
            self.usage = anthropic_usage(field(event, "usage"), self.usage)
        elif kind == "message_stop":
            self.stopped = True
        return None

    def result(self) -> SummarizationResult:
        text = "\n".join(t for t in ("".join(self.blocks[i]) for i in sorted(self.blocks)) if t)
        finish: Finish | None = None
        if self.stopped:
            finish = _STOP.get(self.stop_reason or "end_turn", "stop")
        return finish_result(
            text,
            finish,
            provider="anthropic",
            model=self.model,
            usage=self.usage,
            tool_called=self.tool_called,
            detail=f"stop_reason={self.stop_reason}" if finish not in ("stop", None) else None,
            cap=self.cap,
            tokens=_answer_tokens(self.usage),
        )
