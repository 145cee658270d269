"""The files an agent session read and modified, carried from checkpoint to checkpoint.

A coding agent's checkpoint must say which files the work touched, even when the summary
forgets to: :class:`FileTrail` gathers the paths from the prior checkpoint, the summarizer's
report and the span's own tool calls, and lists those the summary does not mention.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.framing import escape_text
from contextfold.messages import Message
from contextfold.paths import file_operations, is_plausible_path
from contextfold.summarizers.base import SummarizationResult

__all__ = ["FileTrail"]


@dataclass(frozen=True, slots=True)
class FileTrail:
    """Paths read and modified, accumulated across checkpoints."""

    read: frozenset[str]
    modified: frozenset[str]

    @classmethod
    def of(cls, prior: CheckpointRecord | None) -> FileTrail:
        if prior is None:
            return cls(frozenset(), frozenset())
        d = prior.details or {}
        return cls(frozenset(_strs(d.get("files_read"))), frozenset(_strs(d.get("files_modified"))))

    def after(self, results: Sequence[SummarizationResult], span: Sequence[Message]) -> FileTrail:
        """These plus what the summarizer reported and the span's tool calls touched."""
        read, modified = set(self.read), set(self.modified)
        for r in results:
            read |= set(_strs(r.details.get("files_read")))
            modified |= set(_strs(r.details.get("files_modified")))
        r_new, m_new = file_operations(span)
        read |= r_new
        modified |= m_new
        # A heredoc or a pipe misread as a file name is no file to list or carry forward.
        modified = {f for f in modified if is_plausible_path(f)}
        read = {f for f in read - modified if is_plausible_path(f)}
        return FileTrail(frozenset(read), frozenset(modified))

    def details(self) -> dict[str, list[str]]:
        return {"files_read": sorted(self.read), "files_modified": sorted(self.modified)}

    def listed_in(self, text: str) -> str:
        """``text`` with the file lists it does not already mention appended."""
        return _with_file_lists(text, set(self.read), set(self.modified))


def _strs(value: Any) -> list[str]:
    if isinstance(value, (list, tuple, set, frozenset)):
        return [v for v in value if isinstance(v, str)]
    return []


def _with_file_lists(text: str, read: set[str], modified: set[str]) -> str:
    """Append the file lists the summary does not already mention (paths escaped)."""
    missing_mod = sorted(f for f in modified if f not in text)
    missing_read = sorted(f for f in read if f not in text)
    out = text
    if missing_read:
        body = escape_text("\n".join(missing_read))
        out += f"\n\n<read-files>\n{body}\n</read-files>"
    if missing_mod:
        body = escape_text("\n".join(missing_mod))
        out += f"\n\n<modified-files>\n{body}\n</modified-files>"
    return out
