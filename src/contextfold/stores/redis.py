"""Redis store (redis-py, sync and asyncio): a shared log with no schema to manage.

Layout, under a key prefix (``contextfold`` by default):

* ``<prefix>:c:<id>:m``: a list of message JSON; a message's sequence number is its position
  (1-based). ``RPUSH`` of a whole batch is atomic and returns the new length, so concurrent
  appends from any number of machines get contiguous, gap-free sequence numbers.
* ``<prefix>:c:<id>:k``: a list of checkpoint JSON; ``<prefix>:c:<id>:latest`` the id of
  the newest one. A Lua script checks and commits a checkpoint atomically.
* ``<prefix>:c:<id>:lock``: the compaction lock, ``SET NX PX`` with a random token, released
  by a compare-and-delete script so a holder whose lock expired cannot free someone else's.
* ``<prefix>:conversations``: the set of conversation ids; ``<prefix>:schema_version``: the
  layout version, checked on first use.

Durability is the server's: with Redis' default snapshotting, recent appends are lost if the
server itself stops. Enable ``appendonly yes`` (``appendfsync everysec`` or ``always``) when the
log must survive a Redis restart.

The sync and async APIs run the same operations (generators of Redis commands) through
two small drivers, one per client flavour.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Generator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from contextfold._drive import adrive, drive
from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConflictError, MissingExtraError, StoreError
from contextfold.stores._backend import LockingOpStore
from contextfold.stores._checks import (
    LoopRef,
    as_text,
    check_checkpoint_commit,
    check_positive,
    redact_url,
    same_event_loop,
)
from contextfold.stores._codec import decode_checkpoint, decode_rows
from contextfold.stores.base import StoreConfigError, StoredMessage

__all__ = ["RedisStore"]

T = TypeVar("T")

SCHEMA_VERSION = 1

_COMMIT_CHECKPOINT = """
local latest = redis.call('GET', KEYS[3])
if not latest then latest = '' end
local n = redis.call('LLEN', KEYS[1])
local covered = tonumber(ARGV[2])
if latest ~= ARGV[1] or covered < 1 or covered > n then
  return {1, latest, n}
