"""The stored JSON is exactly ``Message.to_dict()``, whichever encoding path produced it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import rich_conversation

from contextfold.errors import StoreError
from contextfold.messages import Message, TextPart
from contextfold.stores import SQLiteStore
from contextfold.stores._codec import decode_message, encode_message

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
