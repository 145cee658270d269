"""The search part of the SQL dialects: full-text indexes, their migrations and queries.

:mod:`contextfold.stores._dialects` holds the SQL of the log, the checkpoints and the locks;
the SQL that builds and queries the search index of each database lives here, next to
nothing else, as its operations live in :mod:`contextfold.stores._sql_search`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "postgres_pending_list",
    "postgres_search_migration",
    "postgres_search_sql",
    "postgres_search_text_migration",
    "sqlite_search_migration",
    "sqlite_search_sql",
    "sqlite_search_text_migration",
]


def _sqlite_search_text(data: str, *, extras: bool = True) -> str:
    """SQL for the searchable text of a stored row: its texts, tool results, names, arguments.

    A compact row of 0002 (not JSON) is searched by what follows its id. Without ``extras``
    (migration 0007 on), values under an ``extra`` object are left out, whatever their keys.
    """
    skip = "" if extras else " AND instr(j.fullkey, '.extra') = 0"
    return (
        f"CASE WHEN json_valid({data}) THEN (SELECT group_concat(j.value, ' ')"
        f" FROM json_tree({data}) AS j WHERE j.key IN ('text', 'content', 'name', 'arguments')"
        f" AND j.type = 'text'{skip}) ELSE substr({data}, instr({data}, char(31)) + 1) END"
    )


def sqlite_search_migration() -> tuple[str, ...]:
    """An FTS5 index of the messages, kept by triggers in the append's own transaction.

    The index's rowid is the message's key, so one conversation is one rowid range; the
    last statement indexes the messages stored before this migration.
    """
    return (
        "CREATE VIRTUAL TABLE IF NOT EXISTS contextfold_messages_fts"
        " USING fts5(body, tokenize = 'porter unicode61')",
        "CREATE TRIGGER IF NOT EXISTS contextfold_messages_fts_insert"
        " AFTER INSERT ON contextfold_messages BEGIN"
        " INSERT INTO contextfold_messages_fts (rowid, body)"
        f" VALUES (new.key, {_sqlite_search_text('new.data')}); END",
        "CREATE TRIGGER IF NOT EXISTS contextfold_messages_fts_delete"
        " AFTER DELETE ON contextfold_messages BEGIN"
        " DELETE FROM contextfold_messages_fts WHERE rowid = old.key; END",
        "INSERT INTO contextfold_messages_fts (rowid, body)"
        f" SELECT key, {_sqlite_search_text('data')} FROM contextfold_messages",
    )


def sqlite_search_text_migration() -> tuple[str, ...]:
    """The index trigger again, leaving ``extra`` fields out, and every message indexed anew."""
    return (
        "DROP TRIGGER IF EXISTS contextfold_messages_fts_insert",
        "CREATE TRIGGER contextfold_messages_fts_insert"
        " AFTER INSERT ON contextfold_messages BEGIN"
        " INSERT INTO contextfold_messages_fts (rowid, body)"
        f" VALUES (new.key, {_sqlite_search_text('new.data', extras=False)}); END",
        "DELETE FROM contextfold_messages_fts",
        "INSERT INTO contextfold_messages_fts (rowid, body)"
        f" SELECT key, {_sqlite_search_text('data', extras=False)} FROM contextfold_messages",
    )


def sqlite_search_sql() -> dict[str, Any]:
    """The search of one conversation's key range, the word counts that trim its query, and
    the span reads of its hits' neighbours."""
    return {
        # Rank inside the index first, then fetch only the rows kept (not every match's row).
        "search_messages": _SQLITE_SEARCH,
        # Each word of the JSON array, counted inside the key range up to the cap.
        "count_words": (
            "SELECT j.value, (SELECT count(*) FROM (SELECT 1 FROM contextfold_messages_fts"
            " WHERE contextfold_messages_fts MATCH '\"' || j.value || '\"'"
            " AND rowid > ?1 AND rowid < ?2 LIMIT ?3)) FROM json_each(?4) AS j"
        ),
        "select_conversation_num": "SELECT num FROM contextfold_conversations WHERE id = ?",
        # The rows of the seqs in the JSON array (the neighbours of the hits).
        "select_seqs": (
            "WITH c AS (SELECT num << 32 AS base FROM contextfold_conversations WHERE id = ?)"
            " SELECT m.key - c.base, m.data FROM c, contextfold_messages AS m"
            " WHERE m.key IN (SELECT c.base + value FROM json_each(?)) ORDER BY m.key"
        ),
    }


# Ties go to the newer message, as on every other store.
_SQLITE_SEARCH = (
    "SELECT f.rowid - ?, m.data FROM (SELECT rowid, rank FROM contextfold_messages_fts"
    " WHERE contextfold_messages_fts MATCH ? AND rowid > ? AND rowid < ?"
    " ORDER BY rank, rowid DESC LIMIT ?) AS f JOIN contextfold_messages AS m ON m.key = f.rowid"
    " ORDER BY f.rank, f.rowid DESC"
)


