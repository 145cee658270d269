"""Semantic search parts: checked embeddings, the vector index, rank fusion, WordLlama."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold import ConfigError
from contextfold.search import (
    Embedder,
    EmbedderError,
    VectorIndex,
    WordLlamaEmbedder,
    embed_checked,
    fuse_ranks,
)
from semantic_helpers import BrokenEmbedder, ConceptEmbedder, require_wordllama


def test_checked_vectors_are_unit_rows_in_order() -> None:
    rows = embed_checked(ConceptEmbedder(), ["my puppy", "a sedan", "the hound"])
    assert rows.shape == (3, 64)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)
    assert rows[0] @ rows[2] > 0.99  # puppy and hound are one concept
    assert rows[0] @ rows[1] < 0.1
    assert embed_checked(ConceptEmbedder(), []).shape == (0, 0)


def test_long_texts_are_embedded_by_their_start() -> None:
    embedder = ConceptEmbedder()
    embed_checked(embedder, ["x" * 5000])
    assert len(embedder.embedded[0]) == 2000


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("raises", "TimeoutError: the embedding server did not answer"),
        ("too few", "for 3 text(s)"),
        ("ragged", "different lengths"),
        ("nan", "not finite"),
        ("empty", "shape (0,)"),
    ],
)
def test_a_failing_or_malformed_embedder_is_an_embedder_error(how: str, says: str) -> None:
    with pytest.raises(EmbedderError, match="test-broken") as err:
        embed_checked(BrokenEmbedder(how), ["a", "b", "c"])
    assert says in str(err.value)


def test_the_protocol_is_checked_at_runtime() -> None:
    assert isinstance(ConceptEmbedder(), Embedder)
    assert not isinstance(object(), Embedder)


def test_index_finds_the_closest_inside_the_key_range() -> None:
    embedder = ConceptEmbedder()
    index = VectorIndex(embedder.name)
    index.add([2, 4, 6, 8], embed_checked(embedder, ["my dog", "a car", "the pup", "a gp"]))
    query = embed_checked(embedder, ["puppy"])[0]
    assert index.search(query, limit=2) == [6, 2]  # equal scores: the newer first
    assert index.search(query, limit=2, lo=3, hi=6) == [4]
    assert index.search(query, limit=5, lo=9) == []
    assert index.search(np.ones(3, dtype=np.float32), limit=2) == []  # another length
    assert len(index) == 4
    assert index.last_key == 8


def test_index_rejects_keys_out_of_order_and_other_lengths() -> None:
    index = VectorIndex("n")
    index.add([5], np.ones((1, 4), dtype=np.float32) / 2)
    with pytest.raises(ValueError, match="increase"):
        index.add([5], np.ones((1, 4), dtype=np.float32) / 2)
    with pytest.raises(ValueError, match="increase"):
        index.add([7, 6], np.ones((2, 4), dtype=np.float32) / 2)
    with pytest.raises(ValueError, match="length 3"):
        index.add([9], np.ones((1, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="2 keys for 1 vectors"):
        index.add([9, 10], np.ones((1, 4), dtype=np.float32))


@given(
    st.lists(
        st.lists(st.floats(-1, 1, allow_nan=False), min_size=3, max_size=3), min_size=1, max_size=40
    ),
    st.lists(st.floats(-1, 1, allow_nan=False), min_size=3, max_size=3),
    st.integers(1, 10),
    st.integers(0, 45),
)
def test_index_search_is_the_brute_force_answer(
    rows: list[list[float]], query: list[float], limit: int, lo: int
) -> None:
    matrix = np.asarray(rows, dtype=np.float32)
    q = np.asarray(query, dtype=np.float32)
    index = VectorIndex("n")
    keys = [3 * i for i in range(len(rows))]
    half = len(rows) // 2
    index.add(keys[:half], matrix[:half])  # two blocks: the matrix is joined on search
    index.add(keys[half:], matrix[half:])
    found = index.search(q, limit=limit, lo=lo)
    scores = {k: float(matrix[i] @ q) for i, k in enumerate(keys) if k >= lo}
    expected = sorted(scores, key=lambda k: (-scores[k], -k))[:limit]
    assert [round(scores[k], 4) for k in found] == [round(scores[k], 4) for k in expected]
    assert len(set(found)) == len(found)


def test_an_index_grown_one_vector_at_a_time_answers_as_one_built_at_once() -> None:
    rng = np.random.default_rng(7)
    rows = rng.normal(size=(300, 8)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    grown, whole = VectorIndex("n"), VectorIndex("n")
    for key in range(300):  # past the first capacity of 64 rows, three times
        grown.add([key], rows[key : key + 1])
    whole.add(list(range(300)), rows)
    for q in rows[:20]:
        assert grown.search(q, limit=7, lo=30, hi=250) == whole.search(q, limit=7, lo=30, hi=250)


def test_fusion_adds_reciprocal_ranks() -> None:
    assert fuse_ranks([1, 2, 3], [], 0.5) == [1, 2, 3]
    # 3 is third by keywords and first by meaning: it passes 2 (second by keywords alone).
    assert fuse_ranks([1, 2, 3], [3, 9], 0.5)[:2] == [3, 1]
    assert fuse_ranks([1, 2], [2, 1], 1.0) == [1, 2]  # equal scores: the keyword rank
    assert set(fuse_ranks([1], [7, 8], 0.0)) == {1, 7, 8}


def test_wordllama_ranks_a_paraphrase_first() -> None:
    require_wordllama()
    embedder = WordLlamaEmbedder()
    assert embedder.name == "wordllama-l2_supercat-256"
    texts = [
        "The quarterly budget meeting moved to Thursday.",
        "We adopted a little puppy from the animal shelter.",
        "My laptop battery died during the flight.",
    ]
    rows = embed_checked(embedder, ["Tell me about your new dog", *texts])
    index = VectorIndex(embedder.name)
    index.add([1, 2, 3], rows[1:])
    assert index.search(rows[0], limit=1) == [2]
    assert np.array_equal(
        rows, embed_checked(WordLlamaEmbedder(), ["Tell me about your new dog", *texts])
    )
    assert embed_checked(WordLlamaEmbedder(64), texts).shape == (3, 64)


@pytest.mark.parametrize("dim", [0, 100, 1024, True, "256"])
def test_wordllama_refuses_other_sizes(dim: object) -> None:
    require_wordllama()
    with pytest.raises(ConfigError) as err:
        WordLlamaEmbedder(dim)  # type: ignore[arg-type]
    assert err.value.argument == "dim"
