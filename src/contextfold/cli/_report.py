"""What the commands report: one-line message previews and the stats of a built context.

``compact`` and ``log context`` print the same stats table whether the context came from a
strategy run or from :class:`~contextfold.memory.ConversationMemory`, so both dicts use the
names and meanings of ``MemoryStats``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, Any, NoReturn

from contextfold.cli._io import table
from contextfold.errors import SummarizerError
from contextfold.memory import ConversationMemory
from contextfold.messages import Message


def preview(message: Message, width: int = 60) -> str:
    """One line that says what a message is: its text, or the tools it calls or answers."""
    text = message.text
    if not text:
        calls = message.tool_calls
        if calls:
            text = "call " + ", ".join(c.name for c in calls)
        elif message.tool_results:
            text = "result " + (message.tool_results[0].text or "")
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def result_stats(result: Any, *, budget: int, messages_in: int) -> dict[str, Any]:
    """Stats of a strategy run, with the same names and meanings as ``MemoryStats``."""
    before = int(result.tokens_before)
    after = int(result.tokens)
    usage = result.usage
    checkpoint = result.checkpoint or result.reused_checkpoint
    return {
        "strategy": result.strategy,
        "budget": budget,
        "tokens_before": before,
        "tokens_after": after,
        "tokens_saved": max(0, before - after),
        "compression_ratio": round(after / before, 4) if before else 1.0,
        "messages_before": messages_in,
        "messages_after": len(result.messages),
        "messages_kept": len(result.kept),
        "messages_summarized": result.summarized_count,
        "messages_dropped": result.dropped_count,
        "messages_pruned": len(result.pruned),
        "summarized": bool(result.is_summarized),
        "summary_calls": result.summary_calls,
        "summarizer_tokens": usage.total_tokens if usage is not None else 0,
        "checkpoint_id": checkpoint.id if checkpoint is not None else None,
        "compacted": result.checkpoint is not None,
        "fallback": result.fallback,
        "failure_code": result.failure_code,
        "limit_reached": result.limit_reached,
        "notes": list(result.notes),
        **recall_stats(result.recalled, result.notes),
    }


def recall_stats(recalled: Sequence[int], notes: Sequence[str]) -> dict[str, Any]:
    """What :class:`~contextfold.Recall` quoted and why (nothing when it did not run).

    Its last note says what it quoted; an earlier one (a failed embedder) is among the notes.
    """
    note = next((n for n in reversed(notes) if n.startswith("recall: ")), None)
    if note is None:
        return {}
    return {"recalled": list(recalled), "recall": note.removeprefix("recall: ")}


def memory_stats(memory: ConversationMemory, context: Any, *, budget: int) -> dict[str, Any]:
    """Stats of a :class:`~contextfold.memory.Context`, named as in :func:`result_stats`.

    The table reports tokens before and saved, so the totals are counted (one read of the
    stored log when the memory did not write all of it itself).
    """
    st = memory.count_totals(context.stats)
    assert st.compression_ratio is not None  # counted just above
    return {
        "strategy": st.strategy,
        "budget": budget,
        "tokens_before": st.total_tokens,
        "tokens_after": st.current_tokens,
        "tokens_saved": st.tokens_saved,
        "compression_ratio": round(st.compression_ratio, 4),
        "messages_before": st.message_count,
        "messages_after": st.context_message_count,
        "messages_summarized": st.summarized_count,
        "messages_dropped": st.dropped_count,
        "summarized": st.is_summarized,
        "summarizer_tokens": st.summarizer_tokens,
        "checkpoint_id": st.checkpoint_id,
        "compacted": st.compacted,
        "fallback": st.fallback_reason if st.fallback else None,
        "lifetime_tokens_saved": st.lifetime_tokens_saved,
        "stable_prefix_tokens": st.stable_prefix_tokens,
        "estimated_cost_usd": st.estimated_cost_usd,
        "full_history_cost_usd": st.full_history_cost_usd,
        "lifetime_cost_usd": st.lifetime_cost_usd,
        "lifetime_full_history_cost_usd": st.lifetime_full_history_cost_usd,
        "limit_reached": st.limit_reached,
        "notes": list(st.notes),
        **recall_stats(st.recalled, st.notes),
    }


def print_stats(stats: dict[str, Any], *, title: str, stream: IO[str]) -> None:
    """The stats table; rows a source does not report (kept, pruned, net) are left out.

    A limit that stopped the strategy early gets a row of its own, so messages dropped
    because of it are never only a number in the ``dropped`` row.
    """
    ratio = stats["compression_ratio"]
    shrink = f"{1 / ratio:.2f}x smaller" if ratio else "-"
    rows: list[tuple[str, object]] = [
        ("strategy", stats["strategy"]),
        ("budget", stats["budget"]),
        ("tokens before", stats["tokens_before"]),
        ("tokens after", stats["tokens_after"]),
        ("tokens saved", stats["tokens_saved"]),
        ("compression ratio", f"{ratio:.3f} ({shrink})"),
        ("messages in / out", f"{stats['messages_before']} / {stats['messages_after']}"),
    ]
    if "messages_kept" in stats:
        rows.append(("kept verbatim", stats["messages_kept"]))
    rows += [
        ("summarized", stats["messages_summarized"]),
        ("dropped", stats["messages_dropped"]),
    ]
    if "messages_pruned" in stats:
        rows.append(("tool outputs pruned", stats["messages_pruned"]))
    rows += [
        ("summary in context", stats["summarized"]),
        ("summarizer tokens", stats["summarizer_tokens"]),
    ]
    if stats.get("checkpoint_id"):
        state = "new" if stats.get("compacted") else "reused"
        rows.append((f"checkpoint ({state})", stats["checkpoint_id"]))
    if "lifetime_tokens_saved" in stats:
        rows.append(("net saved after summary cost", stats["lifetime_tokens_saved"]))
    if stats.get("stable_prefix_tokens") is not None:
        rows.append(("same start as the last context", stats["stable_prefix_tokens"]))
    if stats.get("estimated_cost_usd") is not None:
        full = stats.get("full_history_cost_usd")
        versus = f" (full history: ${full:.5f})" if full is not None else ""
        rows.append(("estimated input cost", f"${stats['estimated_cost_usd']:.5f}{versus}"))
    if "recall" in stats:
        rows.append(("recalled messages", len(stats["recalled"])))
        rows.append(("recall", stats["recall"]))
    rows.append(("fallback", stats["fallback"] or "none"))
    if stats.get("limit_reached"):
        rows.append(("stopped by a limit", stats["limit_reached"]))
    table(title, ("", "value"), rows, stream=stream)


def refuse_fallback(stats: dict[str, Any], *, detail: str = "") -> NoReturn:
    """Raise when the summarizer failed and ``--no-fallback`` forbade the fallback (exit 3).

    Raises:
        SummarizerError: always; the message names the failure and the option.
    """
    raise SummarizerError(
        f"the summarizer failed ({stats['fallback']}) and --no-fallback forbids the "
        f"sliding-window fallback{detail}",
        code=stats.get("failure_code"),
    )
