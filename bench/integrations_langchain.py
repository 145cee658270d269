"""LangChain's own ``SummarizationMiddleware`` and ``ContextfoldMiddleware`` on the same agent runs.

Run ``python -m bench.integrations_langchain`` (the first 20 τ-bench airline runs from
``../shared/data``), ``--runs N`` for more, or ``--tiny`` (the one τ-bench run copied into
``examples/agent_run.json``; also what runs when the shared data is missing). Offline: no
model is called.

Each recorded run is replayed through LangChain's real ``create_agent`` loop. A replay model
answers each model call with the run's next recorded assistant message (its tool calls
included), and a tool middleware answers each tool call with the recorded result, so every
configuration sees the same conversation. One invocation per user turn, on one thread with
LangGraph's in-memory checkpointer. The summaries are a fixed text of the same length for
both middlewares (the summary's quality is not what is measured here).

Measured on what the model received at each call (system prompt and tool schemas included,
counted with contextfold's approximate counter):

* tokens sent: the total over the run's calls, and the largest single call;
* calls over budget;
* calls with a broken tool pair (a tool message without its call, or a call without its
  results before the next turn);
* summary calls;
* messages left in the agent state at the end (LangChain's middleware replaces the state's
  history with its summary; ours leaves it whole).

A run in which one tool exchange alone is over the budget is left out of every
configuration (ours refuses such a call with ``BudgetError`` rather than send it over budget);
how many were left out is printed.

Configurations: no middleware; LangChain's ``SummarizationMiddleware(trigger=("tokens",
BUDGET), keep=("messages", KEEP))``; ``ContextfoldMiddleware(Summarization(BUDGET,
keep_recent=KEEP))``. LangChain's trigger counts the state's messages only, so it also runs
with the trigger lowered by the system prompt's and tool schemas' tokens. Raw figures go to
``bench/out/integrations_langchain.json``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, SummarizationMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, convert_to_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from contextfold.errors import BudgetError, PairingError
from contextfold.integrations.langchain import ContextfoldMiddleware, from_langchain
from contextfold.strategies import Summarization
from contextfold.testing import FakeSummarizer
from contextfold.tokens import ApproxCounter
from contextfold.turns import validate

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "bench" / "out" / "integrations_langchain.json"
BUDGET = 4000
TINY_BUDGET = 2000  # the example run is short: a smaller budget makes it compact too
KEEP = 6
SUMMARY = ("The customer wants to change a reservation; ids, dates and amounts so far: " * 6)[:600]
COUNTER = ApproxCounter()


@dataclass
class Figures:
    """One configuration's totals over the runs."""

    budget: int = BUDGET
    calls: int = 0
    tokens_sent: int = 0
    largest_call: int = 0
    over_budget: int = 0
    broken_pairs: int = 0
    summary_calls: int = 0
    state_messages: int = 0
    full_messages: int = 0
    sizes: list[int] = field(default_factory=list, repr=False)

    def see(self, system: BaseMessage | None, messages: Sequence[BaseMessage], tools: int) -> None:
        """Record one model call."""
        ours = from_langchain([*([system] if system is not None else []), *messages])
        tokens = COUNTER.count_messages(ours) + tools
        self.calls += 1
        self.tokens_sent += tokens
        self.largest_call = max(self.largest_call, tokens)
        self.over_budget += tokens > self.budget
        try:
            validate(ours, allow_pending_tail=True)
        except PairingError:
            self.broken_pairs += 1


class ReplayModel(BaseChatModel):
    """Answers each call with the next recorded assistant message."""

    script: list[AIMessage]
    figures: Figures
    tool_tokens: int = 0

    @property
    def _llm_type(self) -> str:
        return "replay"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        schemas = [convert_to_openai_tool(t) for t in tools]
        return self.model_copy(update={"tool_tokens": COUNTER.count_tools(schemas)})

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        if not self.script:  # the run was cut off after a tool result: end the turn uncounted
            return ChatResult(generations=[ChatGeneration(message=AIMessage(""))])
        system = messages[0] if messages and messages[0].type == "system" else None
        self.figures.see(system, messages[1:] if system is not None else messages, self.tool_tokens)
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])


class SummaryModel(BaseChatModel):
    """LangChain's summarizer model: a fixed text, counted."""

    figures: Figures

    @property
    def _llm_type(self) -> str:
        return "summary"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.figures.summary_calls += 1
        return ChatResult(generations=[ChatGeneration(message=AIMessage(SUMMARY))])


class RecordedTool(BaseTool):
    """A tool of the run; its calls are answered by :class:`ReplayTools`."""

    description: str = "a tool of the recorded run"

    def _run(self, *args: Any, **kwargs: Any) -> str:  # pragma: no cover - never reached
        raise AssertionError("answered by ReplayTools")


class ReplayTools(AgentMiddleware):
    """Answers each tool call with the run's recorded result for its id."""

    def __init__(self, results: dict[str, list[ToolMessage]]) -> None:
        super().__init__()
        self.results = results

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> ToolMessage:
        return self.results[request.tool_call["id"]].pop(0)  # ids recur in long runs


