"""The SQL stores' logic, written once for SQLite and PostgreSQL, sync and async.

Each operation is a sans-I/O generator: it yields :class:`Query` objects and receives the
rows each one returned, then returns its result. A driver owns the connection and the
transaction; :func:`run_sync` works with any DB-API cursor (``sqlite3``, psycopg) and
:func:`run_async` with a psycopg ``AsyncCursor``. A :class:`Dialect` holds the SQL text of one
database, so the rules (sequence numbering, the checkpoint commit check, migrations) live in
one place and the backends only differ in how they talk to their server.

Schema changes are named migrations recorded in a ``contextfold_schema`` table, applied by
:mod:`contextfold.stores._sql_schema`.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import chain, repeat
from typing import Any, TypeVar

from contextfold._drive import adrive, drive
from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import StoreError
from contextfold.stores._backend import OpStore
from contextfold.stores._checks import check_checkpoint_commit
from contextfold.stores._codec import decode_checkpoint, decode_rows
from contextfold.stores._idempotent import AppendPlan, plan_append
from contextfold.stores._search import WordCounts
from contextfold.stores._tally import Counted, added_tokens
from contextfold.stores.base import Spans, StoredMessage, Tally

T = TypeVar("T")

Rows = list[Sequence[Any]]
#: What a streamed query is answered with: the rows, possibly one at a time.
RowStream = Iterable[Sequence[Any]]


@dataclass(frozen=True, slots=True)
class Query:
    """One statement: ``many`` runs it once per parameter tuple in ``params``.

    With ``stream`` the driver may answer with an iterable that yields the rows one by one
    (a sync cursor) instead of a list; the operation must consume it before its next query.
    A full load decodes as it fetches, so each driver row is freed as soon as it is read
    and the garbage collector never has to examine it (nor the list that would hold them).
    """

    sql: str
    params: Sequence[Any] = ()
    many: bool = False
    stream: bool = False
    #: Plan for these parameters every time (psycopg prepares a statement it has run five
    #: times, and PostgreSQL may then reuse a generic plan, blind to a search's words).
    replan: bool = False


Op = Generator[Query, Any, T]

#: The largest sequence number a conversation can reach (SQLite packs it in 32 bits).
MAX_SEQ = 2**32 - 1


@dataclass(frozen=True, slots=True)
class Migration:
    """A named schema step; ``statements`` run in order inside the migration transaction."""

    version: int
    name: str
    statements: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Dialect:
    """The SQL text of one database (see :mod:`contextfold.stores._dialects`)."""

    name: str
    migrations: tuple[Migration, ...]
    schema_table_exists: str
    create_schema_table: tuple[str, ...]
    select_schema: str
    insert_schema: str
    migration_lock: str | None
    bump: str
    select_key_and_last: str
    select_last_seq: str
    lock_conversation: str
    insert_messages: str
    select_stored_ids: str
    select_messages: str
    no_limit: int | None
    select_latest_checkpoint_id: str
    select_latest_checkpoint: str
    select_checkpoints: str
    insert_checkpoint: str
    select_conversations: str
    delete_statements: tuple[str, ...]
    insert_ids: str = ""
    packed_keys: bool = False
    insert_conversation: str = ""
    select_state: str = ""
    upsert_state: str = ""
    select_lock: str = ""
    upsert_lock: str = ""
    release_lock: str = ""
    #: Each table of ours with the columns this version reads and writes.
    layout: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: The column names of the table named by the one parameter; SQLite's rows go on with
    #: whether the column must be given a value (NOT NULL, no default), its place in the
    #: primary key (0 when not in it) and its declared type.
    select_columns: str = ""
    #: Each table's primary key, for a dialect whose ``select_columns`` reports it.
    layout_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: Tables whose one key must be an ``INTEGER PRIMARY KEY`` (the rowid, which SQLite
    #: numbers by itself and keeps as an integer).
    rowid_tables: frozenset[str] = frozenset()
    #: Where the tables live, for errors (`` in schema "app"``).
    layout_scope: str = ""
    #: Full-text search of one conversation's messages (see :func:`op_search`).
    search_messages: str = ""
    #: SQLite: the conversation's number, from which its key range follows.
    select_conversation_num: str = ""
    #: How many of a conversation's messages hold each of a list of words, up to a cap.
    count_words: str = ""
    #: The messages of one conversation whose seqs are in a list (the neighbours of hits).
    select_seqs: str = ""
    #: The driver caches statement plans (psycopg): the searches ask for fresh ones.
    cached_plans: bool = False
    #: Columns of ``layout`` that a migration after the first adds to an existing table.
    later_columns: frozenset[str] = frozenset()
    #: Running token totals (see :mod:`contextfold.stores._tally`): read one, move one
    #: forward when it covered the log's end, keep one unless the stored one reaches as far.
    select_tally: str = ""
    advance_tally: str = ""
    upsert_tally: str = ""


# -- operations --------------------------------------------------------------------------


def op_append(
    d: Dialect,
    conversation_id: str,
    payloads: Sequence[str],
    ids: Sequence[str],
    counted: Counted | None = None,
) -> Op[list[int]]:
    """Store the messages whose ids are new; every message's seq (one write transaction).

    A message whose id the conversation already holds is acknowledged with the seq it was
    stored under (see :mod:`contextfold.stores._idempotent`); ``counted`` moves a tally.
    """
    if d.packed_keys:
        return (yield from _append_packed(d, conversation_id, payloads, ids, counted))
    # A bump by zero takes the counter row's lock (creating the row if needed), so the id
    # lookup below, a statement of its own, sees every append that committed before ours.
    rows = yield Query(d.bump, (conversation_id, 0))
    last = int(rows[0][1])
    stored = (yield from _stored(d, (conversation_id, list(ids)))) if last else {}
    plan = plan_append(conversation_id, ids, payloads, stored, last)
    if plan.fresh:
        new_last = last + len(plan.fresh)
        if new_last > MAX_SEQ:
            raise StoreError(
                f"conversation {conversation_id!r} is full: seq {new_last} > {MAX_SEQ}"
            )
        seqs = list(range(last + 1, new_last + 1))
        yield Query(
            d.insert_messages,
            (new_last, conversation_id, conversation_id, seqs, plan.fresh, plan.fresh_ids),
        )
        yield from _advance_tally(d, conversation_id, counted, plan, last)
    return plan.seqs


def _advance_tally(
    d: Dialect, cid: str, counted: Counted | None, plan: AppendPlan[str], last: int
) -> Op[None]:
    """Move the counter's tally past the stored batch, when it covered the log's end.

    An empty log starts one (any row left is stale); otherwise only a tally at exactly
    ``last`` moves, so one that fell behind is never moved by a partial sum.
    """
    if counted is None or not plan.fresh:
        return
    added = added_tokens(counted, plan)
    new_last = last + len(plan.fresh)
    if last == 0:
        yield Query(d.upsert_tally, (cid, counted.counter, new_last, added, MAX_SEQ + 1))
    else:
        yield Query(d.advance_tally, (new_last, added, cid, counted.counter, last))


def _stored(d: Dialect, params: Sequence[Any]) -> Op[dict[str, tuple[int, str | None]]]:
    """The batch's ids the conversation already holds: id -> (seq, stored text)."""
    rows = yield Query(d.select_stored_ids, params)
    return {str(row[0]): (int(row[1]), str(row[2])) for row in rows}