end
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('SET', KEYS[3], ARGV[4])
return {0, latest, n}
"""

_RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

_SCRIPTS = {
    "commit": (_COMMIT_CHECKPOINT, hashlib.sha1(_COMMIT_CHECKPOINT.encode()).hexdigest()),
    "release": (_RELEASE_LOCK, hashlib.sha1(_RELEASE_LOCK.encode()).hexdigest()),
}


@dataclass(frozen=True, slots=True)
class _Cmd:
    """One command, or several run as one ``MULTI``/``EXEC`` transaction (``multi``)."""

    args: tuple[Any, ...] = ()
    multi: tuple[tuple[Any, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class _Script:
    name: str
    keys: tuple[str, ...]
    args: tuple[Any, ...]


_Op = Generator["_Cmd | _Script", Any, T]


def _module() -> ModuleType:
    try:
        import redis
        import redis.asyncio
    except ImportError as exc:
        raise MissingExtraError("RedisStore", "redis") from exc
    return redis


class RedisStore(LockingOpStore):
    """The append-only log in Redis lists (sync and async).

    Args:
        target: a ``redis://`` / ``rediss://`` / ``unix://`` URL, or an existing
            ``redis.Redis`` or ``redis.asyncio.Redis`` client (used as is and not closed;
            such a store offers only the API of that client's flavour).
        key_prefix: prefix of every key, so several applications can share a database.
        connect_timeout: seconds to wait for the server before raising :class:`StoreError`.

    The asyncio client belongs to the event loop that first used it: use one store per loop
    (an async call from another loop raises :class:`StoreError`).
    """

    def __init__(
        self, target: Any, *, key_prefix: str = "contextfold", connect_timeout: float = 5.0
    ) -> None:
        if not isinstance(key_prefix, str) or not key_prefix:
            raise StoreConfigError(
                f"key_prefix must be a non-empty string, got {key_prefix!r}", argument="key_prefix"
            )
        check_positive(connect_timeout, "connect_timeout")
        redis = _module()
        self._redis = redis
        self._prefix = key_prefix
        self._connect_timeout = connect_timeout
        self._url: str | None = None
        self._client: Any = None
        self._aclient: Any = None
        self._owned = True
        if isinstance(target, str):
            if not target.startswith(("redis://", "rediss://", "unix://")):
                raise StoreConfigError(
                    f"not a Redis URL: {redact_url(target)!r}", argument="target"
                )
            try:
                redis.connection.parse_url(target)
            except ValueError:
                # redis-py's message quotes the piece it could not parse, which may be a
                # password: name the redacted URL only.
                raise StoreConfigError(
                    f"cannot parse Redis URL {redact_url(target)!r} (percent-encode any "
                    "'/', '@' or ':' in the password)",
                    argument="target",
                ) from None
            self._url = target
            self._where = f"Redis {redact_url(target)!r}"
        elif isinstance(target, redis.Redis):
            self._client, self._owned = target, False
            self._where = f"Redis client {target!r}"
        elif isinstance(target, redis.asyncio.Redis):
            self._aclient, self._owned = target, False
            self._where = f"Redis client {target!r}"
        else:
            raise StoreConfigError(
                f"RedisStore expects a redis:// URL or a redis client, got {type(target).__name__}",
                argument="target",
            )
        self._init_lock = threading.Lock()
        self._sync_ready = False
        self._async_ready = False
        self._aloop: LoopRef | None = None
        self._closed = False

    # -- keys ----------------------------------------------------------------------------

    def _key(self, conversation_id: str, suffix: str) -> str:
        return f"{self._prefix}:c:{conversation_id}:{suffix}"

    @property
    def _index_key(self) -> str:
        return f"{self._prefix}:conversations"

    @property
    def _version_key(self) -> str:
        return f"{self._prefix}:schema_version"

    # -- operations (shared by both drivers) ---------------------------------------------

    def _op_check_version(self) -> _Op[None]:
        created = yield _Cmd(("SET", self._version_key, str(SCHEMA_VERSION), "NX"))
        if created:
            return
        raw = yield _Cmd(("GET", self._version_key))
        text = as_text(raw)
        if not text.isdigit():
            raise StoreError(
                f"{self._where}: key {self._version_key!r} holds {text!r}, not a schema "
                "version: unknown layout, refusing to use it"
            )
        if int(text) > SCHEMA_VERSION:
            raise StoreError(
                f"{self._where}: schema version {text} under prefix {self._prefix!r} is newer "
                f"than this contextfold supports ({SCHEMA_VERSION}); upgrade contextfold"
            )

    def _op_append(self, cid: str, payloads: list[str]) -> _Op[list[int]]:
        replies = yield _Cmd(
            multi=(("RPUSH", self._key(cid, "m"), *payloads), ("SADD", self._index_key, cid))
        )
        last = int(replies[0])
        return list(range(last - len(payloads) + 1, last + 1))

    def _op_read(self, cid: str, after_seq: int, limit: int | None) -> _Op[list[StoredMessage]]:
        if limit == 0:
            return []
        end = -1 if limit is None else after_seq + limit - 1
        items = yield _Cmd(("LRANGE", self._key(cid, "m"), after_seq, end))
        # A message's seq is its list position; the bulk decoder reads the commonest rows inline.
        return decode_rows(enumerate(items, after_seq + 1), cid)

    def _op_last_seq(self, cid: str) -> _Op[int]:
        return int((yield _Cmd(("LLEN", self._key(cid, "m")))))

    def _op_append_checkpoint(
        self, cid: str, checkpoint: CheckpointRecord, data: str, expected_previous: str | None
    ) -> _Op[CheckpointRecord]:
        covered = checkpoint.last_covered_seq
        valid = isinstance(covered, int) and not isinstance(covered, bool)
        status, latest, length = yield _Script(
            "commit",
            (self._key(cid, "m"), self._key(cid, "k"), self._key(cid, "latest")),
            (expected_previous or "", covered if valid else -1, data, checkpoint.id),
        )
        if int(status) != 0:
            latest_id = as_text(latest) or None
            check_checkpoint_commit(
                cid,
                checkpoint,
                expected_previous=expected_previous,
                latest_id=latest_id,
                last_seq=int(length),
            )
            raise ConflictError(f"checkpoint {checkpoint.id} for {cid!r} was rejected")
        return checkpoint

    def _op_latest_checkpoint(self, cid: str) -> _Op[CheckpointRecord | None]:
        key = self._key(cid, "k")
        length, data = yield _Cmd(multi=(("LLEN", key), ("LINDEX", key, -1)))
        return None if data is None else decode_checkpoint(data, cid, int(length))

    def _op_checkpoints(self, cid: str) -> _Op[list[CheckpointRecord]]:
        items = yield _Cmd(("LRANGE", self._key(cid, "k"), 0, -1))
        return [decode_checkpoint(data, cid, i + 1) for i, data in enumerate(items)]

    def _op_save_state(self, cid: str, data: str) -> _Op[None]:
        yield _Cmd(("SET", self._key(cid, "state"), data))

    def _op_load_state(self, cid: str) -> _Op[str | None]:
        data = yield _Cmd(("GET", self._key(cid, "state")))
        return None if data is None else as_text(data)

    def _op_list(self) -> _Op[list[str]]:
        members = yield _Cmd(("SMEMBERS", self._index_key))
        return sorted(as_text(m) for m in members)

    def _op_delete(self, cid: str) -> _Op[None]:
        keys = [self._key(cid, s) for s in ("m", "k", "latest", "lock", "state")]
        yield _Cmd(multi=(("DEL", *keys), ("SREM", self._index_key, cid)))

    def _op_try_lock(self, cid: str, token: str, ttl: float) -> _Op[bool]:
        ms = max(1, round(ttl * 1000))
        reply = yield _Cmd(("SET", self._key(cid, "lock"), token, "NX", "PX", ms))
        return reply is not None and reply is not False

    def _op_release_lock(self, cid: str, token: str) -> _Op[None]:
        yield _Script("release", (self._key(cid, "lock"),), (token,))

    # -- drivers -------------------------------------------------------------------------

    def _error(self, what: str, exc: BaseException, cid: str = "") -> StoreError:
        where = f" for conversation {cid!r}" if cid else ""
        return StoreError(f"{what} failed on {self._where}{where}: {exc}")

    def _sync_client(self) -> Any:
        if self._closed:
            raise StoreError(f"{self._where} store is closed")
        if self._sync_ready:
            return self._client
        with self._init_lock:
            if self._client is None:
                if self._url is None:
                    raise StoreError(
                        f"{self._where} is an asyncio client: use the async methods "
                        "(or build the store from a URL to use both)"
                    )
                self._client = self._redis.Redis.from_url(
                    self._url, socket_connect_timeout=self._connect_timeout
                )
            if not self._sync_ready:
                self._execute(self._client, self._op_check_version(), "connect")
                self._sync_ready = True
        return self._client

    async def _async_client(self) -> Any:
        if self._closed:
            raise StoreError(f"{self._where} store is closed")
        self._aloop = same_event_loop(self._aloop, self._where)
        if self._aclient is None:
            if self._url is None:
                raise StoreError(
                    f"{self._where} is a sync client: use the sync methods "
                    "(or build the store from a URL to use both)"
                )
            self._aclient = self._redis.asyncio.Redis.from_url(
                self._url, socket_connect_timeout=self._connect_timeout
            )
        if not self._async_ready:
            await self._aexecute(self._aclient, self._op_check_version(), "connect")
            self._async_ready = True
        return self._aclient

    def _execute(self, client: Any, op: _Op[T], what: str, cid: str = "") -> T:
        redis = self._redis

        def answer(step: _Cmd | _Script) -> Any:
            if isinstance(step, _Script):
                source, sha = _SCRIPTS[step.name]
                argv = (len(step.keys), *step.keys, *step.args)
                try:
                    return client.evalsha(sha, *argv)
                except redis.exceptions.NoScriptError:
                    return client.eval(source, *argv)
            if step.multi:
                pipe = client.pipeline(transaction=True)
                for command in step.multi:
                    pipe.execute_command(*command)
                return pipe.execute()
            return client.execute_command(*step.args)

        try:
            return drive(op, answer)
        except redis.exceptions.RedisError as exc:
            raise self._error(what, exc, cid) from exc

    async def _aexecute(self, client: Any, op: _Op[T], what: str, cid: str = "") -> T:
        redis = self._redis

        async def answer(step: _Cmd | _Script) -> Any:
            if isinstance(step, _Script):
                source, sha = _SCRIPTS[step.name]
                argv = (len(step.keys), *step.keys, *step.args)
                try:
                    return await client.evalsha(sha, *argv)
                except redis.exceptions.NoScriptError:
                    return await client.eval(source, *argv)
            if step.multi:
                async with client.pipeline(transaction=True) as pipe:
                    for command in step.multi:
                        pipe.execute_command(*command)
                    return await pipe.execute()
            return await client.execute_command(*step.args)

        try:
            return await adrive(op, answer)
        except redis.exceptions.RedisError as exc:
            raise self._error(what, exc, cid) from exc

    def _run(self, op: _Op[T], what: str, cid: str = "", *, write: bool = False) -> T:
        # Every Redis operation is atomic by itself (one command, MULTI/EXEC or a script).
        try:
            client = self._sync_client()
        except BaseException:
            op.close()
            raise
        return self._execute(client, op, what, cid)

    async def _arun(self, op: _Op[T], what: str, cid: str = "", *, write: bool = False) -> T:
        try:
            client = await self._async_client()
        except BaseException:
            op.close()
            raise
        return await self._aexecute(client, op, what, cid)

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the sync client this store created (use :meth:`aclose` for both)."""
        self._closed = True
        client, self._client = self._client, None
        if client is not None and self._owned:
            client.close()

    async def aclose(self) -> None:
        """Close both clients this store created."""
        aclient, self._aclient = self._aclient, None
        if aclient is not None and self._owned:
            await aclient.aclose()
        self.close()

    def __repr__(self) -> str:
        return f"RedisStore({self._where}, key_prefix={self._prefix!r})"
