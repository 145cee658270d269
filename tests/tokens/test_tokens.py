from __future__ import annotations

import sys
from collections.abc import Hashable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import tiktoken
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace

from contextfold.errors import ContextfoldError, MissingExtraError
from contextfold.messages import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.strategies.run import run
from contextfold.strategies.sliding import SlidingWindow
from contextfold.tokens import (
    ApproxCounter,
    BaseCounter,
    CalibratedCounter,
    HuggingFaceCounter,
    TiktokenCounter,
    TokenCounter,
    reported_input_tokens,
)

# -- fixtures: small offline tokenizers -----------------------------------------------------

PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def tiny_encoding(name: str = "tiny_bytes") -> tiktoken.Encoding:
    ranks = {bytes([i]): i for i in range(256)}
    ranks[b"he"] = 256
    ranks[b"ll"] = 257
    return tiktoken.Encoding(name, pat_str=PAT, mergeable_ranks=ranks, special_tokens={})


def tiny_tokenizer(words: tuple[str, ...] = ("hello", "world")) -> Tokenizer:
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    return tok


class Recording(BaseCounter):
    """One token per character; records every text it is asked to count."""

    def __init__(self, **overheads: int) -> None:
        self.calls: list[str] = []
        super().__init__(**overheads)

    def _config_key(self) -> Hashable:
        return "recording"

    def count_text(self, text: str, /) -> int:
        self.calls.append(text)
        return len(text)


# -- ApproxCounter and BaseCounter accounting -----------------------------------------------


def test_approx_counts_ceil_of_chars() -> None:
    c = ApproxCounter()
    assert c.count_text("") == 0
    assert c.count_text("abcd") == 1
    assert c.count_text("abcde") == 2
    assert ApproxCounter(2.0).count_text("abcde") == 3
    with pytest.raises(ValueError):
        ApproxCounter(0)


def test_counters_satisfy_protocol() -> None:
    for counter in (
        ApproxCounter(),
        TiktokenCounter(encoding=tiny_encoding()),
        HuggingFaceCounter(tiny_tokenizer()),
        CalibratedCounter(ApproxCounter()),
    ):
        assert isinstance(counter, TokenCounter)


def test_message_accounting_per_part() -> None:
    c = Recording(message_overhead=3, tool_call_overhead=8, tool_result_overhead=4, image_tokens=80)
    assert c.count_message(Message.user("abcd")) == 3 + 4
    assert c.count_message(Message.user("ab", name="bob")) == 3 + 2 + 3 + 1
    call = Message.assistant("x", tool_calls=[ToolCallPart("c", "grep", '{"q":1}')])
    assert c.count_message(call) == 3 + 1 + (4 + 7 + 8)
    assert c.count_message(Message.tool_result("c", "12345")) == 3 + 5 + 4
    parts_result = Message.tool_result("c", [TextPart("abc"), ImagePart(url="u")])
    assert c.count_message(parts_result) == 3 + (3 + 80) + 4
    assert c.count_message(Message.user([ImagePart(data="AAAA", mime="image/png")])) == 3 + 80
    thinking = Message("assistant", (ThinkingPart("think", signature="sig" * 50),))
    assert c.count_message(thinking) == 3 + 5  # the signature is not sent as text
    redacted = Message("assistant", (ThinkingPart(redacted=True, data="opaque"),))
    assert c.count_message(redacted) == 3 + 6
    anthropic = Message.user([ToolResultPart("a", "xy"), ToolResultPart("b", "z")])
    assert c.count_message(anthropic) == 3 + (2 + 4) + (1 + 4)


def test_count_messages_is_additive_and_tools_counted() -> None:
    c = ApproxCounter()
    msgs = [Message.system("s" * 10), Message.user("u" * 7), Message.assistant("a")]
    assert c.count_messages(msgs) == sum(c.count_message(m) for m in msgs)
    assert c.count_tools([]) == 0
    tools = [{"name": "f", "parameters": {"type": "object"}}]
    assert c.count_tools(tools) > c.tool_call_overhead
    assert c.count_tools(tools * 2) == 2 * c.count_tools(tools)


