"""``log append/show/list/context``: a stored conversation, from the shell.

These commands use a store the way an application does: ``append`` adds to the log,
``show`` and ``list`` read it, and ``context`` builds the next request's context through
:class:`~contextfold.memory.ConversationMemory`, so checkpoints are committed and reused.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from contextfold.cli._build import (
    build_counter,
    open_memory,
    open_store,
    require_existing_store,
    strategy_from_args,
)
from contextfold.cli._io import (
    EXIT_OK,
    EXIT_USAGE,
    FORMATS,
    UsageError,
    dump_conversation,
    load_conversation,
    table,
    write_json,
)
from contextfold.cli._options import (
    add_command,
    add_counter,
    add_format,
    add_json,
    add_output,
    add_quiet,
    add_strategy,
    conversation_id,
)
from contextfold.cli._report import memory_stats, preview, print_stats, refuse_fallback
from contextfold.messages import Message

_ROLES = ("system", "developer", "user", "assistant")


def add_log_parser(sub: Any) -> None:
    """The ``log`` sub-parser and its four subcommands."""
    log = add_command(
        sub,
        "log",
        "append to and read a stored conversation",
        "Use a store (sqlite:///file.db, redis://..., postgresql://...) from the shell.",
    )
    log_sub = log.add_subparsers(dest="log_command", metavar="SUBCOMMAND", required=True)

    def log_command(name: str, help_text: str) -> argparse.ArgumentParser:
        q = add_command(log_sub, name, help_text)
        q.add_argument(
            "--store",
            required=True,
            metavar="URL",
            help="store URL: sqlite:///file.db, redis://..., postgresql://...",
        )
        return q

    q = log_command("append", "append messages to a stored conversation")
    _add_conversation(q)
    q.add_argument("file", nargs="?", metavar="FILE", help="conversation file to append")
    q.add_argument("--role", choices=_ROLES, help="role of the --text message (default: user)")
    q.add_argument("--text", help="text of one message to append")
    add_format(q)
    add_json(q)
    q.set_defaults(func=cmd_log_append)

    q = log_command("show", "print a stored conversation and its checkpoints")
    _add_conversation(q)
    add_counter(q)
    add_json(q)
    q.set_defaults(func=cmd_log_show)

    q = log_command("list", "list the conversations in a store")
    add_json(q)
    q.set_defaults(func=cmd_log_list)

    q = log_command("context", "build the context of a stored conversation within a budget")
    _add_conversation(q)
    add_strategy(q)
    add_counter(q)
    q.add_argument("--to", choices=FORMATS, default="openai", help="output format")
    add_output(q, "write the context here (default stdout)")
    add_json(q, 'print {"context": ..., "stats": ...} on stdout instead of a table on stderr')
    add_quiet(q)
    q.set_defaults(func=cmd_log_context)


def _add_conversation(p: argparse.ArgumentParser) -> None:
    """``--conversation ID``: which conversation of the store (required)."""
    p.add_argument(
        "--conversation",
        required=True,
        type=conversation_id,
        metavar="ID",
        help="conversation id in the store",
    )


def _message(role: str, text: str) -> Message:
    """One message of ``role`` (a role the log accepts from the shell) with ``text``."""
    if role == "system":
        return Message.system(text)
    if role == "developer":
        return Message.developer(text)
    if role == "assistant":
        return Message.assistant(text)
    return Message.user(text)


def cmd_log_append(args: argparse.Namespace) -> int:
    """``log append``: add one message (``--role``/``--text``) or a whole file to a log."""
    if args.file is not None and args.text is not None:
        raise UsageError("give either FILE or --text, not both", code=EXIT_USAGE)
    if args.file is None and args.text is None:
        raise UsageError("give a FILE to append, or --role and --text", code=EXIT_USAGE)
    if args.file is not None:
        messages = load_conversation(args.file, fmt=args.format).messages
    else:
        messages = [_message(args.role or "user", args.text)]
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
    require_existing_store(args.store, conversation=args.conversation)
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
    require_existing_store(args.store)
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
    strategy = strategy_from_args(args, counter=counter)
    require_existing_store(args.store, conversation=args.conversation)
    with open_memory(
        args.store, args.conversation, strategy, counter, getattr(args, "prices", None)
    ) as memory:
        if memory.store.last_seq(args.conversation) == 0:
            raise UsageError(f"no conversation {args.conversation!r} in {args.store}")
        context = memory.build_context()
        stats = memory_stats(memory, context, budget=args.budget)
    if args.no_fallback and stats["fallback"]:
        refuse_fallback(stats)
    payload = dump_conversation(context.messages, args.to)
    if args.json:
        write_json({"context": payload, "stats": stats}, None)
        return EXIT_OK
    write_json(payload, args.output)
    if not args.quiet:
        print_stats(stats, title="contextfold log context", stream=sys.stderr)
    return EXIT_OK
