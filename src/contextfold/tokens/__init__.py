"""Token counting: the :class:`TokenCounter` protocol and its implementations.

``ApproxCounter`` needs nothing; ``TiktokenCounter`` and ``HuggingFaceCounter`` import their
libraries lazily and name the extra to install when it is missing.
"""

from __future__ import annotations

from contextfold.tokens.approx import ApproxCounter
from contextfold.tokens.base import BaseCounter, TokenCounter

__all__ = ["ApproxCounter", "BaseCounter", "TokenCounter"]
