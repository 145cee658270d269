"""Exact counts for OpenAI models with ``tiktoken`` (the ``tiktoken`` extra)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from contextfold.errors import ContextfoldError, MissingExtraError
from contextfold.tokens.base import BaseCounter

__all__ = ["TiktokenCounter"]

DEFAULT_ENCODING = "o200k_base"


def _import_tiktoken() -> Any:
    try:
        import tiktoken
    except ImportError as exc:
        raise MissingExtraError("TiktokenCounter", "tiktoken") from exc
    return tiktoken


def _load(tiktoken: Any, name: str) -> Any:
    try:
        return tiktoken.get_encoding(name)
    except ValueError as exc:
        raise ContextfoldError(f"unknown tiktoken encoding {name!r}") from exc
    except Exception as exc:  # the first load fetches the table over the network
        raise ContextfoldError(f"cannot load the tiktoken encoding {name!r}: {exc}") from exc


class TiktokenCounter(BaseCounter):
    """Count with an OpenAI BPE encoding.

    Args:
        model: a model name (``"gpt-4o"``); its encoding is looked up with tiktoken.
        encoding: an encoding name (``"o200k_base"``) or a ``tiktoken.Encoding`` object; the
            default, when neither is given, is ``o200k_base`` (GPT-4o and newer).
        **overheads: see :class:`~contextfold.tokens.base.BaseCounter`. The defaults follow
            OpenAI's published accounting (3 tokens per message).

    Text is encoded as ordinary text: special-token markers inside a message are counted as
    the characters they are, which is what the API does with user content. Loading a named
    encoding the first time may download its table (tiktoken caches it); pass an
    ``Encoding`` object to stay offline.

    Raises:
        MissingExtraError: tiktoken is not installed.
        ContextfoldError: the model or encoding name is unknown to tiktoken.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        encoding: str | Any | None = None,
        **overheads: int,
    ) -> None:
        tiktoken = _import_tiktoken()
        if encoding is not None and model is not None:
            raise ContextfoldError("give either model or encoding, not both")
        if encoding is None:
            if model is None:
                enc = _load(tiktoken, DEFAULT_ENCODING)
            else:
                try:
                    enc = tiktoken.encoding_for_model(model)
                except KeyError as exc:
                    raise ContextfoldError(
                        f"tiktoken does not know the model {model!r}; pass encoding= instead"
                    ) from exc
        elif isinstance(encoding, str):
            enc = _load(tiktoken, encoding)
        elif isinstance(encoding, tiktoken.Encoding):
            enc = encoding
        else:
            raise ContextfoldError(
                f"encoding must be a name or a tiktoken.Encoding, got {type(encoding).__name__}"
            )
        self.encoding = enc
        self.model = model
        super().__init__(**overheads)

    def _config_key(self) -> Hashable:
        return str(self.encoding.name)

    def count_text(self, text: str, /) -> int:
        if not text:
            return 0
        return len(self.encoding.encode_ordinary(text))

    def __repr__(self) -> str:
        return f"TiktokenCounter(encoding={self.encoding.name!r})"
