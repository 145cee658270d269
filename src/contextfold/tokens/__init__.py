"""Token counting: the :class:`TokenCounter` protocol and its implementations.

``ApproxCounter`` needs nothing; ``TiktokenCounter`` and ``HuggingFaceCounter`` import their
libraries only when constructed and name the extra to install when it is missing.
``CalibratedCounter`` corrects any of them with the usage figures providers report.
"""

from __future__ import annotations

from contextfold.tokens.approx import ApproxCounter
from contextfold.tokens.base import BaseCounter, TokenCounter, tally_name
from contextfold.tokens.calibrated import CalibratedCounter, reported_input_tokens
from contextfold.tokens.huggingface import HuggingFaceCounter
from contextfold.tokens.tiktoken import TiktokenCounter

__all__ = [
    "ApproxCounter",
    "BaseCounter",
    "CalibratedCounter",
    "HuggingFaceCounter",
    "TiktokenCounter",
    "TokenCounter",
    "reported_input_tokens",
    "tally_name",
]
