"""The same OpenAI Agents SDK run, with the SDK's own history handling and with ours.

One scripted support conversation (``--turns`` user turns; in each, the model calls a tool
twice, in parallel, then answers; every tool output is a long order record) runs through the
SDK's real ``Runner.run`` against the local wire server in ``tests/wire``, once per setup:

* ``SDK SQLiteSession``: the SDK's session, no trimming (every item is resent);
* ``SDK SQLiteSession, limit N``: the SDK's ``SessionSettings(limit=N)``, the newest N items
  (a turn is six items here, so 12 cuts between turns and 10 inside one);
* ``SDK ToolOutputTrimmer``: the SDK's own ``call_model_input_filter``, which shortens old tool
  outputs;
* ``contextfold``: :class:`ContextfoldSession` with a ``Hybrid`` strategy, plus
  :func:`input_filter` with the same strategy, the offline extractive summarizer.

For every model call the server received it counts the tokens sent (approximate counter,
instructions included) and whether every tool call was sent with its output and every output
with its call; and it checks whether the last request still names the first turn's order
(verbatim or in a summary), a crude sign of what the model can still see. ``OpenAIResponsesCompactionSession`` is left out: it compacts through the
hosted ``responses.compact`` endpoint, which a local server cannot stand in for honestly.

Offline, deterministic, no key. Run: ``python -m bench.integrations_openai_agents [--tiny]``;
prints a Markdown table and writes ``bench/out/integrations_openai_agents.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextfold import turns
from contextfold.errors import PairingError
from contextfold.formats import openai_responses
from contextfold.integrations.openai_agents import ContextfoldSession, input_filter
from contextfold.messages import Message
from contextfold.strategies import Hybrid
from contextfold.summarizers import ExtractiveSummarizer
from contextfold.summarizers.base import SummarizationResult, SummaryRequest
from contextfold.tokens.approx import ApproxCounter

OUT = Path(__file__).parent / "out" / "integrations_openai_agents.json"
BUDGET = 2000
INSTRUCTIONS = "You are the order desk of Lumen Storage. Answer in one sentence."
RECORD = (
    "status shipped; carrier PostNL; parcel {n}A-77{n}; two 4 TB drives; warehouse Tilburg; "
    "refund RF-77{n} pending review; customer note: deliver after 17:00. "
) * 4


class CountingSummarizer:
    """The extractive summarizer, counting its calls."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.calls = 0

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        self.calls += 1
        return self.inner.summarize(request)


def _script(turn: int) -> list[Any]:
    from tests.wire import JSONReply
    from tests.wire.openai_server import function_call_item, response_object

    calls = [
        {**function_call_item(), "id": f"fc_{turn}_{k}", "call_id": f"call_{turn}_{k}",
         "name": "order_record", "arguments": json.dumps({"order": f"LS-{turn}{k}"})}
        for k in range(2)
    ]  # fmt: skip
    answer = {"type": "message", "id": f"msg_{turn}", "status": "completed", "role": "assistant",
              "content": [{"type": "output_text", "text": f"Order LS-{turn}0 ships today.",
                           "annotations": []}]}  # fmt: skip
    return [JSONReply(response_object(None, output=calls)),
            JSONReply(response_object(None, output=[answer]))]  # fmt: skip


def _measure(body: dict[str, Any], counter: ApproxCounter) -> tuple[int, bool]:
    messages = openai_responses.load(body["input"])
    tokens = counter.count_messages([Message.system(body.get("instructions") or ""), *messages])
    try:
        turns.validate(messages)
    except PairingError:
        return tokens, False
    return tokens, True


