"""Provider adapters: what a summary call sends, and what the adapter layer costs.

Run ``python -m bench.bench_adapters`` (all τ-bench runs and the three main Claude Code
sessions, 200 timed calls per case) or ``--tiny`` (a few conversations, 20 calls).

1. **Isolated vs cache-aligned input.** For each real conversation the ``Checkpoint``
   strategy (budget: half the conversation's tokens) plans a summary call in each mode; the
   call is built exactly as the adapter sends it (``OpenAISummarizer.build_request`` for the
   τ-bench OpenAI Chat runs, ``AnthropicSummarizer.build_request`` for the Claude Code
   sessions). Reported per mode: input tokens (approximate counter on the JSON the provider
   receives), the *cacheable share* (tokens of the leading messages whose content is identical
   to the conversation's own request, the most a prefix cache can serve; ``cache_control``
   markers and string-vs-text-block spelling are ignored, as they do not change what is
   cached; isolated calls use a fresh cache identity, so none), and the *effective input cost* in uncached-token units
   with cache reads priced at 10% (Anthropic's and OpenAI's current discount).
2. **Adapter overhead.** The same request sent through the real SDK client to a local wire
   server (``tests/wire``), once as a raw SDK call with prebuilt arguments and once through
   the adapter (prompt building, result mapping). The difference is what the adapter adds per
   call; the median of interleaved runs is reported.

Raw figures go to ``bench/out/adapters.json``; Markdown tables go to stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from contextfold.errors import BudgetError
from contextfold.formats import anthropic as anthropic_format
from contextfold.formats import openai_chat
from contextfold.formats.claude_code import merge_records
from contextfold.messages import Message
from contextfold.strategies.checkpoint import Checkpoint
from contextfold.strategies.run import run
from contextfold.summarizers.anthropic import AnthropicSummarizer
from contextfold.summarizers.base import SummarizationResult, SummaryRequest
from contextfold.summarizers.openai import OpenAISummarizer
from contextfold.summarizers.settings import SummarizerSettings
from contextfold.tokens.approx import ApproxCounter

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "bench" / "out" / "adapters.json"
CACHE_READ_PRICE = 0.1
COUNTER = ApproxCounter()


# -- data ---------------------------------------------------------------------------------------


def _claude_code_payload(path: Path) -> list[dict[str, Any]]:
    """A Claude Code session merged into Messages API messages (as the data README says)."""
    return merge_records(json.loads(line) for line in path.read_text().splitlines() if line)


def _tau_conversations(limit: int | None) -> list[list[dict[str, Any]]]:
    runs = json.loads((DATA / "tau-bench" / "gpt-4o-airline.json").read_text())
    return [r["traj"] for r in runs[:limit]]


def _claude_code_conversations(limit: int | None) -> list[dict[str, Any]]:
    base = DATA / "claude-code-sessions"
    paths = sorted(p for p in base.glob("*.jsonl") if len(p.stem) > 30)[:limit]
    return [{"messages": _claude_code_payload(p)} for p in paths]


# -- part 1: isolated vs cache-aligned ----------------------------------------------------------


class _Capture:
    """Records the summary request a strategy sends and answers with a short summary."""

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        self.requests.append(request)
        return SummarizationResult.success("## Primary request and intent\n- (bench)")


def _tokens(value: Any) -> int:
    return COUNTER.count_text(value if isinstance(value, str) else json.dumps(value))


def _unmarked(value: Any) -> Any:
    """``value`` without ``cache_control`` markers (they place cache entries; the cached
    content is the same with or without them)."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _same_content(a: Any, b: Any) -> bool:
    a, b = _unmarked(a), _unmarked(b)
    if isinstance(a.get("content"), str):
        a = {**a, "content": [{"type": "text", "text": a["content"]}]}
    if isinstance(b.get("content"), str):
        b = {**b, "content": [{"type": "text", "text": b["content"]}]}
    return bool(a == b)


