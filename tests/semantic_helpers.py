"""Embedders for the semantic recall tests: a small deterministic one, and failing ones."""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Sequence

import pytest

#: Words that mean the same thing to the test embedder (each maps to its group's first).
SYNONYMS = (
    ("dog", "puppy", "hound", "pup"),
    ("car", "vehicle", "sedan", "automobile"),
    ("doctor", "physician", "clinic", "gp"),
    ("holiday", "vacation", "trip", "getaway"),
)
_CONCEPT = {word: group[0] for group in SYNONYMS for word in group}
_WORD = re.compile(r"[a-z]+")
DIM = 64


class ConceptEmbedder:
    """Bag of concepts, hashed into 64 dimensions: synonyms share a vector, nothing else does.

    Counts every text it embeds, so a test can tell what was embedded again.
    """

    name = "test-concepts-64"

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str], /) -> list[list[float]]:
        self.embedded.extend(texts)
        out = []
        for text in texts:
            vector = [0.0] * DIM
            for word in _WORD.findall(text.lower()):
                concept = _CONCEPT.get(word)
                if concept is not None:
                    slot = int(hashlib.sha256(concept.encode()).hexdigest(), 16) % DIM
                    vector[slot] += 1.0
            vector[-1] += 0.01  # no text is the zero vector
            norm = math.sqrt(sum(x * x for x in vector))
            out.append([x / norm for x in vector])
        return out


class BrokenEmbedder:
    """Fails in one of several ways."""

    name = "test-broken"

    def __init__(self, how: str) -> None:
        self.how = how

    def embed(self, texts: Sequence[str], /) -> list[list[float]]:
        if self.how == "raises":
            raise TimeoutError("the embedding server did not answer")
        if self.how == "too few":
            return [[1.0, 0.0]] * (len(texts) - 1)
        if self.how == "ragged":
            return [[1.0, 0.0], *[[1.0] for _ in texts[1:]]]
        if self.how == "nan":
            return [[math.nan, 1.0] for _ in texts]
        return [[] for _ in texts]  # "empty"


def require_wordllama() -> None:
    """Skip without wordllama, except in CI (which installs it): there it fails."""
    try:
        import wordllama  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("wordllama is not installed (pip install 'contextfold[semantic]')")
