"""The Chat Completions pieces shared by the OpenAI and LiteLLM adapters.

LiteLLM takes and returns OpenAI's Chat Completions shapes, so both adapters build the
request body, read a plain answer and fold a stream with the code below; only the provider
named in failure reasons differs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from contextfold.formats.tools import tools_for_openai_chat
from contextfold.messages import Message
from contextfold.summarizers._wire import (
    Finish,
    answer_tokens,
    as_int,
    field,
    finish_result,
    not_an_answer,
    token_usage,
)
from contextfold.summarizers.base import SummarizationResult, SummaryRequest, Usage
from contextfold.summarizers.prompts import (
    PromptSet,
    build_cache_aligned_messages,
    build_isolated_prompt,
)

__all__ = ["ChatStream", "chat_body", "chat_usage", "parse_chat", "replay_body", "strip_think"]

_CHAT_FINISH: dict[str, Finish] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool",
    "function_call": "tool",
    "content_filter": "filter",
}


# -- request bodies ------------------------------------------------------------------------


def replay_body(
    request: SummaryRequest,
    prompts: PromptSet | None,
    key: str,
    dump: Callable[[Sequence[Message]], list[dict[str, Any]]],
    convert_tools: Callable[[Iterable[Mapping[str, Any]]], list[dict[str, Any]]],
) -> dict[str, Any]:
    """A cache-aligned body: the conversation and instruction under ``key``, then its tools."""
    system, messages, tools = build_cache_aligned_messages(request, prompts=prompts)
    body: dict[str, Any] = {key: dump([*system, *messages])}
    if tools:
        body["tools"] = convert_tools(tools)
    return body


# -- Chat Completions ---------------------------------------------------------------------


def chat_body(
    request: SummaryRequest, *, prompts: PromptSet | None, tool_result_limit: int
) -> dict[str, Any]:
    """The ``messages`` (and ``tools``) of a Chat Completions request for ``request``.

    Isolated mode: our system prompt and one user message with the serialized transcript.
    Cache-aligned mode: the conversation's own system messages, messages and tools, then
    the instruction (see :mod:`contextfold.summarizers.prompts`). Every server that speaks the Chat
    Completions shape (LiteLLM included) takes this body.
    """
    if request.mode == "cache_aligned":
        from contextfold.formats import openai_chat

        return replay_body(request, prompts, "messages", openai_chat.dump, tools_for_openai_chat)
    system_text, user_text = build_isolated_prompt(
        request, prompts=prompts, tool_result_limit=tool_result_limit
    )
    return {
        "messages": [
            {"role": "system", "content": system_text},
            {"role": "user", "content": user_text},
        ]
    }


def chat_usage(usage: Any) -> Usage | None:
    """Usage from a Chat Completions ``usage`` object (cached prompt tokens included)."""
    return token_usage(usage, input_key="prompt_tokens", output_key="completion_tokens")


_THINK = re.compile(r"\A\s*<(think|thinking|reasoning)>.*?(?:</\1>|\Z)\s*", re.DOTALL)


def strip_think(text: str) -> str:
    """Drop a leading ``<think>...</think>`` block from an answer.

    Reasoning models served through OpenAI-compatible servers (Ollama, vLLM, llama.cpp)
    often put their chain of thought inside the answer text in such tags. It is scratch
    work, not summary: like thinking blocks elsewhere, it is left out. A block that never
    closes (the answer was all thinking) leaves nothing, so the result is ``empty``.
    """
    return _THINK.sub("", text, count=1)


def _chat_finish(reason: Any) -> Finish | None:
    if reason is None:
        return None
    return _CHAT_FINISH.get(str(reason), "stop")


def parse_chat(
    response: Any, model: str, *, provider: str = "openai", cap: int | None = None
) -> SummarizationResult:
    """The verdict on a plain Chat Completions answer; ``provider`` names who served it and
    ``cap`` is the output cap the call asked for."""
    answered_by = field(response, "model") or model
    raw_usage = field(response, "usage")
    usage = chat_usage(raw_usage)
    choices = field(response, "choices")
    if isinstance(response, (str, bytes)) or choices is None:
        return not_an_answer(response, "chat completion", provider=provider, model=answered_by)
    if not choices:
        return SummarizationResult.failure(
            f"{provider}: the answer has no choices", "empty", usage=usage, model=answered_by
        )
    choice = choices[0]
    message = field(choice, "message")
    text = strip_think(str(field(message, "content") or ""))
    refusal = field(message, "refusal")
    tool_called = bool(field(message, "tool_calls")) or bool(field(message, "function_call"))
    finish = _chat_finish(field(choice, "finish_reason"))
    if finish is None:
        finish = "stop"  # a plain answer is whole even when a server omits the reason
    if refusal and not text.strip():
        finish = "refused"
    return finish_result(
        str(text),
        finish,
        provider=provider,
        model=answered_by,
        usage=usage,
        tool_called=tool_called,
        detail=str(refusal) if refusal else None,
        cap=cap,
        tokens=answer_tokens(raw_usage, "completion_tokens"),
    )


class ChatStream:
    """Folds ``chat.completion.chunk`` events: text deltas, tool-call deltas, finish, usage.

    ``provider`` names who served the stream in failure reasons (LiteLLM streams the same
    chunks as OpenAI); ``cap`` is the output cap the call asked for.
    """

    def __init__(self, model: str, *, provider: str = "openai", cap: int | None = None) -> None:
        self.model = model
        self.provider = provider
        self.cap = cap
        self.events = 0
        self.pieces: list[str] = []
        self.refusal: list[str] = []
        self.tool_called = False
        self.finish: Finish | None = None
        self.usage: Usage | None = None
        self.tokens: int | None = None  # the answer's, by the provider's count

    @property
    def complete(self) -> bool:
        return self.finish is not None

    def feed(self, chunk: Any) -> SummarizationResult | None:
        self.events += 1
        self.model = field(chunk, "model") or self.model
        usage = field(chunk, "usage")
        if usage is not None:
            self.usage = chat_usage(usage)
            self.tokens = answer_tokens(usage, "completion_tokens")
        for choice in field(chunk, "choices") or []:
            if as_int(field(choice, "index")) != 0:
                continue
            delta = field(choice, "delta")
            content = field(delta, "content")
            if content:
                self.pieces.append(str(content))
            refusal = field(delta, "refusal")
            if refusal:
                self.refusal.append(str(refusal))
            if field(delta, "tool_calls") or field(delta, "function_call"):
                self.tool_called = True
            reason = _chat_finish(field(choice, "finish_reason"))
            if reason is not None:
                self.finish = reason
        return None

    def result(self) -> SummarizationResult:
        text = strip_think("".join(self.pieces))
        finish = self.finish
        if finish == "stop" and self.refusal and not text.strip():
            finish = "refused"
        return finish_result(
            text,
            finish,
            provider=self.provider,
            model=self.model,
            usage=self.usage,
            tool_called=self.tool_called,
            detail="".join(self.refusal) or None,
            cap=self.cap,
            tokens=self.tokens,
        )