#: The searchable text of a row as migration 0002 indexed it, read from its JSON text
#: without parsing it (a damaged row must still be stored, to be reported when read): the
#: keys, the role and part kinds and the escapes ``\\n``, ``\\t``, ``\\r`` become spaces;
#: so do hyphens, which PostgreSQL's parser would otherwise read as the sign of a number
#: (``ORD-1042`` as ``ord``, ``-1042``).
_PG_SEARCH_TEXT = (
    "regexp_replace(translate(data, '-', ' '), "
    "'\\\\[nrt]|\"(kind|role)\":\"[a-z_]*\"|\"[a-z_]+\":', ' ', 'g')"
)

# What migration 0007 removes from a row's JSON before indexing it: escapes (an escaped
# backslash whole, so ``C:\\notes`` keeps ``notes``), the role and part kinds, the values of
# the fields nobody searches for (the format version, ids, flags, image data and links) and
# the ``extra`` object (up to three levels deep), then every remaining key.
_NESTED_OBJECT = r"\{(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*\}"
_PG_NOT_SEARCHED = (
    r'\\\\|\\[nrtbf]|"(?:kind|role)":"[a-z_]*"'
    r'|"(?:v|id|call_id|is_error|redacted|signature|data|url|mime|detail)":'
    r'(?:"(?:[^"\\]|\\.)*"|[^,}\]]*)'
    r'|"extra":' + _NESTED_OBJECT + r'|"[a-z_]+":'
)
#: The text migration 0007 indexes, read from the row's JSON without parsing it (a row the
#: database cannot parse is still stored, to be reported when read): its first 100,000
#: characters (a ``tsvector`` holds at most 1 MB, so a huge tool output would otherwise fail
#: its append), less what :data:`_PG_NOT_SEARCHED` matches; hyphens, ``@``, ``/``, ``.`` and
#: ``:`` become spaces, so ``ORD-1042``, ``ana@example.com``, ``src/app.py`` and ``1.5.2``
#: are indexed by their words, as the other stores index them and as queries name them.
_PG_SEARCH_TEXT_V2 = (
    "translate(regexp_replace(left(data, 100000), '"
    + _PG_NOT_SEARCHED.replace("'", "''")
    + "', ' ', 'g'), '-@/.:', '     ')"
)


def postgres_search_migration(msgs: str) -> tuple[str, ...]:
    """A generated ``tsvector`` column (PostgreSQL 12+) with a GIN index.

    Generated, so every insert fills it in its own statement and the rows stored before the
    migration get it when the column is added (the migration rewrites the table once).
    """
    return (
        f"ALTER TABLE {msgs} ADD COLUMN IF NOT EXISTS search tsvector GENERATED ALWAYS AS"
        f" (to_tsvector('english'::regconfig, {_PG_SEARCH_TEXT})) STORED",
        f"CREATE INDEX IF NOT EXISTS contextfold_messages_search ON {msgs} USING gin (search)",
    )


def postgres_search_text_migration(msgs: str) -> tuple[str, ...]:
    """The search column again, over :data:`_PG_SEARCH_TEXT_V2` (the table is rewritten
    once, every stored row indexed anew), with its index and short pending list."""
    return (
        f"ALTER TABLE {msgs} DROP COLUMN IF EXISTS search",
        f"ALTER TABLE {msgs} ADD COLUMN search tsvector GENERATED ALWAYS AS"
        f" (to_tsvector('english'::regconfig, {_PG_SEARCH_TEXT_V2})) STORED",
        f"CREATE INDEX IF NOT EXISTS contextfold_messages_search ON {msgs} USING gin (search)",
        *postgres_pending_list(msgs),
    )


def postgres_pending_list(msgs: str) -> tuple[str, ...]:
    """A short pending list for the search index, so every search stays fast.

    A GIN index takes new entries into an unsorted pending list and sorts them into the
    index when the list outgrows ``gin_pending_list_limit`` (4 MB by default) or at a
    vacuum; every search scans the whole list meanwhile, a few milliseconds at 4 MB. At
    256 kB the appends still sort their entries in batches, and a search scans little.
    """
    index = msgs.rsplit(".", 1)[0] + ".contextfold_messages_search"
    return (f"ALTER INDEX {index} SET (gin_pending_list_limit = 256)",)


def postgres_search_sql(msgs: str) -> dict[str, Any]:
    """Full-text search of one conversation, and the word counts that trim its query.

    Both run with a plan made for their parameters (``cached_plans``): a generic plan cannot
    see the words, so it reads every message of the conversation through the primary key.
    """
    return {
        "cached_plans": True,
        "count_words": (
            f"SELECT u.w, (SELECT count(*) FROM (SELECT 1 FROM {msgs}"
            " WHERE conversation_id = %s AND seq >= %s AND seq < %s"
            " AND search @@ to_tsquery('english', u.w) LIMIT %s) AS x)"
            " FROM unnest(%s::text[]) AS u(w)"
        ),
        "select_seqs": (
            f"SELECT seq, data FROM {msgs}"
            " WHERE conversation_id = %s AND seq = ANY(%s::bigint[]) ORDER BY seq"
        ),
        "search_messages": (
            f"SELECT seq, data FROM {msgs}, to_tsquery('english', %s) AS q"
            " WHERE conversation_id = %s AND seq < %s AND search @@ q"
            " ORDER BY ts_rank(search, q) DESC, seq DESC LIMIT %s"
        ),
    }
