"""Test helpers, shipped so users can test their own code and stores without a model.

* :class:`FakeSummarizer` and :class:`FixedCounter` (:mod:`contextfold.testing.fakes`):
  deterministic stand-ins for a model and a tokenizer.
* :func:`check_store` / :func:`acheck_store` (:mod:`contextfold.testing.store_contract`):
  the store contract contextfold's own backends pass, to run against any store.
"""

from __future__ import annotations

from contextfold.testing.fakes import FakeSummarizer, FixedCounter
from contextfold.testing.store_contract import acheck_store, check_store

__all__ = ["FakeSummarizer", "FixedCounter", "acheck_store", "check_store"]
