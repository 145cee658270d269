"""Claude Code session logs (``~/.claude/projects/*.jsonl``) as Anthropic payloads.

A session log is not a provider payload: it holds one record per line, most of them one
content block of an API message, plus progress, snapshot and system records.
:func:`merge_records` rebuilds the Messages API conversation from them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from contextfold.errors import FormatError

__all__ = ["merge_records"]


def merge_records(records: Iterable[Any]) -> list[dict[str, Any]]:
    """Merge the records of a Claude Code session log into Anthropic Messages messages.

    The log stores one content block per line; the blocks of one API message share
    ``message.id``, and the blocks of parallel tool calls arrive interleaved with earlier
    results. Progress, snapshot and system records are skipped. The result loads with
    :func:`contextfold.formats.anthropic.load` (wrap it as ``{"messages": ...}``).

    Args:
        records: the decoded JSON objects of the log's lines, in order.

    Raises:
        FormatError: a user or assistant record's content is neither text nor blocks.
    """
    out: list[dict[str, Any]] = []
    for k, r in enumerate(records):
        if not isinstance(r, dict) or r.get("type") not in ("user", "assistant"):
            continue
        m = r.get("message")
        if not isinstance(m, dict) or "content" not in m:
            continue
        c = m["content"]
        if not isinstance(c, (str, list)):
            raise FormatError(
                "a record's message content must be a string or a list of blocks, "
                f"not {type(c).__name__}",
                index=k,
                field="content",
            )
        blocks = [{"type": "text", "text": c}] if isinstance(c, str) else list(c)
        only_results = bool(blocks) and all(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks
        )
        if m.get("role") == "assistant":
            if out and out[-1]["role"] == "assistant" and out[-1]["_id"] == m.get("id"):
                out[-1]["content"] += blocks
            elif (
                len(out) >= 2
                and out[-2]["role"] == "assistant"
                and out[-2]["_id"] == m.get("id")
                and out[-1]["_results"]
            ):
                out[-2]["content"] += blocks
            else:
                out.append(
                    {"role": "assistant", "content": blocks, "_id": m.get("id"), "_results": False}
                )
        elif only_results and out and out[-1]["role"] == "user" and out[-1]["_results"]:
            out[-1]["content"] += blocks
        else:
            out.append({"role": "user", "content": blocks, "_id": None, "_results": only_results})
    return [{"role": x["role"], "content": x["content"]} for x in out]
