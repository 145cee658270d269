"""The LangChain message conversion (both directions, lossless) and the pair-safe trim."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.errors import BudgetError, ConfigError, FormatError
from contextfold.messages import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.tokens import ApproxCounter
from contextfold.turns import validate

if os.environ.get("CI"):  # in CI the extra is installed: a missing one must fail, not skip
    import langchain  # noqa: F401
else:
    pytest.importorskip("langchain")

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages import trim_messages as lc_trim_messages
from langchain_core.messages.utils import count_tokens_approximately

from contextfold.integrations.langchain import from_langchain, to_langchain, trim_messages

# -- conversion -----------------------------------------------------------------------------


def sample_history() -> list[BaseMessage]:
    """Every shape the converter models, and fields it only carries along."""
    return [
        SystemMessage("Be brief."),
        SystemMessage("Use the tools.", additional_kwargs={"__openai_role__": "developer"}),
        HumanMessage("Where is A1?", id="h1", name="dana"),
        HumanMessage(
            [
                {"type": "text", "text": "and this label"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://x.test/a.png", "detail": "low"},
                },
                {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
                {"type": "image", "url": "https://x.test/b.png", "id": "blk"},
                "a bare string item",
            ],
            id="h2",
        ),
        AIMessage(
            [
                {"type": "thinking", "thinking": "check A1 and A2", "signature": "sig=="},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "reasoning", "reasoning": "two lookups", "id": "rs_1"},
                {"type": "text", "text": "Looking.", "annotations": []},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}},
            ],
            tool_calls=[
                {"name": "lookup", "args": {"order": "A1"}, "id": "c1"},
                {"name": "lookup", "args": {"order": "A2", "n": [1, 2.5, None]}, "id": "c2"},
            ],
            id="a1",
            response_metadata={"model_name": "m", "finish_reason": "tool_calls"},
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        ),
        ToolMessage("A1 shipped", tool_call_id="c1", id="t1", artifact={"rows": 1}),
        ToolMessage(
            [{"type": "text", "text": "A2 missing"}],
            tool_call_id="c2",
            id="t2",
            status="error",
            name="lookup",
        ),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": None}], id="a2"),
        ToolMessage("empty", tool_call_id="", id="t3"),
        AIMessage([], id="a3", invalid_tool_calls=[{"name": "x", "args": "{", "id": "bad"}]),
        AIMessageChunk("partial", id="a4"),
        HumanMessage("no id"),
    ]


def test_langchain_messages_round_trip_exactly() -> None:
    history = sample_history()
    ours = from_langchain(history)
    back = to_langchain(ours)
    assert back == history
    assert [type(m) for m in back] == [type(m) for m in history]


def test_conversion_models_what_strategies_need() -> None:
    ours = from_langchain(sample_history())
    assert [m.role for m in ours[:3]] == ["system", "developer", "user"]
    assert ours[2].id == "h1"
    assert ours[2].name == "dana"
    image = [p for p in ours[3].parts if isinstance(p, ImagePart)]
    assert [(p.url, p.data, p.mime, p.detail) for p in image] == [
        ("https://x.test/a.png", None, None, "low"),
        (None, "iVBORw0KGgo=", "image/png", None),
        ("https://x.test/b.png", None, None, None),
    ]
    ai = ours[4]
    thinking = [p for p in ai.parts if isinstance(p, ThinkingPart)]
    assert [(p.text, p.signature, p.redacted) for p in thinking] == [
        ("check A1 and A2", "sig==", False),
        ("", None, True),
        ("two lookups", None, False),
    ]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in ai.tool_calls] == [
        ("c1", "lookup", {"order": "A1"}),
        ("c2", "lookup", {"order": "A2", "n": [1, 2.5, None]}),
    ]
    error = ours[6].parts[0]
    assert isinstance(error, ToolResultPart)
    assert (error.call_id, error.is_error, error.name, error.text) == (
        "c2",
        True,
        "lookup",
        "A2 missing",
    )
    validate(ours[:7])  # the calls and their results pair up
    # A message without a LangChain id gets the same id on every conversion.
    assert from_langchain(sample_history())[-1].id == ours[-1].id


def test_a_rewritten_part_is_written_from_its_new_content() -> None:
    ai = from_langchain([AIMessage([{"type": "text", "text": "long answer", "id": "b"}])])[0]
    edited = ai.replace(parts=(TextPart("short", extra=ai.parts[0].extra),))
    assert to_langchain([edited])[0].content == [{"type": "text", "text": "short"}]


def test_anthropic_style_tool_results_become_tool_messages() -> None:
    m = Message.user([ToolResultPart("c1", "done"), TextPart("next?")], id="u")
    out = to_langchain([m])
    assert [type(x) for x in out] == [ToolMessage, HumanMessage]
    assert out[0].tool_call_id == "c1"  # type: ignore[attr-defined]
    assert out[1].content == "next?"


def test_from_langchain_rejects_what_is_not_a_message() -> None:
    with pytest.raises(FormatError):
        from_langchain([{"role": "user", "content": "hi"}])  # type: ignore[list-item]
    # LangChain validates content on construction; a message built around it is refused.
    bad = HumanMessage.model_construct(content=[{"type": "text", "text": "x"}, 3])
    with pytest.raises(FormatError):
        from_langchain([bad])


_text = st.text(max_size=20)
_ids = st.text(alphabet="abcdef0123456789", min_size=1, max_size=8)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _text),
    st.builds(lambda t, i: {"type": "text", "text": t, "id": i}, _text, _ids),
    st.builds(lambda t: {"type": "reasoning", "reasoning": t}, _text),
    st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, _text, _text),
    st.builds(lambda u: {"type": "image", "url": "https://x.test/" + u}, _ids),
    st.builds(lambda d: {"type": "image_url", "image_url": {"url": d, "detail": "auto"}}, _ids),
    st.builds(lambda k: {"type": "custom_block", "k": k}, _json),
    _text,
)
_content = st.one_of(_text, st.lists(_blocks, max_size=4))


@st.composite
def lc_histories(draw: st.DrawFn) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    if draw(st.booleans()):
        out.append(SystemMessage(draw(_text)))
    for turn in range(draw(st.integers(0, 3))):
        out.append(HumanMessage(draw(_content), id=f"h{turn}"))
        calls = [
            {
                "name": draw(_ids),
                "args": draw(st.dictionaries(_ids, _json, max_size=2)),
                "id": f"c{turn}{n}",
            }
            for n in range(draw(st.integers(0, 2)))
        ]
        meta = draw(st.dictionaries(_ids, _json, max_size=2))
        out.append(
            AIMessage(draw(_content), tool_calls=calls, response_metadata=meta, id=f"a{turn}")
        )
        for n, call in enumerate(calls):
            status = draw(st.sampled_from(["success", "error"]))
            out.append(
                ToolMessage(
                    draw(_content), tool_call_id=call["id"], status=status, id=f"t{turn}{n}"
                )
            )
    return out


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(lc_histories())
def test_property_langchain_round_trip(history: list[BaseMessage]) -> None:
    assert to_langchain(from_langchain(history)) == history


_parts = st.one_of(
    st.builds(TextPart, _text),
    st.builds(ThinkingPart, _text),
    st.builds(lambda t, s: ThinkingPart(t, signature=s), _text, _text),
    st.builds(lambda d: ThinkingPart(redacted=True, data=d), _text),
    st.builds(lambda u: ImagePart(url="https://x.test/" + u), _ids),
    st.builds(lambda d: ImagePart(data=d, mime="image/png"), _ids),
    st.builds(lambda u: ImagePart(url=u, detail="high"), _ids),
)


def canonical(args: dict[str, Any]) -> str:
    """Arguments in the form LangChain gives them back (it holds them parsed, as JSON values)."""
    return json.dumps(args, ensure_ascii=False)


@st.composite
def our_histories(draw: st.DrawFn) -> list[Message]:
    out = [Message.system(draw(_text), id="s")] if draw(st.booleans()) else []
    for turn in range(draw(st.integers(0, 3))):
        out.append(
            Message.user(
                draw(st.lists(_parts, max_size=3)), id=f"u{turn}", name=draw(st.none() | _ids)
            )
        )
        calls = [
            ToolCallPart(
                f"c{turn}{n}",
                draw(_ids),
                canonical(draw(st.dictionaries(_ids, _json, max_size=2))),
            )
            for n in range(draw(st.integers(0, 2)))
        ]
        out.append(
            Message.assistant(draw(st.lists(_parts, max_size=3)), tool_calls=calls, id=f"a{turn}")
        )
        for n, call in enumerate(calls):
            body = draw(
                st.one_of(_text, st.lists(st.builds(TextPart, _text), max_size=2).map(tuple))
            )
            out.append(
                Message.tool_result(call.id, body, is_error=draw(st.booleans()), id=f"t{turn}{n}")
            )
    return out


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(our_histories())
def test_property_contextfold_round_trip(history: list[Message]) -> None:
    assert from_langchain(to_langchain(history)) == history


# -- trim_messages --------------------------------------------------------------------------


def tool_exchange() -> list[BaseMessage]:
    """The langchain#33245 shape: a long tool exchange right before the final answer."""
    return [
        SystemMessage("sys", id="s"),
        HumanMessage("look up A1 and A2", id="h"),
        AIMessage(
            "x" * 400,
            tool_calls=[
                {"name": "lookup", "args": {"order": "A1"}, "id": "c1"},
                {"name": "lookup", "args": {"order": "A2"}, "id": "c2"},
            ],
            id="a",
        ),
        ToolMessage("A1 shipped", tool_call_id="c1", id="t1"),
        ToolMessage("A2 shipped", tool_call_id="c2", id="t2"),
        AIMessage("Both shipped.", id="b"),
    ]