def test_each_message_counted_once() -> None:
    c = Recording()
    msgs = [Message.user(f"message {i}") for i in range(5)]
    c.count_messages(msgs)
    c.count_messages(msgs)
    c.count_message(msgs[0])
    assert c.calls == [m.text for m in msgs]
    other = Recording()  # same configuration: shares the cache on the messages
    other.count_messages(msgs)
    assert other.calls == []
    different = Recording(message_overhead=7)
    assert different.count_message(msgs[0]) == c.count_message(msgs[0]) + 4
    assert different.calls == [msgs[0].text]


def test_cache_survives_strategy_runs() -> None:
    c = Recording()
    history = [Message.system("s")] + [Message.user(f"q{i}") for i in range(50)]
    run(SlidingWindow(60), history, counter=c)
    first = len(c.calls)
    run(SlidingWindow(60), history, counter=c)
    run(SlidingWindow(60), history, counter=c)
    assert len(c.calls) == first


# -- TiktokenCounter ------------------------------------------------------------------------


def test_tiktoken_counter_with_offline_encoding() -> None:
    c = TiktokenCounter(encoding=tiny_encoding())
    assert c.count_text("hello") == 3  # he + ll + o
    assert c.count_text("") == 0
    assert c.count_text("<|endoftext|>") == len(b"<|endoftext|>")  # plain text: a byte each
    assert c.count_message(Message.user("hello")) == 3 + 3
    assert c.cache_key != TiktokenCounter(encoding=tiny_encoding("other")).cache_key
    assert c.cache_key == TiktokenCounter(encoding=tiny_encoding()).cache_key
    assert "tiny_bytes" in repr(c)


def test_tiktoken_counter_bad_arguments() -> None:
    with pytest.raises(ContextfoldError, match="either"):
        TiktokenCounter("gpt-4o", encoding="o200k_base")
    with pytest.raises(ContextfoldError, match="does not know"):
        TiktokenCounter("no-such-model-anywhere")
    with pytest.raises(ContextfoldError, match="Encoding"):
        TiktokenCounter(encoding=42)


def test_tiktoken_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(MissingExtraError, match=r"contextfold\[tiktoken\]") as err:
        TiktokenCounter(encoding="o200k_base")
    assert isinstance(err.value, ImportError)


# -- HuggingFaceCounter ---------------------------------------------------------------------


def test_huggingface_counter_word_level() -> None:
    c = HuggingFaceCounter(tiny_tokenizer())
    assert c.count_text("hello world") == 2
    assert c.count_text("hello brave new world") == 4  # unknown words are one token each
    assert c.count_text("") == 0
    assert c.count_message(Message.user("hello, world")) == 3 + 3
    same = HuggingFaceCounter(tiny_tokenizer())
    assert same.cache_key == c.cache_key
    other = HuggingFaceCounter(tiny_tokenizer(("hello", "there")))
    assert other.cache_key != c.cache_key
    assert HuggingFaceCounter(tiny_tokenizer(), name="mine").cache_key != c.cache_key


def test_huggingface_from_file(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    tiny_tokenizer().save(str(path))
    c = HuggingFaceCounter.from_file(path)
    assert c.count_text("hello world hello") == 3
    assert c.cache_key == HuggingFaceCounter(tiny_tokenizer()).cache_key
    with pytest.raises(ContextfoldError, match="cannot load"):
        HuggingFaceCounter.from_file(tmp_path / "missing.json")


def test_huggingface_rejects_non_tokenizer_and_missing_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ContextfoldError, match="Tokenizer"):
        HuggingFaceCounter(object())
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(MissingExtraError, match="huggingface"):
        HuggingFaceCounter(tiny_tokenizer())


# -- CalibratedCounter ----------------------------------------------------------------------


def convo() -> list[Message]:
    return [Message.system("You help." * 5), Message.user("Where is my order 48213?" * 3)]


def test_calibration_learns_and_scales() -> None:
    base = ApproxCounter()
    c = CalibratedCounter(base, model="m1")
    msgs = convo()
    estimate = base.count_messages(msgs)
    assert c.ratio() == 1.0
    assert c.count_messages(msgs) == estimate
    assert c.observe(msgs, round(estimate * 1.25)) == pytest.approx(1.25, rel=0.02)
    assert c.observations() == 1
    probe = Message.user("x" * 400)
    assert c.count_message(probe) == pytest.approx(base.count_message(probe) * 1.25, abs=1)
    assert c.count_messages(msgs) == sum(c.count_message(m) for m in msgs)
    assert c.count_text("x" * 40) == 13  # ceil(10 * 1.25)


