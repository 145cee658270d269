"""``delete()`` racing appends on every store: the log it leaves is whole.

Writers on their own store handles append while another handle deletes the conversation
again and again. Whatever interleaving happened, what is left must be one gap-free log:
sequence numbers 1..``last_seq`` with no duplicates and no orphans, and the next append must
continue right after it.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from contextfold.messages import Message

WRITERS = 4
APPENDS = 120
DELETES = 40
TRIALS = 100


def _writer(store: Any, cid: str, writer: int, start: threading.Event, errors: list[str]) -> None:
    start.wait()
    try:
        for i in range(APPENDS):
            store.append(cid, [Message.user(f"w{writer}:{i}"), Message.assistant(f"r{i}")])
    except Exception as exc:  # reported by the test, which must see none
        errors.append(f"writer {writer}: {exc!r}")


def _deleter(store: Any, cid: str, start: threading.Event, errors: list[str]) -> None:
    start.wait()
    try:
        for _ in range(DELETES):
            store.delete(cid)
            time.sleep(0.002)
    except Exception as exc:
        errors.append(f"deleter: {exc!r}")


def test_delete_racing_appends_leaves_a_gap_free_log(backend: Any) -> None:
    cid = "delrace-" + uuid.uuid4().hex[:8]
    start = threading.Event()
    errors: list[str] = []
    threads = [
        threading.Thread(target=_writer, args=(backend.open(), cid, w, start, errors))
        for w in range(WRITERS)
    ]
    threads.append(threading.Thread(target=_deleter, args=(backend.open(), cid, start, errors)))
    for t in threads:
        t.start()
    start.set()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    store = backend.open()
    log = store.read(cid)
    last = store.last_seq(cid)
    assert [s.seq for s in log] == list(range(1, last + 1)), "gaps, duplicates or orphans"
    # Appends are batches of two, so a whole log holds user/assistant pairs in order.
    assert [s.message.role for s in log] == ["user", "assistant"] * (last // 2)
    assert (cid in store.list_conversations()) == (last > 0)
    assert store.append(cid, [Message.user("after")]) == [last + 1]


def test_delete_racing_an_append_leaves_list_conversations_in_step_with_the_log(
    backend: Any,
) -> None:
    # One append against one delete, started together, many times: whichever wins, the
    # conversation is listed exactly when it holds messages.
    appender, deleter, reader = backend.open(), backend.open(), backend.open()
    out_of_step = []
    for trial in range(TRIALS):
        cid = f"listrace-{uuid.uuid4().hex[:8]}-{trial}"
        appender.append(cid, [Message.user("seed")])
        go = threading.Barrier(2)

        def append(cid: str = cid, go: threading.Barrier = go) -> None:
            go.wait()
            appender.append(cid, [Message.user("racing the delete")])

        def delete(cid: str = cid, go: threading.Barrier = go) -> None:
            go.wait()
            deleter.delete(cid)

        threads = [threading.Thread(target=append), threading.Thread(target=delete)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        stored = reader.last_seq(cid) > 0
        if (cid in reader.list_conversations()) != stored:
            out_of_step.append((cid, stored))
        reader.delete(cid)
    assert out_of_step == []