def test_langchain_trim_orphans_a_tool_message_and_ours_does_not() -> None:
    history = tool_exchange()
    theirs = lc_trim_messages(
        history, max_tokens=60, token_counter=count_tokens_approximately, include_system=True
    )
    assert any(isinstance(m, ToolMessage) for m in theirs)
    assert not any(isinstance(m, AIMessage) and m.tool_calls for m in theirs)  # the bug

    ours = trim_messages(history, max_tokens=60, token_counter="approximate")
    validate(from_langchain(ours))
    assert ours[0] is history[0]  # the caller's own objects come back
    assert all(any(m is h for h in history) for m in ours)


def test_trim_keeps_everything_that_fits_and_the_newest_turns_otherwise() -> None:
    history = tool_exchange()
    assert trim_messages(history, max_tokens=10_000) == history
    history.append(HumanMessage("thanks", id="h2"))
    kept = trim_messages(history, max_tokens=40)
    assert [m.id for m in kept] == ["s", "h2"]
    assert [m.id for m in trim_messages(history, max_tokens=40, include_system=False)] == ["h2"]
    assert trim_messages(history, max_tokens=10_000, include_system=False) == history


def test_trim_accepts_message_likes_and_every_counter_kind() -> None:
    likes = [("system", "sys"), ("human", "hi"), {"role": "assistant", "content": "hello"}]
    for counter in (None, ApproxCounter(), "approximate", count_tokens_approximately):
        out = trim_messages(likes, max_tokens=500, token_counter=counter)
        assert [type(m) for m in out] == [SystemMessage, HumanMessage, AIMessage]


