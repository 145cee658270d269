"""Checkpoint records: the persisted result of one compaction.

A checkpoint says "messages up to ``last_covered_id`` (after the system prefix) are replaced
by ``summary``". It is appended to the conversation's log next to the messages; the stored
transcript itself is never edited, so a checkpoint can be audited or ignored later. Strategies
receive the latest checkpoint and reuse it: a span is summarized once, not on every request.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contextfold.errors import FormatError
from contextfold.usage import Usage

__all__ = ["CHECKPOINT_FORMAT_VERSION", "CheckpointRecord"]

CHECKPOINT_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """One compaction, as stored in the log.

    Attributes:
        summary: the summary text (without framing; strategies frame it when injecting).
        last_covered_id: id of the newest message the summary covers.
        first_kept_id: id of the first message kept verbatim after it (None if none yet).
        strategy: name of the strategy that produced it.
        id: unique id of this checkpoint.
        previous_id: the checkpoint this one merged, if any.
        last_covered_seq: store sequence number of ``last_covered_id`` (set by the memory).
        model: the summarizer model, when known.
        prompt_hash: hash of the prompt set used, so a prompt change is visible in audits.
        tokens_before: tokens of the context before compaction.
        tokens_after: tokens of the context after compaction.
        usage: what the summarizer call(s) cost.
        details: structured state (checkpoint sections, files read and modified ...).
        created_at: UNIX time of creation.
    """

    summary: str
    last_covered_id: str
    first_kept_id: str | None = None
    strategy: str = ""
    id: str = field(default_factory=lambda: "ckpt_" + uuid.uuid4().hex)
    previous_id: str | None = None
    last_covered_seq: int | None = None
    model: str | None = None
    prompt_hash: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    usage: Usage | None = None
    details: Mapping[str, Any] = field(default_factory=dict, hash=False)
    created_at: float = field(default_factory=time.time)

    def replace(self, **changes: Any) -> CheckpointRecord:
        """A copy with some fields changed."""
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        values.update(changes)
        return CheckpointRecord(**values)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a format version (``"v"``)."""
        return {
            "v": CHECKPOINT_FORMAT_VERSION,
            "id": self.id,
            "summary": self.summary,
            "last_covered_id": self.last_covered_id,
            "first_kept_id": self.first_kept_id,
            "strategy": self.strategy,
            "previous_id": self.previous_id,
            "last_covered_seq": self.last_covered_seq,
            "model": self.model,
            "prompt_hash": self.prompt_hash,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "usage": self.usage.to_dict() if self.usage is not None else None,
            "details": dict(self.details),
            "created_at": self.created_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckpointRecord:
        """Inverse of :meth:`to_dict`; raises :class:`FormatError` on malformed data.

        Every field's type is checked, not coerced: a stored record that was edited or
        corrupted (a ``last_covered_seq`` of ``"3"``, a summary that is a number) would
        otherwise surface later as a ``TypeError`` deep inside a strategy, on every build.
        The error names the field.
        """
        if not isinstance(data, Mapping):
            raise FormatError("a checkpoint must be an object")
        if data.get("v") != CHECKPOINT_FORMAT_VERSION:
            raise FormatError(f"unsupported checkpoint version {data.get('v')!r}", field="v")
        for name in _REQUIRED:
            if name not in data:
                raise FormatError(f"malformed checkpoint: {name!r} is missing", field=name)
        usage = _typed(data, "usage", (Mapping,), None)
        details = _typed(data, "details", (Mapping,), None)
        return cls(
            summary=_typed(data, "summary", (str,), ""),
            last_covered_id=_typed(data, "last_covered_id", (str,), ""),
            first_kept_id=_typed(data, "first_kept_id", (str,), None),
            strategy=_typed(data, "strategy", (str,), ""),
            id=_typed(data, "id", (str,), ""),
            previous_id=_typed(data, "previous_id", (str,), None),
            last_covered_seq=_typed(data, "last_covered_seq", (int,), None),
            model=_typed(data, "model", (str,), None),
            prompt_hash=_typed(data, "prompt_hash", (str,), None),
            tokens_before=_typed(data, "tokens_before", (int,), 0),
            tokens_after=_typed(data, "tokens_after", (int,), 0),
            usage=_usage(usage) if usage is not None else None,
            details=dict(details) if details is not None else {},
            created_at=float(_typed(data, "created_at", (int, float), 0.0)),
        )


_REQUIRED = ("summary", "last_covered_id", "id")
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", Mapping: "an object"}


def _typed(data: Mapping[str, Any], name: str, types: tuple[type, ...], default: Any) -> Any:
    """``data[name]`` when it has one of ``types`` (or is null, where the field may be)."""
    value = data.get(name)
    if value is None and (default is None or name not in data):
        return default
    if isinstance(value, bool) or not isinstance(value, types):
        wanted = " or ".join(_TYPE_NAMES[t] for t in types)
        null = " or null" if default is None else ""
        raise FormatError(
            f"malformed checkpoint: {name!r} must be {wanted}{null}, not {value!r:.80}",
            field=name,
        )
    return value


def _usage(data: Mapping[str, Any]) -> Usage:
    for key in Usage().to_dict():
        value = data.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int):
            raise FormatError(
                f"malformed checkpoint: usage {key!r} must be an integer, not {value!r:.80}",
                field=f"usage.{key}",
            )
    return Usage.from_dict(data)
