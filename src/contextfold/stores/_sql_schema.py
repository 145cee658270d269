"""Schema migrations of the SQL stores, and the layout check of the tables they adopt.

Written over a :class:`~contextfold.stores._sql.Dialect` like the log's operations (see
:mod:`contextfold.stores._sql`): migrations are named steps recorded in a
``contextfold_schema`` table, applied inside one write transaction, so they are all-or-nothing,
and running them again does nothing. A database that records a migration this version does
not know (written by a newer contextfold) is refused rather than read wrongly.
"""

from __future__ import annotations

from contextfold.errors import StoreError
from contextfold.stores._sql import Dialect, Migration, Op, Query, Rows

__all__ = ["op_check_layout", "op_migrate", "op_schema_current"]


def op_schema_current(d: Dialect) -> Op[bool]:
    """True when every known migration is applied (read-only; raises on a newer schema)."""
    rows = yield Query(d.schema_table_exists)
    if not rows or not rows[0][0]:
        return False
    applied = yield Query(d.select_schema)
    if _missing(d, applied):
        return False
    yield from op_check_layout(d)
    return True


def op_migrate(d: Dialect) -> Op[list[str]]:
    """Apply the missing migrations; returns their names. Run inside a write transaction."""
    if d.migration_lock is not None:
        yield Query(d.migration_lock)
    for statement in d.create_schema_table:
        yield Query(statement)
    applied = yield Query(d.select_schema)
    # A table with one of our names that something else created must be refused before a
    # migration alters or reads it (its columns of later migrations may still be missing).
    yield from op_check_layout(d, before_migrating=True)
    names = []
    for migration in _missing(d, applied):
        for statement in migration.statements:
            yield Query(statement)
        yield Query(d.insert_schema, (migration.version, migration.name))
        names.append(migration.name)
    # CREATE TABLE IF NOT EXISTS adopts a table of the same name whatever its columns.
    yield from op_check_layout(d)
    return names


def op_check_layout(d: Dialect, *, before_migrating: bool = False) -> Op[None]:
    """Refuse tables of ours that lack a column this version uses, or (SQLite) have another
    primary key or a NOT NULL column this version does not write.

    A table with one of our names created by something else would otherwise be adopted
    and marked as migrated, and fail only at the first append (or be read wrongly).
    ``before_migrating`` checks only the tables that exist, without the columns that later
    migrations add.
    """
    keys = dict(d.layout_keys)
    for table, all_columns in d.layout:
        rows = yield Query(d.select_columns, (table,))
        found = {str(row[0]).lower() for row in rows}
        columns = all_columns
        if before_migrating:
            if not found:
                continue
            columns = tuple(c for c in all_columns if c not in d.later_columns)
        if not found:
            raise StoreError(
                f"the {d.name} store's table {table}{d.layout_scope} is missing although its "
                "schema is recorded as migrated: refusing to use it"
            )
        missing = [c for c in columns if c not in found]
        problem = (
            f"it lacks the column(s) {', '.join(missing)} (has {', '.join(sorted(found))})"
            if missing
            else _other_constraints(d, table, all_columns, keys.get(table), rows)
        )
        if problem:
            raise StoreError(
                f"the {d.name} store's table {table}{d.layout_scope} has another layout: "
                f"{problem}; was it created by another application? Refusing to use it"
            )


def _other_constraints(
    d: Dialect, table: str, columns: tuple[str, ...], key: tuple[str, ...] | None, rows: Rows
) -> str:
    """What in the table's keys or extra columns would fail a write ("" when nothing).

    ``rows`` are ``select_columns``'s: name, required, place in the primary key, type.
    """
    if key is None:
        return ""
    found_key = tuple(str(r[0]).lower() for r in sorted(rows, key=lambda r: int(r[2])) if r[2])
    if found_key != key:
        return f"its primary key is ({', '.join(found_key) or 'none'}), not ({', '.join(key)})"
    if table in d.rowid_tables and next(str(r[3]) for r in rows if r[2]) != "INTEGER":
        return f"its {key[0]} must be declared INTEGER PRIMARY KEY"
    required = sorted(str(r[0]).lower() for r in rows if r[1] and str(r[0]).lower() not in columns)
    if required:
        return f"it has NOT NULL column(s) {', '.join(required)}, which this store does not write"
    return ""


def _missing(d: Dialect, applied: Rows) -> list[Migration]:
    known = {m.version: m for m in d.migrations}
    newest = max(known)
    for version, name in applied:
        migration = known.get(int(version))
        if migration is None:
            raise StoreError(
                f"the {d.name} store's schema has migration {version} ({name}), newer than "
                f"this contextfold knows (up to {newest}); upgrade contextfold to open it"
            )
        if migration.name != name:
            raise StoreError(
                f"the {d.name} store's schema migration {version} is {name!r}, but this "
                f"contextfold expects {migration.name!r}: unknown schema, refusing to use it"
            )
    done = {int(row[0]) for row in applied}
    return [m for m in d.migrations if m.version not in done]
