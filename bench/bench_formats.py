"""Load and dump speed of the provider formats on long, real conversations.

Run ``python -m bench.bench_formats`` (1k, 10k and 100k messages) or ``--tiny`` (1k only).

The histories are real data repeated to size: τ-bench airline runs (OpenAI Chat, system prompts
left out after the first) for ``openai_chat``, the same messages dumped as Responses items for
``openai_responses``, and the merged Claude Code sessions (about 2 kB per message, many tool
results; tool ids made unique in each copy, as the API requires) for ``anthropic``. Each figure
is the best of a few runs of ``load`` then ``dump``, and every run checks that
``dump(load(x)) == x``. The machine's load matters: run it on a quiet machine for figures.

For scale, LangChain's ``convert_to_messages`` / ``convert_to_openai_messages`` (langchain-core)
run on the same Chat payload when installed; they are not lossless (unknown keys and the
``name`` of tool messages are dropped), so they are a speed reference only.

Raw figures go to ``bench/out/formats.json``; a Markdown table goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextfold.formats import anthropic, openai_chat, openai_responses

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "bench" / "out" / "formats.json"


def _claude_code_messages() -> list[dict[str, Any]]:
    """Claude Code sessions merged into API messages (as the data README describes)."""
    out: list[dict[str, Any]] = []
    for path in sorted((DATA / "claude-code-sessions").glob("*.jsonl")):
        merged: list[dict[str, Any]] = []
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r.get("type") not in ("user", "assistant") or not isinstance(r.get("message"), dict):
                continue
            m = r["message"]
            c = m["content"]
            blocks = [{"type": "text", "text": c}] if isinstance(c, str) else list(c)
            results = all(b.get("type") == "tool_result" for b in blocks)
            if m["role"] == "assistant":
                if (
                    merged
                    and merged[-1]["role"] == "assistant"
                    and merged[-1]["_id"] == m.get("id")
                ):
                    merged[-1]["content"] += blocks
                elif (
                    len(merged) >= 2
                    and merged[-2]["role"] == "assistant"
                    and merged[-2]["_id"] == m.get("id")
                    and merged[-1]["_results"]
                ):
                    merged[-2]["content"] += blocks
                else:
                    merged.append(
                        {
                            "role": "assistant",
                            "content": blocks,
                            "_id": m.get("id"),
                            "_results": False,
                        }
                    )
            elif results and merged and merged[-1]["role"] == "user" and merged[-1]["_results"]:
                merged[-1]["content"] += blocks
            else:
                merged.append({"role": "user", "content": blocks, "_id": None, "_results": results})
        out += [{"role": x["role"], "content": x["content"]} for x in merged]
    return out


def _repeat(base: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while len(out) < n:
        out.extend(base)
    return out[:n]


def _repeat_anthropic(base: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """Repeat with tool ids made unique per copy, as the API requires in one request."""
    out: list[dict[str, Any]] = []
    copy = 0
    while len(out) < n:
        for m in base:
            if isinstance(m["content"], list):
                blocks = []
                for b in m["content"]:
                    if copy and b.get("type") == "tool_use":
                        b = {**b, "id": f"{b['id']}_c{copy}"}
                    elif copy and b.get("type") == "tool_result":
                        b = {**b, "tool_use_id": f"{b['tool_use_id']}_c{copy}"}
                    blocks.append(b)
                m = {**m, "content": blocks}
            out.append(m)
        copy += 1
    return out[:n]


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best = float("inf")
    result: Any = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def _measure(name: str, module: Any, payload: Any, repeat: int) -> dict[str, Any]:
    load_s, messages = _best(lambda: module.load(payload), repeat)
    dump_s, dumped = _best(lambda: module.dump(messages), repeat)
    assert dumped == payload, f"{name}: round trip is not exact"
    return {"format": name, "messages": len(messages), "load_s": load_s, "dump_s": dump_s}


def _langchain(payload: list[dict[str, Any]], repeat: int) -> dict[str, Any] | None:
    try:
        from langchain_core.messages import convert_to_messages, convert_to_openai_messages
    except ImportError:
        return None
    load_s, messages = _best(lambda: convert_to_messages(payload), repeat)
    dump_s, _ = _best(lambda: convert_to_openai_messages(messages), repeat)
    return {
        "format": "langchain-core (chat)",
        "messages": len(messages),
        "load_s": load_s,
        "dump_s": dump_s,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="1k messages only (a few seconds)")
    args = parser.parse_args(argv)
    sizes = [1_000] if args.tiny else [1_000, 10_000, 100_000]

    runs = json.loads((DATA / "tau-bench" / "gpt-4o-airline.json").read_text())
    chat_base = runs[0]["traj"][:1] + [m for r in runs for m in r["traj"] if m["role"] != "system"]
    claude_base = _claude_code_messages()

    rows: list[dict[str, Any]] = []
    for n in sizes:
        repeat = 3 if n <= 10_000 else 1
        chat = _repeat(chat_base, n)
        rows.append(_measure("openai_chat", openai_chat, chat, repeat))
        items = openai_responses.dump(openai_chat.load(chat))
        rows.append(_measure("openai_responses", openai_responses, items, repeat))
        rows.append(
            _measure(
                "anthropic", anthropic, {"messages": _repeat_anthropic(claude_base, n)}, repeat
            )
        )
        peer = _langchain(chat, repeat)
        if peer is not None:
            rows.append(peer)

    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"rows": rows}, indent=2))
    print("| format | messages | load (ms) | dump (ms) | µs/message (load+dump) |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        total = (r["load_s"] + r["dump_s"]) / r["messages"] * 1e6
        print(
            f"| {r['format']} | {r['messages']:,} | {r['load_s'] * 1e3:.1f} | "
            f"{r['dump_s'] * 1e3:.1f} | {total:.1f} |"
        )


if __name__ == "__main__":
    main()
