"""Exact counts with a Hugging Face tokenizer (the ``huggingface`` extra)."""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from contextfold.errors import ContextfoldError, MissingExtraError
from contextfold.tokens.base import BaseCounter

__all__ = ["HuggingFaceCounter"]


def _import_tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError as exc:
        raise MissingExtraError("HuggingFaceCounter", "huggingface") from exc
    return tokenizers


class HuggingFaceCounter(BaseCounter):
    """Count with any ``tokenizers.Tokenizer`` (open-weight models, Mistral, Llama ...).

    Args:
        tokenizer: a ``tokenizers.Tokenizer``. A ``transformers`` fast tokenizer works too
            (anything whose ``encode(text, add_special_tokens=False)`` returns ids).
        name: a short label for the tokenizer, used in the cache key. By default the key is
            a hash of the tokenizer's serialized form, so two counters share cached counts
            only when their tokenizers are identical.
        **overheads: see :class:`~contextfold.tokens.base.BaseCounter`.

    Special tokens are not added to each text: chat-template framing is what the
    per-message overhead stands for.

    Raises:
        MissingExtraError: the ``tokenizers`` package is not installed.
    """

    def __init__(self, tokenizer: Any, *, name: str | None = None, **overheads: int) -> None:
        _import_tokenizers()
        if not callable(getattr(tokenizer, "encode", None)):
            raise ContextfoldError(
                f"expected a tokenizers.Tokenizer, got {type(tokenizer).__name__}"
            )
        self.tokenizer = tokenizer
        self.name = name or _fingerprint(tokenizer)
        super().__init__(**overheads)

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> HuggingFaceCounter:
        """Load a ``tokenizer.json`` file (no network)."""
        tokenizers = _import_tokenizers()
        try:
            tok = tokenizers.Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust binding raises a bare Exception
            raise ContextfoldError(f"cannot load a tokenizer from {path}: {exc}") from exc
        return cls(tok, **kwargs)

    def _config_key(self) -> Hashable:
        return self.name

    def count_text(self, text: str, /) -> int:
        if not text:
            return 0
        encoded = self.tokenizer.encode(text, add_special_tokens=False)
        ids = getattr(encoded, "ids", encoded)
        return len(ids)

    def __repr__(self) -> str:
        return f"HuggingFaceCounter(name={self.name!r})"


def _fingerprint(tokenizer: Any) -> str:
    to_str = getattr(tokenizer, "to_str", None)
    if callable(to_str):
        data = str(to_str())
    else:  # a transformers tokenizer: its vocabulary identifies it well enough
        vocab = tokenizer.get_vocab() if callable(getattr(tokenizer, "get_vocab", None)) else {}
        data = repr(sorted(vocab.items())) + type(tokenizer).__qualname__
    return "hf-" + hashlib.sha256(data.encode()).hexdigest()[:16]
