"""The commands of ``contextfold``: compact, plan, stats, convert and log."""

from __future__ import annotations

import argparse
import sys
from collections import Counter as _Tally
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from contextfold.cli._build import (
    build_counter,
    build_strategy,
    build_summarizer,
    open_store,
)
from contextfold.cli._io import (
    CONTEXT_WINDOWS,
    EXIT_OK,
    EXIT_USAGE,
    Loaded,
    UsageError,
    dump_conversation,
    load_conversation,
    progress,
    table,
    write_json,
)
from contextfold.errors import (
    BudgetError,
    FormatError,
    MissingExtraError,
    PairingError,
    StoreError,
    SummarizerError,
)
from contextfold.memory import ConversationMemory
from contextfold.messages import Message
from contextfold.strategies.base import Strategy, StrategyResult
from contextfold.tokens.base import TokenCounter

# -- command: compact ----------------------------------------------------------------------


def _check_pairing(loaded: Loaded, repair: str | None) -> list[Message]:
    """Refuse broken tool pairing up front, naming the message, unless asked to repair.

    Sending a context with an orphaned tool result makes the provider answer 400; it is
    better to say so on the input than to produce an unusable output.
    """
    from contextfold import turns

    try:
        turns.validate(loaded.messages, allow_pending_tail=True)
    except PairingError as exc:
        if repair is None:
            raise UsageError(
                f"{loaded.source}: {exc}",
                hint="fix the file, or pass --repair drop (remove orphans) or "
                "--repair text (keep them as plain text)",
            ) from exc
        return turns.repair(loaded.messages, mode="drop" if repair == "drop" else "text")
    return loaded.messages


def _stats_dict(result: Any, *, budget: int, messages_in: int) -> dict[str, Any]:
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
    }


