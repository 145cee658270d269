"""Search over the log, on every backend against its real server (see ``conftest.py``)."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from typing import Any

import pytest

from contextfold import ConfigError, Message, ToolCallPart
from contextfold.stores import InMemoryStore
from contextfold.stores.base import StoredMessage, has_async_search, has_search
from contextfold.stores.sqlite import SQLiteStore


def cid() -> str:
    return f"search-{uuid.uuid4().hex[:10]}"


def orders(n: int = 40) -> list[Message]:
    out = [Message.system("You are a shop assistant.")]
    for i in range(n):
        out.append(Message.user(f"Where is my order ORD-{1000 + i}? It goes to city {i}."))
        out.append(Message.assistant(f"Order {i} is being packed."))
    return out


def test_every_backend_can_search(store: Any) -> None:
    assert has_search(store)
    assert has_async_search(store)


def test_the_matching_message_ranks_first_with_its_seq(store: Any) -> None:
    c = cid()
    store.append(c, orders())
    hits = store.search(c, "where is ORD-1012?", limit=3)
    assert hits[0].seq == 26
    assert "ORD-1012" in hits[0].message.text
    assert len(hits) == 3
    assert store.search(c, "packed", limit=100)[0].message.text.startswith("Order ")


def test_before_seq_limit_and_empty_answers(store: Any) -> None:
    c = cid()
    store.append(c, orders())
    assert 26 not in [h.seq for h in store.search(c, "ORD-1012", limit=50, before_seq=26)]
    assert 26 in [h.seq for h in store.search(c, "ORD-1012", limit=50, before_seq=27)]
    assert all(h.seq < 10 for h in store.search(c, "order city", limit=50, before_seq=10))
    assert store.search(c, "order", limit=0) == []
    assert store.search(c, "zebra xylophone") == []
    assert store.search(c, "the and of") == []
    assert store.search("no-such-conversation", "order") == []


def test_tool_calls_and_later_appends_are_found(store: Any) -> None:
    c = cid()
    store.append(c, orders(5))
    assert store.search(c, "lisbon") == []
    call = ToolCallPart("c1", "weather_lookup", '{"city": "Lisbon"}')
    seqs = store.append(c, [Message.assistant(None, tool_calls=[call])])
    seqs += store.append(c, [Message.tool_result("c1", "Sunny in Porto", name="weather_lookup")])
    assert [h.seq for h in store.search(c, "lisbon")] == [seqs[0]]
    assert [h.seq for h in store.search(c, "porto")] == [seqs[1]]


def test_a_deleted_conversation_is_not_found_and_can_start_again(store: Any) -> None:
    c = cid()
    store.append(c, orders(5))
    assert store.search(c, "ORD-1003")
    store.delete(c)
    assert store.search(c, "ORD-1003") == []
    store.append(c, [Message.user("a fresh start about bicycles")])
    assert [h.seq for h in store.search(c, "bicycles")] == [1]
    assert store.search(c, "ORD-1003") == []


def test_conversations_do_not_see_each_other(store: Any) -> None:
    a, b = cid(), cid()
    store.append(a, [Message.user("alpha secret 4417")])
    store.append(b, [Message.user("beta notes")])
    assert store.search(b, "4417") == []
    assert [h.seq for h in store.search(a, "4417")] == [1]


def test_bad_search_arguments_raise_config_error(store: Any) -> None:
    c = cid()
    for kwargs, argument in (
        ({"limit": -1}, "limit"),
        ({"limit": True}, "limit"),
        ({"before_seq": -3}, "before_seq"),
    ):
        with pytest.raises(ConfigError) as err:
            store.search(c, "x", **kwargs)
        assert err.value.argument == argument
    with pytest.raises(ConfigError) as err:
        store.search(c, 42)
    assert err.value.argument == "query"


async def test_async_search_matches_sync(backend: Any) -> None:
    store = backend.open()
    c = cid()
    try:
        await store.aappend(c, orders(10))
        sync = [h.seq for h in store.search(c, "ORD-1007 city", limit=4)]
        assert [h.seq for h in await store.asearch(c, "ORD-1007 city", limit=4)] == sync
        assert sync[0] == 16
    finally:
        await store.aclose()


def test_sqlite_migration_indexes_an_existing_log(tmp_path: Any) -> None:
    path = tmp_path / "old.db"
    store = SQLiteStore(path)
    store.append("c", orders(10))
    store.close()
    # Make the file what an earlier version left: no search table, no triggers.
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER contextfold_messages_fts_insert")
        conn.execute("DROP TRIGGER contextfold_messages_fts_delete")
        conn.execute("DROP TABLE contextfold_messages_fts")
        conn.execute("DELETE FROM contextfold_schema WHERE version = 3")
    conn.close()
    store = SQLiteStore(path)
    assert [h.seq for h in store.search("c", "ORD-1004", limit=1)] == [10]
    store.append("c", [Message.user("after the upgrade: kayak")])
    assert [h.seq for h in store.search("c", "kayak")] == [22]
    store.close()


def test_postgres_migration_indexes_an_existing_log(postgres_backend: Any) -> None:
    import psycopg

    store = postgres_backend.open()
    store.append("c", orders(10))
    schema = postgres_backend.options["schema"]
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{schema}".contextfold_messages DROP COLUMN search')
        conn.execute(f'DELETE FROM "{schema}".contextfold_schema WHERE version = 2')
    again = postgres_backend.open()
    assert [h.seq for h in again.search("c", "ORD-1004", limit=1)] == [10]


def test_in_memory_index_is_per_store() -> None:
    one, two = InMemoryStore(), InMemoryStore()
    one.append("c", [Message.user("lantern")])
    two.append("c", [Message.user("compass")])
    assert one.search("c", "compass") == []
    assert [h.seq for h in two.search("c", "compass")] == [1]


def test_sql_searches_leave_out_words_most_messages_hold(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextfold.stores import _sql_search

    monkeypatch.setattr(_sql_search, "COMMON_WORD", 5)
    c = cid()
    store.append(c, [Message.user(f"weather report {i}") for i in range(12)])
    store.append(c, [Message.user("weather and an umbrella")])
    hits = store.search(c, "weather umbrella", limit=50)
    if hasattr(store, "_dialect"):
        assert [h.seq for h in hits] == [13]  # "weather" is in every message: left out
    else:  # BM25 keeps every word but weighs the rare one: the umbrella comes first
        assert hits[0].seq == 13
    assert len(store.search(c, "weather", limit=50)) == 13  # a lone word is always kept


async def test_recall_under_an_async_memory_searches_the_store(backend: Any) -> None:
    from contextfold import ConversationMemory, Recall, SlidingWindow

    store = backend.open()
    try:
        memory = ConversationMemory(
            strategy=Recall(SlidingWindow(300)), store=store, conversation_id=cid()
        )
        await memory.aextend(orders(40))
        await memory.aadd(Message.user("Where is order ORD-1012 going?"))
        ctx = await memory.abuild_context()
        assert 26 in ctx.stats.recalled
        assert "ORD-1012" in ctx.messages[-1].text
        hits = await memory.asearch("ORD-1012", limit=5)
        assert 26 in [h.seq for h in hits]
    finally:
        await store.aclose()


def test_sql_word_counts_follow_the_log_as_it_grows(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store keeps its word counts between searches; they must follow later appends."""
    from contextfold.stores import _sql_search

    monkeypatch.setattr(_sql_search, "COMMON_WORD", 5)
    c = cid()
    store.append(c, [Message.user(f"weather report {i}") for i in range(3)])
    store.append(c, [Message.user("weather and an umbrella")])
    first = [h.seq for h in store.search(c, "weather umbrella", limit=50, before_seq=5)]
    assert first[0] == 4  # "weather" is rare yet: every message matches, the umbrella first
    assert sorted(first) == [1, 2, 3, 4]
    store.append(c, [Message.user(f"weather report {i}") for i in range(3, 12)])
    later = [h.seq for h in store.search(c, "weather umbrella", limit=50, before_seq=14)]
    if hasattr(store, "_dialect"):
        assert later == [4]  # counted again from seq 5 on: now common, left out
        # An earlier bound is counted again too: there "weather" is rare, and searched.
        assert sorted(h.seq for h in store.search(c, "umbrella weather", before_seq=5)) == [
            1,
            2,
            3,
            4,
        ]
    else:
        assert later[0] == 4
        assert len(later) == 13
    store.delete(c)
    store.append(c, [Message.user("weather now"), Message.user("no umbrella")])
    assert sorted(h.seq for h in store.search(c, "weather umbrella", before_seq=3)) == [1, 2]


