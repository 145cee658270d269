"""The offline default summarizer: a structured checkpoint built without a model.

:class:`ExtractiveSummarizer` reads the span and writes the checkpoint sections
(:data:`contextfold.summarizers.prompts.CHECKPOINT_SECTIONS`) from what it can find
mechanically: the user's requests and corrections (quoted), file paths and what was done
to them, shell commands, error lines, code identifiers, pending work, the latest request, and, under
"Critical context", the span's *key phrases*.

A key phrase is a run of one to three content words cut out of a clause once greetings,
pronouns and filler are removed (``"I went to a LGBTQ support group yesterday"`` gives
``"LGBTQ support group"``, ``"support group yesterday"`` ...), a full date
(``"8 May, 2023"``) or a capitalized title (``"Becoming Nicole"``, ``"A Dance with
Dragons"``). Each is weighed by what tends to matter later: names, numbers and dates weigh
most, everyday words and adverbs least, and repetition raises the weight logarithmically.
Key phrases are found by :mod:`._phrases`, the hot path on chat text.

Every candidate, whatever its section, competes for the token budget by weight per
character; the budget is filled greedily in that order, a phrase already contained in a
chosen one is skipped, and the counter has the last word (the weakest items are dropped until
the text fits). The result is dense in distinct names, numbers, dates, places and paths
rather than in filler, and deterministic: the same span gives the same text.

A previous summary (``request.previous_summary``) is merged, not copied: its items compete for
the budget with the new ones (with a bonus, since they already survived once), duplicates are
removed, and its "Current work" and "Next step" give way when the new span says something
newer.

No third-party package is needed. ``bench/retention.py`` measures the throughput (CPU time,
one core) and what survives at a given budget.

The package: :mod:`._collect` finds the candidates of each section, :mod:`._phrases` the key
phrases, :mod:`._items` ranks, merges and renders them, and :mod:`._summarizer` holds the
summarizer itself.
"""

from __future__ import annotations

from contextfold.summarizers.extractive._summarizer import ExtractiveSummarizer

__all__ = ["ExtractiveSummarizer"]
