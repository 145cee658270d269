"""The Redis store's key layout, its Lua scripts and the migration from the first layout.

Layout 2, under a key prefix ``P``:

* ``P:{E}:m`` the message list, ``P:{E}:ids`` a hash of message id -> seq, ``P:{E}:k`` the
  checkpoint list, ``P:{E}:latest`` the newest checkpoint's id, ``P:{E}:lock`` the compaction
  lock, ``P:{E}:state`` the strategy state, ``P:{E}:tally`` a hash of token counter ->
  ``"<upto_seq> <tokens>"`` (the running totals of :mod:`contextfold.stores._tally`), where
  ``E`` is the conversation id with ``%``, ``{`` and ``}`` percent-encoded;
* ``P:conversations`` the set of conversation ids and ``P:schema_version`` the layout.

The braces are a Redis Cluster hash tag: every key of one conversation lives in one slot, so
the scripts that touch several of them run on a cluster too. Since ``E`` holds no brace, the
last ``{`` of a key marks where the conversation starts: two (prefix, conversation) pairs never
share a key, however the prefix is spelt (layout 1, ``P:c:<id>:m``, let data under prefix
``app:c:x`` read as conversation ``x:c:y`` of prefix ``app``). On a cluster, a ``{`` in the
prefix makes the hash tag start there instead (a ``{tag}`` puts every conversation in one
slot); a store refuses a prefix whose first ``{`` is followed by ``}``, which would make Redis
hash each key whole.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "SCHEMA_VERSION",
    "SCRIPTS",
    "Cmd",
    "Pipeline",
    "RedisOp",
    "Script",
    "conversation_key",
    "old_conversation_key",
    "op_migrate_v1",
]

T = TypeVar("T")

SCHEMA_VERSION = 2

#: Conversation keys, one slot per conversation.
SUFFIXES = ("m", "ids", "k", "latest", "lock", "state", "tally")
#: Keys layout 1 did not have (the migration has nothing to move for them).
_NEW_IN_LAYOUT_2 = ("ids", "tally")


@dataclass(frozen=True, slots=True)
class Cmd:
    """One Redis command."""

    args: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Script:
    """One of :data:`SCRIPTS` run on ``keys`` (all of one slot) with ``args``."""

    name: str
    keys: tuple[str, ...]
    args: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Several steps sent in one round trip, not as a transaction; answered with a list.

    Each step runs even if one before it failed; an error is answered in its place. On a
    cluster, commands go in one round trip per node, in no order between nodes, and a
    pipeline holding a script runs its steps one after another.
    """

    steps: tuple[Cmd | Script, ...]


RedisOp = Generator[Cmd | Script | Pipeline, Any, T]


def _escape(conversation_id: str) -> str:
    return conversation_id.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


def conversation_key(prefix: str, conversation_id: str, suffix: str) -> str:
    """The layout-2 key ``suffix`` of a conversation (hash-tagged by the conversation)."""
    return f"{prefix}:{{{_escape(conversation_id)}}}:{suffix}"


def old_conversation_key(prefix: str, conversation_id: str, suffix: str) -> str:
    """The layout-1 key, read only by the migration."""
    return f"{prefix}:c:{conversation_id}:{suffix}"


# KEYS: messages, ids, tallies. ARGV: n, n ids, n payloads, a counter name ('' for none),
# then (with a counter) n token counts. Returns {0, seq...} or, when an id is stored (or
# repeated) with other content, {1, index, seq} having written nothing. The counter's tally
# moves by the stored messages' tokens when it covered the log's end (or the log was empty).
_APPEND = """
local n = tonumber(ARGV[1])
local base = redis.call('LLEN', KEYS[1])
local seqs, fresh, batch = {0}, {}, {}
for i = 1, n do
  local id, data = ARGV[1 + i], ARGV[1 + n + i]
  local seq, old = batch[id], nil
  if seq then
    old = fresh[seq - base]
  else
    seq = redis.call('HGET', KEYS[2], id)
    if seq then
      seq = tonumber(seq)
      old = redis.call('LINDEX', KEYS[1], seq - 1)
    end
  end
  if seq then
    if old and old ~= data then return {1, i, seq} end
  else
    fresh[#fresh + 1] = data
    seq = base + #fresh
    batch[id] = seq
  end
  seqs[#seqs + 1] = seq
end
for s = 1, #fresh, 1000 do
  local chunk = {}
  for j = s, math.min(s + 999, #fresh) do
    chunk[#chunk + 1] = fresh[j]
  end
  redis.call('RPUSH', KEYS[1], unpack(chunk))
end
local added = 0
for i = 1, n do
  local id = ARGV[1 + i]
  if batch[id] then
    if redis.call('HSETNX', KEYS[2], id, batch[id]) == 1 and ARGV[2 + 2 * n] ~= '' then
      added = added + tonumber(ARGV[2 + 2 * n + i])
    end
  end
end
local counter = ARGV[2 + 2 * n]
if counter ~= '' and #fresh > 0 then
  local held, upto, tokens = redis.call('HGET', KEYS[3], counter), -1, 0
  if held then
    local sep = string.find(held, ' ', 1, true)
    upto, tokens = tonumber(string.sub(held, 1, sep - 1)), tonumber(string.sub(held, sep + 1))
  end
  if base == 0 then
    redis.call('HSET', KEYS[3], counter, (base + #fresh) .. ' ' .. added)
  elseif upto == base then
    redis.call('HSET', KEYS[3], counter, (base + #fresh) .. ' ' .. (tokens + added))
  end
end
return seqs
"""