def test_postgres_migration_shortens_the_search_pending_list(postgres_backend: Any) -> None:
    import psycopg

    store = postgres_backend.open()
    store.append("c", orders(10))
    schema = postgres_backend.options["schema"]
    index = f'"{schema}".contextfold_messages_search'
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        conn.execute(f"ALTER INDEX {index} RESET (gin_pending_list_limit)")
        conn.execute(f'DELETE FROM "{schema}".contextfold_schema WHERE version = 6')
    again = postgres_backend.open()
    assert [h.seq for h in again.search("c", "ORD-1004", limit=1)] == [10]
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        row = conn.execute(f"SELECT reloptions FROM pg_class WHERE oid = '{index}'::regclass")
        assert row.fetchone() == (["gin_pending_list_limit=256"],)


def test_read_spans_reads_every_run_in_order(store: Any) -> None:
    from contextfold.stores.base import has_async_span_reads, has_span_reads

    assert has_span_reads(store)
    assert has_async_span_reads(store)
    c = cid()
    store.append(c, [Message.user(f"message {i}") for i in range(1, 21)])
    rows = store.read_spans(c, [(2, 4), (10, 11), (19, 25)])
    assert [r.seq for r in rows] == [2, 3, 10, 19, 20]  # the last run is cut at the end
    assert [r.message.text for r in rows][:2] == ["message 2", "message 3"]
    assert store.read_spans(c, []) == []
    assert store.read_spans("no-such-conversation", [(1, 3)]) == []
    for spans in ([(3, 2)], [(1, 5), (4, 6)], [(0, 2)], [(1.0, 2)], [(1, 2, 3)], "12"):
        with pytest.raises(ConfigError) as err:
            store.read_spans(c, spans)
        assert err.value.argument == "spans"