def _append_packed(
    d: Dialect,
    conversation_id: str,
    payloads: Sequence[str],
    ids: Sequence[str],
    counted: Counted | None,
) -> Op[list[int]]:
    """SQLite: keys are ``num << 32 | seq`` and the next seq follows the largest key.

    Runs inside a write transaction, which SQLite holds exclusively, so reading the largest
    key, looking up the ids and inserting after them cannot interleave with another writer.
    """
    rows = yield Query(d.select_key_and_last, (conversation_id,))
    if not rows:
        yield Query(d.insert_conversation, (conversation_id,))
        rows = yield Query(d.select_key_and_last, (conversation_id,))
    num, last_key = int(rows[0][0]), rows[0][1]
    base = num << 32
    last = 0 if last_key is None else int(last_key) - base
    stored = {}
    if last:
        stored = yield from _stored(d, (num, json.dumps(list(ids))))
    plan = plan_append(conversation_id, ids, payloads, stored, last)
    count = len(plan.fresh)
    if last + count > MAX_SEQ:
        raise StoreError(
            f"conversation {conversation_id!r} is full: seq {last + count} > {MAX_SEQ}"
        )
    # Multi-row VALUES lists insert about a third faster than executemany; their sizes are
    # powers of two, so only a handful of distinct statements exist and all stay in the
    # driver's statement cache.
    first_key = base + last + 1
    done = 0
    while done < count:
        n = min(_ROWS_PER_INSERT, 1 << ((count - done).bit_length() - 1))
        keys = range(first_key + done, first_key + done + n)
        params = list(chain.from_iterable(zip(keys, plan.fresh[done : done + n], strict=True)))
        yield Query(_values_insert(d.insert_messages, n, 2), params)
        seqs = range(last + 1 + done, last + 1 + done + n)
        rows_ids = zip(repeat(num), plan.fresh_ids[done : done + n], seqs, strict=False)
        yield Query(_values_insert(d.insert_ids, n, 3), list(chain.from_iterable(rows_ids)))
        done += n
    yield from _advance_tally(d, conversation_id, counted, plan, last)
    return plan.seqs