def _memory_stats_dict(memory: ConversationMemory, context: Any, *, budget: int) -> dict[str, Any]:
    """Stats of a :class:`~contextfold.memory.Context`, named as in :func:`_stats_dict`.

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
    }


def _print_stats(stats: dict[str, Any], *, stream: IO[str]) -> None:
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
    rows.append(("fallback", stats["fallback"] or "none"))
    table("contextfold compact", ("", "value"), rows, stream=stream)


def _run_plan(
    strategy: Strategy, history: Sequence[Message], counter: TokenCounter, ckpt: Any
) -> StrategyResult:
    """Run the strategy once with the sync driver (the command line has no event loop)."""
    from contextfold.strategies.base import run

    return run(strategy, history, counter=counter, checkpoint=ckpt)


def _open_memory(
    url: str, conversation: str, strategy: Strategy, counter: TokenCounter
) -> ConversationMemory:
    """The memory of a stored conversation; a bad URL is reported, not raised as a traceback."""

    try:
        return ConversationMemory.open(
            url, conversation_id=conversation, strategy=strategy, counter=counter
        )
    except (MissingExtraError, StoreError, FormatError):
        raise
    except ValueError as exc:
        raise UsageError(
            f"--store {url}: {exc}", hint="e.g. sqlite:///chats.db or redis://localhost:6379/0"
        ) from exc


def _compact_with_store(
    args: argparse.Namespace,
    loaded: Loaded,
    messages: list[Message],
    strategy: Any,
    counter: TokenCounter,
) -> tuple[Any, dict[str, Any], int]:
    """Sync the file into a stored conversation and build its context with the memory.

    The file is taken as the whole conversation: messages beyond those already stored are
    appended, so running the command again after the conversation grew appends only the new
    ones, and the memory reuses the stored checkpoint instead of summarizing again.
    """
    conversation = args.conversation or Path(loaded.source).stem or "default"
    with _open_memory(args.store, conversation, strategy, counter) as memory:
        stored = memory.store.last_seq(conversation)
        if stored > len(messages):
            raise UsageError(
                f"conversation {conversation!r} in the store has {stored} messages but the file "
                f"has {len(messages)}: it is not the same conversation",
                hint="pick another --conversation id",
            )
        if stored < len(messages):
            memory.extend(messages[stored:])
        context = memory.build_context()
        stats = _memory_stats_dict(memory, context, budget=args.budget)
    return context, stats, len(messages) - stored


def cmd_compact(args: argparse.Namespace) -> int:
    """``compact``: the context that fits the budget, in the input's format, with stats."""
    loaded = load_conversation(args.file, fmt=args.format)
    messages = _check_pairing(loaded, args.repair)
    counter = build_counter(args.counter)
    needs_summary = args.strategy in ("summary", "hybrid", "checkpoint")
    summarizer = build_summarizer(args.summarizer) if needs_summary else None
    strategy = build_strategy(
        args.strategy, budget=args.budget, summarizer=summarizer, keep_recent=args.keep_recent
    )
    appended = None
    if args.store is not None:
        context, stats, appended = _compact_with_store(args, loaded, messages, strategy, counter)
        out_messages: Sequence[Message] = context.messages
    else:
        with progress("counting tokens", len(messages), enabled=len(messages) > 2000) as advance:
            for m in messages:
                counter.count_message(m)
                advance(1)
        result = _run_plan(strategy, messages, counter, None)
        out_messages = result.messages
        stats = _stats_dict(result, budget=args.budget, messages_in=len(messages))
    if args.no_fallback and stats["fallback"]:
        raise SummarizerError(
            f"the summarizer failed ({stats['fallback']}) and --no-fallback forbids the "
            "sliding-window fallback; nothing was written",
            code=stats.get("failure_code"),
        )
    after = counter.count_messages(out_messages)
    if after > args.budget:  # the strategies guarantee this; never pass an oversize context
        raise BudgetError(
            f"the context needs {after} tokens, over the budget of {args.budget}",
            budget=args.budget,
            required=after,
        )
    stats["format"] = loaded.format
    if appended is not None:
        stats["store"] = {"url": args.store, "appended": appended}
    payload = dump_conversation(out_messages, loaded.format, loaded.envelope)
    if args.json:
        if args.output and args.output != "-":
            write_json(payload, args.output)
            write_json({"output": args.output, "stats": stats}, None)
        else:
            write_json({"context": payload, "stats": stats}, None)
        return EXIT_OK
    write_json(payload, args.output)
    if not args.quiet:
        if loaded.note:
            sys.stderr.write(f"note: {loaded.note}\n")
        _print_stats(stats, stream=sys.stderr)
    return EXIT_OK


# -- command: plan -------------------------------------------------------------------------


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