async def test_async_read_spans_matches_sync(backend: Any) -> None:
    store = backend.open()
    c = cid()
    try:
        await store.aappend(c, [Message.user(f"message {i}") for i in range(1, 11)])
        rows = await store.aread_spans(c, [(1, 2), (5, 8)])
        assert [r.seq for r in rows] == [1, 5, 6, 7]
        assert [r.message.text for r in rows] == [f"message {i}" for i in (1, 5, 6, 7)]
    finally:
        await store.aclose()


# -- a log written again, ties, counts past the end, long queries -------------------------


SYSTEM = Message.system("You are a shop assistant.")  # the same message in every log


def test_a_log_written_again_after_delete_is_searched_afresh(store: Any) -> None:
    c = cid()
    store.append(c, [SYSTEM, Message.user("my apple order"), Message.assistant("sorry, apple")])
    assert store.search(c, "apple")
    store.delete(c)
    store.append(c, [SYSTEM, Message.user("banana smoothie recipe please")])
    assert store.search(c, "apple") == []
    assert [h.seq for h in store.search(c, "banana")] == [2]


def test_searches_between_deletes_never_fail(store: Any) -> None:
    # A log deleted and written again, shorter, many times over: the old index must never
    # answer for the new log (an index kept by the log's address once did, after a reuse).
    c = cid()
    for _ in range(60):
        store.append(c, [SYSTEM, Message.user("apple one"), Message.user("apple two")])
        assert len(store.search(c, "apple")) == 2
        store.delete(c)
        store.append(c, [SYSTEM, Message.user("banana")])
        assert store.search(c, "apple") == []
        store.delete(c)


