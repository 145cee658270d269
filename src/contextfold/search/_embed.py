"""Semantic search over a conversation's log: the embedder protocol and a vector index.

Keyword search misses a paraphrase ("my new puppy" for a question about a dog).
:class:`~contextfold.Recall` can rank by meaning too, through any :class:`Embedder`: an
object with a ``name`` and an ``embed(texts)`` that returns one vector per text.
:class:`WordLlamaEmbedder` (the ``semantic`` extra) is a local one whose model ships inside
its package, so it runs offline.

The drivers keep the vectors: :func:`~contextfold.strategies.run` embeds the searched span
for the one call, a :class:`~contextfold.ConversationMemory` keeps a :class:`VectorIndex` of
its log and embeds only what was appended since its last search. Keyword and semantic ranks
are fused by :func:`fuse_ranks` (reciprocal ranks, the semantic ones weighted), before the
spread of :func:`~contextfold.search.spread_ranks`.

Vectors are compared by cosine similarity, with numpy (the ``semantic`` extra installs
it). Whatever an embedder returns is checked: a wrong number of vectors, vectors of
different lengths or values that are not finite numbers raise :class:`EmbedderError`, as
does any exception of the embedder itself, and :class:`~contextfold.Recall` then falls back
to the keyword search alone, with a note.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from contextfold.errors import ConfigError, ContextfoldError, MissingExtraError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Embedder",
    "EmbedderError",
    "VectorIndex",
    "WordLlamaEmbedder",
    "embed_checked",
    "fuse_ranks",
]

#: A text longer than this is embedded by its start (a static model averages its tokens:
#: a long tool output says little more for its tail, and costs time).
EMBED_CHARS = 2000
#: Rank ``r`` (from 0) scores ``1 / (_RANK_OFFSET + r + 1)`` (:func:`rank_score`): the first
#: few count about alike, so one strong match does not drown a pair of good neighbours.
_RANK_OFFSET = 10


class EmbedderError(ContextfoldError):
    """An embedder failed, or returned something that is not one vector per text."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors whose cosine similarity follows their meaning.

    ``name`` identifies the model and its settings: vectors made under two names are never
    compared. ``embed`` returns one vector per text, all of one length; it is called from
    one thread at a time per memory, but one embedder may serve many memories at once.
    """

    @property
    def name(self) -> str:
        """The model and its settings, e.g. ``"wordllama-l2_supercat-256"``."""
        ...

    def embed(self, texts: Sequence[str], /) -> Sequence[Sequence[float]]:
        """One vector per text, in order."""
        ...


def require_numpy() -> Any:
    """The numpy module.

    Raises:
        MissingExtraError: numpy is not installed (the ``semantic`` extra installs it).
    """
    try:
        import numpy
    except ImportError:  # pragma: no cover - the semantic extra installs it
        raise MissingExtraError("semantic recall", "semantic") from None
    return numpy


def embed_checked(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``embedder``'s vectors for ``texts`` as unit-length rows of a float32 matrix.

    Raises:
        EmbedderError: the embedder raised, or returned the wrong number of vectors,
            vectors of different lengths, or values that are not finite numbers.
    """
    xp = require_numpy()
    if not texts:
        empty: np.ndarray = xp.zeros((0, 0), dtype=xp.float32)
        return empty
    name = getattr(embedder, "name", type(embedder).__name__)
    try:
        raw = embedder.embed([text[:EMBED_CHARS] for text in texts])
    except Exception as exc:
        raise EmbedderError(f"embedder {name!r} failed: {type(exc).__name__}: {exc}") from exc
    try:
        rows = xp.asarray(raw, dtype=xp.float32)
    except (TypeError, ValueError) as exc:
        raise EmbedderError(f"embedder {name!r} returned vectors of different lengths") from exc
    if rows.ndim != 2 or rows.shape[0] != len(texts) or rows.shape[1] == 0:
        raise EmbedderError(
            f"embedder {name!r} returned {rows.shape[0] if rows.ndim else 0} vector(s) of shape "
            f"{rows.shape[1:]} for {len(texts)} text(s)"
        )
    if not xp.isfinite(rows).all():
        raise EmbedderError(f"embedder {name!r} returned values that are not finite numbers")
    norms = xp.linalg.norm(rows, axis=1, keepdims=True)
    unit: np.ndarray = rows / xp.where(norms > 0, norms, 1.0)
    return unit