def cmd_plan(args: argparse.Namespace) -> int:
    """``plan``: each message's fate and why, from a dry run that calls no summarizer."""
    from contextfold.strategies.base import dry_run
    from contextfold.turns import prefix_length

    loaded = load_conversation(args.file, fmt=args.format)
    messages = _check_pairing(loaded, args.repair)
    counter = build_counter(args.counter)
    needs_summary = args.strategy in ("summary", "hybrid", "checkpoint")
    # A plan never calls a model, so the offline summarizer stands in for any provider.
    summarizer = build_summarizer("extractive") if needs_summary else None
    strategy = build_strategy(
        args.strategy, budget=args.budget, summarizer=summarizer, keep_recent=args.keep_recent
    )
    result = dry_run(strategy, messages, counter=counter)
    action: dict[int, tuple[str, str]] = {}
    for a, b in result.summarized_ranges:
        for i in range(a, b):
            action[i] = ("summarized", "older than the kept window; folded into the summary")
    for a, b in result.dropped_ranges:
        for i in range(a, b):
            action[i] = ("dropped", "older than the kept window; no summary covers it")
    pruned = set(result.pruned)
    kept = set(result.kept)
    n_prefix = prefix_length(messages)
    rows = []
    for i, m in enumerate(messages):
        if i in action:
            act, why = action[i]
        elif m.id in pruned:
            act, why = "pruned", "old tool output replaced by a short placeholder"
        elif i < n_prefix:
            act, why = "kept", "system prefix is always kept"
        elif m.id in kept:
            act, why = "kept", "recent enough to fit the budget"
        else:
            act, why = "kept", "part of the context"
        rows.append(
            {
                "index": i,
                "role": m.role,
                "tokens": counter.count_message(m),
                "action": act,
                "reason": why,
                "preview": preview(m),
            }
        )
    summary = {
        "strategy": result.strategy,
        "budget": args.budget,
        "tokens_before": result.tokens_before,
        "projected_tokens": result.tokens,
        "counts": dict(_Tally(r["action"] for r in rows)),
        "summary_calls_needed": result.summary_calls,
        "fallback": result.fallback,
        "notes": list(result.notes),
    }
    if args.json:
        write_json({"plan": summary, "messages": rows}, None)
        return EXIT_OK
    table(
        f"plan: {loaded.source} with {result.strategy} in {args.budget:,} tokens",
        ("#", "role", "tokens", "action", "why", "preview"),
        [
            (r["index"], r["role"], r["tokens"], r["action"], r["reason"], r["preview"])
            for r in rows
        ],
        stream=sys.stdout,
    )
    counts = ", ".join(f"{v} {k}" for k, v in sorted(summary["counts"].items()))
    sys.stdout.write(
        f"tokens: {result.tokens_before:,} now, {result.tokens:,} projected "
        f"(budget {args.budget:,}); {counts}; summarizer calls needed: {result.summary_calls}\n"
    )
    if result.summary_calls:
        sys.stdout.write("projection uses a placeholder summary; the real one may be longer\n")
    for note in result.notes:
        sys.stdout.write(f"note: {note}\n")
    return EXIT_OK


# -- command: stats ------------------------------------------------------------------------


def conversation_stats(messages: Sequence[Message], counter: TokenCounter) -> dict[str, Any]:
    """Token breakdown by role, tool and turn, the largest messages, and window fit."""
    from contextfold.turns import group_turns

    per = [counter.count_message(m) for m in messages]
    total = sum(per)
    by_role: dict[str, dict[str, int]] = {}
    for m, t in zip(messages, per, strict=True):
        row = by_role.setdefault(m.role, {"messages": 0, "tokens": 0})
        row["messages"] += 1
        row["tokens"] += t
    call_names: dict[str, str] = {}
    by_tool: dict[str, dict[str, int]] = {}
    for m in messages:
        for c in m.tool_calls:
            call_names[c.id] = c.name
            row = by_tool.setdefault(c.name, {"calls": 0, "call_tokens": 0, "result_tokens": 0})
            row["calls"] += 1
            row["call_tokens"] += counter.count_text(c.name) + counter.count_text(c.arguments)
        for r in m.tool_results:
            name = call_names.get(r.call_id) or r.name or "(unknown)"
            row = by_tool.setdefault(name, {"calls": 0, "call_tokens": 0, "result_tokens": 0})
            row["result_tokens"] += counter.count_text(r.text)
    turns = []
    for n, turn in enumerate(group_turns(messages)):
        tokens = sum(per[turn.start : turn.end])
        turns.append(
            {
                "turn": n,
                "first_index": turn.start,
                "messages": turn.end - turn.start,
                "tokens": tokens,
                "preview": preview(turn.messages[0], 50),
            }
        )
    largest = sorted(range(len(messages)), key=lambda i: (-per[i], i))[:10]
    return {
        "messages": len(messages),
        "tokens": total,
        "by_role": by_role,
        "by_tool": by_tool,
        "turns": turns,
        "largest": [
            {
                "index": i,
                "role": messages[i].role,
                "tokens": per[i],
                "preview": preview(messages[i], 50),
            }
            for i in largest
        ],
        "windows": [
            {
                "window": label,
                "tokens": size,
                "used_percent": round(100 * total / size, 1),
                "fits": total <= size,
            }
            for label, size in CONTEXT_WINDOWS
        ],
    }


