"""Bad input to an integration raises a typed contextfold error, never the framework's or
Python's own (AttributeError, TypeError, KeyError) from inside our code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contextfold.errors import ConfigError, FormatError


def _llama_put(item: Any) -> None:
    from contextfold.integrations.llama_index import ContextfoldMemory

    ContextfoldMemory("c").put(item)


def _llama_kwargs(additional: dict[str, Any]) -> None:
    from llama_index.core.base.llms.types import ChatMessage

    from contextfold.integrations.llama_index import to_messages

    to_messages([ChatMessage(role="assistant", content="x", additional_kwargs=additional)])


def _agents_add(item: Any) -> None:
    import asyncio

    from contextfold.integrations.openai_agents import ContextfoldSession
    from contextfold.stores import InMemoryStore

    asyncio.run(ContextfoldSession("c", InMemoryStore()).add_items([item]))


def _agents_tail(limit: Any) -> None:
    from contextfold.integrations.openai_agents import pair_safe_tail

    pair_safe_tail([{"role": "user", "content": "hi"}], limit)


def _langchain_count(result: Any) -> None:
    from contextfold.integrations.langchain import LangChainCounter

    LangChainCounter(lambda messages: result)


def _langchain_to(item: Any) -> None:
    from contextfold.integrations.langchain import to_langchain

    to_langchain([item])


def _langchain_trim_role() -> None:
    from contextfold.integrations.langchain import trim_messages

    trim_messages([{"role": "alien", "content": "x"}], max_tokens=50)


def _pai_to(item: Any) -> None:
    from contextfold.integrations.pydantic_ai import to_model_messages

    to_model_messages([item])


CASES: list[tuple[str, str, Callable[[], None], type[Exception]]] = [
    ("llama_index", "put a dict", lambda: _llama_put({"role": "user"}), FormatError),
    ("llama_index", "unserializable kwargs", lambda: _llama_kwargs({"x": object()}), FormatError),
    (
        "llama_index",
        "a call's function is a string",
        lambda: _llama_kwargs({"tool_calls": [{"id": "a", "function": "f"}]}),
        FormatError,
    ),
    ("agents", "an item that is a string", lambda: _agents_add("hello"), FormatError),
    ("agents", "a limit that is a string", lambda: _agents_tail("3"), ConfigError),
    ("langchain_core", "a counter returning text", lambda: _langchain_count("3"), ConfigError),
    ("langchain_core", "to_langchain of a string", lambda: _langchain_to("hi"), ConfigError),
    ("langchain_core", "trim an unknown role", _langchain_trim_role, FormatError),
    ("pydantic_ai", "to_model_messages of a string", lambda: _pai_to("hi"), ConfigError),
]


@pytest.mark.parametrize(("framework", "case", "call", "error"), CASES, ids=[c[1] for c in CASES])
def test_bad_input_raises_a_typed_error(
    framework: str, case: str, call: Callable[[], None], error: type[Exception]
) -> None:
    pytest.importorskip(framework)
    with pytest.raises(error):
        call()