def test_trim_refuses_what_it_cannot_do() -> None:
    with pytest.raises(ConfigError) as info:
        trim_messages(tool_exchange(), max_tokens=100, strategy="first")
    assert info.value.argument == "strategy"
    with pytest.raises(ConfigError) as info:
        trim_messages(tool_exchange(), max_tokens=100, token_counter=42)
    assert info.value.argument == "token_counter"
    with pytest.raises(BudgetError):
        trim_messages(tool_exchange(), max_tokens=3)


def test_without_the_extra_the_import_names_it() -> None:
    code = textwrap.dedent(
        """
        import sys

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("langchain", "langchain_core", "langgraph"):
                    raise ImportError("blocked for the test: " + name)
                return None

        sys.meta_path.insert(0, Blocker())
        import contextfold.integrations  # the package itself needs no framework
        from contextfold.errors import MissingExtraError
        try:
            import contextfold.integrations.langchain
        except MissingExtraError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert "pip install 'contextfold[langchain]'" in out.stdout, out.stderr


def test_parallel_calls_without_ids_get_distinct_stable_ids() -> None:
    calls = [{"name": "lookup", "args": {"order": o}, "id": None} for o in ("A1", "A2")]
    ai = AIMessage("", tool_calls=calls, id="a")
    first, again = from_langchain([ai])[0], from_langchain([ai])[0]
    ids = [c.id for c in first.tool_calls]
    assert len(set(ids)) == 2
    assert ids == [c.id for c in again.tool_calls]
    assert to_langchain([first]) == [ai]


@pytest.mark.parametrize("arguments", ["[1, 2]", "null", "123", '"text"', "not json"])
def test_arguments_that_are_not_a_json_object_survive_the_round_trip(arguments: str) -> None:
    ours = [
        Message.user("go"),
        Message.assistant(None, tool_calls=[ToolCallPart("c1", "f", arguments)]),
        Message.tool_result("c1", "ok"),
    ]
    lc = to_langchain(ours)
    assert lc[1].tool_calls[0]["args"] == {"__arguments__": arguments}  # not an empty dict
    assert from_langchain(lc)[1].tool_calls[0].arguments == arguments


def test_an_inline_image_with_a_detail_keeps_its_data() -> None:
    image = ImagePart(data="QUJD", mime="image/jpeg", detail="high")
    lc = to_langchain([Message.user([TextPart("look"), image])])
    block = lc[0].content[1]
    assert block == {
        "type": "image_url",
        "image_url": {"url": "data:image/jpeg;base64,QUJD", "detail": "high"},
    }
