"""Running token totals ("tallies") of stored conversations, shared by every backend.

A memory that opens a long stored conversation needs its total token count for the stats
(``total_tokens``, ``tokens_saved``); counting it means decoding the whole log. So a store
keeps, per conversation and token counter, the tokens of messages ``1..upto_seq``: an append
that carries its messages' counts (:meth:`~contextfold.stores.base.TallyLog.append_counted`)
moves the counter's tally forward inside its own transaction or script, when the tally was
current, i.e. it covered every message before the batch. A tally that fell behind (messages
appended without counts, or by a memory with another counter) stays put; whoever counts the
messages in between saves a newer one, and :meth:`save_tally` never moves one backwards nor
past the log's end.

This module holds what the backends share: the checked counts of an append
(:class:`Counted`) and the sum an append adds (:func:`added_tokens`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contextfold.errors import ConfigError
from contextfold.stores._idempotent import AppendPlan
from contextfold.stores.base import Tally

__all__ = [
    "Counted",
    "added_tokens",
    "check_counted",
    "check_counter",
    "check_tally",
    "tally_sql",
]


@dataclass(frozen=True, slots=True)
class Counted:
    """The token counts an append carries: the counter's name and one count per message."""

    counter: str
    tokens: tuple[int, ...]


def check_counter(counter: object) -> str:
    """A counter name: a non-empty string."""
    if not isinstance(counter, str) or not counter:
        raise ConfigError(
            f"counter must be a non-empty string, got {counter!r}", argument="counter"
        )
    return counter


def check_counted(counter: object, tokens: object, messages: object) -> Counted:
    """Validate ``append_counted``'s arguments for the batch ``messages``.

    A batch that is not a sequence is refused later, by the encoder, like any append's.
    """
    name = check_counter(counter)
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
        raise ConfigError(
            f"tokens must be a sequence of counts, got {type(tokens).__name__}", argument="tokens"
        )
    counts = tuple(tokens)
    size = len(messages) if isinstance(messages, Sequence) else 0
    if len(counts) != size:
        raise ConfigError(f"tokens has {len(counts)} counts for {size} messages", argument="tokens")
    for n in counts:
        if type(n) is not int or n < 0:
            raise ConfigError(f"tokens must hold non-negative ints, got {n!r}", argument="tokens")
    return Counted(name, counts)


def check_tally(tally: object) -> Tally:
    """A :class:`Tally` with a non-negative ``upto_seq`` and ``tokens``."""
    if not isinstance(tally, Tally):
        raise ConfigError(f"expected a Tally, got {type(tally).__name__}", argument="tally")
    for name in ("upto_seq", "tokens"):
        value = getattr(tally, name)
        if type(value) is not int or value < 0:
            raise ConfigError(
                f"tally.{name} must be a non-negative int, got {value!r}", argument="tally"
            )
    return tally


def added_tokens(counted: Counted, plan: AppendPlan[Any]) -> int:
    """The tokens of the messages an append stores (acknowledged ones add nothing)."""
    tokens = counted.tokens
    return sum(tokens[i] for i in plan.fresh_at)


def tally_sql(table: str, p: str) -> dict[str, Any]:
    """The SQL stores' statements for tallies in ``table`` (``p`` is the parameter marker)."""
    key = f"conversation_id = {p} AND counter = {p}"
    return {
        "select_tally": f"SELECT upto_seq, tokens FROM {table} WHERE {key}",
        "advance_tally": (
            f"UPDATE {table} SET upto_seq = {p}, tokens = tokens + {p}"
            f" WHERE {key} AND upto_seq = {p}"
        ),
        # The last parameter: replace a stored tally only below this seq.
        "upsert_tally": (
            f"INSERT INTO {table} AS t (conversation_id, counter, upto_seq, tokens)"
            f" VALUES ({p}, {p}, {p}, {p}) ON CONFLICT (conversation_id, counter) DO UPDATE"
            f" SET upto_seq = excluded.upto_seq, tokens = excluded.tokens"
            f" WHERE t.upto_seq < {p}"
        ),
    }
