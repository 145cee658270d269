"""``stats``: where the tokens of one or more conversations go.

The breakdown (by role, by tool, by turn, the largest messages, and the fit against common
context windows) is a plain dict, so ``--json`` and the tables show the same numbers.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import IO, Any

from contextfold.cli._build import build_counter
from contextfold.cli._io import (
    CONTEXT_WINDOWS,
    EXIT_OK,
    load_conversation,
    progress,
    table,
    write_json,
)
from contextfold.cli._options import add_command, add_input, add_json, positive
from contextfold.cli._report import preview
from contextfold.messages import Message
from contextfold.tokens.base import TokenCounter


def add_stats_parser(sub: Any) -> None:
    """The ``stats`` sub-parser."""
    p = add_command(
        sub,
        "stats",
        "token breakdown by role, tool and turn",
        "Count the tokens of one or more conversations: by role, by tool, by turn, the "
        "largest messages, and how the total compares with common context windows.",
    )
    add_input(p, many=True)
    p.add_argument("--top", type=positive, default=5, metavar="N", help="rows per ranking")
    p.add_argument("--all-turns", action="store_true", help="list every turn in order")
    add_json(p)
    p.set_defaults(func=cmd_stats)


# -- the breakdown -------------------------------------------------------------------------


def _by_role(messages: Sequence[Message], per: Sequence[int]) -> dict[str, dict[str, int]]:
    """Messages and tokens per role; ``per`` holds each message's token count."""
    by_role: dict[str, dict[str, int]] = {}
    for m, t in zip(messages, per, strict=True):
        row = by_role.setdefault(m.role, {"messages": 0, "tokens": 0})
        row["messages"] += 1
        row["tokens"] += t
    return by_role


def _by_tool(messages: Sequence[Message], counter: TokenCounter) -> dict[str, dict[str, int]]:
    """Calls and tokens per tool; a result is charged to the tool its call named."""
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
    return by_tool


def _by_turn(messages: Sequence[Message], per: Sequence[int]) -> list[dict[str, Any]]:
    """Each turn (a user message and what answers it) with its size and first words."""
    from contextfold.turns import group_turns

    return [
        {
            "turn": n,
            "first_index": turn.start,
            "messages": turn.end - turn.start,
            "tokens": sum(per[turn.start : turn.end]),
            "preview": preview(turn.messages[0], 50),
        }
        for n, turn in enumerate(group_turns(messages))
    ]


def conversation_stats(messages: Sequence[Message], counter: TokenCounter) -> dict[str, Any]:
    """Token breakdown by role, tool and turn, the largest messages, and window fit."""
    per = [counter.count_message(m) for m in messages]
    total = sum(per)
    largest = sorted(range(len(messages)), key=lambda i: (-per[i], i))[:10]
    return {
        "messages": len(messages),
        "tokens": total,
        "by_role": _by_role(messages, per),
        "by_tool": _by_tool(messages, counter),
        "turns": _by_turn(messages, per),
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


# -- the command ---------------------------------------------------------------------------


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
    for s in results:
        _print_breakdown(s, top=args.top, all_turns=args.all_turns, out=sys.stdout)
    return EXIT_OK


def _print_breakdown(s: dict[str, Any], *, top: int, all_turns: bool, out: IO[str]) -> None:
    """The tables of one conversation's breakdown, heaviest rows first."""
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
                for name, v in sorted(s["by_tool"].items(), key=lambda kv: -kv[1]["result_tokens"])
            ],
            stream=out,
        )
    turns = s["turns"]
    shown = turns if all_turns else sorted(turns, key=lambda t: -t["tokens"])[:top]
    table(
        "by turn" if all_turns else f"heaviest turns (of {len(turns)})",
        ("turn", "from #", "messages", "tokens", "starts with"),
        [(t["turn"], t["first_index"], t["messages"], t["tokens"], t["preview"]) for t in shown],
        stream=out,
    )
    table(
        "largest messages",
        ("#", "role", "tokens", "preview"),
        [(m["index"], m["role"], m["tokens"], m["preview"]) for m in s["largest"][:top]],
        stream=out,
    )
    table(
        "against common context windows",
        ("window", "tokens", "used", "fits"),
        [(w["window"], w["tokens"], f"{w['used_percent']}%", w["fits"]) for w in s["windows"]],
        stream=out,
    )
