"""An OpenAI Agents SDK agent whose session lives in SQLite and whose model calls are compacted.

A support agent answers four questions; for each it looks two orders up with a tool whose
records are long. ``ContextfoldSession`` keeps every item in SQLite and starts each run from a
compacted view; ``input_filter`` keeps every model call of a run inside the budget, folding old
tool outputs into a summary (the offline extractive summarizer) that later calls reuse.

Run it with a key (the SDK's OpenAI client reads ``OPENAI_API_KEY`` and, for a proxy or a
local server, ``OPENAI_BASE_URL``)::

    OPENAI_API_KEY=sk-... python examples/openai_agents_session.py [DB]

``CONTEXTFOLD_MODEL`` picks the model (default ``gpt-4o-mini``). Without ``DB`` the session
lives in a temporary file, so every run starts fresh.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from contextfold import ExtractiveSummarizer, Hybrid
from contextfold.integrations.openai_agents import ContextfoldSession, input_filter

QUESTIONS = [
    "Where are orders LS-48219 and LS-48220?",
    "And LS-48221 and LS-48222?",
    "Did any of them ship from Tilburg? Check LS-48219 and LS-48221 again.",
    "Which refund was pending on the first order I asked about?",
]


async def main(db: Path) -> int:
    from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)  # this example uploads no traces

    @function_tool
    def order_record(order: str) -> str:
        """The full record of an order: status, carrier, parcel, items and notes."""
        return (
            f"{order}: shipped with PostNL, parcel {order[-3:]}A; two 4 TB drives; warehouse "
            f"Tilburg; refund RF-{order[-4:]} pending review; deliver after 17:00. "
        ) * 6

    strategy = Hybrid(
        max_tokens=1200,  # small on purpose, so a short run needs a summary
        keep_recent=6,
        chunk_size=10,
        summarizer=ExtractiveSummarizer(),
    )
    session = ContextfoldSession("customer-42", f"sqlite:///{db}", strategy=strategy)
    agent = Agent(
        name="support",
        instructions="You are the order desk of Lumen Storage. Answer in one sentence.",
        tools=[order_record],
        model=os.environ.get("CONTEXTFOLD_MODEL", "gpt-4o-mini"),
    )
    run_config = RunConfig(call_model_input_filter=input_filter(strategy))
    for question in QUESTIONS:
        result = await Runner.run(agent, question, session=session, run_config=run_config)
        print(f"> {question}\n{result.final_output}")
    stored = await ContextfoldSession("customer-42", session.memory.store).get_items()
    view = await session.get_items()
    stats = session.memory.stats
    summary = stats.is_summarized if stats is not None else False
    print(
        f"\nstored {len(stored)} items; the next run starts from {len(view)} (summary: {summary})",
        file=sys.stderr,
    )
    session.close()
    return 0


if __name__ == "__main__":
    if not os.environ.get("OPENAI_API_KEY"):
        print("set OPENAI_API_KEY first (OPENAI_BASE_URL for a proxy or a local server)")
        raise SystemExit(1)
    if len(sys.argv) > 1:
        raise SystemExit(asyncio.run(main(Path(sys.argv[1]))))
    with tempfile.TemporaryDirectory() as tmp:
        code = asyncio.run(main(Path(tmp) / "agents.db"))
    raise SystemExit(code)
