"""LlamaIndex's ``Memory`` with a ``VectorMemoryBlock``, on a local embedding model.

The peer row of ``bench/recall.py`` that retrieves by meaning: LlamaIndex keeps the newest
messages inside ``token_limit * chat_history_token_ratio``, flushes the older ones in
batches of ``token_flush_size`` tokens into the block, which embeds each batch as one node
and, asked with the newest messages, returns the ``similarity_top_k`` closest batches. The
embedding model is WordLlama's ``l2_supercat`` (256 dimensions), which its wheel ships, so
the row runs offline; LlamaIndex counts with our approximate counter (its ``tokenizer_fn``).

Configured as our ``Recall`` is: the chat history gets 70% of the budget and the retrieved
batches the rest (three of a tenth of the budget each), so both spend the same share on
what they bring back.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from contextfold import Message
from contextfold.search import WordLlamaEmbedder
from contextfold.tokens.approx import ApproxCounter

COUNTER = ApproxCounter()


def embedding() -> Any:
    """A LlamaIndex ``BaseEmbedding`` over contextfold's :class:`WordLlamaEmbedder`."""
    from llama_index.core.base.embeddings.base import BaseEmbedding

    model = WordLlamaEmbedder()

    class WordLlamaEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return [float(x) for x in model.embed([query])[0]]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._get_query_embedding(text)

    return WordLlamaEmbedding(model_name=model.name)


def text_store() -> Any:
    """LlamaIndex's in-memory ``SimpleVectorStore``, keeping each node's text as well.

    The block needs a store that returns the nodes it found; the simple store keeps only
    their vectors, so this one keeps the nodes beside them.
    """
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.vector_stores.simple import SimpleVectorStore

    class TextVectorStore(SimpleVectorStore):
        stores_text: bool = True
        _nodes: dict[str, Any] = PrivateAttr(default_factory=dict)

        def add(self, nodes: Sequence[Any], **kwargs: Any) -> list[str]:
            self._nodes.update((node.node_id, node) for node in nodes)
            return list(super().add(list(nodes), **kwargs))

        def query(self, query: Any, **kwargs: Any) -> Any:
            result = super().query(query, **kwargs)
            result.nodes = [self._nodes[i] for i in result.ids or []]
            return result

    return TextVectorStore()


def _tokens(text: str) -> list[int]:
    return [0] * COUNTER.count_text(text)


def _chat(message: Message) -> Any:
    from llama_index.core.base.llms.types import ChatMessage

    return ChatMessage(role=message.role, content=message.text)


async def _contexts(
    messages: Sequence[Message], budget: int, questions: Sequence[str]
) -> list[str]:
    from llama_index.core.memory import Memory
    from llama_index.core.memory.memory_blocks.vector import VectorMemoryBlock

    block = VectorMemoryBlock(
        vector_store=text_store(),
        embed_model=embedding(),
        similarity_top_k=3,
    )
    memory = Memory.from_defaults(
        session_id=uuid.uuid4().hex,
        token_limit=budget,
        tokenizer_fn=_tokens,
        chat_history_token_ratio=0.7,
        token_flush_size=max(1, budget // 10),
        memory_blocks=[block],
    )
    for message in messages:
        if message.role != "system":
            await memory.aput(_chat(message))
    out = []
    for question in questions:
        sent = await memory.aget(input=question)
        out.append("\n".join(str(m.content or "") for m in sent))
    return out


def contexts(messages: Sequence[Message], budget: int, questions: Sequence[str]) -> list[str]:
    """The text LlamaIndex sends for each question asked after ``messages``.

    The question is given as ``input`` (what the block searches with, beside the newest
    messages) and not stored, so every question meets the same memory.
    """
    return asyncio.run(_contexts(messages, budget, questions))
