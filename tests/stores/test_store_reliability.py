"""Reliability of the persistent stores under real concurrent processes and a SIGKILL.

Each test starts worker processes (``store_worker.py``) that open the store from its URL,
exactly as separate servers would, and checks the log afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import IO, Any

import pytest

from contextfold.messages import Message

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("store_worker.py")


def start(backend: Any, tmp_path: Path, cid: str, **job: Any) -> subprocess.Popen[str]:
    payload = dict(backend.spec(), conversation=cid, go=str(tmp_path / "go"), **job)
    return subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(payload)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_ready(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.strip() == "ready", p.stderr.read() if p.stderr else line


def finish(p: subprocess.Popen[str], timeout: float = 60) -> str:
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err
    return out


def go(tmp_path: Path) -> None:
    (tmp_path / "go").touch()


def test_eight_processes_append_500_each(persistent_backend: Any, tmp_path: Path) -> None:
    eight_writers(persistent_backend, tmp_path, use_async=[False] * 8)


def test_sqlite_async_and_sync_writers_mixed(sqlite_backend: Any, tmp_path: Path) -> None:
    # Async appends take the event-loop connection when the write lock is free and a
    # worker thread when it is not; both must keep the numbering and each writer's order.
    eight_writers(sqlite_backend, tmp_path, use_async=[w % 2 == 0 for w in range(8)])


def eight_writers(persistent_backend: Any, tmp_path: Path, *, use_async: list[bool]) -> None:
    cid = "race-" + uuid.uuid4().hex[:8]
    procs = [
        start(
            persistent_backend,
            tmp_path,
            cid,
            mode="append",
            writer=w,
            count=500,
            use_async=use_async[w],
        )
        for w in range(8)
    ]
    wait_ready(procs)
    go(tmp_path)
    for p in procs:
        assert finish(p).strip() == "done"
    store = persistent_backend.open()
    log = store.read(cid)
    assert len(log) == 4000
    assert [s.seq for s in log] == list(range(1, 4001))
    assert store.last_seq(cid) == 4000
    per_writer: dict[str, list[int]] = {}
    for s in log:
        writer, i = s.message.text.split(":")
        per_writer.setdefault(writer, []).append(int(i))
    assert sorted(per_writer) == [f"w{w}" for w in range(8)]
    for writer, order in per_writer.items():
        assert order == list(range(500)), f"{writer} out of order or incomplete"
    # The writers really interleaved (otherwise this test proves little).
    first_writer_run = next(
        i for i, s in enumerate(log) if s.message.text[:2] != log[0].message.text[:2]
    )
    assert first_writer_run < 500


def read_lines(stream: IO[str]) -> list[str]:
    return [line.strip() for line in stream.read().splitlines() if line.strip()]


def test_killed_writer_loses_no_acknowledged_append(
    persistent_backend: Any, tmp_path: Path
) -> None:
    killed_writer(persistent_backend, tmp_path, use_async=False)


def test_sqlite_killed_async_writer_loses_no_acknowledged_append(
    sqlite_backend: Any, tmp_path: Path
) -> None:
    killed_writer(sqlite_backend, tmp_path, use_async=True)


def killed_writer(persistent_backend: Any, tmp_path: Path, *, use_async: bool) -> None:
    cid = "kill-" + uuid.uuid4().hex[:8]
    store = persistent_backend.open()
    store.append(cid, [Message.system("before the writer")])
    proc = start(
        persistent_backend,
        tmp_path,
        cid,
        mode="append_until_killed",
        checkpoint_every=25,
        use_async=use_async,
    )
    wait_ready([proc])
    go(tmp_path)
    acks: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while sum(a.startswith("ack ") for a in acks) < 300 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acks.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    acks += read_lines(proc.stdout)  # acks already written before the kill
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    acked = [a.split() for a in acks if a.startswith("ack ")]
    acked_ckpts = [a.split()[1] for a in acks if a.startswith("ckpt ")]
    assert len(acked) >= 300
    assert len(acked_ckpts) >= 10

    after = persistent_backend.open()
    log = after.read(cid)  # readable: no damaged row
    last = after.last_seq(cid)
    assert [s.seq for s in log] == list(range(1, last + 1))
    by_seq = {s.seq: s.message.text for s in log}
    for _, seq, text in acked:
        assert by_seq.get(int(seq)) == text, f"acknowledged append {seq} lost"
    assert log[0].message.text == "before the writer"
    checkpoints = after.checkpoints(cid)
    ids = [k.id for k in checkpoints]
    for ckpt_id in acked_ckpts:
        assert ckpt_id in ids
    assert len(ids) <= len(acked_ckpts) + 1  # at most the one in flight
    for k in checkpoints:
        assert k.summary.startswith("s" * 2000)  # whole, not truncated
        assert k.last_covered_seq is not None
        assert 1 <= k.last_covered_seq <= last
        assert by_seq[k.last_covered_seq] == "k:" + k.last_covered_id.split("-")[1]
    latest = after.latest_checkpoint(cid)
    assert latest is not None
    assert latest.id == ids[-1]
    # The log keeps working after the crash.
    assert after.append(cid, [Message.user("after")]) == [last + 1]


@pytest.mark.parametrize("use_lock", [True, False], ids=["locked", "optimistic"])
def test_racing_compactions_produce_one_checkpoint(
    persistent_backend: Any, tmp_path: Path, use_lock: bool
) -> None:
    cid = "compact-" + uuid.uuid4().hex[:8]
    store = persistent_backend.open()
    store.append(cid, [Message.user(f"m{i}") for i in range(20)])
    procs = [
        start(persistent_backend, tmp_path, cid, mode="compact", use_lock=use_lock, hold=0.5)
        for _ in range(2)
    ]
    wait_ready(procs)
    go(tmp_path)
    outcomes = [json.loads(finish(p).strip().splitlines()[-1]) for p in procs]
    assert [o["committed"] for o in outcomes].count(True) == 1
    if use_lock:
        assert sorted(o["locked"] for o in outcomes) == [False, True]
        assert not any(o["conflict"] for o in outcomes)
    else:
        assert [o["conflict"] for o in outcomes].count(True) == 1
    assert len(store.checkpoints(cid)) == 1