def test_calibration_is_per_model_and_shared_by_views() -> None:
    c = CalibratedCounter(ApproxCounter(), model="a")
    msgs = convo()
    est = ApproxCounter().count_messages(msgs)
    c.observe(msgs, est * 3 // 2, model="b")
    assert c.ratio() == 1.0
    assert c.ratio("b") == pytest.approx(1.5, rel=0.02)
    view = c.for_model("b")
    assert view.ratio() == c.ratio("b")
    view.observe(msgs, est * 3 // 2)
    assert c.observations("b") == 2


def test_calibration_ignores_bad_reports_and_clamps() -> None:
    c = CalibratedCounter(ApproxCounter(), max_ratio=1.5, reject_factor=4)
    msgs = convo()
    est = ApproxCounter().count_messages(msgs)
    assert c.observe(msgs, 0) is None
    assert c.observe(msgs, -5) is None
    assert c.observe(msgs, est * 10) is None  # absurd: beyond the reject factor
    assert c.observe(msgs, est // 10) is None
    assert c.observe([], 100) is None  # nothing to compare with
    assert c.observations() == 0
    assert c.observe(msgs, est * 3) == 1.5  # accepted, clamped
    assert c.ratio() == 1.5


def test_calibration_window_follows_recent_reports() -> None:
    c = CalibratedCounter(ApproxCounter(), window=2)
    msgs = convo()
    est = ApproxCounter().count_messages(msgs)
    c.observe(msgs, est * 2)
    c.observe(msgs, est)
    c.observe(msgs, est)
    assert c.ratio() == 1.0


def test_calibration_includes_tools_in_estimate() -> None:
    base = ApproxCounter()
    tools = [{"name": "lookup", "description": "find things " * 20}]
    msgs = convo()
    est = base.count_messages(msgs) + base.count_tools(tools)
    c = CalibratedCounter(base)
    assert c.observe(msgs, est, tools=tools) == 1.0
    assert c.count_tools(tools) == base.count_tools(tools)


def test_calibration_keeps_base_cache_and_changes_key() -> None:
    base = Recording()
    c = CalibratedCounter(base)
    msgs = convo()
    c.count_messages(msgs)
    key = c.cache_key
    c.observe(msgs, c.count_messages(msgs) * 2)
    c.count_messages(msgs)
    c.count_message(msgs[0])
    assert base.calls == [m.text for m in msgs]  # counted once each, then cached
    assert c.cache_key != key


def test_calibrated_counter_in_a_window() -> None:
    history = [Message.system("s")] + [Message.user("word " * 20) for _ in range(40)]
    c = CalibratedCounter(ApproxCounter())
    before = run(SlidingWindow(500), history, counter=c)
    c.observe(history[:5], ApproxCounter().count_messages(history[:5]) * 2)
    after = run(SlidingWindow(500), history, counter=c)
    assert len(after.messages) < len(before.messages)
    assert after.tokens <= 500


def test_calibrated_counter_bad_configuration() -> None:
    with pytest.raises(ContextfoldError):
        CalibratedCounter(ApproxCounter(), min_ratio=1.5)
    with pytest.raises(ContextfoldError):
        CalibratedCounter(ApproxCounter(), reject_factor=1)
    with pytest.raises(ContextfoldError):
        CalibratedCounter(ApproxCounter(), window=0)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 120, "completion_tokens": 5}, 120),
        (SimpleNamespace(prompt_tokens=77), 77),
        ({"input_tokens": 50, "output_tokens": 3}, 50),
        (
            SimpleNamespace(
                input_tokens=10, cache_creation_input_tokens=200, cache_read_input_tokens=30
            ),
            240,
        ),
        ({"input_tokens": 10, "cache_read_input_tokens": None}, 10),
        ({"completion_tokens": 4}, None),
        ({"prompt_tokens": True}, None),
        (None, None),
    ],
)
def test_reported_input_tokens(usage: Any, expected: int | None) -> None:
    assert reported_input_tokens(usage) == expected