def cmd_stats(args: argparse.Namespace) -> int:
    """``stats``: where the tokens of one or more conversations go."""
    counter = build_counter(args.counter)
    results = []
    with progress("reading", len(args.files)) as advance:
        for path in args.files:
            loaded = load_conversation(path, fmt=args.format)
            stats = conversation_stats(loaded.messages, counter)
            stats["file"] = loaded.source
            stats["format"] = loaded.format
            results.append(stats)
            advance(1)
    if args.json:
        write_json(results[0] if len(results) == 1 else results, None)
        return EXIT_OK
    out = sys.stdout
    for s in results:
        total = s["tokens"] or 1
        out.write(
            f"{s['file']}: {s['messages']:,} messages, {s['tokens']:,} tokens ({s['format']})\n\n"
        )
        table(
            "by role",
            ("role", "messages", "tokens", "share"),
            [
                (role, v["messages"], v["tokens"], f"{100 * v['tokens'] / total:.1f}%")
                for role, v in sorted(s["by_role"].items(), key=lambda kv: -kv[1]["tokens"])
            ],
            stream=out,
        )
        if s["by_tool"]:
            table(
                "by tool",
                ("tool", "calls", "call tokens", "result tokens"),
                [
                    (name, v["calls"], v["call_tokens"], v["result_tokens"])
                    for name, v in sorted(
                        s["by_tool"].items(), key=lambda kv: -kv[1]["result_tokens"]
                    )
                ],
                stream=out,
            )
        turns = s["turns"]
        shown = turns if args.all_turns else sorted(turns, key=lambda t: -t["tokens"])[: args.top]
        table(
            "by turn" if args.all_turns else f"heaviest turns (of {len(turns)})",
            ("turn", "from #", "messages", "tokens", "starts with"),
            [
                (t["turn"], t["first_index"], t["messages"], t["tokens"], t["preview"])
                for t in shown
            ],
            stream=out,
        )
        table(
            "largest messages",
            ("#", "role", "tokens", "preview"),
            [(m["index"], m["role"], m["tokens"], m["preview"]) for m in s["largest"][: args.top]],
            stream=out,
        )
        table(
            "against common context windows",
            ("window", "tokens", "used", "fits"),
            [(w["window"], w["tokens"], f"{w['used_percent']}%", w["fits"]) for w in s["windows"]],
            stream=out,
        )
    return EXIT_OK


# -- command: convert ----------------------------------------------------------------------


def cmd_convert(args: argparse.Namespace) -> int:
    """``convert``: the same conversation in another provider format."""
    loaded = load_conversation(args.file, fmt=args.format)
    envelope = loaded.envelope if args.to == loaded.format else None
    try:
        payload = dump_conversation(loaded.messages, args.to, envelope)
    except FormatError as exc:
        raise UsageError(f"cannot express this conversation as {args.to}: {exc}") from exc
    write_json(payload, args.output)
    return EXIT_OK


# -- command: log --------------------------------------------------------------------------


def cmd_log_append(args: argparse.Namespace) -> int:
    """``log append``: add one message (``--role``/``--text``) or a whole file to a log."""
    if args.file is not None and args.text is not None:
        raise UsageError("give either FILE or --text, not both", code=EXIT_USAGE)
    if args.file is None and args.text is None:
        raise UsageError("give a FILE to append, or --role and --text", code=EXIT_USAGE)
    if args.file is not None:
        messages = load_conversation(args.file, fmt=args.format).messages
    else:
        role = args.role or "user"
        if role == "system":
            message = Message.system(args.text)
        elif role == "developer":
            message = Message.developer(args.text)
        elif role == "assistant":
            message = Message.assistant(args.text)
        else:
            message = Message.user(args.text)
        messages = [message]
    store = open_store(args.store)
    try:
        seqs = store.append(args.conversation, messages)
    finally:
        store.close()
    if args.json:
        write_json({"conversation": args.conversation, "seqs": seqs}, None)
    else:
        first, last = (seqs[0], seqs[-1]) if seqs else (0, 0)
        sys.stdout.write(
            f"appended {len(seqs)} message(s) to {args.conversation!r} (seq {first}..{last})\n"
        )
    return EXIT_OK


