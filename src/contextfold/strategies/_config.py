"""Configuration helpers every strategy shares: option checks, immutability, tool budgets.

* :func:`check_option` and :func:`check_tools` reject bad arguments with
  :class:`~contextfold.errors.ConfigError`, in the constructor.
* :class:`FrozenConfig` makes a strategy's attributes read-only once built: one object
  serves every conversation, so nothing on it may change per request.
* :class:`ToolBudget` counts a request's tool schemas and reserve against ``max_tokens``.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

from contextfold.errors import BudgetError, ConfigError
from contextfold.tokens.base import TokenCounter

__all__ = ["FrozenConfig", "ToolBudget", "check_option", "check_tools"]

_S = TypeVar("_S")


def check_option(name: str, value: object, minimum: int) -> None:
    """Reject an integer option that is missing, of the wrong type or below ``minimum``.

    Raises:
        ConfigError: naming the option and the value given.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(
            f"{name} must be an integer of at least {minimum}, got {value!r}", argument=name
        )


#: The default lower mark: a compaction brings the request down to this share of its budget.
DEFAULT_COMPACT_TO = 0.6


def check_compact_to(value: object, max_tokens: int) -> None:
    """Reject a lower mark that is neither a fraction in (0, 1] nor a count up to the budget.

    Raises:
        ConfigError: naming ``compact_to`` and the value given.
    """
    if isinstance(value, float) and 0.0 < value <= 1.0:
        return
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= max_tokens:
        return
    raise ConfigError(
        "compact_to must be a fraction of max_tokens in (0, 1] or a token count from 1 to "
        f"max_tokens ({max_tokens}), got {value!r}",
        argument="compact_to",
    )


def check_mode(mode: object) -> None:
    """Reject a summary request mode other than ``"isolated"`` and ``"cache_aligned"``.

    Raises:
        ConfigError: naming ``mode`` and the value given.
    """
    if mode not in ("isolated", "cache_aligned"):
        raise ConfigError(
            f"mode must be 'isolated' or 'cache_aligned', got {mode!r}", argument="mode"
        )


def low_mark(max_tokens: int, compact_to: float | int) -> int:
    """The request size, in tokens, a compaction brings the context down to.

    ``compact_to`` is a fraction of ``max_tokens`` (a float) or a token count (an int).
    """
    if isinstance(compact_to, float):
        return max(1, int(max_tokens * compact_to))
    return min(compact_to, max_tokens)


def check_tools(tools: Sequence[Mapping[str, Any]] | None) -> tuple[Mapping[str, Any], ...]:
    """``tools`` as a tuple of schemas.

    Raises:
        ConfigError: ``tools`` is not a sequence of mappings.
    """
    if isinstance(tools, (str, bytes, Mapping)):
        raise ConfigError("tools must be a sequence of tool schemas (mappings)", argument="tools")
    tool_list = tuple(tools or ())
    for i, tool in enumerate(tool_list):
        if not isinstance(tool, Mapping):
            raise ConfigError(
                f"tool schema {i} must be a mapping, got {type(tool).__name__}", argument="tools"
            )
    return tool_list


class FrozenConfig:
    """Mixin: attributes cannot be set once ``__init__`` has called :meth:`_freeze`.

    A strategy is configuration shared by every conversation it serves; setting an attribute
    on it would change every one of them at once. Derive a new object instead (for tool
    schemas, :meth:`ToolBudget.with_tools`).
    """

    def __setattr__(self, name: str, value: object) -> None:
        if getattr(self, "_frozen", False):
            raise AttributeError(
                f"{type(self).__name__} is immutable configuration: build a new one instead "
                f"of setting {name!r}"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable configuration")

    def _freeze(self) -> None:
        object.__setattr__(self, "_frozen", True)


class ToolBudget:
    """Mixin: the tool schemas and reserve a request carries besides its messages.

    A provider bills the tool schemas of a request as input tokens, so a context that fits
    ``max_tokens`` on its own is over budget once they are added. Strategies with this mixin
    count ``tools`` (once per counter setup) plus ``reserve_tokens`` against ``max_tokens``,
    exactly as :class:`~contextfold.strategies.SlidingWindow` does, and build their messages
    (and their sliding-window fallback) inside what is left.
    """

    tools: tuple[Mapping[str, Any], ...]
    reserve_tokens: int
    _tool_cache: dict[Hashable, int]

    def _init_tools(self, tools: Sequence[Mapping[str, Any]] | None, reserve_tokens: int) -> None:
        check_option("reserve_tokens", reserve_tokens, 0)
        self.tools = check_tools(tools)
        self.reserve_tokens = reserve_tokens
        self._tool_cache = {}

    def tool_tokens(self, counter: TokenCounter) -> int:
        """Tokens the tool schemas cost under ``counter`` (cached per counter setup)."""
        if not self.tools:
            return 0
        key = counter.cache_key
        cached = self._tool_cache.get(key)
        if cached is None:
            cached = counter.count_tools(self.tools)
            self._tool_cache[key] = cached
        return cached

    def with_tools(self: _S, tools: Sequence[Mapping[str, Any]], /) -> _S:
        """This configuration counting ``tools``, unless it has schemas of its own.

        Strategies are immutable, so this is a new object (``self`` when nothing changes);
        :class:`~contextfold.ConversationMemory` calls it with the schemas its requests
        carry.
        """
        return self.with_overhead(tools, 0)  # type: ignore[attr-defined, no-any-return]

    def with_overhead(self: _S, tools: Sequence[Mapping[str, Any]], reserve_tokens: int) -> _S:
        """This configuration with ``tools`` and ``reserve_tokens`` where it has none of its own.

        A pipeline hands its own to its stages this way; a strategy that passes its tools on
        (a pipeline to its stages) does so again on the copy.
        """
        given = check_tools(tools)
        check_option("reserve_tokens", reserve_tokens, 0)
        give_tools = bool(given) and not self.tools  # type: ignore[attr-defined]
        give_reserve = reserve_tokens > 0 and self.reserve_tokens == 0  # type: ignore[attr-defined]
        if not give_tools and not give_reserve:
            return self
        clone = copy.copy(self)
        if give_tools:
            object.__setattr__(clone, "tools", given)
            object.__setattr__(clone, "_tool_cache", {})
        if give_reserve:
            object.__setattr__(clone, "reserve_tokens", reserve_tokens)
        clone._tools_changed()  # type: ignore[attr-defined]
        return clone

    def _tools_changed(self) -> None:
        """Called on a copy made by :meth:`with_tools`; a pipeline hands them to its stages."""

    def _budget(self, max_tokens: int, counter: TokenCounter) -> tuple[int, int]:
        """``(budget for the messages, tool tokens)``.

        Raises:
            BudgetError: the tool schemas and reserve alone exceed ``max_tokens``.
        """
        tools = self.tool_tokens(counter)
        overhead = tools + self.reserve_tokens
        if overhead > max_tokens:
            raise BudgetError(
                f"the tool schemas ({tools} tokens) and reserve_tokens ({self.reserve_tokens}) "
                f"need {overhead} tokens, over the budget of {max_tokens}",
                budget=max_tokens,
                required=overhead,
            )
        return max_tokens - overhead, tools