def turns_of(traj: list[dict[str, Any]]) -> tuple[str, list[list[BaseMessage]], list[AIMessage]]:
    """The system prompt, the user messages of each turn, and the assistant script."""
    messages = convert_to_messages(traj)
    for i, m in enumerate(messages):
        m.id = f"m{i}"
    system = str(messages[0].content) if messages[0].type == "system" else ""
    turns: list[list[BaseMessage]] = []
    script: list[AIMessage] = []
    previous = ""
    for m in messages[1 if system else 0 :]:
        if m.type == "human":
            if previous != "human":
                turns.append([])
            turns[-1].append(m)
        elif isinstance(m, AIMessage):
            script.append(m)
        previous = m.type
    return system, turns, script


Factory = Callable[["Figures", int], list[Any]]


def replay(traj: list[dict[str, Any]], middleware: Factory, budget: int) -> Figures:
    """Run one recorded conversation through ``create_agent`` with ``middleware``."""
    figures = Figures(budget=budget)
    system, turns, script = turns_of(traj)
    results: dict[str, list[ToolMessage]] = {}
    for m in convert_to_messages(traj):
        if isinstance(m, ToolMessage):
            results.setdefault(m.tool_call_id, []).append(m)
    names = sorted({c["name"] for m in script for c in m.tool_calls})
    tools = [RecordedTool(name=name) for name in names]
    model = ReplayModel(script=list(script), figures=figures)
    fixed = model.bind_tools(tools).tool_tokens + COUNTER.count_text(system)
    agent = create_agent(
        model,
        tools,
        system_prompt=system or None,
        middleware=[*middleware(figures, fixed), ReplayTools(results)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "run"}, "recursion_limit": 200}
    for turn in turns:
        if not model.script:
            break
        agent.invoke({"messages": turn}, config)
    state = agent.get_state(config).values["messages"]
    figures.state_messages = len(state)
    figures.full_messages = len(convert_to_messages(traj)) - (1 if system else 0)
    return figures


def langchain_middleware(figures: Figures, fixed: int, *, lowered: bool = False) -> list[Any]:
    """LangChain's middleware; its trigger counts the state's messages only."""
    trigger = figures.budget - fixed if lowered else figures.budget
    model = SummaryModel(figures=figures)
    return [SummarizationMiddleware(model, trigger=("tokens", trigger), keep=("messages", KEEP))]


def contextfold_middleware(figures: Figures, fixed: int) -> list[Any]:
    """Ours; the budget covers the system prompt and the tool schemas as well."""

    class Counted(FakeSummarizer):
        def summarize(self, request: Any, /) -> Any:
            figures.summary_calls += 1
            return super().summarize(request)

    strategy = Summarization(figures.budget, keep_recent=KEEP, summarizer=Counted(SUMMARY))
    return [ContextfoldMiddleware(strategy)]


CONFIGS: dict[str, Factory] = {
    "no middleware": lambda figures, fixed: [],
    "LangChain SummarizationMiddleware, trigger = budget": langchain_middleware,
    "LangChain SummarizationMiddleware, trigger = budget - system prompt - tools": (
        lambda figures, fixed: langchain_middleware(figures, fixed, lowered=True)
    ),
    "ContextfoldMiddleware(Summarization(budget))": contextfold_middleware,
}


def runs(n: int, tiny: bool) -> Iterator[list[dict[str, Any]]]:
    path = DATA / "tau-bench" / "gpt-4o-airline.json"
    if tiny or not path.exists():
        if not tiny:
            print(f"(shared data not found at {path}: replaying examples/agent_run.json)")
        yield json.loads((ROOT / "examples" / "agent_run.json").read_text())
        return
    for run in json.loads(path.read_text())[:n]:
        yield run["traj"]


def total(parts: list[Figures]) -> Figures:
    out = Figures(budget=parts[0].budget if parts else BUDGET)
    for f in parts:
        for key in ("calls", "tokens_sent", "over_budget", "broken_pairs", "summary_calls"):
            setattr(out, key, getattr(out, key) + getattr(f, key))
        out.largest_call = max(out.largest_call, f.largest_call)
        out.state_messages += f.state_messages
        out.full_messages += f.full_messages
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="τ-bench runs to replay")
    parser.add_argument("--tiny", action="store_true", help="one run from examples/")
    args = parser.parse_args(argv)
    trajs = list(runs(args.runs, args.tiny))
    budget = TINY_BUDGET if args.tiny else BUDGET
    per_run: dict[str, list[Figures]] = {name: [] for name in CONFIGS}
    left_out = 0
    for traj in trajs:
        try:
            done = {name: replay(traj, make, budget) for name, make in CONFIGS.items()}
        except BudgetError:  # one tool exchange alone is over the budget: no window can fit
            left_out += 1
            continue
        for name, f in done.items():
            per_run[name].append(f)
    figures = {name: total(parts) for name, parts in per_run.items()}
    replayed = len(trajs) - left_out
    print(f"{replayed} recorded agent runs, budget {budget} tokens, keep {KEEP} messages")
    print(f"({left_out} left out: a single tool exchange in them is over the budget)\n")
    print(
        "| | model calls | tokens sent | largest call | calls over budget "
        "| calls with a broken tool pair | summary calls | state messages kept |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, f in figures.items():
        print(
            f"| {name} | {f.calls} | {f.tokens_sent:,} | {f.largest_call:,} | {f.over_budget} "
            f"| {f.broken_pairs} | {f.summary_calls} | {f.state_messages} of {f.full_messages} |"
        )
    result = {
        "runs": replayed,
        "left_out": left_out,
        "budget": budget,
        "keep": KEEP,
        "figures": {k: asdict(v) for k, v in figures.items()},
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
