"""``compact`` and ``plan``: fit a conversation file into a budget, or show how it would be.

Both read a file, check its tool pairing and configure the same strategy; ``compact`` runs
it (optionally through a store, so checkpoints persist) and writes the context, ``plan``
dry-runs it and explains each message's fate.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contextfold.cli._build import build_counter, open_memory, strategy_from_args
from contextfold.cli._io import (
    DEFAULT_STORE,
    EXIT_OK,
    Loaded,
    UsageError,
    dump_conversation,
    load_conversation,
    progress,
    table,
    write_json,
)
from contextfold.cli._options import (
    add_command,
    add_input,
    add_json,
    add_output,
    add_quiet,
    add_strategy,
    conversation_id,
)
from contextfold.cli._report import (
    memory_stats,
    preview,
    print_stats,
    refuse_fallback,
    result_stats,
)
from contextfold.errors import BudgetError, PairingError
from contextfold.messages import Message
from contextfold.strategies.base import Strategy, StrategyResult
from contextfold.tokens.base import TokenCounter

_REPAIR = ("drop", "text")

# -- command: compact ----------------------------------------------------------------------


def add_compact_parser(sub: Any) -> None:
    """The ``compact`` sub-parser."""
    p = add_command(
        sub,
        "compact",
        "write the part of a conversation that fits a token budget",
        "Read a conversation, fit it into --budget tokens with the chosen strategy, and write "
        "the result in the same provider format. A stats table goes to stderr. Wrapper "
        "objects are accepted: a request body ('messages'/'input'), a tau-bench run ('traj'), "
        "a SWE-agent trajectory ('history'), and Claude Code session logs (JSONL).",
    )
    add_input(p)
    add_strategy(p)
    add_output(p, "write the context here (default stdout)")
    add_json(p, 'print {"context": ..., "stats": ...} on stdout instead of a table on stderr')
    add_quiet(p)
    p.add_argument(
        "--repair",
        choices=_REPAIR,
        help="fix broken tool pairing instead of failing: drop orphans, or keep them as text",
    )
    p.add_argument(
        "--store",
        nargs="?",
        const=DEFAULT_STORE,
        metavar="URL",
        help=f"also persist the conversation and its checkpoint (default URL: {DEFAULT_STORE}); "
        "a second run appends only new messages and reuses the checkpoint",
    )
    p.add_argument(
        "--conversation",
        type=conversation_id,
        metavar="ID",
        help="conversation id in the store (default: the file name without extension)",
    )
    p.set_defaults(func=cmd_compact)


def check_pairing(loaded: Loaded, repair: str | None) -> list[Message]:
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


def _compact_with_store(
    args: argparse.Namespace,
    loaded: Loaded,
    messages: list[Message],
    strategy: Strategy,
    counter: TokenCounter,
) -> tuple[Any, dict[str, Any], int]:
    """Sync the file into a stored conversation and build its context with the memory.

    The file is taken as the whole conversation: messages beyond those already stored are
    appended, so running the command again after the conversation grew appends only the new
    ones, and the memory reuses the stored checkpoint instead of summarizing again.
    """
    conversation = args.conversation or Path(loaded.source).stem or "default"
    with open_memory(
        args.store, conversation, strategy, counter, getattr(args, "prices", None)
    ) as memory:
        rows = memory.store.read(conversation)  # compared with the file below
        stored = len(rows)  # seqs run from 1 without gaps
        if stored > len(messages):
            raise UsageError(
                f"conversation {conversation!r} in the store has {stored} messages but the file "
                f"has {len(messages)}: it is not the same conversation",
                hint="pick another --conversation id",
            )
        differs = _first_difference(rows, messages)
        if differs is not None:
            raise UsageError(
                f"conversation {conversation!r} in the store differs from the file at message "
                f"{differs + 1}: it is not the same conversation, or the file was edited there",
                hint="pick another --conversation id",
            )
        if stored < len(messages):
            memory.extend(messages[stored:])
        context = memory.build_context()
        stats = memory_stats(memory, context, budget=args.budget)
    return context, stats, len(messages) - stored


def _first_difference(stored: Sequence[Any], messages: Sequence[Message]) -> int | None:
    """Index of the first stored message the file does not have in the same place, or None.

    Messages read from a file get ids from their position, role and content, so a file of
    another conversation, or one edited, differs from the stored log by id.
    """
    for i, row in enumerate(stored):
        if i >= len(messages) or row.message != messages[i]:
            return i
    return None


def _compact_in_memory(
    strategy: Strategy, messages: list[Message], counter: TokenCounter, budget: int
) -> tuple[Sequence[Message], dict[str, Any]]:
    """Run the strategy once with the sync driver (the command line has no event loop)."""
    from contextfold.strategies.run import run

    with progress("counting tokens", len(messages), enabled=len(messages) > 2000) as advance:
        for m in messages:
            counter.count_message(m)
            advance(1)
    result = run(strategy, messages, counter=counter, checkpoint=None)
    return result.messages, result_stats(result, budget=budget, messages_in=len(messages))


def cmd_compact(args: argparse.Namespace) -> int:
    """``compact``: the context that fits the budget, in the input's format, with stats."""
    loaded = load_conversation(args.file, fmt=args.format)
    messages = check_pairing(loaded, args.repair)
    counter = build_counter(args.counter)
    strategy = strategy_from_args(args, counter=counter)
    appended = None
    if args.store is not None:
        context, stats, appended = _compact_with_store(args, loaded, messages, strategy, counter)
        out_messages: Sequence[Message] = context.messages
    else:
        out_messages, stats = _compact_in_memory(strategy, messages, counter, args.budget)
    if args.no_fallback and stats["fallback"]:
        refuse_fallback(stats, detail="; nothing was written")
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
    _write_compacted(args, payload, stats, note=loaded.note)
    return EXIT_OK


