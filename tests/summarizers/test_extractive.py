"""ExtractiveSummarizer: structure, budget, determinism, merging, file tracking, real data."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.formats import load
from contextfold.messages import Message, ToolCallPart
from contextfold.summarizers import ExtractiveSummarizer, SummaryRequest
from contextfold.summarizers.prompts import CHECKPOINT_SECTIONS
from contextfold.testing import FixedCounter
from contextfold.tokens.approx import ApproxCounter
from shared_data import claude_code_main_sessions, claude_code_payload, require_data


def coding_span() -> tuple[Message, ...]:
    return (
        Message.user(
            "Please add retry logic to src/client/http.py with exponential backoff.", id="u1"
        ),
        Message.assistant(
            "Reading the client first.",
            tool_calls=[ToolCallPart("c1", "Read", '{"file_path": "src/client/http.py"}')],
            id="a1",
        ),
        Message.tool_result("c1", "class HttpClient:\n    def send(self, req): ...", id="t1"),
        Message.assistant(
            "Adding RetryPolicy.",
            tool_calls=[
                ToolCallPart("c2", "Edit", '{"file_path": "src/client/http.py", "old_string": "x"}')
            ],
            id="a2",
        ),
        Message.tool_result("c2", "ok", id="t2"),
        Message.assistant(
            None,
            tool_calls=[ToolCallPart("c3", "Bash", '{"command": "pytest tests/test_http.py -q"}')],
            id="a3",
        ),
        Message.tool_result(
            "c3",
            "FAILED tests/test_http.py::test_retry - AssertionError: expected 3 attempts, got 1",
            is_error=True,
            id="t3",
        ),
        Message.user("No, use max_attempts=5 and keep the jitter off.", id="u2"),
        Message.assistant(
            "Understood: max_attempts=5, no jitter. Still need to update the docs.", id="a4"
        ),
    )


def sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:]
            out[current] = []
        else:
            out[current].append(line)
    return out


def summarize(span: tuple[Message, ...], **kw: object) -> str:
    result = ExtractiveSummarizer(max_output_tokens=2000).summarize(
        SummaryRequest(span, kind="checkpoint", **kw)  # type: ignore[arg-type]
    )
    assert result.ok, result.reason
    return result.text


def test_every_section_present_in_order_with_none_for_empty() -> None:
    text = summarize((Message.user("hello there, how are things in Lisbon?", id="u"),))
    assert list(sections(text)) == list(CHECKPOINT_SECTIONS)
    parts = sections(text)
    assert parts["Errors and fixes"] == ["(none)"]
    assert parts["Files and code"] == ["(none)"]


def test_coding_span_keeps_requests_paths_commands_errors_and_identifiers() -> None:
    text = summarize(coding_span())
    parts = sections(text)
    request = "\n".join(parts["Primary request and intent"])
    assert '"Please add retry logic to src/client/http.py with exponential backoff."' in request
    assert "Correction:" in request
    assert "max_attempts=5" in request
    assert any("src/client/http.py (modified)" in ln for ln in parts["Files and code"])
    assert any("$ pytest tests/test_http.py -q" in ln for ln in parts["Files and code"])
    errors = "\n".join(parts["Errors and fixes"])
    assert "AssertionError: expected 3 attempts, got 1" in errors
    assert any("max_attempts" in ln for ln in parts["Key technical concepts"])
    assert any("Still need to update the docs" in ln for ln in parts["Pending tasks"])
    assert "max_attempts=5" in "\n".join(parts["Next step"])


def test_file_tracking_in_details_and_accumulation() -> None:
    s = ExtractiveSummarizer()
    result = s.summarize(SummaryRequest(coding_span()))
    assert result.details["files_modified"] == ["src/client/http.py"]
    assert result.details["files_read"] == []  # a file read and then edited counts as modified
    more = (
        Message.user("look at the README", id="u9"),
        Message.assistant(
            None, tool_calls=[ToolCallPart("c9", "Read", '{"file_path": "README.md"}')], id="a9"
        ),
        Message.tool_result("c9", "# project", id="t9"),
    )
    carried = s.summarize(
        SummaryRequest(more, details={"files_read": ["docs/a.md"], "files_modified": ["x.py"]})
    )
    assert carried.details["files_read"] == ["README.md", "docs/a.md"]
    assert carried.details["files_modified"] == ["x.py"]


def test_deterministic_sync_and_async() -> None:
    s = ExtractiveSummarizer(max_output_tokens=300)
    request = SummaryRequest(coding_span(), kind="checkpoint")
    first = s.summarize(request)
    assert s.summarize(request) == first
    assert ExtractiveSummarizer(max_output_tokens=300).summarize(request).text == first.text


async def test_async_matches_sync() -> None:
    s = ExtractiveSummarizer(max_output_tokens=300)
    request = SummaryRequest(coding_span(), kind="checkpoint")
    assert (await s.asummarize(request)).text == s.summarize(request).text


@settings(max_examples=25, deadline=None)
@given(budget=st.integers(min_value=120, max_value=3000), per_char=st.sampled_from([0, 1]))
def test_budget_is_respected(budget: int, per_char: int) -> None:
    counter = ApproxCounter() if per_char == 0 else FixedCounter(0, per_char=1)
    s = ExtractiveSummarizer(max_output_tokens=5000, counter=counter)
    result = s.summarize(SummaryRequest(coding_span() * 3, max_output_tokens=budget))
    if result.ok:
        assert counter.count_text(result.text) <= budget
    else:
        assert result.code == "truncated"  # only when even the empty skeleton does not fit


def test_tiny_budget_is_a_truncation_failure_and_empty_span_is_empty() -> None:
    s = ExtractiveSummarizer()
    assert s.summarize(SummaryRequest(coding_span(), max_output_tokens=5)).code == "truncated"
    assert s.summarize(SummaryRequest((), max_output_tokens=500)).code == "empty"
    with pytest.raises(Exception, match="positive"):
        ExtractiveSummarizer(max_output_tokens=0)


def test_previous_summary_is_merged_not_copied() -> None:
    s = ExtractiveSummarizer(max_output_tokens=2000)
    first = s.summarize(SummaryRequest(coding_span(), kind="checkpoint")).text
    later = (
        Message.user("Now deploy it with ./scripts/deploy.sh to staging-eu-2.", id="u5"),
        Message.assistant("Deploying to staging-eu-2.", id="a5"),
    )
    merged = s.summarize(SummaryRequest(later, previous_summary=first, kind="checkpoint")).text
    parts = sections(merged)
    # still-true facts from the previous checkpoint survive
    assert "src/client/http.py" in merged
    assert "max_attempts=5" in merged
    # the newer request is there too
    assert "./scripts/deploy.sh" in merged
    # no line is repeated
    lines = [ln for ln in merged.splitlines() if ln.startswith("- ")]
    assert len(lines) == len(set(lines))
    # current work and next step describe the new span, not the old one
    assert parts["Current work"] == ["- Deploying to staging-eu-2."]
    assert "deploy" in "\n".join(parts["Next step"])
    assert "max_attempts" not in "\n".join(parts["Next step"])


def test_salience_prefers_names_numbers_and_dates_over_filler() -> None:
    chatter = [
        Message.user("That is so great, I really love it, thanks so much!", id=f"f{i}")
        for i in range(30)
    ]
    facts = [
        Message.user("My sister Ingrid moved to Tromsø on 14 March 2021.", id="x1"),
        Message.assistant("Ingrid works at Equinor as a geologist since 2019.", id="x2"),
    ]
    text = (
        ExtractiveSummarizer(max_output_tokens=150)
        .summarize(SummaryRequest(tuple(chatter[:15] + facts + chatter[15:])))
        .text
    )
    for needle in ("Ingrid", "Tromsø", "14 March 2021", "Equinor", "2019"):
        assert needle in text


def test_claude_code_session_paths_survive() -> None:
    require_data()
    path = claude_code_main_sessions()[0]
    messages = tuple(load(claude_code_payload(path, include_compact_summary=False), "anthropic"))
    budget_chars = 12_000
    result = ExtractiveSummarizer(max_output_tokens=budget_chars // 4).summarize(
        SummaryRequest(messages, kind="checkpoint")
    )
    assert result.ok
    assert len(result.text) <= budget_chars
    assert result.details["files_modified"], "Edit/Write calls should be tracked"
    for modified in result.details["files_modified"][:10]:
        assert modified in result.text
    # paths named at least three times in the session are in the summary
    body = json.dumps([m.to_dict() for m in messages])
    counts: dict[str, int] = {}
    for p in re.findall(r"(?:[\w.-]+/)+[\w-]+\.(?:ex|exs|md|js|json)\b", body):
        counts[p] = counts.get(p, 0) + 1
    frequent = [p for p, c in counts.items() if c >= 3]
    assert frequent
    kept = sum(1 for p in frequent if p in result.text)
    assert kept / len(frequent) >= 0.8


def test_locomo_dates_and_names_survive() -> None:
    data: Path = require_data()
    sample = json.loads((data / "locomo" / "locomo10.json").read_text())[0]
    conv = sample["conversation"]
    msgs = []
    for key in sorted(
        (k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])
    ):
        date = conv[f"{key}_date_time"]
        for j, turn in enumerate(conv[key]):
            text = f"[{date}] {turn['text']}" if j == 0 else turn["text"]
            role = "user" if turn["speaker"] == conv["speaker_a"] else "assistant"
            msgs.append(
                Message(
                    role, (Message.user(text).parts[0],), id=turn["dia_id"], name=turn["speaker"]
                )
            )
    result = ExtractiveSummarizer(max_output_tokens=1500).summarize(SummaryRequest(tuple(msgs)))
    assert result.ok
    assert ApproxCounter().count_text(result.text) <= 1500
    for needle in ("8 May, 2023", "Sweden", "Caroline", "Melanie", "adoption agencies"):
        assert needle in result.text


# -- key phrases: the fast implementation against a plain word-by-word reading ------------


def reference_phrases(owns: list[str], speakers: list[str]) -> dict[str, tuple[str, float, int]]:
    """Key phrases read the slow, obvious way: clause by clause, word by word.

    Written independently of the module's two-pass layout; only the word lists, regexes
    and weights are shared. Returns ``key -> (text, score, first message)``.
    """
    from collections import Counter

    from contextfold.summarizers.extractive import _phrases as ph

    df: Counter[str] = Counter()
    for own in owns:
        if own:
            df.update({w.strip(ph.STRIP).lower() for w in own.split()})
    total = max(1, sum(1 for own in owns if own))
    generic = max(3.0, total * 0.04)
    found: dict[str, list[object]] = {}  # key -> [text, first, weight, count]

    def add(key: str, text: str, i: int, weight: float) -> None:
        if key in found:
            found[key][3] += 1  # type: ignore[operator]
        else:
            found[key] = [text, i, weight, 1]

    for i, own in enumerate(owns):
        if not own:
            continue
        if re.search(r"\d", own):
            for date in ph._DATE_RE.findall(own):
                add(date.lower(), date, i, 6.0)
        for title in ph._TITLE_RE.findall(own):
            title = title.rstrip(".'\u2019-")
            caps = sum(1 for w in title.split() if w[:1].isupper())
            if caps >= 2 and title.count(" ") <= 8:
                add(title.lower(), title, i, 1.6 * caps + 1.0)
        for clause in ph._CLAUSE_RE.split(own):
            runs: list[tuple[list[tuple[str, float]], str]] = []
            run: list[tuple[str, float]] = []
            lead = ""
            for j, raw in enumerate(clause.split()):
                word = raw.strip(ph.STRIP)
                low = word.lower()
                if low in ph._STOPWORDS:
                    i_form = word[:1] == "I" and (len(word) == 1 or word[1] in "'\u2019")
                    if not (word[:1].isupper() and (j or low in ph._MONTH_WORDS) and not i_form):
                        if run:
                            runs.append((run, lead))
                            run = []
                        lead = word if low in ph._ARTICLES else ""
                        continue
                elif not word or not (word[0].isalnum() or word[-1].isalnum()):
                    continue
                weight = ph._word_weight(word, low, df, generic)
                run.append((word, weight + 1.5 if j and word[0].isupper() else weight))
            if run:
                runs.append((run, lead))
            for words, lead_word in runs:
                for a in range(len(words)):
                    for b in range(a, min(a + 3, len(words))):
                        text = " ".join(w for w, _ in words[a : b + 1])
                        weight = words[a][1]
                        for _, w in words[a + 1 : b + 1]:
                            weight += w
                        if a == 0 and lead_word:
                            text = f"{lead_word} {text}"
                        add(text.lower(), text, i, weight)
    out: dict[str, tuple[str, float, int]] = {}
    for key, (text, first, weight, count) in found.items():
        n_words = str(text).count(" ") + 1
        score = float(weight) * (1 + 0.8 * math.log(int(count))) * (1 + 0.5 * (n_words - 1))  # type: ignore[arg-type]
        out[key] = (str(text), score, int(first))  # type: ignore[call-overload]
    return out


def fast_phrases(
    owns: list[str], speakers: list[str], *, by_line: bool = True
) -> dict[str, tuple[str, float, int]]:
    from contextfold.summarizers.extractive._phrases import key_phrases

    found = key_phrases(owns, speakers, by_line=by_line)
    out = {key: (text, score, first) for text, key, score, first, _ in found}
    assert len(out) == len(found), "each phrase is listed once"
    return out


def same_phrases(
    a: dict[str, tuple[str, float, int]], b: dict[str, tuple[str, float, int]]
) -> None:
    assert a.keys() == b.keys()
    for key, (text, score, first) in a.items():
        assert b[key][0] == text, key
        assert b[key][2] == first, key
        assert b[key][1] == pytest.approx(score, rel=1e-12), key


PIECES = [
    *"abcXYZ019 .,!?;:()\"'-\u2014\u201c\u2019\t\n",
    *(" the ", " I ", " May ", " The ", " a ", " - ", "Mel", "New York", "8 May, 2023"),
]
chatty = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@settings(max_examples=150, deadline=None)
@given(owns=st.lists(chatty, min_size=1, max_size=6))
def test_key_phrases_match_a_word_by_word_reading(owns: list[str]) -> None:
    speakers = ["Ann" if i % 2 else "Bob" for i in range(len(owns))]
    expected = reference_phrases(owns, speakers)
    same_phrases(expected, fast_phrases(owns, speakers))
    # Cutting plain lines by their tokens gives what the clause regex gives.
    same_phrases(expected, fast_phrases(owns, speakers, by_line=False))


def test_key_phrases_match_a_word_by_word_reading_on_locomo() -> None:
    data: Path = require_data()
    sample = json.loads((data / "locomo" / "locomo10.json").read_text())[1]
    conv = sample["conversation"]
    turns = [t for k in conv if re.fullmatch(r"session_\d+", k) for t in conv[k]]
    owns = [t["text"] for t in turns]
    speakers = [t["speaker"] for t in turns]
    expected = reference_phrases(owns, speakers)
    assert len(expected) > 1000
    same_phrases(expected, fast_phrases(owns, speakers))


def test_token_readings_are_remembered_within_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextfold.summarizers.extractive import _phrases as ph

    monkeypatch.setattr(ph, "_TOKENS", {})
    monkeypatch.setattr(ph, "_TOKEN_CACHE_LIMIT", 30)
    first = [" ".join(f"alpha{i}" for i in range(40))]
    second = [" ".join(f"beta{i}" for i in range(40))]
    before = fast_phrases(second, ["x"])
    fast_phrases(first, ["x"])
    assert len(ph._TOKENS) == 40  # over the bound now: the next call starts afresh
    assert fast_phrases(second, ["x"]) == before
    assert set(ph._TOKENS) == {f"beta{i}" for i in range(40)}


def test_opening_request_survives_a_tight_budget() -> None:
    """The first user request frames the span: it is kept even when the summary has room for
    little else, ahead of the dense key phrases of later messages."""
    chat = [Message.user("Hi, I was charged twice for my plan. Orders LS-48213 and LS-48219.")]
    for k in range(30):
        chat.append(
            Message.assistant(f"Ticket RF-{7700 + k} opened on {k + 1} March, $1{k}.00 due.")
        )
        chat.append(Message.user(f"Version 5.2.{k} on a Pixel {k}, 1,2{k}4 files."))
    result = ExtractiveSummarizer().summarize(
        SummaryRequest(messages=tuple(chat), max_output_tokens=110)
    )
    assert result.ok
    request_section = result.text.split("## Key technical concepts")[0]
    assert "charged twice for my plan" in request_section
    assert ApproxCounter().count_text(result.text) <= 110


def test_update_keeps_the_conversations_opening_request_first() -> None:
    """Merging a previous summary: the request that opened the conversation keeps the first
    place; the first message of the new span is not promoted over it."""
    first = ExtractiveSummarizer().summarize(
        SummaryRequest(
            messages=(
                Message.user("Please migrate the billing service to PostgreSQL 16."),
                Message.assistant("Started with the schema in db/schema.sql."),
            ),
            max_output_tokens=200,
        )
    )
    later = ExtractiveSummarizer().summarize(
        SummaryRequest(
            messages=(
                Message.user("A Pixel 8."),
                Message.assistant("Noted: device Pixel 8, app 5.2.3, build 4417 on 3 March."),
            ),
            previous_summary=first.text,
            kind="update",
            max_output_tokens=90,
        )
    )
    assert later.ok
    request_section = later.text.split("## Key technical concepts")[0]
    assert "migrate the billing service" in request_section
