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
from contextfold.errors import BudgetError, FormatError, PairingError, SummarizerError
from contextfold.messages import Message
from contextfold.tokens.base import TokenCounter

# -- command: compact ----------------------------------------------------------------------


def _check_pairing(loaded: Loaded, repair: str | None) -> list[Message]:
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
    before = int(result.tokens_before)
    after = int(result.tokens)
    usage = result.usage
    return {
        "strategy": result.strategy,
        "budget": budget,
        "tokens_before": before,
        "tokens_after": after,
        "tokens_saved": max(0, before - after),
        "compression_ratio": round(before / after, 3) if after else None,
        "messages_before": messages_in,
        "messages_after": len(result.messages),
        "messages_kept": len(result.kept),
        "messages_summarized": result.summarized_count,
        "messages_dropped": result.dropped_count,
        "messages_pruned": len(result.pruned),
        "summarized": bool(result.is_summarized),
        "summary_calls": result.summary_calls,
        "summarizer_usage": usage.to_dict() if usage is not None else None,
        "reused_checkpoint": result.reused_checkpoint.id if result.reused_checkpoint else None,
        "new_checkpoint": result.checkpoint.id if result.checkpoint else None,
        "fallback": result.fallback,
        "failure_code": result.failure_code,
    }


def _print_stats(stats: dict[str, Any], *, stream: IO[str]) -> None:
    ratio = stats["compression_ratio"]
    rows: list[tuple[str, object]] = [
        ("strategy", stats["strategy"]),
        ("budget", stats["budget"]),
        ("tokens before", stats["tokens_before"]),
        ("tokens after", stats["tokens_after"]),
        ("tokens saved", stats["tokens_saved"]),
        ("compression", f"{ratio:.2f}x" if ratio else "-"),
        ("messages in / out", f"{stats['messages_before']} / {stats['messages_after']}"),
        ("kept verbatim", stats["messages_kept"]),
        ("summarized", stats["messages_summarized"]),
        ("dropped", stats["messages_dropped"]),
        ("tool outputs pruned", stats["messages_pruned"]),
        ("summary in context", stats["summarized"]),
        ("summarizer calls", stats["summary_calls"]),
    ]
    if stats.get("reused_checkpoint"):
        rows.append(("reused checkpoint", stats["reused_checkpoint"]))
    if stats.get("new_checkpoint"):
        rows.append(("new checkpoint", stats["new_checkpoint"]))
    rows.append(("fallback", stats["fallback"] or "none"))
    table("contextfold compact", ("", "value"), rows, stream=stream)


def _run_plan(strategy: Any, history: Sequence[Message], counter: TokenCounter, ckpt: Any) -> Any:
    from contextfold.strategies.base import run

    return run(strategy, history, counter=counter, checkpoint=ckpt)


def _compact_with_store(
    args: argparse.Namespace,
    loaded: Loaded,
    messages: list[Message],
    strategy: Any,
    counter: TokenCounter,
) -> tuple[Any, list[Message], int]:
    """Sync the file into the store, build the context on the stored log, save the checkpoint.

    The file is taken as the whole conversation: messages beyond those already stored are
    appended, so running the command again after the conversation grew appends only the
    new ones and reuses the stored checkpoint.
    """
    conversation = args.conversation or Path(loaded.source).stem or "default"
    store = open_store(args.store)
    try:
        stored = store.last_seq(conversation)
        if stored > len(messages):
            raise UsageError(
                f"conversation {conversation!r} in the store has {stored} messages but the file "
                f"has {len(messages)}: it is not the same conversation",
                hint="pick another --conversation id",
            )
        if stored < len(messages):
            store.append(conversation, messages[stored:])
        rows = store.read(conversation)
        history = [r.message for r in rows]
        seq_of = {r.message.id: r.seq for r in rows}
        latest = store.latest_checkpoint(conversation)
        ckpt = latest if latest is not None and latest.strategy == strategy.name else None
        result = _run_plan(strategy, history, counter, ckpt)
        if result.checkpoint is not None and not (args.no_fallback and result.fallback):
            record = result.checkpoint
            if record.last_covered_seq is None and record.last_covered_id in seq_of:
                record = record.replace(last_covered_seq=seq_of[record.last_covered_id])
            store.append_checkpoint(
                conversation, record, expected_previous=latest.id if latest else None
            )
        return result, history, len(messages) - stored
    finally:
        store.close()


