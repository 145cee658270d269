"""A writer process for the reliability tests: ``python store_worker.py '<json job>'``.

Jobs open the store from a URL (as a separate process on another machine would), wait for a
start file so that all workers really run at the same time, and report on stdout, one line
per acknowledged operation, flushed, so a parent that kills the worker knows what was acked.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConflictError
from contextfold.messages import Message
from contextfold.stores import open_store


def wait_for(path: str) -> None:
    deadline = time.monotonic() + 30
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit("start file never appeared")
        time.sleep(0.005)


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(job: dict[str, Any]) -> None:
    store = open_store(job["url"], **job["options"])
    cid = job["conversation"]
    say("ready")
    wait_for(job["go"])
    mode = job["mode"]
    append: Callable[[str, Sequence[Message]], list[int]] = store.append
    if job.get("use_async"):
        loop = asyncio.new_event_loop()

        def append(conversation: str, messages: Sequence[Message]) -> list[int]:
            return loop.run_until_complete(store.aappend(conversation, messages))

    if mode == "append":
        writer = job["writer"]
        for i in range(job["count"]):
            append(cid, [Message.user(f"w{writer}:{i}")])
        say("done")
    elif mode == "append_until_killed":
        i = 0
        while True:
            text = f"k:{i}"
            (seq,) = append(cid, [Message.user(text, id=f"id-{i}")])
            say(f"ack {seq} {text}")
            if i % job["checkpoint_every"] == job["checkpoint_every"] - 1:
                latest = store.latest_checkpoint(cid)
                record = CheckpointRecord(
                    summary="s" * 2000 + str(i),
                    last_covered_id=f"id-{i}",
                    last_covered_seq=seq,
                    previous_id=latest.id if latest else None,
                )
                store.append_checkpoint(
                    cid, record, expected_previous=latest.id if latest else None
                )
                say(f"ckpt {record.id}")
            i += 1
    elif mode == "compact":
        latest = store.latest_checkpoint(cid)
        expected = latest.id if latest else None
        outcome = {"locked": False, "committed": False, "conflict": False}
        with store.compaction_lock(cid, ttl=30) as taken:
            outcome["locked"] = taken
            if taken or not job["use_lock"]:
                last = store.read(cid)[-1]
                time.sleep(job["hold"])  # the summarizer call
                record = CheckpointRecord(
                    summary=f"by {os.getpid()}",
                    last_covered_id=last.message.id,
                    last_covered_seq=last.seq,
                    previous_id=expected,
                )
                try:
                    store.append_checkpoint(cid, record, expected_previous=expected)
                    outcome["committed"] = True
                except ConflictError:
                    outcome["conflict"] = True
        say(json.dumps(outcome))
    store.close()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