#: The most rows in one multi-row INSERT: 768 parameters at most, under SQLite's oldest
#: limit of 999.
_ROWS_PER_INSERT = 256


@lru_cache(maxsize=128)
def _values_insert(head: str, rows: int, width: int) -> str:
    """``head`` followed by ``rows`` value lists of ``width`` parameters."""
    one = "(" + ", ".join(["?"] * width) + ")"
    return head + ",".join([one] * rows)


def op_read(
    d: Dialect, conversation_id: str, after_seq: int, limit: int | None
) -> Op[list[StoredMessage]]:
    """Messages after ``after_seq`` in order; a damaged row raises with its seq."""
    rows = yield Query(
        d.select_messages,
        (conversation_id, after_seq, d.no_limit if limit is None else limit),
        stream=True,
    )
    return decode_rows(rows, conversation_id)


def op_last_seq(d: Dialect, conversation_id: str) -> Op[int]:
    rows = yield Query(d.select_last_seq, (conversation_id,))
    return int(rows[0][0]) if rows else 0


def op_append_checkpoint(
    d: Dialect,
    conversation_id: str,
    checkpoint: CheckpointRecord,
    data: str,
    expected_previous: str | None,
) -> Op[CheckpointRecord]:
    """Check and commit a checkpoint; runs inside a write transaction."""
    rows = yield Query(d.lock_conversation, (conversation_id,))
    last_seq = int(rows[0][0]) if rows else 0
    latest = yield Query(d.select_latest_checkpoint_id, (conversation_id,))
    latest_n, latest_id = (int(latest[0][0]), str(latest[0][1])) if latest else (0, None)
    check_checkpoint_commit(
        conversation_id,
        checkpoint,
        expected_previous=expected_previous,
        latest_id=latest_id,
        last_seq=last_seq,
    )
    yield Query(d.insert_checkpoint, (conversation_id, latest_n + 1, checkpoint.id, data))
    return checkpoint


def op_latest_checkpoint(d: Dialect, conversation_id: str) -> Op[CheckpointRecord | None]:
    rows = yield Query(d.select_latest_checkpoint, (conversation_id,))
    if not rows:
        return None
    n, data = rows[0]
    return decode_checkpoint(data, conversation_id, int(n))


def op_checkpoints(d: Dialect, conversation_id: str) -> Op[list[CheckpointRecord]]:
    rows = yield Query(d.select_checkpoints, (conversation_id,))
    return [decode_checkpoint(data, conversation_id, int(n)) for n, data in rows]


def op_save_state(d: Dialect, conversation_id: str, data: str) -> Op[None]:
    yield Query(d.upsert_state, (conversation_id, data))


def op_load_state(d: Dialect, conversation_id: str) -> Op[str | None]:
    rows = yield Query(d.select_state, (conversation_id,))
    return str(rows[0][0]) if rows else None


def op_list(d: Dialect) -> Op[list[str]]:
    rows = yield Query(d.select_conversations)
    return sorted(str(row[0]) for row in rows)


def op_delete(d: Dialect, conversation_id: str) -> Op[None]:
    for statement in d.delete_statements:
        yield Query(statement, (conversation_id,))


def op_try_lock(d: Dialect, conversation_id: str, token: str, now: float, ttl: float) -> Op[bool]:
    """Claim the lock row unless a live one exists (inside a write transaction)."""
    rows = yield Query(d.select_lock, (conversation_id,))
    if rows and float(rows[0][1]) > now:
        return False
    yield Query(d.upsert_lock, (conversation_id, token, now + ttl))
    return True