def cmd_compact(args: argparse.Namespace) -> int:
    loaded = load_conversation(args.file, fmt=args.format)
    messages = _check_pairing(loaded, args.repair)
    counter = build_counter(args.counter)
    needs_summary = args.strategy in ("summary", "hybrid", "checkpoint", "compactor")
    summarizer = build_summarizer(args.summarizer) if needs_summary else None
    strategy = build_strategy(
        args.strategy, budget=args.budget, summarizer=summarizer, keep_recent=args.keep_recent
    )
    appended = None
    if args.store is not None:
        result, history, appended = _compact_with_store(args, loaded, messages, strategy, counter)
    else:
        history = messages
        with progress("counting tokens", len(history), enabled=len(history) > 2000) as advance:
            for m in history:
                counter.count_message(m)
                advance(1)
        result = _run_plan(strategy, history, counter, None)
    if args.no_fallback and result.fallback:
        raise SummarizerError(
            f"the summarizer failed ({result.fallback}) and --no-fallback forbids the "
            "sliding-window fallback; nothing was written",
            code=result.failure_code,
        )
    after = counter.count_messages(result.messages)
    if after > args.budget:  # the strategies guarantee this; never pass an oversize context
        raise BudgetError(
            f"the context needs {after} tokens, over the budget of {args.budget}",
            budget=args.budget,
            required=after,
        )
    stats = _stats_dict(result, budget=args.budget, messages_in=len(history))
    stats["format"] = loaded.format
    if appended is not None:
        stats["store"] = {"url": args.store, "appended": appended}
    payload = dump_conversation(result.messages, loaded.format, loaded.envelope)
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
    from contextfold.strategies.base import dry_run
    from contextfold.turns import prefix_length

    loaded = load_conversation(args.file, fmt=args.format)
    messages = _check_pairing(loaded, args.repair)
    counter = build_counter(args.counter)
    needs_summary = args.strategy in ("summary", "hybrid", "checkpoint", "compactor")
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
    counter = build_counter(args.counter)
    needs_summary = args.strategy in ("summary", "hybrid", "checkpoint", "compactor")
    summarizer = build_summarizer(args.summarizer) if needs_summary else None
    strategy = build_strategy(
        args.strategy, budget=args.budget, summarizer=summarizer, keep_recent=args.keep_recent
    )
    store = open_store(args.store)
    try:
        rows = store.read(args.conversation)
        if not rows:
            raise UsageError(f"no conversation {args.conversation!r} in {args.store}")
        history = [r.message for r in rows]
        seq_of = {r.message.id: r.seq for r in rows}
        latest = store.latest_checkpoint(args.conversation)
        ckpt = latest if latest is not None and latest.strategy == strategy.name else None
        result = _run_plan(strategy, history, counter, ckpt)
        if args.no_fallback and result.fallback:
            raise SummarizerError(
                f"the summarizer failed ({result.fallback}) and --no-fallback forbids the "
                "sliding-window fallback",
                code=result.failure_code,
            )
        if result.checkpoint is not None:
            record = result.checkpoint
            if record.last_covered_seq is None and record.last_covered_id in seq_of:
                record = record.replace(last_covered_seq=seq_of[record.last_covered_id])
            store.append_checkpoint(
                args.conversation, record, expected_previous=latest.id if latest else None
            )
    finally:
        store.close()
    stats = _stats_dict(result, budget=args.budget, messages_in=len(history))
    payload = dump_conversation(result.messages, args.to)
    if args.json:
        write_json({"context": payload, "stats": stats}, None)
        return EXIT_OK
    write_json(payload, args.output)
    if not args.quiet:
        _print_stats(stats, stream=sys.stderr)
    return EXIT_OK
