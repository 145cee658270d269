"""Idempotent appends: a message id already stored in the conversation is acknowledged.

A network store can lose the reply to a write the server applied, so an application that
retries after a :class:`~contextfold.errors.StoreError` could store a message twice (and a
doubled tool result breaks every later build). Every store therefore treats a message's id as
its idempotency key: appending a message whose id the conversation already holds returns the
sequence number it was stored under and stores nothing. Within one batch, a repeated id is the
same message too.

An id that is already stored with *other* content is not a retry but two different messages
sharing an id: storing the second would lose it silently and skipping it would too, so the
whole batch is refused with :class:`StoreError` and nothing is stored.

Each backend finds the ids it already holds (inside the transaction or script that also
writes, so a concurrent append cannot slip in between) and hands them to :func:`plan_append`,
which decides which messages are new and which sequence number each one is acknowledged with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from contextfold.errors import StoreError

__all__ = ["AppendPlan", "id_conflict", "plan_append"]

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class AppendPlan(Generic[P]):
    """What an append stores and what it answers.

    Attributes:
        seqs: the sequence number of every message of the batch, in order (stored or new).
        fresh: the payloads to store, in order; they take ``last + 1`` onwards.
        fresh_ids: the ids of ``fresh``.
        fresh_at: the batch position of each of ``fresh``.
    """

    seqs: list[int]
    fresh: list[P]
    fresh_ids: list[str]
    fresh_at: list[int]


def plan_append(
    conversation_id: str,
    ids: Sequence[str],
    payloads: Sequence[P],
    stored: Mapping[str, tuple[int, P | None]],
    last: int,
) -> AppendPlan[P]:
    """Split a batch into messages already stored and new ones.

    Args:
        conversation_id: named in errors.
        ids: each message's id, in batch order.
        payloads: each message's stored form (compared with ``==`` against what is stored).
        stored: for every id of the batch the conversation already holds, its sequence
            number and stored form (``None`` when the backend cannot tell, which is taken
            as the same message).
        last: the conversation's newest sequence number.

    Raises:
        StoreError: an id is stored (or repeated in the batch) with other content.
    """
    seqs: list[int] = []
    fresh: list[P] = []
    fresh_ids: list[str] = []
    fresh_at: list[int] = []
    batch: dict[str, tuple[int, P]] = {}
    for index, (msg_id, payload) in enumerate(zip(ids, payloads, strict=True)):
        known = stored.get(msg_id)
        if known is None:
            earlier = batch.get(msg_id)
            if earlier is None:
                last += 1
                batch[msg_id] = (last, payload)
                fresh.append(payload)
                fresh_ids.append(msg_id)
                fresh_at.append(index)
                seqs.append(last)
                continue
            known = earlier
        seq, old = known
        if old is not None and old != payload:
            raise id_conflict(conversation_id, msg_id, seq)
        seqs.append(seq)
    return AppendPlan(seqs, fresh, fresh_ids, fresh_at)


def id_conflict(conversation_id: str, msg_id: str, seq: int) -> StoreError:
    """The error for an id already stored (or earlier in the batch) with other content."""
    return StoreError(
        f"append to {conversation_id!r}: message id {msg_id!r} is already stored at seq {seq} "
        "with other content; ids must be unique per message, so nothing was stored"
    )
