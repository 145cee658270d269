"""Question-aware retention: is the answer in the context when the question is the newest message?

Every LoCoMo question of categories 1-4 whose answer occurs in its conversation is appended as
the newest user message after the whole conversation (speaker A as ``user``, B as
``assistant``, each message dated with its session's date). The context is built at 5%, 10%
and 25% of the conversation's tokens by SlidingWindow, Hybrid, Summarization and Checkpoint
(extractive summarizer), each with and without ``Recall`` (30% of the budget; ``fill``
rows also spend what the inner context leaves unused), by LangChain
``trim_messages``, and by LlamaIndex's ``Memory`` with a ``VectorMemoryBlock`` over a local
embedding model (``bench/_llama_vector.py``; the row is left out without ``wordllama``). As
a live app would, each strategy builds a context before every user
turn of the conversation, keeping its newest checkpoint and its state (where the cache-stable
window stands), and every question's build starts from those; Recall's searches are
answered by one BM25 index per conversation (what a store's search gives a
``ConversationMemory``). Score: the share of questions whose normalized answer (as in
``bench/retention.py``) appears as whole words in the context, the question itself left out.

Also measured: the median latency of a store's search on a stored 100,000-message
conversation (SQLite FTS5; PostgreSQL when ``CONTEXTFOLD_TEST_POSTGRES_URL`` names a server,
its table analyzed after the load as autovacuum would have it soon after),
and the median ``build_context`` time of a ``ConversationMemory`` on that SQLite conversation
with and without Recall.

Run: ``python -m bench.recall [--tiny] [--latency-only]`` (tiny: one conversation, 40
questions, a 3,000-message store; latency-only: the stored conversation's figures alone, not
written to ``bench/out``). Prints Markdown tables and writes ``bench/out/recall.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from bench._llama_vector import contexts as llama_vector_contexts
from bench.retention import (
    DATA,
    FRACTIONS,
    OUT,
    langchain_trim,
    locomo_messages,
    normalize,
    retained,
)
from contextfold import (
    Checkpoint,
    ConversationMemory,
    ExtractiveSummarizer,
    Hybrid,
    Message,
    Recall,
    SlidingWindow,
    Summarization,
)
from contextfold._drive import drive
from contextfold.checkpoints import CheckpointRecord
from contextfold.search import (
    BM25Index,
    VectorIndex,
    WordLlamaEmbedder,
    embed_checked,
    hit_around,
    rank_matches,
    searchable_text,
)
from contextfold.strategies.base import (
    PlanOp,
    SearchCall,
    Strategy,
    StrategyResult,
    StrategyState,
)
from contextfold.strategies.run import call_summarizer
from contextfold.tokens.approx import ApproxCounter
from contextfold.turns import prefix_length

COUNTER = ApproxCounter()
SHARE = 0.3
LLAMA_VECTOR = "LlamaIndex Memory + VectorMemoryBlock (WordLlama)"
#: The inner strategies measured with semantic recall too, and how their rows are marked.
SEMANTIC = ("SlidingWindow", "Checkpoint")
SEMANTIC_ROW = "(keywords + WordLlama)"

# -- data ----------------------------------------------------------------------------------


def dated_messages(sample: dict[str, Any]) -> list[Message]:
    """The conversation as messages; the session date opens each session and dates each one."""
    return locomo_messages(sample, dated=True)


def questions(sample: dict[str, Any], full_norm: str) -> list[tuple[str, str]]:
    """``(question, normalized answer)`` of categories 1-4 whose answer the chat contains."""
    padded = f" {full_norm} "
    out = []
    for q in sample["qa"]:
        if q.get("category") == 5 or "answer" not in q:
            continue
        answer = normalize(str(q["answer"]))
        if answer and f" {answer} " in padded:
            out.append((str(q["question"]), answer))
    return out


def without_question(context: Sequence[Message], question_id: str) -> list[Message]:
    """The context with the question's own text removed (what it brought was not recalled)."""
    out = list(context)
    for i in range(len(out) - 1, -1, -1):
        if out[i].id == question_id:
            parts = out[i].parts[:-1]
            out[i : i + 1] = [out[i].replace(parts=parts)] if parts else []
            break
    return out


# -- strategies ----------------------------------------------------------------------------


