"""A pair-safe ``trim_messages`` over LangChain messages, and LangChain token counters.

``langchain_core.messages.trim_messages`` cuts a message list at a token count; the cut can
fall between an AI message's tool calls and their tool messages, which leaves a tool message
no provider accepts (langchain#33245). This one runs the list through
:class:`~contextfold.strategies.SlidingWindow`, which keeps whole turns and whole tool
exchanges, and returns the caller's own message objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage, HumanMessage, convert_to_messages
from langchain_core.messages.utils import count_tokens_approximately

from contextfold.errors import ConfigError, FormatError
from contextfold.integrations._langchain_convert import from_langchain, to_langchain
from contextfold.messages import Message
from contextfold.strategies.sliding import SlidingWindow
from contextfold.tokens.base import TokenCounter

__all__ = ["LangChainCounter", "trim_messages"]

LangChainTokenCounter = Callable[[list[BaseMessage]], int]


class LangChainCounter:
    """A :class:`~contextfold.tokens.base.TokenCounter` over a LangChain token counter.

    LangChain counts lists of its own messages (``count_tokens_approximately``, or a chat
    model's ``get_num_tokens_from_messages``); this counts each contextfold message by
    converting it back, so a budget means what it means to the rest of a LangChain program.

    Args:
        count: a function of a list of LangChain messages returning its token count.
    """

    def __init__(self, count: LangChainTokenCounter) -> None:
        if not callable(count):
            raise ConfigError(f"count must be callable, got {count!r:.80}", argument="count")
        self._count = count
        self._empty = self._counted([HumanMessage("")])

    def _counted(self, messages: list[BaseMessage]) -> int:
        """What the wrapped function counts, checked: a budget needs whole tokens."""
        n = self._count(messages)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigError(
                f"the LangChain token counter must return a whole number of tokens, got {n!r:.80}",
                argument="count",
            )
        return n

    @property
    def cache_key(self) -> Hashable:
        """Distinct per wrapped function: two functions may count differently."""
        return ("langchain", id(self._count))

    def count_text(self, text: str, /) -> int:
        """Tokens of ``text`` as the content of a message, less an empty message's cost."""
        return max(0, self._counted([HumanMessage(text)]) - self._empty)

    def count_message(self, message: Message, /) -> int:
        """Tokens of the message as LangChain counts it."""
        return self._counted(to_langchain([message]))

    def count_messages(self, messages: Sequence[Message], /) -> int:
        """The sum of :meth:`count_message` (the counter contract is additive)."""
        return sum(self.count_message(m) for m in messages)

    def count_tools(self, tools: Sequence[Mapping[str, Any]], /) -> int:
        """Tokens of the schemas' JSON text."""
        return sum(self.count_text(json.dumps(t, sort_keys=True, default=str)) for t in tools)


def as_counter(token_counter: Any) -> TokenCounter:
    """A contextfold counter for ``token_counter`` as ``trim_messages`` accepts it."""
    if token_counter is None:
        from contextfold.tokens.approx import ApproxCounter

        return ApproxCounter()
    if isinstance(token_counter, TokenCounter):
        return token_counter
    if token_counter == "approximate":
        return LangChainCounter(count_tokens_approximately)
    if isinstance(token_counter, BaseLanguageModel):
        return LangChainCounter(token_counter.get_num_tokens_from_messages)
    if callable(token_counter):
        return LangChainCounter(token_counter)
    raise ConfigError(
        "token_counter must be a contextfold TokenCounter, a LangChain chat model, a function "
        f"of a message list, or 'approximate'; got {token_counter!r:.80}",
        argument="token_counter",
    )


def trim_messages(
    messages: Sequence[Any],
    *,
    max_tokens: int,
    token_counter: Any = None,
    strategy: str = "last",
    include_system: bool = True,
    tools: Sequence[Mapping[str, Any]] | None = None,
    reserve_tokens: int = 0,
) -> list[BaseMessage]:
    """Keep the newest whole turns of ``messages`` that fit ``max_tokens``; never orphan a tool.

    A drop-in for ``langchain_core.messages.trim_messages(messages, strategy="last", ...)``
    with the same ``max_tokens`` / ``token_counter`` / ``include_system`` arguments. Unlike it,
    the window always starts on a turn (a human message) when there is one, and an AI
    message's tool calls and their tool messages are kept or dropped together, parallel
    calls included. The objects returned are the ones passed in (message-like dicts and
    tuples are converted first, as LangChain does).

    Args:
        messages: LangChain messages or message-like values.
        max_tokens: the budget for the messages kept (and ``tools``, and ``reserve_tokens``).
        token_counter: a contextfold :class:`~contextfold.tokens.base.TokenCounter`, a
            LangChain chat model, a function of a message list, or ``"approximate"``.
            Default: :class:`~contextfold.tokens.ApproxCounter`.
        strategy: only ``"last"`` (keep the newest messages) is offered.
        include_system: keep the leading system messages whatever else is cut (the default
            here, unlike LangChain's). With False they are treated like any old message:
            kept only when the whole list fits.
        tools: tool schemas sent with the messages, counted against ``max_tokens``.
        reserve_tokens: tokens kept free, for example for the answer.

    Raises:
        ConfigError: an argument is of the wrong kind or out of range.
        BudgetError: not even the newest tool exchange (with the system messages, when kept)
            fits; its ``required`` says what budget would.
        PairingError: the input already has a tool message without its call.
    """
    if strategy != "last":
        raise ConfigError(
            f"strategy must be 'last' (a cut from the front orphans results), not {strategy!r}",
            argument="strategy",
        )
    if not isinstance(include_system, bool):
        raise ConfigError(
            f"include_system must be True or False, got {include_system!r}",
            argument="include_system",
        )
    window = SlidingWindow(max_tokens, tools=tools, reserve_tokens=reserve_tokens)
    counter = as_counter(token_counter)
    try:
        originals = convert_to_messages(list(messages))
    except (ValueError, TypeError, NotImplementedError) as exc:  # LangChain's own checks
        raise FormatError(f"cannot read the messages as LangChain messages: {exc}") from exc
    ours = from_langchain(originals)
    start = 0
    if not include_system:
        while start < len(ours) and ours[start].role in ("system", "developer"):
            start += 1
        whole = counter.count_messages(ours) + window.tool_tokens(counter) + reserve_tokens
        if whole <= max_tokens:
            return list(originals)
    by_id = {m.id: (m, lc) for m, lc in zip(ours, originals, strict=True)}
    result = window.fit(ours[start:], counter=counter)
    out: list[BaseMessage] = []
    for m in result.messages:
        known = by_id.get(m.id)
        out.extend([known[1]] if known is not None and known[0] == m else to_langchain([m]))
    return out
