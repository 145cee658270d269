"""The offline default summarizer: a fact-preserving summary built without a model.

:class:`ExtractiveSummarizer` keeps *clauses*, not keyword lists: the sentence (or, in a long
sentence, the piece between its commas, colons or dashes) that carries a fact, so
``refund ticket RF-7720 for order LS-48219, $119.00, back to the Visa card ending 4417`` keeps
the numbers together with what they are. A fact is a token a later question is likely to
need spelled exactly: amounts, ids and order numbers, emails, versions, numbers and
quantities, dates, links, names, and (weighing little) any other content word.

The layout follows what the span is:

* a **chat** gets ``Requests``, ``Facts``, ``Decisions`` and ``Open questions``;
* an **agent run** (tool calls present) gets the checkpoint sections of
  :data:`contextfold.summarizers.prompts.CHECKPOINT_SECTIONS`: the user's requests and
  corrections (quoted; client notices such as ``[Request interrupted by user]`` left out),
  the real files read and changed (seen in tool calls, or shaped like files: never ``and/or``
  or ``/dev/null``), error lines of tool results with the command that produced them, pending
  work, the current work and the latest request, code identifiers, and the clauses that carry
  the facts under "Critical context".

A section with nothing to say is left out: there is no wall of ``(none)``.

Every candidate competes for the room by the weight it adds per character: its own (a
request, a path, an error line) plus that of the facts no chosen line carries yet, so a
second line repeating an order number adds little and a line with a new amount a lot. The
room is the request's ``max_output_tokens``: the summary fills it as far as the span has
something to say and never exceeds it (the counter has the last word). The result is
deterministic: the same span gives the same text.

A previous summary (``request.previous_summary``), in either layout, is merged, not copied:
its lines compete with the new ones (with a small bonus), duplicates are removed, its opening
request keeps the first place, and its "Current work", "Next step" and open questions give
way when the new span says something newer.

No third-party package is needed. ``bench/retention.py`` measures the throughput (CPU time,
one core) and what survives at a given budget.

The package: :mod:`._facts` reads facts and cuts clauses, :mod:`._paths` finds the real
paths, :mod:`._collect` finds the candidates of each section, :mod:`._items` chooses, merges
and renders them, and :mod:`._summarizer` holds the summarizer itself.
"""

from __future__ import annotations

from contextfold.summarizers.extractive._facts import clear_token_cache
from contextfold.summarizers.extractive._summarizer import ExtractiveSummarizer

__all__ = ["ExtractiveSummarizer", "clear_token_cache"]
