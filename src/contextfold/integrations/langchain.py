"""LangChain v1: a compaction middleware for ``create_agent``, and a pair-safe ``trim_messages``.

:class:`ContextfoldMiddleware` is an ``AgentMiddleware`` that decides what each model call
sends, without touching the agent's state: ``state["messages"]`` keeps every message, and the
compacted view is built in ``wrap_model_call`` / ``awrap_model_call`` for that one call, by
:func:`contextfold.strategies.run.run` (or ``arun``) over the converted history. What a build
must hand to the next one (the checkpoint a summarizing strategy made, and the strategy's
per-conversation state) is written to a private state key, ``_contextfold``, through the
``Command`` of an ``ExtendedModelResponse``. LangGraph's checkpointer persists it with the rest
of the thread, so the next call, in this process or another, reuses the summary instead of
writing it again. The middleware object holds no per-request state and can serve every
thread of a server at once.

Everything the strategies guarantee holds for the call: the request fits the budget (system
prompt and tool schemas counted), no tool message is sent without the AI message that called
it, and a summarizer that fails, times out or raises gives the sliding-window fallback that
:func:`~contextfold.strategies.run.run` gives, with the failure streak kept per thread.

:func:`trim_messages` is a drop-in for ``langchain_core.messages.trim_messages(strategy="last")``
built on :class:`~contextfold.strategies.SlidingWindow`: it keeps whole turns and never returns
a tool message whose call was cut off.

The conversion functions (:func:`from_langchain`, :func:`to_langchain`) are lossless in both
directions; see :mod:`contextfold.integrations._langchain_convert`.

Needs the ``langchain`` extra: ``pip install 'contextfold[langchain]'``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from contextfold.errors import ConfigError, MissingExtraError

try:
    from langchain.agents.middleware.types import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
        PrivateStateAttr,
    )
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.types import Command
    from typing_extensions import NotRequired
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("contextfold.integrations.langchain", "langchain") from exc

from contextfold.checkpoints import CheckpointRecord
from contextfold.integrations._langchain_convert import (
    from_langchain,
    message_from_langchain,
    to_langchain,
)
from contextfold.integrations._langchain_trim import LangChainCounter, trim_messages
from contextfold.messages import Message
from contextfold.strategies.base import Strategy, StrategyResult, StrategyState, with_tools
from contextfold.strategies.run import arun, run
from contextfold.tokens.base import TokenCounter

__all__ = [
    "STATE_KEY",
    "ContextfoldMiddleware",
    "ContextfoldState",
    "LangChainCounter",
    "from_langchain",
    "to_langchain",
    "trim_messages",
]

#: The private state key the middleware keeps its checkpoint and strategy state under.
STATE_KEY = "_contextfold"


class ContextfoldState(AgentState[Any]):
    """The agent state with the middleware's private key (never an input or an output)."""

    _contextfold: Annotated[NotRequired[dict[str, Any] | None], PrivateStateAttr]


@dataclass(frozen=True)
class _Call:
    """One model call's inputs: built per call, so the middleware itself stays stateless."""

    history: list[Message]
    strategy: Strategy
    checkpoint: CheckpointRecord | None
    state: StrategyState
    saved: dict[str, Any] | None
    originals: dict[str, tuple[Message, BaseMessage]]


