"""Search over a conversation's log: the BM25 index the in-memory and Redis stores keep.

:class:`BM25Index` is pure Python and incremental (documents are only ever added, under
increasing keys), :func:`tokenize` is the tokenization it uses, and :func:`searchable_text`
is the text of a message every search backend indexes. :class:`~contextfold.Recall` answers
its searches with these when a history is given directly (``run()``/``arun()``); a
:class:`~contextfold.ConversationMemory` asks its store instead. Both rank the matches
with :func:`spread_ranks`, which lets a message inherit part of its neighbours' rank.

Semantic search is optional: an :class:`Embedder` (:class:`WordLlamaEmbedder` runs offline,
with the ``semantic`` extra) ranks the messages by meaning, kept in a :class:`VectorIndex`,
and :func:`fuse_ranks` merges that ranking with the keyword one.
"""

from __future__ import annotations

from contextfold.search._bm25 import BM25Index, searchable_text, tokenize
from contextfold.search._embed import (
    Embedder,
    EmbedderError,
    VectorIndex,
    WordLlamaEmbedder,
    embed_checked,
    fuse_ranks,
)
from contextfold.search._history import hit_around, rank_matches, search_messages, spread_ranks

__all__ = [
    "BM25Index",
    "Embedder",
    "EmbedderError",
    "VectorIndex",
    "WordLlamaEmbedder",
    "embed_checked",
    "fuse_ranks",
    "hit_around",
    "rank_matches",
    "search_messages",
    "searchable_text",
    "spread_ranks",
    "tokenize",
]
