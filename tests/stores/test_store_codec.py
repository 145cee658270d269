"""Stored rows: JSON is exactly ``Message.to_dict()``; compact rows of old files are still read."""

from __future__ import annotations

import gc
import json
import sqlite3
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import rich_conversation

from contextfold.errors import StoreError
from contextfold.messages import Message, TextPart
from contextfold.stores import SQLiteStore
from contextfold.stores._codec import decode_message, decode_rows, encode_message, encode_messages
from contextfold.stores.base import StoredMessage

ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=())
ROLE = st.sampled_from(["system", "developer", "user", "assistant", "tool"])


def reference(m: Message) -> str:
    return json.dumps(m.to_dict(), separators=(",", ":"), ensure_ascii=False)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    text = draw(st.text(ANY_CHAR, max_size=60))
    role = draw(ROLE)
    shape = draw(st.sampled_from(["plain", "named", "extra", "two-parts", "part-extra", "odd-id"]))
    if shape == "named":
        return Message(role, (TextPart(text),), name=draw(st.text(max_size=5)))
    if shape == "extra":
        return Message(role, (TextPart(text),), extra={"k": text})
    if shape == "two-parts":
        return Message(role, (TextPart(text), TextPart("second")))
    if shape == "part-extra":
        return Message(role, (TextPart(text, extra={"cache": True}),))
    if shape == "odd-id":
        return Message(role, (TextPart(text),), id=draw(st.text(ANY_CHAR, max_size=8)))
    return Message(role, (TextPart(text),))


@settings(max_examples=300, deadline=None)
@given(messages())
def test_encoding_is_to_dict_and_decoding_inverts_it(m: Message) -> None:
    payload = encode_message(m)
    payload.encode()  # always valid UTF-8, so every backend can store it
    assert json.loads(payload) == m.to_dict()
    ref = reference(m)
    try:
        ref.encode()
    except UnicodeEncodeError:
        assert payload.isascii()  # lone surrogates: written with ASCII escapes
    else:
        assert payload == ref
    assert decode_message(payload, "c", 1).message == m


def test_every_part_kind_round_trips_through_the_generic_path() -> None:
    for m in rich_conversation():
        payload = encode_message(m)
        assert payload == reference(m)
        assert decode_message(payload, "c", 3).message == m