def _setup(setup: str, summarizer: CountingSummarizer, db: Path) -> tuple[Any, Any]:
    """The session and run config of ``setup``."""
    from agents import RunConfig, SessionSettings, SQLiteSession
    from agents.extensions.tool_output_trimmer import ToolOutputTrimmer

    strategy = Hybrid(BUDGET, keep_recent=6, chunk_size=12, summarizer=summarizer)
    if setup == "contextfold":
        session = ContextfoldSession(setup, f"sqlite:///{db}", strategy=strategy)
        return session, RunConfig(call_model_input_filter=input_filter(strategy))
    if setup.startswith("SDK SQLiteSession, limit"):
        limit = int(setup.rsplit(" ", 1)[1])
        return SQLiteSession(setup, db, session_settings=SessionSettings(limit=limit)), None
    if setup == "SDK ToolOutputTrimmer":
        return SQLiteSession(setup, db), RunConfig(call_model_input_filter=ToolOutputTrimmer())
    return SQLiteSession(setup, db), None


async def _run(setup: str, turns_: int, db: Path) -> dict[str, Any]:
    from agents import (
        Agent,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI
    from tests.wire import WireServer

    set_tracing_disabled(True)

    @function_tool
    def order_record(order: str) -> str:
        """The full record of an order."""
        return f"{order}: " + RECORD.format(n=order[-2:])

    summarizer = CountingSummarizer()
    session, config = _setup(setup, summarizer, db)
    counter = ApproxCounter()
    sent: list[tuple[int, bool]] = []
    with WireServer() as server:
        client = AsyncOpenAI(base_url=server.url + "/v1", api_key="bench", max_retries=0)
        model = OpenAIResponsesModel(model="gpt-test-mini", openai_client=client)
        agent = Agent(name="desk", instructions=INSTRUCTIONS, tools=[order_record], model=model)
        for turn in range(turns_):
            server.script(*_script(turn))
            await Runner.run(agent, f"Turn {turn}: where are orders LS-{turn}0 and LS-{turn}1?",
                             session=session, run_config=config)  # fmt: skip
            sent += [_measure(r.body, counter) for r in server.requests]
        last = json.dumps(server.requests[-1].body["input"])
        await client.close()
    session.close()
    return {
        "setup": setup,
        "model_calls": len(sent),
        "tokens_sent": sum(t for t, _ in sent),
        "largest_request": max(t for t, _ in sent),
        "requests_with_broken_pairs": sum(1 for _, ok in sent if not ok),
        "summary_calls": summarizer.calls if setup == "contextfold" else 0,
        "first_turn_visible_at_end": "LS-00" in last,
    }


SETUPS = (
    "SDK SQLiteSession",
    "SDK SQLiteSession, limit 12",
    "SDK SQLiteSession, limit 10",
    "SDK ToolOutputTrimmer",
    "contextfold",
)


def run(turns_: int, *, out: Path | None = OUT) -> list[dict[str, Any]]:
    """Every setup on the same run; writes the figures to ``out`` when given."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, setup in enumerate(SETUPS):
            rows.append(asyncio.run(_run(setup, turns_, Path(tmp) / f"run{i}.db")))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"turns": turns_, "budget": BUDGET, "rows": rows}, indent=2))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of the docs."""
    head = ("| setup | model calls | tokens sent | largest request | requests with broken pairs "
            "| summary calls | first turn still visible |\n|---|---|---|---|---|---|---|")  # fmt: skip
    lines = [
        f"| {r['setup']} | {r['model_calls']} | {r['tokens_sent']:,} | {r['largest_request']:,} "
        f"| {r['requests_with_broken_pairs']} | {r['summary_calls']} "
        f"| {'yes' if r['first_turn_visible_at_end'] else 'no'} |"
        for r in rows
    ]
    return "\n".join([head, *lines])


def main(argv: list[str] | None = None, *, emit: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tiny", action="store_true", help="a short run (for the smoke test)")
    parser.add_argument("--turns", type=int, default=12, help="user turns in the run")
    args = parser.parse_args(argv)
    rows = run(3 if args.tiny else args.turns)
    emit(f"{args.turns if not args.tiny else 3} turns; contextfold budget {BUDGET} tokens.\n")
    emit(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