def cmd_log_show(args: argparse.Namespace) -> int:
    """``log show``: the stored messages with their sequence numbers, and the checkpoints."""
    store = open_store(args.store)
    try:
        rows = store.read(args.conversation)
        checkpoints = store.checkpoints(args.conversation)
    finally:
        store.close()
    if not rows:
        raise UsageError(f"no conversation {args.conversation!r} in {args.store}")
    if args.json:
        write_json(
            {
                "conversation": args.conversation,
                "messages": [dict(r.message.to_dict(), seq=r.seq) for r in rows],
                "checkpoints": [c.to_dict() for c in checkpoints],
            },
            None,
        )
        return EXIT_OK
    counter = build_counter(args.counter)
    table(
        f"{args.conversation}: {len(rows)} messages",
        ("seq", "role", "tokens", "text"),
        [
            (r.seq, r.message.role, counter.count_message(r.message), preview(r.message))
            for r in rows
        ],
        stream=sys.stdout,
    )
    if checkpoints:
        table(
            "checkpoints",
            ("id", "strategy", "covers up to seq", "tokens before", "tokens after"),
            [
                (c.id, c.strategy, c.last_covered_seq, c.tokens_before, c.tokens_after)
                for c in checkpoints
            ],
            stream=sys.stdout,
        )
    return EXIT_OK


def cmd_log_list(args: argparse.Namespace) -> int:
    """``log list``: the conversations of a store with their message counts."""
    store = open_store(args.store)
    try:
        ids = store.list_conversations()
        counts = {cid: store.last_seq(cid) for cid in ids}
    finally:
        store.close()
    if args.json:
        write_json([{"conversation": c, "messages": counts[c]} for c in ids], None)
        return EXIT_OK
    table(
        f"{len(ids)} conversation(s) in {args.store}",
        ("conversation", "messages"),
        [(c, counts[c]) for c in ids],
        stream=sys.stdout,
    )
    return EXIT_OK


def cmd_log_context(args: argparse.Namespace) -> int:
    """``log context``: what an application would send now, built by ``ConversationMemory``.

    Goes through the memory (not the strategy alone) so checkpoints are committed and
    reused, and compaction is single-flight, exactly as in an application.
    """
    counter = build_counter(args.counter)
    needs_summary = args.strategy in ("summary", "hybrid", "checkpoint")
    summarizer = build_summarizer(args.summarizer) if needs_summary else None
    strategy = build_strategy(
        args.strategy, budget=args.budget, summarizer=summarizer, keep_recent=args.keep_recent
    )
    with _open_memory(args.store, args.conversation, strategy, counter) as memory:
        if memory.store.last_seq(args.conversation) == 0:
            raise UsageError(f"no conversation {args.conversation!r} in {args.store}")
        context = memory.build_context()
        stats = _memory_stats_dict(memory, context, budget=args.budget)
    if args.no_fallback and stats["fallback"]:
        raise SummarizerError(
            f"the summarizer failed ({stats['fallback']}) and --no-fallback forbids the "
            "sliding-window fallback",
        )
    payload = dump_conversation(context.messages, args.to)
    if args.json:
        write_json({"context": payload, "stats": stats}, None)
        return EXIT_OK
    write_json(payload, args.output)
    if not args.quiet:
        _print_stats(stats, stream=sys.stderr)
    return EXIT_OK