def _write_compacted(
    args: argparse.Namespace, payload: Any, stats: dict[str, Any], *, note: str | None
) -> None:
    """The context on stdout or ``-o``, then the stats: in the JSON, or as a table on stderr."""
    if args.json:
        if args.output and args.output != "-":
            write_json(payload, args.output)
            write_json({"output": args.output, "stats": stats}, None)
        else:
            write_json({"context": payload, "stats": stats}, None)
        return
    write_json(payload, args.output)
    if not args.quiet:
        if note:
            sys.stderr.write(f"note: {note}\n")
        print_stats(stats, title="contextfold compact", stream=sys.stderr)


# -- command: plan -------------------------------------------------------------------------


def add_plan_parser(sub: Any) -> None:
    """The ``plan`` sub-parser."""
    p = add_command(
        sub,
        "plan",
        "dry run: show what each message would become, and why",
        "Show, per message, whether it would be kept, pruned, summarized or dropped, and "
        "the projected tokens. No summarizer is called.",
    )
    add_input(p)
    add_strategy(p, summarizer=False)
    add_json(p)
    p.add_argument("--repair", choices=_REPAIR, help="fix broken tool pairing first")
    p.set_defaults(func=cmd_plan)


def plan_rows(
    result: StrategyResult, messages: Sequence[Message], counter: TokenCounter
) -> list[dict[str, Any]]:
    """One row per input message: its fate in ``result`` and the reason for it."""
    from contextfold.turns import prefix_length

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
    return rows


def cmd_plan(args: argparse.Namespace) -> int:
    """``plan``: each message's fate and why, from a dry run that calls no summarizer."""
    from contextfold.strategies.run import dry_run

    loaded = load_conversation(args.file, fmt=args.format)
    messages = check_pairing(loaded, args.repair)
    counter = build_counter(args.counter)
    # A plan never calls a model, so the offline summarizer stands in for any provider.
    strategy = strategy_from_args(args, summarizer_spec="extractive", counter=counter)
    result = dry_run(strategy, messages, counter=counter)
    rows = plan_rows(result, messages, counter)
    summary = {
        "strategy": result.strategy,
        "budget": args.budget,
        "tokens_before": result.tokens_before,
        "projected_tokens": result.tokens,
        "counts": dict(Counter(r["action"] for r in rows)),
        "summary_calls_needed": result.summary_calls,
        "fallback": result.fallback,
        "notes": list(result.notes),
        "recalled": list(result.recalled),
    }
    if args.json:
        write_json({"plan": summary, "messages": rows}, None)
    else:
        _print_plan(loaded.source, result, rows, summary)
    return EXIT_OK


def _print_plan(
    source: str, result: StrategyResult, rows: list[dict[str, Any]], summary: dict[str, Any]
) -> None:
    """The plan as a table on stdout, then the projected totals and the strategy's notes."""
    budget = summary["budget"]
    table(
        f"plan: {source} with {result.strategy} in {budget:,} tokens",
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
        f"(budget {budget:,}); {counts}; summarizer calls needed: {result.summary_calls}\n"
    )
    if result.summary_calls:
        sys.stdout.write("projection uses a placeholder summary; the real one may be longer\n")
    for note in result.notes:
        sys.stdout.write(f"note: {note}\n")