def _leading_identical(sent: Sequence[Any], own: Sequence[Any]) -> int:
    n = 0
    for a, b in zip(sent, own, strict=False):
        if not _same_content(a, b):
            break
        n += 1
    return n


def _measure(body: dict[str, Any], own_messages: Sequence[Any], aligned: bool) -> dict[str, int]:
    """Input tokens of one provider request, and how many a prefix cache could serve."""
    head = {k: v for k, v in body.items() if k in ("system", "tools", "instructions")}
    messages = body.get("messages", [])
    head_tokens = _tokens(head) if head else 0
    total = head_tokens + sum(_tokens(m) for m in messages)
    cached = 0
    if aligned:
        same = _leading_identical(messages, own_messages)
        cached = head_tokens + sum(_tokens(m) for m in messages[:same])
    return {"input": total, "cached": cached}


def _request_in_mode(history: list[Message], mode: str) -> SummaryRequest | None:
    """The summary request Checkpoint sends at half the conversation's tokens (or 3/4)."""
    total = COUNTER.count_messages(history)
    for share in (0.5, 0.75):
        capture = _Capture()
        strategy = Checkpoint(capture, max_tokens=int(total * share), mode=mode)  # type: ignore[arg-type]
        try:
            run(strategy, history)
        except BudgetError:
            continue  # the newest turn alone is over this budget; try a larger one
        return capture.requests[0] if capture.requests else None
    return None