def test_a_log_another_handle_rewrote_is_searched_afresh(backend: Any) -> None:
    mine, theirs = backend.open(), backend.open()
    c = cid()
    mine.append(c, [SYSTEM, Message.user("my apple order"), Message.assistant("sorry, apple")])
    assert mine.search(c, "apple")
    theirs.delete(c)  # another process: this handle's index does not hear of it
    theirs.append(
        c, [SYSTEM, Message.user("banana smoothie"), Message.assistant("here is a recipe")]
    )
    assert mine.search(c, "apple") == []
    assert [h.seq for h in mine.search(c, "banana")] == [2]


def test_a_log_rewritten_with_the_same_ids_is_searched_afresh(backend: Any) -> None:
    """An application's own ids repeat when it writes a conversation again: the ids of the
    first and newest messages matched, so the old index answered with the new rows."""
    mine, theirs = backend.open(), backend.open()
    c = cid()

    def log(words: list[str]) -> list[Message]:
        return [SYSTEM] + [Message.user(w, id=f"m{i}") for i, w in enumerate(words)]

    mine.append(c, log(["apples are red", "bananas are yellow", "the end of it"]))
    assert [h.seq for h in mine.search(c, "bananas")] == [3]
    theirs.delete(c)
    theirs.append(c, log(["cherries are dark", "grapes are green", "that was all"]))
    assert mine.search(c, "bananas") == []
    assert [h.message.text for h in mine.search(c, "grapes")] == ["grapes are green"]


@pytest.mark.parametrize("how", ["another memory", "the same memory"])
def test_a_memory_follows_its_conversation_deleted_and_written_again(
    backend: Any, how: str
) -> None:
    """The memory kept what it had cached of the old log whenever the new one was not
    shorter: its next build sent the old messages and quoted them as excerpts."""
    from contextfold import ConversationMemory, Recall, SlidingWindow

    c = cid()
    strategy = Recall(SlidingWindow(400), share=0.4)

    def log(tag: str) -> list[Message]:
        out = [SYSTEM]
        for i in range(30):
            out.append(Message.user(f"{tag} note {i}: the weather is fine today."))
            out.append(Message.assistant(f"{tag} noted {i}."))
        return out

    mine = ConversationMemory(strategy=strategy, store=backend.open(), conversation_id=c)
    mine.extend([*log("OLD"), Message.user("How is the weather?")])
    assert "OLD" in mine.build_context().messages[-1].text
    new = [*log("NEW"), Message.user("hello"), Message.user("How is the weather?")]
    if how == "another memory":
        other = ConversationMemory(strategy=strategy, store=backend.open(), conversation_id=c)
        other.clear()
        other.extend(new)
    else:
        backend.open().delete(c)
        mine.extend(new)
    context = mine.build_context()
    assert not any("OLD" in m.text for m in context.messages)
    assert "NEW" in context.messages[-1].text  # excerpts of the new log


