"""Redis store (redis-py, sync and asyncio; single node or Redis Cluster): a shared log with
no schema to manage.

Layout, under a key prefix (``contextfold`` by default; see
:mod:`contextfold.stores._redis_layout`): a conversation's keys are ``<prefix>:{<id>}:m`` (a
list of message JSON; a message's sequence number is its 1-based position), ``:ids`` (message
id -> seq), ``:k`` (checkpoint JSON), ``:latest`` (the newest checkpoint's id), ``:lock``
(the compaction lock), ``:state`` and ``:tally`` (running token totals);
``<prefix>:conversations`` is the set of ids and ``<prefix>:schema_version`` the layout
version, checked (and migrated from layout 1) on first use. The braces are a Redis Cluster
hash tag, so every key of a conversation is in one slot and the scripts below run on a
cluster as on one server.

An append is one Lua script: it acknowledges the messages whose ids are stored already and
``RPUSH``es the others, so concurrent appends from any number of machines get contiguous,
gap-free sequence numbers and a retried append stores nothing twice. Another script checks
and commits a checkpoint; the lock is ``SET NX PX`` with a random token, released by a
compare-and-delete script so a holder whose lock expired cannot free someone else's.

Durability is the server's: with Redis' default snapshotting, recent appends are lost if the
server itself stops. Enable ``appendonly yes`` (``appendfsync everysec`` or ``always``) when the
log must survive a Redis restart.

The sync and async APIs run the same operations (generators of Redis commands) through
two small drivers, one per client flavour (:mod:`contextfold.stores._redis_driver`).
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any, TypeVar

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
from contextfold.stores._idempotent import id_conflict
from contextfold.stores._redis_driver import arun_commands, redis_errors, run_commands
from contextfold.stores._redis_layout import (
    SCHEMA_VERSION,
    SUFFIXES,
    Cmd,
    Pipeline,
    RedisOp,
    Script,
    conversation_key,
    op_migrate_v1,
)
from contextfold.stores._tally import Counted
from contextfold.stores.base import StoreConfigError, StoredMessage, Tally

__all__ = ["RedisStore"]

T = TypeVar("T")

#: URL schemes that name a Redis Cluster (any node of it).
_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def _module() -> ModuleType:
    try:
        import redis
        import redis.asyncio
        import redis.asyncio.cluster
        import redis.asyncio.retry
        import redis.backoff
        import redis.cluster
        import redis.retry
    except ImportError as exc:
        raise MissingExtraError("RedisStore", "redis") from exc
    return redis


def _check_cluster_prefix(key_prefix: str) -> None:
    """Refuse a prefix that would keep a conversation's keys out of one cluster slot.

    Redis hashes the text between a key's first ``{`` and the ``}`` after it. The
    conversation's own braces come after the prefix, so a ``{`` in the prefix takes over:
    a ``{tag}`` puts every conversation in the one slot of ``tag``, and a ``{`` with no
    ``}`` after it in the prefix still gives each conversation a tag of its own; but an
    empty ``{}`` makes Redis hash every key whole, so the keys of one conversation fall in
    different slots and every script fails.
    """
    start = key_prefix.find("{")
    if start >= 0 and key_prefix[start + 1 : start + 2] == "}":
        raise StoreConfigError(
            f"key_prefix {key_prefix!r} holds an empty hash tag '{{}}' before any other: on a "
            "Redis Cluster the keys of one conversation would fall in different slots",
            argument="key_prefix",
        )


class RedisStore(LockingOpStore):
    """The append-only log in Redis lists (sync and async), on one server or a cluster.

    Args:
        target: a ``redis://`` / ``rediss://`` / ``unix://`` URL, a ``redis+cluster://`` /
            ``rediss+cluster://`` URL naming any node of a Redis Cluster, or an existing
            ``redis.Redis``, ``redis.asyncio.Redis``, ``redis.cluster.RedisCluster`` or
            ``redis.asyncio.cluster.RedisCluster`` client (used as is and not closed; such a
            store offers only the API of that client's flavour).
        key_prefix: prefix of every key, so several applications can share a database. On a
            cluster it must not start a hash tag with ``{}`` (see
            :mod:`contextfold.stores._redis_layout`).
        connect_timeout: seconds to wait for a connection before raising :class:`StoreError`.
        read_timeout: seconds to wait for a reply (redis-py's ``socket_timeout``); a call
            is retried once on a new connection, so a frozen server or a lost connection
            raises :class:`StoreError` within about twice this. The write may still have
            been applied: a retried append then stores nothing twice.
        cluster: the URL names a Redis Cluster node (as the ``+cluster`` schemes do).

    The asyncio client belongs to the event loop that first used it: use one store per loop
    (an async call from another loop raises :class:`StoreError`).
    """

    def __init__(
        self,
        target: Any,
        *,
        key_prefix: str = "contextfold",
        connect_timeout: float = 5.0,
        read_timeout: float = 5.0,
        cluster: bool = False,
    ) -> None:
        if not isinstance(key_prefix, str) or not key_prefix:
            raise StoreConfigError(
                f"key_prefix must be a non-empty string, got {key_prefix!r}", argument="key_prefix"
            )
        check_positive(connect_timeout, "connect_timeout")
        check_positive(read_timeout, "read_timeout")
        if not isinstance(cluster, bool):
            raise StoreConfigError(f"cluster must be a bool, got {cluster!r}", argument="cluster")
        redis = _module()
        self._redis = redis
        # The cluster client's own errors (no reachable node, keys of several slots) are not
        # RedisErrors.
        self._errors: tuple[type[BaseException], ...] = redis_errors()
        self._prefix = key_prefix
        self._timeouts = {
            "socket_connect_timeout": connect_timeout,
            "socket_timeout": read_timeout,
        }
        self._cluster = cluster
        self._url: str | None = None
        self._client: Any = None
        self._aclient: Any = None
        self._owned = True
        if isinstance(target, str):
            self._url = self._parse_url(target)
            self._where = f"Redis {'Cluster ' if self._cluster else ''}{redact_url(target)!r}"
        elif isinstance(target, (redis.Redis, redis.cluster.RedisCluster)):
            self._client, self._owned = target, False
            self._where = f"Redis client {target!r}"
        elif isinstance(target, (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)):
            self._aclient, self._owned = target, False
            self._where = f"Redis client {target!r}"
        else:
            raise StoreConfigError(
                f"RedisStore expects a redis:// URL or a redis client, got {type(target).__name__}",
                argument="target",
            )
        if self._cluster or isinstance(
            target, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)
        ):
            _check_cluster_prefix(key_prefix)
        self._init_lock = threading.Lock()
        self._sync_ready = False
        self._async_ready = False
        self._aloop: LoopRef | None = None
        self._closed = False

    def _parse_url(self, target: str) -> str:
        """The URL redis-py is given (``+cluster`` schemes set cluster mode)."""
        scheme, sep, rest = target.partition("://")
        if sep and scheme.lower() in _CLUSTER_SCHEMES:
            self._cluster = True
            target = f"{_CLUSTER_SCHEMES[scheme.lower()]}://{rest}"
        if not target.startswith(("redis://", "rediss://", "unix://")):
            raise StoreConfigError(f"not a Redis URL: {redact_url(target)!r}", argument="target")
        try:
            host = self._redis.connection.parse_url(target).get("host")
            # The socket module encodes a host name with IDNA and raises UnicodeError (not an
            # OSError redis-py would report) for one it cannot encode: a password with an
            # unencoded '/' leaves its end in the host.
            if isinstance(host, str):
                host.encode("idna")
        except ValueError:  # UnicodeError included
            # redis-py's message quotes the piece it could not parse, which may be a
            # password: name the redacted URL only.
            raise StoreConfigError(
                f"cannot parse Redis URL {redact_url(target)!r} (percent-encode any "
                "'/', '@' or ':' in the password)",
                argument="target",
            ) from None
        return target

    # -- keys ----------------------------------------------------------------------------

    def _key(self, conversation_id: str, suffix: str) -> str:
        return conversation_key(self._prefix, conversation_id, suffix)

    @property
    def _index_key(self) -> str:
        return f"{self._prefix}:conversations"

    @property
    def _version_key(self) -> str:
        return f"{self._prefix}:schema_version"

    # -- operations (shared by both drivers) ---------------------------------------------

    def _op_check_version(self) -> RedisOp[None]:
        created = yield Cmd(("SET", self._version_key, str(SCHEMA_VERSION), "NX"))
        if created:
            return
        raw = yield Cmd(("GET", self._version_key))
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
        if int(text) < SCHEMA_VERSION:
            # Layout 1 could not run on a cluster (its keys had no hash tags), so data in it
            # lives on one server, where the keys can be renamed in place.
            members = yield Cmd(("SMEMBERS", self._index_key))
            yield from op_migrate_v1(self._prefix, sorted(as_text(m) for m in members))
            yield Cmd(("SET", self._version_key, str(SCHEMA_VERSION)))

    def _op_append(
        self, cid: str, payloads: list[str], ids: list[str], counted: Counted | None
    ) -> RedisOp[list[int]]:
        tally: tuple[Any, ...] = ("",) if counted is None else (counted.counter, *counted.tokens)
        script = Script(
            "append",
            (self._key(cid, "m"), self._key(cid, "ids"), self._key(cid, "tally")),
            (len(payloads), *ids, *payloads, *tally),
        )
        # Listed in the same round trip, right after the write (the index is another slot on
        # a cluster, so not in the script): a crash in between leaves the conversation
        # unlisted until its next append, never listed with rows lost.
        reply, listed = yield Pipeline((script, Cmd(("SADD", self._index_key, cid))))
        if isinstance(reply, Exception):
            raise reply
        if isinstance(listed, Exception):
            raise listed
        if int(reply[0]) != 0:
            index, seq = int(reply[1]), int(reply[2])
            raise id_conflict(cid, ids[index - 1], seq)
        return [int(seq) for seq in reply[1:]]

    def _op_load_tally(self, cid: str, counter: str) -> RedisOp[Tally | None]:
        held = yield Cmd(("HGET", self._key(cid, "tally"), counter))
        if held is None:
            return None
        upto, _, tokens = as_text(held).partition(" ")
        if not (upto.isdigit() and tokens.isdigit()):
            return None  # damaged: only a cache, so it is counted again
        return Tally(int(upto), int(tokens))

    def _op_save_tally(self, cid: str, counter: str, tally: Tally) -> RedisOp[None]:
        keys = (self._key(cid, "m"), self._key(cid, "tally"))
        yield Script("save_tally", keys, (counter, tally.upto_seq, tally.tokens))

    def _op_read(self, cid: str, after_seq: int, limit: int | None) -> RedisOp[list[StoredMessage]]:
        if limit == 0:
            return []
        end = -1 if limit is None else after_seq + limit - 1
        items = yield Cmd(("LRANGE", self._key(cid, "m"), after_seq, end))
        # A message's seq is its list position; the bulk decoder reads the commonest rows inline.
        return decode_rows(enumerate(items, after_seq + 1), cid)

    def _op_last_seq(self, cid: str) -> RedisOp[int]:
        return int((yield Cmd(("LLEN", self._key(cid, "m")))))

    def _op_append_checkpoint(
        self, cid: str, checkpoint: CheckpointRecord, data: str, expected_previous: str | None
    ) -> RedisOp[CheckpointRecord]:
        covered = checkpoint.last_covered_seq
        valid = isinstance(covered, int) and not isinstance(covered, bool)
        status, latest, length = yield Script(
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

    def _op_latest_checkpoint(self, cid: str) -> RedisOp[CheckpointRecord | None]:
        length, data = yield Script("latest", (self._key(cid, "k"),), ())
        return None if data is None else decode_checkpoint(data, cid, int(length))

    def _op_checkpoints(self, cid: str) -> RedisOp[list[CheckpointRecord]]:
        items = yield Cmd(("LRANGE", self._key(cid, "k"), 0, -1))
        return [decode_checkpoint(data, cid, i + 1) for i, data in enumerate(items)]

    def _op_save_state(self, cid: str, data: str) -> RedisOp[None]:
        yield Cmd(("SET", self._key(cid, "state"), data))

    def _op_load_state(self, cid: str) -> RedisOp[str | None]:
        data = yield Cmd(("GET", self._key(cid, "state")))
        return None if data is None else as_text(data)

    def _op_list(self) -> RedisOp[list[str]]:
        members = sorted(as_text(m) for m in (yield Cmd(("SMEMBERS", self._index_key))))
        if not members:
            return []
        # A delete racing an append can leave an id in the index whose log is gone (see
        # _op_delete): like every other store, list only conversations holding messages.
        held = yield Pipeline(tuple(Cmd(("EXISTS", self._key(cid, "m"))) for cid in members))
        for reply in held:
            if isinstance(reply, Exception):
                raise reply
        return [cid for cid, exists in zip(members, held, strict=True) if int(exists)]

    def _op_delete(self, cid: str) -> RedisOp[None]:
        yield Cmd(("DEL", *(self._key(cid, s) for s in SUFFIXES)))
        yield Cmd(("SREM", self._index_key, cid))
        # The index is another slot on a cluster, so these are separate commands, and an
        # append may have run its script and SADD between the DEL and the SREM: list the
        # conversation again if it holds messages now, so a stored conversation is never
        # left out. (Listed with no messages, which the other order can leave, is what
        # _op_list filters out.)
        if int((yield Cmd(("EXISTS", self._key(cid, "m"))))):
            yield Cmd(("SADD", self._index_key, cid))

    def _op_try_lock(self, cid: str, token: str, ttl: float) -> RedisOp[bool]:
        ms = max(1, round(ttl * 1000))
        reply = yield Cmd(("SET", self._key(cid, "lock"), token, "NX", "PX", ms))
        return reply is not None and reply is not False

    def _op_release_lock(self, cid: str, token: str) -> RedisOp[None]:
        yield Script("release", (self._key(cid, "lock"),), (token,))

    # -- drivers -------------------------------------------------------------------------

    def _error(self, what: str, exc: BaseException, cid: str = "") -> StoreError:
        where = f" for conversation {cid!r}" if cid else ""
        return StoreError(f"{what} failed on {self._where}{where}: {exc}")

    def _new_client(self, flavour: Any) -> Any:
        """A client of ``flavour`` (``redis`` or ``redis.asyncio``) for the URL."""
        kind = flavour.cluster.RedisCluster if self._cluster else flavour.Redis
        # One immediate retry on a new connection (a pooled one the server closed), not
        # redis-py's default of three with back-off, so a frozen server fails within about
        # twice read_timeout. The retry is safe: an append whose reply was lost is
        # acknowledged, not stored again.
        retry = flavour.retry.Retry(self._redis.backoff.NoBackoff(), 1)
        return kind.from_url(self._url, retry=retry, **self._timeouts)

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
                try:
                    self._client = self._new_client(self._redis)
                except self._errors as exc:
                    raise self._error("connect", exc) from exc
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
            try:
                self._aclient = self._new_client(self._redis.asyncio)
            except self._errors as exc:
                raise self._error("connect", exc) from exc
        if not self._async_ready:
            await self._aexecute(self._aclient, self._op_check_version(), "connect")
            self._async_ready = True
        return self._aclient

    def _execute(self, client: Any, op: RedisOp[T], what: str, cid: str = "") -> T:
        try:
            return run_commands(client, op)
        except self._errors as exc:
            raise self._error(what, exc, cid) from exc

    async def _aexecute(self, client: Any, op: RedisOp[T], what: str, cid: str = "") -> T:
        try:
            return await arun_commands(client, op)
        except self._errors as exc:
            raise self._error(what, exc, cid) from exc

    def _run(self, op: RedisOp[T], what: str, cid: str = "", *, write: bool = False) -> T:
        # Every Redis operation is atomic where it must be (one command or a script).
        try:
            client = self._sync_client()
        except BaseException:
            op.close()
            raise
        return self._execute(client, op, what, cid)

    async def _arun(self, op: RedisOp[T], what: str, cid: str = "", *, write: bool = False) -> T:
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