class VectorIndex:
    """Unit vectors under increasing integer keys; the closest to a query within a key range.

    Append-only like :class:`~contextfold.search.BM25Index`. It holds one conversation's
    vectors for one embedder (its ``name``) in one matrix that grows by doubling, so adding
    a few vectors per build copies nothing most of the time. It is not thread-safe (a memory
    uses it under its own lock).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._keys: list[int] = []
        self._matrix: np.ndarray | None = None  # rows 0..len(keys)-1 are in use

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def width(self) -> int | None:
        """The length of the vectors held, or None before the first."""
        return None if self._matrix is None else int(self._matrix.shape[1])

    @property
    def last_key(self) -> int | None:
        """The newest key added, or None when empty."""
        return self._keys[-1] if self._keys else None

    def add(self, keys: Sequence[int], vectors: np.ndarray) -> None:
        """Add ``vectors`` (unit rows, as :func:`embed_checked` gives) under ``keys``.

        Raises:
            ValueError: the keys do not increase past the newest one, or do not match the
                rows in number or the index's vector length.
        """
        if len(keys) != len(vectors):
            raise ValueError(f"{len(keys)} keys for {len(vectors)} vectors")
        if not keys:
            return
        last = self.last_key
        rising = all(a < b for a, b in itertools.pairwise(keys))
        if not rising or (last is not None and keys[0] <= last):
            raise ValueError("keys must increase past the newest key in the index")
        xp = require_numpy()
        size, more = len(self._keys), len(keys)
        if self._matrix is None:
            self._matrix = xp.empty((max(more, 64), vectors.shape[1]), dtype=xp.float32)
        elif vectors.shape[1] != self._matrix.shape[1]:
            raise ValueError(
                f"vectors of length {vectors.shape[1]} in an index of {self._matrix.shape[1]}"
            )
        elif size + more > len(self._matrix):
            rows = max(2 * len(self._matrix), size + more)
            grown = xp.empty((rows, self._matrix.shape[1]), dtype=xp.float32)
            grown[:size] = self._matrix[:size]
            self._matrix = grown
        self._matrix[size : size + more] = vectors
        self._keys.extend(keys)

    def search(
        self, query: np.ndarray, *, limit: int, lo: int = 0, hi: int | None = None
    ) -> list[int]:
        """The keys in ``lo..hi-1`` of the ``limit`` vectors closest to ``query``, best first.

        Ties go to the newer key. A query of another length than the index's finds nothing.
        """
        xp = require_numpy()
        if self._matrix is None or limit <= 0 or query.shape != (self._matrix.shape[1],):
            return []
        start = bisect.bisect_left(self._keys, lo)
        stop = len(self._keys) if hi is None else bisect.bisect_left(self._keys, hi)
        if stop <= start:
            return []
        scores = self._matrix[start:stop] @ query
        take = min(limit, stop - start)
        best = xp.argpartition(-scores, take - 1)[:take] if take < len(scores) else xp.arange(take)
        order = sorted(best.tolist(), key=lambda i: (-float(scores[i]), -i))
        return [self._keys[start + i] for i in order]


def rank_score(rank: int) -> float:
    """What rank ``rank`` (from 0) of a ranking is worth when rankings are combined.

    One scale for :func:`fuse_ranks` and :func:`~contextfold.search.spread_ranks`.
    """
    return 1.0 / (_RANK_OFFSET + rank + 1)


def fuse_ranks(keyword: Sequence[int], semantic: Sequence[int], weight: float) -> list[int]:
    """One ranking from two: reciprocal ranks, the semantic ones times ``weight``.

    A position at rank ``r`` (from 0) of a list scores ``1 / (10 + r + 1)`` there (times
    ``weight`` in ``semantic``); its scores add up. Ties go to the keyword rank, then the
    later position.
    """
    score: dict[int, float] = {}
    first: dict[int, int] = {}
    for rank, position in enumerate(keyword):
        if position not in first:
            first[position] = rank
            score[position] = score.get(position, 0.0) + rank_score(rank)
    seen: set[int] = set()
    for rank, position in enumerate(semantic):
        if position not in seen:
            seen.add(position)
            score[position] = score.get(position, 0.0) + weight * rank_score(rank)
    never = len(keyword)
    return sorted(score, key=lambda p: (-score[p], first.get(p, never), -p))


class WordLlamaEmbedder:
    """WordLlama's static embedding model, loaded from its package: offline, no download.

    WordLlama (``pip install 'contextfold[semantic]'``) ships its ``l2_supercat`` model in
    its wheel at 256 dimensions; each text's vector is the average of its token embeddings
    (``dim`` of 64, 128 or 256 values: the model is trained so its leading values stand on
    their own), tens of thousands of short messages a second on one core. The model is
    loaded once per process and dimension, on first use, and shared by every embedder of
    that size.

    Raises:
        MissingExtraError: wordllama is not installed.
        ConfigError: ``dim`` is not one of the model's sizes.
    """

    _models: ClassVar[dict[int, Any]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, dim: int = 256) -> None:
        if isinstance(dim, bool) or dim not in (64, 128, 256):
            raise ConfigError(f"dim must be 64, 128 or 256, got {dim!r}", argument="dim")
        try:
            import wordllama  # type: ignore[import-untyped]  # noqa: F401
        except ImportError:
            raise MissingExtraError("WordLlamaEmbedder", "semantic") from None
        self.dim = dim

    @property
    def name(self) -> str:
        """``"wordllama-l2_supercat-<dim>"``."""
        return f"wordllama-l2_supercat-{self.dim}"

    def __repr__(self) -> str:
        return f"WordLlamaEmbedder(dim={self.dim})"

    def _model(self) -> Any:
        with self._lock:
            model = self._models.get(self.dim)
            if model is None:
                import wordllama
                from wordllama import WordLlama

                # The package holds the weights and the tokenizer; pointed at its own
                # folder it never reaches for the network.
                model = WordLlama.load(
                    cache_dir=Path(wordllama.__file__).parent,
                    disable_download=True,
                    dim=256,
                    trunc_dim=None if self.dim == 256 else self.dim,
                )
                self._models[self.dim] = model
        return model

    def embed(self, texts: Sequence[str], /) -> Sequence[Sequence[float]]:
        """One vector per text (unit length)."""
        if not texts:
            return []
        vectors: Sequence[Sequence[float]] = self._model().embed(list(texts), norm=True)
        return vectors