def test_an_in_memory_search_overtaken_by_a_rewrite_answers_from_one_whole_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A search has read the log and learnt how far its index goes when another thread
    # deletes the conversation, writes it again and searches it. The first search must
    # still answer from one whole log: it once found the index replaced and began a new
    # one past what the old one held, with the old log's last message only.
    from contextfold.stores import _search

    store, c = InMemoryStore(), cid()
    store.append(c, [Message.user(f"old note {i} marker", id=f"old{i}") for i in range(3)])
    assert len(store.search(c, "marker")) == 3
    store.append(c, [Message.user("old note 3 marker", id="old3")])
    reached, resume = threading.Event(), threading.Event()
    indexed_upto = _search.LogIndexes.indexed_upto

    def pausing(self: _search.LogIndexes, cid: str, first_id: str | None) -> Any:
        found = indexed_upto(self, cid, first_id)
        if threading.current_thread().name == "overtaken":
            reached.set()
            resume.wait(5)
        return found

    monkeypatch.setattr(_search.LogIndexes, "indexed_upto", pausing)
    answers: dict[str, list[StoredMessage]] = {}

    def rewrite() -> None:
        store.delete(c)
        store.append(c, [Message.user(f"new note {i} marker", id=f"new{i}") for i in range(2)])
        answers["rewrite"] = store.search(c, "marker")

    overtaken = threading.Thread(
        target=lambda: answers.setdefault("overtaken", store.search(c, "marker")),
        name="overtaken",
    )
    overtaken.start()
    assert reached.wait(5)
    rewriter = threading.Thread(target=rewrite)
    rewriter.start()
    rewriter.join(0.5)  # done at once unless the paused search keeps the store from it
    resume.set()
    overtaken.join(5)
    rewriter.join(5)

    def seen(hits: list[StoredMessage]) -> list[tuple[int, str]]:
        return sorted((h.seq, h.message.text.split()[0]) for h in hits)

    assert seen(answers["overtaken"]) == [(1, "old"), (2, "old"), (3, "old"), (4, "old")]
    assert seen(answers["rewrite"]) == [(1, "new"), (2, "new")]
    assert seen(store.search(c, "marker")) == [(1, "new"), (2, "new")]


def test_equal_scores_go_to_the_newer_message(store: Any) -> None:
    c = cid()
    store.append(c, [Message.user("ping") for _ in range(5)])
    assert [h.seq for h in store.search(c, "ping", limit=2)] == [5, 4]