def test_text_with_lone_surrogates_is_stored_and_read_back(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    odd = Message.user("broken \udcff decoding \ud800")
    store.append("c", [odd])
    assert store.read("c")[0].message == odd
    store.close()


@settings(max_examples=100, deadline=None)
@given(st.text(ANY_CHAR, max_size=30), ROLE)
def test_damaged_payloads_never_decode_silently(text: str, role: str) -> None:
    payload = encode_message(Message(role, (TextPart(text),)))
    for cut in range(len(payload)):
        with pytest.raises(StoreError, match="seq 7"):
            decode_message(payload[:cut], "c", 7)
    with pytest.raises(StoreError):
        decode_message(payload + "}", "c", 7)


def test_equivalent_json_in_another_layout_decodes_the_same() -> None:
    m = Message.user('hello \\n "there"\n')
    loose = json.dumps(dict(reversed(list(m.to_dict().items()))), indent=2)
    assert decode_message(loose, "c", 1).message == m
    assert decode_message(loose.encode(), "c", 1).message == m


# -- the fast text path and the trusted constructor ----------------------------------------


def is_plain(m: Message) -> bool:
    """The shape the fast path covers: one extra-less text part, no name, no extras."""
    return (
        len(m.parts) == 1
        and type(m.parts[0]) is TextPart
        and not m.parts[0].extra
        and m.name is None
        and not m.extra
    )


@settings(max_examples=300, deadline=None)
@given(messages())
def test_rows_decode_alike_one_by_one_and_in_bulk(m: Message) -> None:
    row = encode_message(m)
    assert decode_rows([(4, row)], "c") == [decode_message(row, "c", 4)]
    assert decode_rows([(4, row.encode())], "c") == [StoredMessage(4, m)]


@settings(max_examples=100, deadline=None)
@given(st.text(ANY_CHAR, max_size=30), ROLE, st.text(ANY_CHAR, max_size=6))
def test_damaged_rows_never_decode_silently_in_bulk(text: str, role: str, msg_id: str) -> None:
    row = encode_message(Message(role, (TextPart(text),), id=msg_id))
    for raw in [row[:cut] for cut in range(len(row))] + [row + "}", row + "x"]:
        with pytest.raises(StoreError, match="seq 7"):
            decode_rows([(6, row), (7, raw)], "c")


def test_the_trusted_constructor_builds_the_same_message() -> None:
    # Message.trusted sets every field itself; a field added to either class must be added
    # there too, or messages read from a store would lack it.
    assert [f.name for f in fields(Message)] == [
        "role",
        "parts",
        "id",
        "name",
        "extra",
        "_token_cache",
    ]
    assert [f.name for f in fields(TextPart)] == ["text", "extra", "kind"]
    built = Message.trusted("tool", "résumé \x00", id="id-1")
    plain = Message("tool", (TextPart("résumé \x00"),), id="id-1")
    assert built == plain
    assert hash(built) == hash(plain)
    assert repr(built) == repr(plain)
    assert built._token_cache == {}
    assert built._token_cache is not Message.trusted("tool", "", id="x")._token_cache
    assert built.parts[0].kind == "text"
    assert built.text == "résumé \x00"
    rich = rich_conversation()[-1]
    again = Message.trusted(rich.role, rich.parts, id=rich.id, name=rich.name, extra=rich.extra)
    assert again == rich
    assert repr(again) == repr(rich)


# -- compact rows written by earlier versions ------------------------------------------------


def legacy_row(m: Message) -> str:
    """A compact row exactly as contextfold wrote them before JSON became the only format."""
    return f"\x1e{m.role[0]}{len(m.text)}:{m.id}\x1f{m.text}"


@settings(max_examples=200, deadline=None)
@given(messages())
def test_compact_rows_of_earlier_versions_are_still_read(m: Message) -> None:
    if not is_plain(m) or "\x1f" in m.id:
        return  # earlier versions wrote these as JSON
    row = legacy_row(m)
    assert decode_message(row, "c", 4).message == m
    assert decode_rows([(4, row), (5, encode_message(m))], "c") == [
        StoredMessage(4, m),
        StoredMessage(5, m),
    ]


@settings(max_examples=100, deadline=None)
@given(st.text(ANY_CHAR, max_size=30), ROLE, st.text(ANY_CHAR, max_size=6))
def test_damaged_compact_rows_never_decode_silently(text: str, role: str, msg_id: str) -> None:
    row = legacy_row(Message(role, (TextPart(text),), id=msg_id.replace("\x1f", "")))
    damaged = [row[:cut] for cut in range(len(row))] + [row + "}", row + "x"]
    for raw in damaged:
        with pytest.raises(StoreError, match="seq 7"):
            decode_message(raw, "c", 7)
        with pytest.raises(StoreError, match="seq 7"):
            decode_rows([(6, row), (7, raw)], "c")


ODD_TEXTS = ["", "\x00", "a\x1fb", "\x1e", "12:34", "ünï 🙂", "lone \udcff", "x" * 5000]


def test_sqlite_stores_odd_texts_and_ids_exactly(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    batch = [Message.user(t) for t in ODD_TEXTS]
    batch += [Message.assistant("x", id=i) for i in ["", "a\x1fb", "\x1e", ":", "9:"]]
    batch += rich_conversation()
    assert store.append("c", batch) == list(range(1, len(batch) + 1))
    assert [s.message for s in store.read("c")] == batch
    assert [s.seq for s in store.read("c", after_seq=3, limit=4)] == [4, 5, 6, 7]
    store.close()


@pytest.mark.parametrize("size", [1, 2, 255, 256, 257, 1000, 1023])
def test_sqlite_batches_of_any_size_keep_order_and_numbering(tmp_path: Path, size: int) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    store.append("c", [Message.user("first")])
    batch = [
        Message.user(f"m{i}") if i % 3 else Message.user(f"m{i}", name="n") for i in range(size)
    ]
    assert store.append("c", batch) == list(range(2, size + 2))
    assert store.append("other", [Message.user("elsewhere")]) == [1]
    stored = store.read("c")
    assert [s.seq for s in stored] == list(range(1, size + 2))
    assert [s.message for s in stored[1:]] == batch
    store.close()


def test_a_log_with_compact_rows_on_disk_is_read_and_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SQLiteStore(path)
    old = [Message.user("from before"), Message.assistant("also compact"), *rich_conversation()]
    store.append("c", old)
    store.close()
    # Make the file look like one written by a version that stored compact rows.
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT key, data FROM contextfold_messages ORDER BY key").fetchall()
        for (key, _), m in zip(rows, old, strict=True):
            if is_plain(m):
                conn.execute(
                    "UPDATE contextfold_messages SET data = ? WHERE key = ?", (legacy_row(m), key)
                )
    store = SQLiteStore(path)
    new = [Message.user("after the upgrade")]
    store.append("c", new)
    assert [s.message for s in store.read("c")] == old + new
    assert [s.message for s in store.read("c", after_seq=1, limit=1)] == old[1:2]
    store.close()
    with sqlite3.connect(path) as conn:
        data = [d for (d,) in conn.execute("SELECT data FROM contextfold_messages ORDER BY key")]
    assert data[0].startswith("\x1e")
    assert data[-1] == encode_message(new[0])  # new rows are JSON


def test_a_log_written_before_migration_2_is_upgraded_and_read(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SQLiteStore(path)
    old = [Message.user("from before"), Message.assistant("also JSON")]
    store.append("c", old)
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM contextfold_schema WHERE version = 2")
    store = SQLiteStore(path)
    store.append("c", [Message.user("after the upgrade")])
    assert [s.message.text for s in store.read("c")] == [
        "from before",
        "also JSON",
        "after the upgrade",
    ]
    store.close()
    with sqlite3.connect(path) as conn:
        names = [n for (n,) in conn.execute("SELECT name FROM contextfold_schema ORDER BY version")]
    assert names == [
        "0001_initial_log",
        "0002_compact_text_rows",
        "0003_message_search",
        "0004_conversation_state",
        "0005_message_ids",
        "0006_token_tallies",
        "0007_search_text",
    ]


def test_big_batches_decode_like_single_rows_and_leave_the_collector_alone() -> None:
    assert [f.name for f in fields(StoredMessage)] == ["seq", "message"]
    batch = [Message.user(f"turn {i}") for i in range(3000)] + rich_conversation()
    rows = [(seq, encode_message(m)) for seq, m in enumerate(batch, 1)]
    decoded = decode_rows(rows, "c")
    assert decoded == [StoredMessage(seq, m) for seq, m in enumerate(batch, 1)]
    damaged = [*rows[:-1], (len(rows), rows[-1][1][:-1])]
    with pytest.raises(StoreError, match=f"seq {len(rows)}"):
        decode_rows(damaged, "c")
    gc.disable()
    try:
        assert decode_rows(rows, "c") == decoded
        assert not gc.isenabled()  # a caller's choice is left alone
    finally:
        gc.enable()


@settings(max_examples=100, deadline=None)
@given(st.lists(messages(), max_size=8))
def test_batch_encoding_matches_row_by_row(batch: list[Message]) -> None:
    batch += [Message.from_dict(m.to_dict()) for m in batch]  # plain-dict extras
    assert encode_messages("c", batch) == [encode_message(m) for m in batch]


def test_a_closed_sqlite_store_refuses_reads(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    batch = [Message.user(f"m{i}") for i in range(3000)]
    store.append("c", batch)
    assert [s.message for s in store.read("c")] == batch
    assert [s.seq for s in store.read("c", after_seq=5, limit=2000)][-1] == 2005
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.read("c")