def strategies(budget: int, n: int = 512, room: int | None = None) -> dict[str, Strategy]:
    """The strategies measured, configured as ``bench/retention.py`` configures them.

    ``n`` is the conversation's length: Hybrid folds it in chunks of an eighth. ``room`` is
    what the strategy builds in (less than ``budget`` under Recall): summaries are capped
    at 70% of it, so the summary and the recent messages fit next to the excerpts.
    """
    room = budget if room is None else room
    extractive = ExtractiveSummarizer(max_output_tokens=room)
    return {
        "SlidingWindow": SlidingWindow(budget),
        "Hybrid": Hybrid(
            budget,
            keep_recent=8,
            chunk_size=max(8, n // 8),
            summarizer=extractive,
            max_output_tokens=int(room * 0.7),
        ),
        "Summarization": Summarization(
            budget, keep_recent=8, summarizer=extractive, max_output_tokens=int(room * 0.7)
        ),
        "Checkpoint": Checkpoint(extractive, max_tokens=budget, keep_recent_tokens=room // 5),
    }


class Conversation:
    """One conversation with its BM25 index: answers a plan's searches as a store would."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self.index = BM25Index()
        self.floor = prefix_length(messages)
        for i in range(self.floor, len(messages)):
            self.index.add(i, searchable_text(messages[i]))
        self.vectors: VectorIndex | None = None

    def semantic(self, op: SearchCall, hi: int) -> list[int]:
        """The embedder's ranking (the conversation embedded once, as a memory keeps it)."""
        if op.embedder is None:
            return []
        if self.vectors is None or self.vectors.name != op.embedder.name:
            texts = [searchable_text(m) for m in self.messages[self.floor :]]
            self.vectors = VectorIndex(op.embedder.name)
            self.vectors.add(
                range(self.floor, len(self.messages)), embed_checked(op.embedder, texts)
            )
        query = embed_checked(op.embedder, [op.query])[0]
        return self.vectors.search(query, limit=op.limit, lo=self.floor, hi=hi)

    def answer(self, history: Sequence[Message]) -> Callable[[PlanOp], Any]:
        def reply(op: PlanOp) -> Any:
            if isinstance(op, SearchCall):
                hi = min(op.before, len(self.messages))
                hits = self.index.search(op.query, limit=op.limit, hi=hi)
                matches = [p for p, _ in hits]
                ranked = rank_matches(op, matches, self.semantic(op, hi), self.floor, hi)
                return tuple(
                    hit_around(p, self.floor, hi, op.around, lambda a, b: history[a:b])
                    for p in ranked
                )
            return call_summarizer(op)

        return reply

    def build(
        self,
        strategy: Strategy,
        history: Sequence[Message],
        ckpt: CheckpointRecord | None,
        state: StrategyState | None = None,
    ) -> StrategyResult:
        plan = strategy.plan(history, counter=COUNTER, checkpoint=ckpt, state=state)
        return drive(plan, self.answer(history))

    def live(self, strategy: Strategy) -> tuple[CheckpointRecord | None, StrategyState]:
        """The checkpoint and state a live app holds once the conversation is over.

        The app builds a context before every turn (each speaker's message, as it arrives),
        keeping the newest checkpoint and the strategy's state, as a ConversationMemory does;
        a cache-stable window is then wherever that sequence of builds left it, not freshly
        compacted to its lower mark.
        """
        ckpt: CheckpointRecord | None = None
        state = StrategyState()
        for end in range(self.floor + 1, len(self.messages) + 1):
            if self.messages[end - 1].role != "user":
                continue
            result = self.build(strategy, self.messages[:end], ckpt, state)
            ckpt = result.checkpoint or ckpt
            state = result.state
        return ckpt, state


def score_conversation(
    sample: dict[str, Any],
    limit: int | None,
    scores: dict[str, dict[str, list[int]]],
    sizes: dict[str, dict[str, list[float]]],
    used: dict[str, dict[str, list[float]]],
) -> dict[str, list[float]]:
    """Add one conversation's hits to ``scores``; returns build times per strategy.

    ``sizes`` gets, per peer row that may exceed the budget, each context's tokens (our
    count) over the budget; ours never exceed it (each build is checked). ``used`` gets
    the same share for our rows: what each request sends, which is what it costs.
    """
    msgs = dated_messages(sample)
    conv = Conversation(msgs)
    total = COUNTER.count_messages(msgs)
    qs = questions(sample, normalize(" ".join(m.text for m in msgs)))[:limit]
    times: dict[str, list[float]] = {}
    for frac in FRACTIONS:
        budget = int(total * frac)
        col = f"{int(frac * 100)}%"
        runs: dict[str, Strategy] = {}
        inner = strategies(budget, len(msgs), budget - int(budget * SHARE))
        for name, strategy in strategies(budget, len(msgs)).items():
            runs[name] = strategy
            runs[f"Recall+{name}"] = Recall(inner[name], share=SHARE)
            if name in SEMANTIC:
                runs[f"Recall+{name} (fill)"] = Recall(inner[name], share=SHARE, fill=True)
            if name in SEMANTIC and semantic_available():
                runs[f"Recall+{name} {SEMANTIC_ROW}"] = Recall(
                    inner[name], share=SHARE, embedder=WordLlamaEmbedder()
                )
            if name == "Checkpoint" and semantic_available():
                runs[f"Recall+{name} (fill, keywords + WordLlama)"] = Recall(
                    inner[name], share=SHARE, embedder=WordLlamaEmbedder(), fill=True
                )
        for name, strategy in runs.items():
            # The checkpoint and state a live app holds by the time the questions come.
            ckpt, state = conv.live(strategy)
            for k, (question, answer) in enumerate(qs):
                qid = f"q{k}"
                history = [*msgs, Message.user(question, id=qid)]
                start = time.perf_counter()
                result = conv.build(strategy, history, ckpt, state)
                times.setdefault(f"{name} {col}", []).append(time.perf_counter() - start)
                assert result.tokens <= budget, (name, result.tokens, budget)
                used.setdefault(name, {}).setdefault(col, []).append(result.tokens / budget)
                hit = retained([answer], without_question(result.messages, qid)) > 0
                scores.setdefault(name, {}).setdefault(col, [0, 0])
                scores[name][col][0] += int(hit)
                scores[name][col][1] += 1
        for k, (question, answer) in enumerate(qs):
            qid = f"q{k}"
            history = [*msgs, Message.user(question, id=qid)]
            trimmed = langchain_trim(history, budget, COUNTER)
            hit = retained([answer], without_question(trimmed, qid)) > 0
            cell = scores.setdefault("langchain trim_messages", {}).setdefault(col, [0, 0])
            cell[0] += int(hit)
            cell[1] += 1
        if llama_vector_available():
            sent = llama_vector_contexts(msgs, budget, [q for q, _ in qs])
            cell = scores.setdefault(LLAMA_VECTOR, {}).setdefault(col, [0, 0])
            size = sizes.setdefault(LLAMA_VECTOR, {}).setdefault(col, [])
            for text, (_, answer) in zip(sent, qs, strict=True):
                cell[0] += int(f" {answer} " in f" {normalize(text)} ")
                cell[1] += 1
                size.append(COUNTER.count_text(text) / budget)
    return times


def semantic_available() -> bool:
    """Whether the local embedding model of the semantic rows is installed."""
    return importlib.util.find_spec("wordllama") is not None


def llama_vector_available() -> bool:
    """Whether LlamaIndex and the local embedding model of its vector row are installed."""
    return all(importlib.util.find_spec(name) for name in ("llama_index", "wordllama"))


def bench_retention(tiny: bool) -> dict[str, Any]:
    samples = json.loads((DATA / "locomo" / "locomo10.json").read_text())
    if tiny:
        samples = samples[:1]
    scores: dict[str, dict[str, list[int]]] = {}
    sizes: dict[str, dict[str, list[float]]] = {}
    used: dict[str, dict[str, list[float]]] = {}
    times: dict[str, list[float]] = {}
    for sample in samples:
        for key, vals in score_conversation(
            sample, 40 if tiny else None, scores, sizes, used
        ).items():
            times.setdefault(key, []).extend(vals)
    table = {
        name: {col: hits / n if n else 0.0 for col, (hits, n) in cols.items()}
        for name, cols in scores.items()
    }
    questions_scored = next(iter(next(iter(scores.values())).values()))[1]
    medians = {key: statistics.median(v) * 1000 for key, v in times.items()}
    return {
        "conversations": len(samples),
        "questions": questions_scored,
        "retention": table,
        "size_to_budget": {
            name: {col: [statistics.median(v), max(v)] for col, v in cols.items()}
            for name, cols in sizes.items()
        },
        "context_share": {
            name: {col: statistics.median(v) for col, v in cols.items()}
            for name, cols in used.items()
        },
        "build_ms": medians,
    }


# -- search latency and build time on a 100k-message stored conversation ----------------------


def corpus(n: int) -> list[Message]:
    """``n`` real LoCoMo messages (the ten chats over and over), after a system message."""
    samples = json.loads((DATA / "locomo" / "locomo10.json").read_text())
    pool = [m for s in samples for m in dated_messages(s)]
    out = [Message.system("You are a helpful assistant.")]
    for i in range(n - 1):
        m = pool[i % len(pool)]
        out.append(Message(m.role, m.parts, extra=m.extra))
    return out


def probe_questions(k: int) -> list[str]:
    samples = json.loads((DATA / "locomo" / "locomo10.json").read_text())
    qs = [str(q["question"]) for s in samples for q in s["qa"] if q.get("category") != 5]
    return qs[:: max(1, len(qs) // k)][:k]


def time_search(store: Any, cid: str, qs: Sequence[str], last: int) -> float:
    """Median ms of the questions' searches, each the first of its query."""
    for q in qs[:5]:  # warm caches and the lazy index
        store.search(cid, q, limit=20, before_seq=last)
    return median_search_ms(store, cid, qs, last)


def median_search_ms(store: Any, cid: str, qs: Sequence[str], last: int) -> float:
    """Median ms of one search per question, before the conversation's last 50 messages.

    Called again after :func:`time_search`, it times the same searches once more: the
    words' counts are known by then, as they are for most words of a conversation a store
    has searched for a while.
    """
    laps = []
    for q in qs:
        start = time.perf_counter()
        store.search(cid, q, limit=20, before_seq=last - 50)
        laps.append(time.perf_counter() - start)
    return statistics.median(laps) * 1000


def time_builds(store: Any, cid: str, qs: Sequence[str], budget: int) -> dict[str, float]:
    """Median build_context ms on the stored conversation, with and without Recall."""
    out = {}
    runs: list[tuple[str, Strategy]] = [
        ("SlidingWindow", SlidingWindow(budget)),
        ("Recall+SlidingWindow", Recall(SlidingWindow(budget))),
    ]
    if semantic_available():
        # The first build embeds the whole log (not timed); later ones what came since.
        semantic = Recall(SlidingWindow(budget), embedder=WordLlamaEmbedder())
        runs.append((f"Recall+SlidingWindow {SEMANTIC_ROW}", semantic))
    for name, strategy in runs:
        memory = ConversationMemory(strategy=strategy, store=store, conversation_id=cid)
        memory.build_context()  # the first build reads the window; later ones are steady
        laps = []
        for q in qs:
            memory.add(Message.user(q))
            start = time.perf_counter()
            memory.build_context()
            laps.append(time.perf_counter() - start)
            memory.add(Message.assistant("(answer)"))
        out[name] = statistics.median(laps) * 1000
    return out


def fill(store: Any, cid: str, messages: Sequence[Message]) -> None:
    for i in range(0, len(messages), 2000):
        store.append(cid, messages[i : i + 2000])


def bench_latency(tiny: bool) -> dict[str, Any]:
    from contextfold.stores import open_store

    n = 3_000 if tiny else 100_000
    messages = corpus(n)
    qs = probe_questions(20 if tiny else 200)
    out: dict[str, Any] = {"messages": n, "search_ms": {}, "search_again_ms": {}, "build_ms": {}}
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/recall.db")
        try:
            start = time.perf_counter()
            fill(store, "big", messages)
            out["sqlite_load_s"] = time.perf_counter() - start
            out["search_ms"]["SQLite (FTS5)"] = time_search(store, "big", qs, n)
            out["search_again_ms"]["SQLite (FTS5)"] = median_search_ms(store, "big", qs, n)
            out["build_ms"] = time_builds(store, "big", qs[:50], 4000)
        finally:
            store.close()
    url = os.environ.get("CONTEXTFOLD_TEST_POSTGRES_URL", "")
    if url:
        schema = f"bench_recall_{uuid.uuid4().hex[:8]}"
        store = open_store(url, schema=schema)
        import psycopg

        try:
            fill(store, "big", messages)
            with psycopg.connect(url, autocommit=True) as conn:
                # What autovacuum does to a table grown by this much within a minute or so:
                # without statistics the planner takes the conversation for a small one.
                conn.execute(f'ANALYZE "{schema}".contextfold_messages')
            pg = "PostgreSQL (tsvector, GIN)"
            out["search_ms"][pg] = time_search(store, "big", qs, n)
            out["search_again_ms"][pg] = median_search_ms(store, "big", qs, n)
        finally:
            store.close()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return out


# -- report --------------------------------------------------------------------------------


def print_tables(res: dict[str, Any]) -> None:
    if "retention" in res:
        print_retention(res["retention"])
    print_latency(res["latency"])


def print_retention(ret: dict[str, Any]) -> None:
    cols = [f"{int(f * 100)}%" for f in FRACTIONS]
    print(
        f"## Answers in the context, question as the newest message "
        f"({ret['conversations']} conversations, {ret['questions']} questions per cell)\n"
    )
    print("| strategy (extractive summarizer) | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for name, by_col in ret["retention"].items():
        cells = " | ".join(f"{by_col.get(c, 0) * 100:.1f}%" for c in cols)
        print(f"| {name} | {cells} |")
    for name, by_col in ret.get("size_to_budget", {}).items():
        shares = ", ".join(
            f"{by_col[c][0]:.2f}x (up to {by_col[c][1]:.2f}x) at {c}" for c in cols if c in by_col
        )
        print(f"\n{name}: context size over the budget, our count, median: {shares}.")
    if LLAMA_VECTOR not in ret["retention"]:
        print(f"\n({LLAMA_VECTOR} not measured: llama-index-core or wordllama missing.)")
    shares = ret.get("context_share", {})
    if shares:
        print("\nMedian context size (share of the budget sent), our rows:\n")
        print("| strategy | " + " | ".join(cols) + " |")
        print("|---|" + "---:|" * len(cols))
        for name, by_col in shares.items():
            cells = " | ".join(f"{by_col.get(c, 0) * 100:.0f}%" for c in cols)
            print(f"| {name} | {cells} |")
    print("\nMedian build time per question (ms), 10% budget:\n")
    print("| strategy | without Recall | with Recall |")
    print("|---|---:|---:|")
    for name in strategies(1000):
        plain = ret["build_ms"].get(f"{name} 10%", 0.0)
        recall = ret["build_ms"].get(f"Recall+{name} 10%", 0.0)
        print(f"| {name} | {plain:.2f} | {recall:.2f} |")


def print_latency(lat: dict[str, Any]) -> None:
    print(f"\n## Search on a stored {lat['messages']:,}-message conversation\n")
    print("| store | median search (ms), top 20 | the same searches again |")
    print("|---|---:|---:|")
    again = lat.get("search_again_ms", {})
    for name, ms in lat["search_ms"].items():
        print(f"| {name} | {ms:.2f} | {again.get(name, 0.0):.2f} |")
    print(
        "\nThe first column is each query's first search: a SQL store then counts the"
        " query's words it has not counted before (to leave out the common ones); the"
        " second repeats the searches once their counts are known."
    )
    print("\n| ConversationMemory on SQLite, 4,000-token budget | median build_context (ms) |")
    print("|---|---:|")
    for name, ms in lat["build_ms"].items():
        print(f"| {name} | {ms:.2f} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="one conversation, small store")
    parser.add_argument(
        "--latency-only",
        action="store_true",
        help="only the search and build latency on the stored conversation (no JSON written)",
    )
    args = parser.parse_args(argv)
    if not DATA.is_dir():
        print(f"shared data not found at {DATA}", file=sys.stderr)
        return 1
    if args.latency_only:
        print_latency(bench_latency(args.tiny))
        return 0
    res = {"retention": bench_retention(args.tiny), "latency": bench_latency(args.tiny)}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "recall.json").write_text(json.dumps(res, indent=2))
    print_tables(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