class ContextfoldMiddleware(AgentMiddleware[ContextfoldState, Any]):
    """Compact what each model call of a LangChain agent sends, keeping the state whole.

    Args:
        strategy: decides what is sent (``SlidingWindow``, ``Summarization``, ``Hybrid`` ...).
            It must hold the whole request's budget: the system prompt, the messages and the
            tool schemas, which are counted here (a strategy with schemas of its own keeps
            those).
        counter: counts tokens. Default: :class:`~contextfold.tokens.ApproxCounter`.
        count_tools: count the request's tool schemas against the budget (the default);
            turn it off only when the strategy's ``reserve_tokens`` already covers them.

    Raises:
        ConfigError: ``strategy`` is not a strategy, ``counter`` not a token counter, or
            ``count_tools`` not a boolean.

    Example:
        >>> from langchain.agents import create_agent  # doctest: +SKIP
        >>> agent = create_agent(model, tools, middleware=[ContextfoldMiddleware(strategy)])
    """

    state_schema = ContextfoldState

    def __init__(
        self,
        strategy: Strategy,
        *,
        counter: TokenCounter | None = None,
        count_tools: bool = True,
    ) -> None:
        super().__init__()
        if not isinstance(strategy, Strategy):
            raise ConfigError(
                f"strategy must have a name and a plan() method, got {strategy!r:.80}",
                argument="strategy",
            )
        if counter is not None and not isinstance(counter, TokenCounter):
            raise ConfigError(
                f"counter must be a TokenCounter, got {counter!r:.80}", argument="counter"
            )
        if not isinstance(count_tools, bool):
            raise ConfigError(
                f"count_tools must be True or False, got {count_tools!r}", argument="count_tools"
            )
        if counter is None:
            from contextfold.tokens.approx import ApproxCounter

            counter = ApproxCounter()
        self._strategy = strategy
        self._counter = counter
        self._count_tools = count_tools

    @property
    def strategy(self) -> Strategy:
        """The strategy every call is built with."""
        return self._strategy

    @property
    def counter(self) -> TokenCounter:
        """The token counter."""
        return self._counter

    def __repr__(self) -> str:
        return f"ContextfoldMiddleware(strategy={self._strategy!r})"

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Send the compacted view of ``request``; record a new checkpoint in private state."""
        call = self._open(request)
        result = run(
            call.strategy,
            call.history,
            counter=self._counter,
            checkpoint=call.checkpoint,
            state=call.state,
        )
        return _close(call, result, handler(_view(request, call, result)))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Async form of :meth:`wrap_model_call`: the same view, summaries awaited."""
        call = self._open(request)
        result = await arun(
            call.strategy,
            call.history,
            counter=self._counter,
            checkpoint=call.checkpoint,
            state=call.state,
        )
        return _close(call, result, await handler(_view(request, call, result)))

    def _open(self, request: ModelRequest[Any]) -> _Call:
        """Convert the request and read what the thread's previous call left."""
        originals: dict[str, tuple[Message, BaseMessage]] = {}
        history: list[Message] = []
        if request.system_message is not None:
            system = message_from_langchain(request.system_message, index="system")
            history.append(system)
            originals[system.id] = (system, request.system_message)
        for message, original in zip(
            from_langchain(request.messages), request.messages, strict=True
        ):
            history.append(message)
            originals[message.id] = (message, original)
        strategy = self._strategy
        if self._count_tools and request.tools:
            strategy = with_tools(strategy, _tool_schemas(request.tools))
        saved = request.state.get(STATE_KEY)
        saved = saved if isinstance(saved, Mapping) else None
        return _Call(
            history=history,
            strategy=strategy,
            checkpoint=_saved_checkpoint(saved),
            state=StrategyState.from_dict((saved or {}).get("strategy_state") or {}),
            saved=dict(saved) if saved is not None else None,
            originals=originals,
        )


def _tool_schemas(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """The request's tools as OpenAI function schemas, the form the counters measure."""
    schemas = []
    for tool in tools:
        try:
            schemas.append(convert_to_openai_tool(tool))
        except Exception:  # a provider's built-in tool given as a dict: count it as it is
            if isinstance(tool, Mapping):
                schemas.append(dict(tool))
    return schemas


def _saved_checkpoint(saved: Mapping[str, Any] | None) -> CheckpointRecord | None:
    """The checkpoint the thread's state holds, or None (a damaged one is ignored)."""
    raw = (saved or {}).get("checkpoint")
    if not isinstance(raw, Mapping):
        return None
    try:
        return CheckpointRecord.from_dict(raw)
    except ValueError:  # FormatError: rebuild from the full history rather than fail the call
        return None


def _view(request: ModelRequest[Any], call: _Call, result: StrategyResult) -> ModelRequest[Any]:
    """The request carrying ``result``: original LangChain objects wherever kept verbatim."""
    system = None
    messages: list[BaseMessage] = []
    for m in result.messages:
        known = call.originals.get(m.id)
        if known is not None and known[0] == m:
            if known[1] is request.system_message:
                system = request.system_message
            else:
                messages.append(known[1])
        else:
            messages.extend(to_langchain([m]))
    return request.override(messages=messages, system_message=system)  # type: ignore[arg-type]


def _close(
    call: _Call, result: StrategyResult, response: ModelResponse[Any] | AIMessage
) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
    """The model's response, with a private state update when the thread's record changed."""
    checkpoint = result.checkpoint or call.checkpoint
    record: dict[str, Any] = {
        "checkpoint": checkpoint.to_dict() if checkpoint is not None else None,
        "strategy_state": result.state.to_dict(),
    }
    if record == (call.saved or {"checkpoint": None, "strategy_state": {}}):
        return response
    if isinstance(response, AIMessage):
        response = ModelResponse(result=[response])
    return ExtendedModelResponse(
        model_response=response, command=Command(update={STATE_KEY: record})
    )
