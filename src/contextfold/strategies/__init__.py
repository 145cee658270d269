"""Strategies: sans-I/O planners that build a context inside a token budget.

Each strategy's ``plan()`` yields a :class:`SummaryCall` whenever it needs a summary and
returns a :class:`StrategyResult`; :func:`run`, :func:`arun` and :func:`dry_run` drive it.

* :class:`SlidingWindow` keeps the system prefix and the newest whole turns; no model.
* :class:`PruneToolOutputs` clears old tool outputs behind a marker; no model.
* :class:`Summarization` folds everything older than the recent messages into one summary.
* :class:`Hybrid` grows a running summary one overflow chunk at a time.
* :class:`Checkpoint` writes a structured checkpoint for coding agents.
* :class:`SummaryCompactor` turns the oldest turns into one summary turn, in characters.
* :class:`Pipeline` runs stages cheapest first and stops once the context fits.
* :class:`Recall` wraps any of them and puts back earlier excerpts that match the newest
  user message, found with a :class:`SearchCall` the driver answers.

Every summarizing strategy falls back to the sliding window when its summarizer fails, and
says why in ``StrategyResult.fallback`` and ``failure_code``.
"""

from __future__ import annotations

from contextfold.framing import SummaryPlacement
from contextfold.strategies.base import (
    SearchCall,
    SearchHit,
    Strategy,
    StrategyResult,
    StrategyState,
    SummaryCall,
)
from contextfold.strategies.checkpoint import Checkpoint
from contextfold.strategies.compactor import SummaryCompactor
from contextfold.strategies.hybrid import Hybrid
from contextfold.strategies.pipeline import Pipeline
from contextfold.strategies.prune import PruneToolOutputs
from contextfold.strategies.recall import Recall
from contextfold.strategies.run import arun, dry_run, run
from contextfold.strategies.sliding import SlidingWindow
from contextfold.strategies.summarization import Summarization

__all__ = [
    "Checkpoint",
    "Hybrid",
    "Pipeline",
    "PruneToolOutputs",
    "Recall",
    "SearchCall",
    "SearchHit",
    "SlidingWindow",
    "Strategy",
    "StrategyResult",
    "StrategyState",
    "Summarization",
    "SummaryCall",
    "SummaryCompactor",
    "SummaryPlacement",
    "arun",
    "dry_run",
    "run",
]