def compare_modes(tiny: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    openai_adapter = OpenAISummarizer(object(), async_client=object(), model="gpt-4o-mini")
    anthropic_adapter = AnthropicSummarizer(object(), async_client=object(), model="claude")
    cases: list[tuple[str, list[Any], Callable[[Any], tuple[list[Message], list[Any]]], Any]] = [
        (
            "τ-bench airline (OpenAI Chat)",
            list(_tau_conversations(5 if tiny else None)),
            lambda traj: (openai_chat.load(traj), traj),
            lambda req: openai_adapter.build_request(req),
        ),
        (
            "Claude Code sessions (Anthropic)",
            list(_claude_code_conversations(1 if tiny else None)),
            lambda payload: (anthropic_format.load(payload), payload["messages"]),
            lambda req: anthropic_adapter.build_request(req),
        ),
    ]
    for name, conversations, load, build in cases:
        per_mode: dict[str, list[dict[str, int]]] = {"isolated": [], "cache_aligned": []}
        for raw in conversations:
            history, own = load(raw)
            for mode in per_mode:
                req = _request_in_mode(history, mode)
                if req is None:
                    continue
                body = build(req)
                body.pop("timeout", None)
                per_mode[mode].append(_measure(body, own, mode == "cache_aligned"))
        for mode, figures in per_mode.items():
            if not figures:
                continue
            total = sum(f["input"] for f in figures)
            cached = sum(f["cached"] for f in figures)
            effective = total - cached + CACHE_READ_PRICE * cached
            rows.append(
                {
                    "data": name,
                    "mode": mode,
                    "calls": len(figures),
                    "median_input_tokens": statistics.median(f["input"] for f in figures),
                    "total_input_tokens": total,
                    "cacheable_share": cached / total if total else 0.0,
                    "effective_cost_tokens": effective,
                }
            )
    by_data: dict[str, float] = {}
    for row in rows:
        if row["mode"] == "isolated":
            by_data[row["data"]] = row["effective_cost_tokens"]
    for row in rows:
        base = by_data.get(row["data"])
        row["cost_vs_isolated"] = row["effective_cost_tokens"] / base if base else None
    return rows


# -- part 2: adapter overhead -------------------------------------------------------------------


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def overhead(tiny: bool) -> list[dict[str, Any]]:
    import anthropic
    import openai
    from tests.wire import JSONReply, SSEReply, WireServer
    from tests.wire import anthropic_server as anthropic_wire
    from tests.wire import openai_server as openai_wire

    calls = 20 if tiny else 200
    traj = _tau_conversations(1)[0]
    request = SummaryRequest(tuple(openai_chat.load(traj)[1:]))
    rows: list[dict[str, Any]] = []
    with WireServer() as srv:
        oa = openai.OpenAI(base_url=srv.url + "/v1", api_key="bench", max_retries=0)
        an = anthropic.Anthropic(base_url=srv.url, api_key="bench", max_retries=0)
        cases: list[tuple[str, Any, Any, Callable[[], Any], Callable[[Any], Any]]] = []
        for stream in (False, True):
            reply = (
                SSEReply(openai_wire.chat_stream(["A ", "short ", "summary."]))
                if stream
                else JSONReply(openai_wire.chat_completion("A short summary."))
            )
            adapter = OpenAISummarizer(
                oa, async_client=object(), model="m", settings=SummarizerSettings(stream=stream)
            )
            kwargs = adapter.build_request(request, client=oa)

            def raw_openai(kwargs: dict[str, Any] = kwargs, stream: bool = stream) -> None:
                answer = oa.chat.completions.create(**kwargs)
                if stream:
                    for _ in answer:
                        pass

            cases.append(("openai chat", stream, reply, raw_openai, adapter.summarize))
            a_reply = (
                SSEReply(anthropic_wire.message_stream([["A ", "short ", "summary."]]))
                if stream
                else JSONReply(anthropic_wire.message(["A short summary."]))
            )
            a_adapter = AnthropicSummarizer(
                an, async_client=object(), model="m", settings=SummarizerSettings(stream=stream)
            )
            a_kwargs = a_adapter.build_request(request)

            def raw_anthropic(kwargs: dict[str, Any] = a_kwargs, stream: bool = stream) -> None:
                answer = an.messages.create(**kwargs)
                if stream:
                    for _ in answer:
                        pass

            cases.append(("anthropic", stream, a_reply, raw_anthropic, a_adapter.summarize))
        for name, stream, reply, raw_call, adapter_call in cases:
            raw_times: list[float] = []
            ours: list[float] = []
            for _ in range(calls):  # interleaved, so a busy machine slows both alike
                srv.script(reply)
                raw_times.append(_timed(raw_call))
                srv.script(reply)
                start = time.perf_counter()
                result = adapter_call(request)
                ours.append(time.perf_counter() - start)
                assert result.ok, result.reason
            raw_ms = statistics.median(raw_times) * 1000
            ours_ms = statistics.median(ours) * 1000
            rows.append(
                {
                    "adapter": name,
                    "stream": stream,
                    "calls": calls,
                    "raw_sdk_ms": raw_ms,
                    "adapter_ms": ours_ms,
                    "overhead_ms": ours_ms - raw_ms,
                }
            )
        oa.close()
        an.close()
    return rows


# -- report ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a few conversations, 20 calls")
    args = parser.parse_args(argv)

    modes = compare_modes(args.tiny)
    costs = overhead(args.tiny)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"tiny": args.tiny, "modes": modes, "overhead": costs}, indent=2))

    print("## Summary-call input: isolated vs cache-aligned\n")
    print(
        "| data | mode | calls | median input tokens | cacheable share "
        "| effective cost (cache reads at 10%) | vs isolated |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in modes:
        ratio = f"{r['cost_vs_isolated']:.2f}x" if r["cost_vs_isolated"] is not None else "-"
        print(
            f"| {r['data']} | {r['mode']} | {r['calls']} | {r['median_input_tokens']:,.0f} "
            f"| {r['cacheable_share']:.1%} | {r['effective_cost_tokens']:,.0f} | {ratio} |"
        )
    print("\n## Adapter overhead per call (local wire server, real SDK client)\n")
    print(
        "| adapter | stream | calls | raw SDK call (ms) | through the adapter (ms) | overhead (ms) |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for r in costs:
        print(
            f"| {r['adapter']} | {r['stream']} | {r['calls']} | {r['raw_sdk_ms']:.2f} "
            f"| {r['adapter_ms']:.2f} | {r['overhead_ms']:+.2f} |"
        )


if __name__ == "__main__":
    main()