def test_word_counts_for_a_bound_past_the_end_follow_later_appends(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextfold.stores import _sql_search

    monkeypatch.setattr(_sql_search, "COMMON_WORD", 5)
    c = cid()
    store.append(c, [Message.user("hello there")])
    assert store.search(c, "apple banana", limit=3, before_seq=5000) == []
    store.append(c, [Message.user(f"apple number {i}") for i in range(8)])
    store.append(c, [Message.user("banana")])
    hits = [h.seq for h in store.search(c, "apple banana", limit=3, before_seq=5000)]
    if hasattr(store, "_dialect"):
        assert hits == [10]  # "apple" is common by now: left out, as a fresh store would
    else:
        assert hits[0] == 10


def test_a_long_query_is_searched_by_its_first_32_words_on_every_store(store: Any) -> None:
    c = cid()
    store.append(c, [Message.user("a trip to zanzibar"), Message.user("word7 and word9")])
    head = " ".join(f"word{i}" for i in range(32))
    assert [h.seq for h in store.search(c, head)] == [2]
    assert [h.seq for h in store.search(c, head + " zanzibar")] == [2]


# -- what is indexed: text, not the stored format ------------------------------------------


def test_ids_and_format_fields_are_not_searched(store: Any) -> None:
    c = cid()
    store.append(
        c,
        [
            Message.user(
                "plain words only",
                id="ORD-9999",
                extra={"source": "zebra", "meta": {"name": "okapi", "text": "lynx"}},
            ),
            Message.assistant(
                None, tool_calls=[ToolCallPart("call_77", "lookup", '{"q": "giraffe"}')]
            ),
            Message.tool_result("call_77", "nothing found"),
        ],
    )
    for query in ("9999", "zebra", "okapi", "lynx", "msg", "1", "77", "call", "text", "kind"):
        assert store.search(c, query) == [], query
    assert [h.seq for h in store.search(c, "giraffe")] == [2]  # arguments are searched
    assert [h.seq for h in store.search(c, "lookup")] == [2]  # and tool names


def test_emails_paths_versions_and_backslashes_are_found_by_their_words(store: Any) -> None:
    c = cid()
    texts = [
        "mail it to ana@example.com please",
        "the bug is in src/app/main_loop.py",
        "upgrade to version 1.5.2 tonight",
        "see https://example.org/docs/setup for details",
        "saved as C:\\notes\\report.txt",
    ]
    store.append(c, [Message.user(t) for t in texts])
    for seq, query in enumerate(
        ["ana@example.com", "src/app/main_loop.py", "1.5.2", "example.org/docs", "notes"], 1
    ):
        assert seq in [h.seq for h in store.search(c, query, limit=5)], query


def test_a_message_too_large_for_a_search_index_is_stored_and_found(store: Any) -> None:
    import random
    import string

    rng = random.Random(4)
    words = " ".join("".join(rng.choices(string.ascii_lowercase, k=10)) for _ in range(120_000))
    c = cid()
    store.append(c, [Message.user("first " + words)])
    assert store.read(c)[0].message.text == "first " + words
    assert [h.seq for h in store.search(c, "first")] == [1]


def test_postgres_migration_reindexes_an_existing_log_by_its_text(postgres_backend: Any) -> None:
    import psycopg

    from contextfold.stores._dialects_search import postgres_search_migration

    store = postgres_backend.open()
    store.append("warm", [Message.user("the schema is created on first use")])
    schema = postgres_backend.options["schema"]
    msgs = f'"{schema}".contextfold_messages'
    # What a database of the previous version holds: the search column of migration 0002.
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {msgs} DROP COLUMN search")
        for statement in postgres_search_migration(msgs):
            conn.execute(statement)
        conn.execute(f'DELETE FROM "{schema}".contextfold_schema WHERE version = 7')
    store.append("c", [Message.user("the file src/app.py", id="ORD-9999")])
    assert store.search("c", "9999")  # the old column indexes the id
    again = postgres_backend.open()
    assert again.search("c", "9999") == []
    assert [h.seq for h in again.search("c", "src/app.py")] == [1]


def test_a_postgres_migration_is_not_cut_short_by_the_read_timeout(postgres_backend: Any) -> None:
    import psycopg

    from contextfold.stores import open_store

    schema = postgres_backend.options["schema"]
    store = postgres_backend.open()
    store.append("c", [Message.user(f"message {i} about parcels") for i in range(20_000)])
    with psycopg.connect(postgres_backend.url, autocommit=True) as conn:
        conn.execute(f'DELETE FROM "{schema}".contextfold_schema WHERE version = 7')
    # Rewriting 20,000 rows takes far longer than 20 ms, the statement timeout of this store.
    quick = open_store(postgres_backend.url, schema=schema, read_timeout=0.02)
    try:
        assert quick.last_seq("c") == 20_000
    finally:
        quick.close()
    assert [h.seq for h in postgres_backend.open().search("c", "message 19999")][:1] == [20_000]


def test_sqlite_migration_reindexes_an_existing_log_without_extras(tmp_path: Any) -> None:
    from contextfold.stores._dialects_search import sqlite_search_migration

    path = tmp_path / "old.db"
    store = SQLiteStore(path)
    store.append("c", [Message.user("plain words", extra={"meta": {"name": "okapi"}})])
    store.close()
    # What a file of the previous version holds: the index and trigger of migration 0003.
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER contextfold_messages_fts_insert")
        conn.execute("DELETE FROM contextfold_messages_fts")
        for statement in sqlite_search_migration():
            conn.execute(statement)
        conn.execute("DELETE FROM contextfold_schema WHERE version = 7")
    conn.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute(
            "SELECT count(*) FROM contextfold_messages_fts WHERE body MATCH 'okapi'"
        ).fetchone() == (1,)
    conn.close()
    store = SQLiteStore(path)
    assert store.search("c", "okapi") == []
    assert [h.seq for h in store.search("c", "plain")] == [1]
    store.append("c", [Message.user("more words", extra={"name": "lynx"})])
    assert store.search("c", "lynx") == []
    assert [h.seq for h in store.search("c", "more")] == [2]
    store.close()