# KEYS: messages, tallies. ARGV: counter, upto_seq, tokens. Keeps the tally unless the stored
# one reaches as far or it passes the log's end.
_SAVE_TALLY = """
local upto = tonumber(ARGV[2])
if upto > redis.call('LLEN', KEYS[1]) then return 0 end
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held then
  local sep = string.find(held, ' ', 1, true)
  if tonumber(string.sub(held, 1, sep - 1)) >= upto then return 0 end
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ' ' .. ARGV[3])
return 1
"""

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

_LATEST_CHECKPOINT = """
return {redis.call('LLEN', KEYS[1]), redis.call('LINDEX', KEYS[1], -1)}
"""

_RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# KEYS: the old keys, then the new ones, in SUFFIXES order (no old ``ids``). Moves what is
# there unless the new key exists already (a migration that ran before).
_MOVE = """
local moved = 0
for i = 1, #KEYS / 2 do
  local old, new = KEYS[i], KEYS[#KEYS / 2 + i]
  if redis.call('EXISTS', old) == 1 and redis.call('EXISTS', new) == 0 then
    redis.call('RENAME', old, new)
    moved = moved + 1
  end
end
return moved
"""

# KEYS: ids. ARGV: id, seq pairs; the first seq of an id wins.
_INDEX = """
for i = 1, #ARGV, 2 do
  redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 0
"""


def _script(source: str) -> tuple[str, str]:
    return source, hashlib.sha1(source.encode()).hexdigest()


SCRIPTS = {
    "append": _script(_APPEND),
    "save_tally": _script(_SAVE_TALLY),
    "commit": _script(_COMMIT_CHECKPOINT),
    "latest": _script(_LATEST_CHECKPOINT),
    "release": _script(_RELEASE_LOCK),
    "move": _script(_MOVE),
    "index": _script(_INDEX),
}


def _message_id(raw: Any) -> str | None:
    """The id in a stored message's JSON, ``None`` for anything else."""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError, RecursionError):
        return None
    msg_id = value.get("id") if isinstance(value, dict) else None
    return msg_id if isinstance(msg_id, str) else None


def op_migrate_v1(prefix: str, conversation_ids: list[str]) -> RedisOp[None]:
    """Move each conversation of layout 1 to layout 2 and index its message ids.

    Safe to run twice or from several processes at once: a key already moved is left alone
    and the first seq of an id wins. The caller records the new version afterwards.
    """
    old_suffixes = [s for s in SUFFIXES if s not in _NEW_IN_LAYOUT_2]
    for cid in conversation_ids:
        keys = [old_conversation_key(prefix, cid, s) for s in old_suffixes]
        keys += [conversation_key(prefix, cid, s) for s in old_suffixes]
        yield Script("move", tuple(keys), ())
        items = yield Cmd(("LRANGE", conversation_key(prefix, cid, "m"), 0, -1))
        pairs: list[Any] = []
        for seq, raw in enumerate(items, 1):
            msg_id = _message_id(raw)
            if msg_id is not None:
                pairs += (msg_id, seq)
        for start in range(0, len(pairs), 2000):
            ids_key = conversation_key(prefix, cid, "ids")
            yield Script("index", (ids_key,), tuple(pairs[start : start + 2000]))
