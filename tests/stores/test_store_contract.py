"""The store contract, run against every backend (memory, SQLite, Redis, PostgreSQL)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from store_helpers import real_conversation, rich_conversation

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConflictError, StoreError
from contextfold.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart
from contextfold.stores.base import AsyncStore, Store
from contextfold.summarizers.base import Usage


def cid() -> str:
    return "conv-" + uuid.uuid4().hex[:10]


def ckpt(covered: int, *, previous: str | None = None, **extra: Any) -> CheckpointRecord:
    return CheckpointRecord(
        summary=f"summary up to {covered}",
        last_covered_id=f"m{covered}",
        last_covered_seq=covered,
        previous_id=previous,
        strategy="hybrid",
        **extra,
    )


def users(n: int, prefix: str = "m") -> list[Message]:
    return [Message.user(f"{prefix}{i}") for i in range(n)]


# -- messages --------------------------------------------------------------------------


def test_store_satisfies_both_protocols(store: Any) -> None:
    assert isinstance(store, Store)
    assert isinstance(store, AsyncStore)


def test_round_trip_keeps_every_part_and_field(store: Any) -> None:
    c = cid()
    messages = rich_conversation()
    seqs = store.append(c, messages)
    assert seqs == list(range(1, len(messages) + 1))
    stored = store.read(c)
    assert [s.seq for s in stored] == seqs
    assert [s.message for s in stored] == messages
    assert [s.message.to_dict() for s in stored] == [m.to_dict() for m in messages]


def test_sequences_continue_across_appends_and_empty_append_is_a_no_op(store: Any) -> None:
    c = cid()
    assert store.append(c, users(3)) == [1, 2, 3]
    assert store.append(c, []) == []
    assert store.append(c, users(2, "n")) == [4, 5]
    assert store.last_seq(c) == 5
    assert [s.message.text for s in store.read(c)] == ["m0", "m1", "m2", "n0", "n1"]


def test_read_windows(store: Any) -> None:
    c = cid()
    store.append(c, users(10))
    assert [s.seq for s in store.read(c, after_seq=7)] == [8, 9, 10]
    assert [s.seq for s in store.read(c, after_seq=2, limit=3)] == [3, 4, 5]
    assert [s.seq for s in store.read(c, limit=2)] == [1, 2]
    assert store.read(c, after_seq=4, limit=0) == []
    assert store.read(c, after_seq=10) == []
    assert store.read(c, after_seq=50, limit=5) == []
    assert [s.message.text for s in store.read(c, after_seq=8, limit=100)] == ["m8", "m9"]


def test_unknown_conversation_reads_as_empty(store: Any) -> None:
    c = cid()
    assert store.read(c) == []
    assert store.last_seq(c) == 0
    assert store.latest_checkpoint(c) is None
    assert store.checkpoints(c) == []
    assert c not in store.list_conversations()


def test_conversations_are_isolated(store: Any) -> None:
    a, b = cid(), cid()
    store.append(a, users(3, "a"))
    store.append(b, users(1, "b"))
    assert store.last_seq(a) == 3
    assert store.last_seq(b) == 1
    assert [s.message.text for s in store.read(b)] == ["b0"]


def test_a_message_repeated_in_one_batch_is_stored_once(store: Any) -> None:
    c = cid()
    m = Message.user("again")
    assert store.append(c, [m, m]) == [1, 1]
    assert [s.message for s in store.read(c)] == [m]


def test_a_new_instance_sees_the_same_log(backend: Any) -> None:
    c = cid()
    backend.open().append(c, users(4))
    other = backend.open()
    assert other.last_seq(c) == 4
    assert other.append(c, users(1, "x")) == [5]


# -- checkpoints -----------------------------------------------------------------------


def test_checkpoint_chain_and_round_trip(store: Any) -> None:
    c = cid()
    store.append(c, users(6))
    first = ckpt(
        3,
        usage=Usage(input_tokens=120, output_tokens=30),
        details={"files": ["a.py"], "nested": {"k": [1, 2]}},
        model="m-1",
        tokens_before=900,
        tokens_after=200,
    )
    assert store.append_checkpoint(c, first, expected_previous=None) == first
    second = ckpt(5, previous=first.id)
    store.append_checkpoint(c, second, expected_previous=first.id)
    assert [k.id for k in store.checkpoints(c)] == [first.id, second.id]
    latest = store.latest_checkpoint(c)
    assert latest is not None
    assert latest.to_dict() == second.to_dict()
    assert store.checkpoints(c)[0].to_dict() == first.to_dict()


def test_checkpoint_may_cover_the_whole_log(store: Any) -> None:
    c = cid()
    store.append(c, users(2))
    store.append_checkpoint(c, ckpt(2), expected_previous=None)
    assert store.latest_checkpoint(c).last_covered_seq == 2


@pytest.mark.parametrize(
    ("expected", "covered", "reason"),
    [
        ("stale", 2, "expected previous"),
        ("first-is-none", 2, "expected previous"),
        ("unknown", 2, "expected previous"),
        ("right", None, "no last_covered_seq"),
        ("right", 0, "covers up to seq 0"),
        ("right", 7, "covers up to seq 7"),
    ],
)
def test_checkpoint_conflicts_change_nothing(
    store: Any, expected: str, covered: int | None, reason: str
) -> None:
    c = cid()
    store.append(c, users(4))
    base = ckpt(1)
    store.append_checkpoint(c, base, expected_previous=None)
    store.append_checkpoint(c, ckpt(2, previous=base.id), expected_previous=base.id)
    latest_id = store.latest_checkpoint(c).id
    previous = {
        "stale": base.id,
        "first-is-none": None,
        "unknown": "ckpt_nope",
        "right": latest_id,
    }[expected]
    candidate = ckpt(3).replace(last_covered_seq=covered)
    with pytest.raises(ConflictError, match=reason):
        store.append_checkpoint(c, candidate, expected_previous=previous)
    assert [k.id for k in store.checkpoints(c)] == [base.id, latest_id]
    assert store.last_seq(c) == 4


def test_checkpoint_on_unknown_conversation_conflicts(store: Any) -> None:
    c = cid()
    with pytest.raises(ConflictError):
        store.append_checkpoint(c, ckpt(1), expected_previous=None)
    assert store.checkpoints(c) == []
    assert c not in store.list_conversations()


def test_conflict_error_is_a_store_error(store: Any) -> None:
    c = cid()
    store.append(c, users(1))
    with pytest.raises(StoreError):
        store.append_checkpoint(c, ckpt(5), expected_previous=None)


# -- compaction lock -------------------------------------------------------------------


def test_compaction_lock_is_single_flight_across_instances(backend: Any) -> None:
    a, b = backend.open(), backend.open()
    c = cid()
    with a.compaction_lock(c, ttl=30) as first:
        assert first is True
        with b.compaction_lock(c, ttl=30) as second:
            assert second is False
        with b.compaction_lock(cid(), ttl=30) as other_conversation:
            assert other_conversation is True
    with b.compaction_lock(c, ttl=30) as again:
        assert again is True


def test_compaction_lock_is_released_on_error(store: Any) -> None:
    c = cid()

    def compact_and_fail() -> None:
        with store.compaction_lock(c, ttl=30) as taken:
            assert taken
            raise RuntimeError("summarizer blew up")

    with pytest.raises(RuntimeError, match="blew up"):
        compact_and_fail()
    with store.compaction_lock(c, ttl=30) as taken:
        assert taken is True


def test_compaction_lock_expires_and_a_late_release_frees_nothing(backend: Any) -> None:
    a, b, c_store = backend.open(), backend.open(), backend.open()
    c = cid()
    with a.compaction_lock(c, ttl=0.3) as held:
        assert held is True
        deadline = time.monotonic() + 5
        while True:
            time.sleep(0.1)
            b_lock = b.compaction_lock(c, ttl=30)
            taken = b_lock.__enter__()
            if taken or time.monotonic() > deadline:
                break
            b_lock.__exit__(None, None, None)
        assert taken, "the expired lock was never released"
    # ``a`` left its block after its lock expired: ``b`` must still hold the lock.
    try:
        with c_store.compaction_lock(c, ttl=30) as third:
            assert third is False
    finally:
        b_lock.__exit__(None, None, None)
    with c_store.compaction_lock(c, ttl=30) as fourth:
        assert fourth is True


# -- listing and deleting --------------------------------------------------------------


def test_list_and_delete(store: Any) -> None:
    ids = sorted(cid() for _ in range(3))
    for i, c in enumerate(reversed(ids)):
        store.append(c, users(i + 1))
    listed = store.list_conversations()
    assert [c for c in listed if c in ids] == ids
    assert listed == sorted(listed)
    store.append_checkpoint(ids[0], ckpt(1), expected_previous=None)
    store.delete(ids[0])
    assert ids[0] not in store.list_conversations()
    assert store.read(ids[0]) == []
    assert store.last_seq(ids[0]) == 0
    assert store.checkpoints(ids[0]) == []
    assert store.latest_checkpoint(ids[0]) is None
    assert store.last_seq(ids[1]) == 2
    store.delete(cid())  # unknown: nothing to do, no error
    assert store.append(ids[0], users(1)) == [1]


# -- bad arguments ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", 7, None, b"bytes", "nul\x00", "half \ud800"])
def test_bad_conversation_id_is_a_store_error(store: Any, bad: Any) -> None:
    with pytest.raises(StoreError, match="conversation id"):
        store.append(bad, users(1))
    with pytest.raises(StoreError, match="conversation id"):
        store.read(bad)


def test_bad_items_store_nothing(store: Any) -> None:
    c = cid()
    store.append(c, users(1))
    with pytest.raises(StoreError, match="item 1"):
        store.append(c, [Message.user("ok"), {"role": "user", "content": "dict"}])
    with pytest.raises(StoreError, match="sequence of Message"):
        store.append(c, Message.user("not in a list"))
    with pytest.raises(StoreError, match="sequence of Message"):
        store.append(c, "text")
    assert store.last_seq(c) == 1


@pytest.mark.parametrize(
    ("after_seq", "limit"), [(-1, None), (0, -2), ("3", None), (1.5, 2), (True, None), (0, 2**64)]
)
def test_bad_read_arguments(store: Any, after_seq: Any, limit: Any) -> None:
    with pytest.raises(StoreError):
        store.read(cid(), after_seq=after_seq, limit=limit)


def test_bad_checkpoint_and_ttl(store: Any) -> None:
    c = cid()
    store.append(c, users(2))
    with pytest.raises(StoreError, match="CheckpointRecord"):
        store.append_checkpoint(c, {"summary": "x"}, expected_previous=None)
    with pytest.raises(StoreError, match="ttl"), store.compaction_lock(c, ttl=0):
        pass
    assert store.checkpoints(c) == []


# -- async twins -----------------------------------------------------------------------


async def test_async_api_matches_sync(backend: Any) -> None:
    store = backend.open()
    c = cid()
    try:
        assert await store.aappend(c, users(3)) == [1, 2, 3]
        assert await store.aappend(c, []) == []
        assert await store.alast_seq(c) == 3
        assert [s.seq for s in await store.aread(c, after_seq=1, limit=1)] == [2]
        first = ckpt(2)
        await store.aappend_checkpoint(c, first, expected_previous=None)
        with pytest.raises(ConflictError):
            await store.aappend_checkpoint(c, ckpt(3), expected_previous=None)
        assert (await store.alatest_checkpoint(c)).id == first.id
        assert [k.id for k in await store.acheckpoints(c)] == [first.id]
        async with store.acompaction_lock(c, ttl=30) as taken:
            assert taken is True
            async with store.acompaction_lock(c, ttl=30) as again:
                assert again is False
        async with store.acompaction_lock(c, ttl=30) as after:
            assert after is True
        assert c in await store.alist_conversations()
        # The sync API of the same store sees what the async one wrote, and vice versa.
        assert store.last_seq(c) == 3
        store.append(c, users(1, "s"))
        assert [s.message.text for s in await store.aread(c, after_seq=3)] == ["s0"]
        await store.adelete(c)
        assert await store.alast_seq(c) == 0
        assert c not in await store.alist_conversations()
    finally:
        await store.aclose()


async def test_async_bad_input_is_a_store_error(backend: Any) -> None:
    store = backend.open()
    try:
        with pytest.raises(StoreError):
            await store.aappend("", users(1))
        with pytest.raises(StoreError):
            await store.aread(cid(), after_seq=-1)
        with pytest.raises(StoreError):
            await store.aappend(cid(), [object()])
    finally:
        await store.aclose()


def test_closed_store_refuses_work(persistent_backend: Any) -> None:
    store = persistent_backend.open()
    store.append(cid(), users(1))
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.last_seq(cid())


def test_messages_with_every_part_kind_survive(store: Any) -> None:
    c = cid()
    odd = Message.assistant(
        [
            ThinkingPart(text="hmm", signature="sig"),
            TextPart('quote " backslash \\ nul \x00 tab \t emoji 🙂 </summary>'),
            ToolCallPart(id="call_1", name="f", arguments='{ "a" :1 }'),
            ImagePart(data="aGVsbG8=", mime="image/png"),
        ]
    )
    store.append(c, [odd])
    assert store.read(c)[0].message == odd


def test_real_agent_trajectory_round_trips(store: Any) -> None:
    c = cid()
    messages = real_conversation()
    store.append(c, messages[:5])
    store.append(c, messages[5:])
    assert [s.message for s in store.read(c)] == messages
    tail = store.read(c, after_seq=len(messages) - 3, limit=3)
    assert [s.message for s in tail] == messages[-3:]
