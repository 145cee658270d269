"""Passwords never show in a network store's errors or repr, whatever they are made of.

``redact_url`` must hide any password in every URL form the PostgreSQL and Redis stores take
(spaces, ideographic spaces, ``@``, ``/``, ``%`` ... included), and the stores must not let
libpq's own message quote it: libpq names the token it could not parse, or the host and port
it read out of a password with an unencoded ``/`` or ``@``.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.errors import StoreError
from contextfold.messages import Message
from contextfold.stores import open_store
from contextfold.stores._checks import redact_url

#: Any character at all, surrogates aside (a URL is text that can be encoded).
CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=("Cs",))
PASSWORD = st.text(CHAR, min_size=1, max_size=24)
#: Long enough that finding it in a message by chance is out of the question.
SECRET = st.text(CHAR, min_size=8, max_size=24)

USERINFO_FORMS = [
    "postgresql://app:{}@db.example:5432/app?sslmode=require",
    "postgres://app:{}@db.example/app",
    "redis://user:{}@cache.example:6379/0",
    "redis://:{}@cache.example:6379/0",
    "rediss://user:{}@cache.example/0",
    "redis+cluster://user:{}@node-1:7000",
    "unix://:{}@/run/redis.sock?db=0",
]


@pytest.mark.parametrize("form", USERINFO_FORMS)
@settings(max_examples=200, deadline=None)
@given(password=PASSWORD)
def test_redact_url_replaces_exactly_any_password_of_a_url(form: str, password: str) -> None:
    assert redact_url(form.format(password)) == form.format("***")


@settings(max_examples=200, deadline=None)
@given(password=st.text(CHAR.filter(lambda c: c not in "&#"), min_size=1, max_size=24))
def test_redact_url_replaces_any_password_of_a_postgres_url_query(password: str) -> None:
    url = "postgresql://app@db.example/app?password={}&sslmode=require"
    assert redact_url(url.format(password)) == url.format("***")


@settings(max_examples=200, deadline=None)
@given(password=PASSWORD)
def test_redact_url_replaces_any_quoted_password_of_a_conninfo_string(password: str) -> None:
    quoted = "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"
    conninfo = "host=db.example password={} dbname=app"
    assert redact_url(conninfo.format(quoted)) == conninfo.format("***")


def _messages(url: str, **options: Any) -> list[str]:
    """What a store opened on ``url`` (no server there) shows: its repr and its errors."""
    try:
        store = open_store(url, connect_timeout=1, read_timeout=1, **options)
    except StoreError as exc:
        return [str(exc)]
    shown = [repr(store)]

    async def aappend() -> None:
        await store.aappend("c", [Message.user("hi")])

    for call in (lambda: store.append("c", [Message.user("hi")]), lambda: asyncio.run(aappend())):
        with pytest.raises(StoreError) as info:
            call()
        shown.append(str(info.value))
    store.close()
    return shown


PG_FORMS = [
    "postgresql://app:{}@127.0.0.1:1/app",
    "postgresql://127.0.0.1:1/app?password={}",
]


@pytest.mark.parametrize("form", PG_FORMS)
@pytest.mark.parametrize("encode", [False, True])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=SECRET)
def test_a_postgres_store_never_shows_its_password(form: str, encode: bool, secret: str) -> None:
    pytest.importorskip("psycopg")
    for shown in _messages(form.format(quote(secret, safe="") if encode else secret)):
        assert secret not in shown
        assert quote(secret, safe="") not in shown


@pytest.mark.parametrize("form", ["redis://user:{}@127.0.0.1:1/0", "redis://:{}@127.0.0.1:1/0"])
@pytest.mark.parametrize("encode", [False, True])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=SECRET)
def test_a_redis_store_never_shows_its_password(form: str, encode: bool, secret: str) -> None:
    pytest.importorskip("redis")
    for shown in _messages(form.format(quote(secret, safe="") if encode else secret)):
        assert secret not in shown
        assert quote(secret, safe="") not in shown


@pytest.mark.parametrize(
    ("password", "hidden"),
    [
        ("50%offSecret", "offSecret"),  # libpq: invalid percent-encoded token: "50%offSecret"
        ("correct horse", "horse"),  # libpq: unexpected spaces found in "correct horse"
        ("p@ss@word", "ss@word"),  # libpq: could not translate host name "ss@word@127.0.0.1"
        ("S3kr1t/x", "S3kr1t"),  # libpq: invalid integer value "S3kr1t" for option "port"
    ],
)
def test_a_postgres_store_hides_the_parts_of_a_password_libpq_misread(
    password: str, hidden: str
) -> None:
    pytest.importorskip("psycopg")
    for shown in _messages(f"postgresql://app:{password}@127.0.0.1:1/app"):
        assert hidden not in shown