def op_release_lock(d: Dialect, conversation_id: str, token: str) -> Op[None]:
    yield Query(d.release_lock, (conversation_id, token))


# -- the store operations over a dialect -------------------------------------------------


class SQLOpStore(OpStore):
    """The :class:`OpStore` operations of a SQL backend: the ``op_*`` above on its dialect."""

    _dialect: Dialect

    def _op_append(
        self, cid: str, payloads: list[str], ids: list[str], counted: Counted | None
    ) -> Op[list[int]]:
        return op_append(self._dialect, cid, payloads, ids, counted)

    def _op_load_tally(self, cid: str, counter: str) -> Op[Tally | None]:
        rows = yield Query(self._dialect.select_tally, (cid, counter))
        return Tally(int(rows[0][0]), int(rows[0][1])) if rows else None

    def _op_save_tally(self, cid: str, counter: str, tally: Tally) -> Op[None]:
        last = yield from op_last_seq(self._dialect, cid)
        if tally.upto_seq <= last:
            params = (cid, counter, tally.upto_seq, tally.tokens, tally.upto_seq)
            yield Query(self._dialect.upsert_tally, params)

    def _op_read(self, cid: str, after_seq: int, limit: int | None) -> Op[list[StoredMessage]]:
        return op_read(self._dialect, cid, after_seq, limit)

    def _op_last_seq(self, cid: str) -> Op[int]:
        return op_last_seq(self._dialect, cid)

    def _op_append_checkpoint(
        self, cid: str, checkpoint: CheckpointRecord, data: str, expected_previous: str | None
    ) -> Op[CheckpointRecord]:
        return op_append_checkpoint(self._dialect, cid, checkpoint, data, expected_previous)

    def _op_latest_checkpoint(self, cid: str) -> Op[CheckpointRecord | None]:
        return op_latest_checkpoint(self._dialect, cid)

    def _op_checkpoints(self, cid: str) -> Op[list[CheckpointRecord]]:
        return op_checkpoints(self._dialect, cid)

    def _op_save_state(self, cid: str, data: str) -> Op[None]:
        return op_save_state(self._dialect, cid, data)

    def _op_load_state(self, cid: str) -> Op[str | None]:
        return op_load_state(self._dialect, cid)

    def _op_list(self) -> Op[list[str]]:
        return op_list(self._dialect)

    def _op_delete(self, cid: str) -> Op[None]:
        self._word_counts.forget(cid)
        return op_delete(self._dialect, cid)

    def _op_search(
        self, cid: str, query: str, limit: int, before_seq: int | None
    ) -> Op[list[StoredMessage]]:
        from contextfold.stores._sql_search import op_search

        return op_search(self._dialect, cid, query, limit, before_seq, self._word_counts)

    def _op_read_spans(self, cid: str, spans: Spans) -> Op[list[StoredMessage]]:
        from contextfold.stores._sql_search import op_read_spans

        return op_read_spans(self._dialect, cid, spans)

    @cached_property
    def _word_counts(self) -> WordCounts:
        """The word counts this store's searches made, per conversation (see WordCounts)."""
        return WordCounts()


# -- drivers -----------------------------------------------------------------------------


def run_sync(cursor: Any, op: Op[T]) -> T:
    """Run an operation on a DB-API cursor (the caller owns the transaction)."""

    def answer(query: Query) -> Rows | RowStream:
        if query.many:
            cursor.executemany(query.sql, query.params)
            return []
        if query.replan:  # only psycopg's cursors are asked to (see Dialect.cached_plans)
            cursor.execute(query.sql, query.params, prepare=False)
        else:
            cursor.execute(query.sql, query.params)
        if cursor.description is None:
            return []
        rows: Rows | RowStream = cursor if query.stream else cursor.fetchall()
        return rows

    return drive(op, answer)


async def run_async(cursor: Any, op: Op[T]) -> T:
    """Run an operation on a psycopg ``AsyncCursor`` (the caller owns the transaction)."""

    async def answer(query: Query) -> Rows:
        if query.many:
            await cursor.executemany(query.sql, query.params)
            return []
        await cursor.execute(query.sql, query.params, prepare=False if query.replan else None)
        return await cursor.fetchall() if cursor.description is not None else []

    return await adrive(op, answer)
