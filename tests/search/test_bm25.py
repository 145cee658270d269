"""The incremental BM25 index: tokenization, ranking, key ranges, speed on real messages."""

from __future__ import annotations

import json

import pytest

from contextfold import ConfigError, Message, ToolCallPart
from contextfold.search import BM25Index, searchable_text, tokenize
from shared_data import require_data


def test_tokenize_keeps_ids_and_numbers_whole() -> None:
    terms = tokenize("Order ORD-1042 cost $119.00, card 4417, ana@example.com, v5.2.3")
    for term in ("ord-1042", "119.00", "4417", "ana@example.com", "v5.2.3"):
        assert term in terms
    assert "the" not in tokenize("the cat")


def test_tokenize_folds_inflections_and_splits_joined_words() -> None:
    assert tokenize("painted painting paints") == ["paint"] * 3
    assert tokenize("sunrise sunrises") == [tokenize("sunrise")[0]] * 2
    assert tokenize("state-of-the-art") == ["stat", "art"]
    assert tokenize("Überraschung café") == ["überraschung", "café"]


def test_ranking_prefers_the_rare_matching_term() -> None:
    index = BM25Index()
    index.add(0, "we talked about the weather today")
    index.add(1, "my order ORD-1042 has not arrived")
    index.add(2, "the weather is nice, the weather is warm")
    hits = index.search("where is order ORD-1042?", limit=5)
    assert hits[0][0] == 1
    assert [k for k, _ in index.search("weather", limit=5)] == [2, 0]
    assert index.search("nothing matches zebra") == []


def test_key_range_and_limit() -> None:
    index = BM25Index()
    for key in range(0, 100, 2):
        index.add(key, f"note {key} about apples")
    assert {k for k, _ in index.search("apples", limit=100, lo=10, hi=20)} == {10, 12, 14, 16, 18}
    assert len(index.search("apples", limit=3)) == 3
    assert index.search("apples", limit=0) == []
    assert len(index) == 50
    assert index.last_key == 98


def test_ties_go_to_the_newer_message() -> None:
    index = BM25Index()
    index.add(1, "same words")
    index.add(5, "same words")
    assert [k for k, _ in index.search("words")] == [5, 1]


def test_bad_arguments_raise_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        BM25Index(k1=-1)
    assert err.value.argument == "k1"
    with pytest.raises(ConfigError):
        BM25Index(b=2)
    index = BM25Index()
    index.add(3, "x")
    with pytest.raises(ConfigError) as err:
        index.add(3, "y")
    assert err.value.argument == "key"


def test_searchable_text_covers_tool_calls_and_results() -> None:
    call = Message.assistant(tool_calls=[ToolCallPart("c1", "lookup", '{"order": "ORD-7"}')])
    result = Message.tool_result("c1", "shipped to Lisbon", name="lookup")
    assert "ORD-7" in searchable_text(call)
    assert "lookup" in searchable_text(call)
    assert "Lisbon" in searchable_text(result)


def test_an_index_of_20000_real_messages_answers_their_questions() -> None:
    # Its speed is measured in bench/ (a timed assertion would fail on a loaded CI machine).
    data = require_data()
    samples = json.loads((data / "locomo" / "locomo10.json").read_text())
    texts = [
        turn["text"]
        for sample in samples
        for key, turns in sample["conversation"].items()
        if key.startswith("session_") and isinstance(turns, list)
        for turn in turns
    ]
    texts = (texts * 4)[:20_000]
    index = BM25Index()
    for key, text in enumerate(texts):
        index.add(key, text)
    assert len(index) == 20_000
    assert index.search(samples[0]["qa"][0]["question"], limit=5)
