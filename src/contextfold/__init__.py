"""contextfold: decide what part of an LLM conversation is sent to the model."""

from __future__ import annotations

__version__ = "0.1.0"
