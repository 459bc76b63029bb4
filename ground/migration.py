"""Moving the relational store whole from one database to another (SQLite to PostgreSQL, or back): pure copying of
every table kith declares, resumable, with each table's rows counted on both sides at the end.

The target must be empty of kith's rows, or hold the marker of an unfinished copy from the same source (then the
copy goes on where it stopped). Each table is copied in key order, a page at a time; a page and the marker's note of
how far that table has come commit together, so a copy killed at any moment resumes at the first row it had not
committed, never doubling one. Until the marker says done, the target is half-migrated and kith refuses to start on
it (:func:`refuse_half_migrated`). Integer keys PostgreSQL numbers itself continue after the copied ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, metadata
from ground.instance import HalfMigrated

MARKER = "kith_migration"
PAGE_ROWS = 1_000

_marker_metadata = sa.MetaData()  # not kith's schema: a copy's own bookkeeping, in the target only
marker = sa.Table(
    MARKER,
    _marker_metadata,
    sa.Column("table_name", sa.String(200), primary_key=True),  # "" for the copy itself
    sa.Column("source", sa.String(64), nullable=False),  # a digest of the source's URL: resume only from it
    sa.Column("copied", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_key", sa.Text, nullable=True),  # the key of the last row committed, as text; None: none yet
    sa.Column("done", sa.Boolean, nullable=False, server_default=sa.false()),
)


class MigrationError(Exception):
    """One line: why this copy cannot start or did not check out."""


@dataclass(frozen=True, slots=True)
class TableCount:
    table: str
    source: int
    target: int


def source_digest(url: str) -> str:
    rendered = sa.engine.make_url(url).render_as_string(hide_password=True)
    return hashlib.blake2b(rendered.encode(), digest_size=16).hexdigest()


def refuse_half_migrated(conn: Connection) -> None:
    """``HalfMigrated`` when this database is the target of a copy that has not finished."""
    if not sa.inspect(conn).has_table(MARKER):
        return
    whole = conn.execute(sa.select(marker.c.done).where(marker.c.table_name == "")).scalar()
    if whole is not True:
        raise HalfMigrated("this database is the target of an unfinished bot.py migrate: run the same migrate "
                           "again to finish it (nothing is lost), then start kith")


def _tables() -> list[sa.Table]:
    return list(metadata.sorted_tables)


def _key_columns(table: sa.Table) -> list[sa.Column[Any]]:
    return list(table.primary_key.columns)


def _rows(conn: Connection, table: sa.Table) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def _has_rows(conn: Connection) -> list[str]:
    inspector = sa.inspect(conn)
    return [t.name for t in _tables() if inspector.has_table(t.name) and _rows(conn, t)]


def _encode_key(row: sa.Row, keys: list[sa.Column[Any]]) -> str:
    values = [getattr(row, c.name) for c in keys]
    return json.dumps([v.isoformat() if hasattr(v, "isoformat") else v for v in values])


def _after(table: sa.Table, keys: list[sa.Column[Any]], encoded: str | None) -> Any:
    """The condition "past the last copied key" (rows compared as tuples, in key order)."""
    if encoded is None:
        return sa.true()
    values = json.loads(encoded)
    decoded = [datetime.fromisoformat(v) if _is_datetime(c) and isinstance(v, str) else v
               for c, v in zip(keys, values, strict=True)]
    return sa.tuple_(*keys) > sa.tuple_(*[sa.literal(v, type_=c.type) for c, v in zip(keys, decoded, strict=True)])


def _is_datetime(column: sa.Column[Any]) -> bool:
    kind = column.type.impl if isinstance(column.type, sa.types.TypeDecorator) else column.type
    return isinstance(kind, sa.DateTime)


def _pages(source: Database, table: sa.Table, after: str | None) -> Iterator[list[sa.Row]]:
    keys = _key_columns(table)
    while True:
        query = sa.select(table).where(_after(table, keys, after)).order_by(*keys).limit(PAGE_ROWS)
        page = source.run_sync(lambda conn, q=query: conn.execute(q).all())
        if not page:
            return
        yield page
        after = _encode_key(page[-1], keys)


def copy_store(source: Database, target: Database, *, on_rows: Callable[[str, int, int], None] | None = None,
               then: Callable[[], None] | None = None, then_writes: Collection[str] = ()) -> list[TableCount]:
    """Copy every table of ``source`` into ``target`` (created there when missing), resuming an unfinished copy
    from the same source; the rows of each table on both sides, checked equal (``MigrationError`` if not).

    ``then`` is a further copy (memories kept outside the database) that must finish before the target stops
    being half-migrated: it runs after the tables, before the marker says done, and again on a resume. The tables
    it writes into (``then_writes``) are counted by it, not here."""
    digest = source_digest(source.url)
    target.create_all()
    _marker_metadata.create_all(target.engine)

    def begin(conn: Connection) -> None:
        whole = conn.execute(sa.select(marker).where(marker.c.table_name == "")).first()
        if whole is None:
            filled = _has_rows(conn)
            if filled:
                raise MigrationError(f"the target already holds kith's data ({', '.join(filled[:5])}); migrate "
                                     "copies into an empty database only")
            conn.execute(marker.insert().values(table_name="", source=digest, copied=0, done=False))
        elif whole.source != digest:
            raise MigrationError("the target holds an unfinished copy from another database; finish that one "
                                 "first, or start again with an empty database")
        elif whole.done:
            raise MigrationError("the target holds a finished copy already")

    target.run_sync(begin)
    totals = {t.name: source.run_sync(_rows, t) for t in _tables()}
    for table in _tables():
        state = target.run_sync(lambda conn, name=table.name: conn.execute(
            sa.select(marker).where(marker.c.table_name == name)).first())
        if state is not None and state.done:
            continue
        copied = state.copied if state is not None else 0
        last = state.last_key if state is not None else None
        keys = _key_columns(table)
        if not keys:
            raise MigrationError(f"table {table.name} has no primary key to copy it in order by")
        for page in _pages(source, table, last):
            target.run_sync(_write_page, table, keys, page, copied, digest)
            copied += len(page)
            if on_rows is not None:
                on_rows(table.name, copied, totals[table.name])
        target.run_sync(_finish_table, table, digest)
    counts = [TableCount(t.name, totals[t.name], target.run_sync(_rows, t)) for t in _tables()]
    wrong = [c for c in counts if c.source != c.target and c.table not in then_writes]
    if wrong:
        raise MigrationError("rows differ after the copy: " + ", ".join(f"{c.table} {c.source} → {c.target}"
                                                                      for c in wrong))
    if then is not None:
        then()
    target.run_sync(lambda conn: conn.execute(marker.update().where(marker.c.table_name == "").values(done=True)))
    return counts


def _write_page(conn: Connection, table: sa.Table, keys: list[sa.Column[Any]], rows: list[sa.Row], copied: int,
                digest: str) -> None:
    """One page of ``table`` and the marker's note of it, in one transaction: a kill leaves both or neither."""
    conn.execute(table.insert(), [dict(r._mapping) for r in rows])
    values = {"copied": copied + len(rows), "last_key": _encode_key(rows[-1], keys)}
    if not conn.execute(marker.update().where(marker.c.table_name == table.name).values(**values)).rowcount:
        conn.execute(marker.insert().values(table_name=table.name, source=digest, **values))


def _finish_table(conn: Connection, table: sa.Table, digest: str) -> None:
    name = table.name
    if conn.dialect.name == "postgresql":
        # Ids PostgreSQL hands out itself go on after the copied ones, not from 1 into them.
        for column in table.primary_key.columns:
            if column.autoincrement is True or (column.autoincrement == "auto" and isinstance(column.type, sa.Integer)
                                                and len(table.primary_key.columns) == 1):
                sequence = conn.execute(sa.text("SELECT pg_get_serial_sequence(:t, :c)"),
                                        {"t": table.name, "c": column.name}).scalar()
                if sequence:
                    conn.execute(sa.text(f"SELECT setval(:s, COALESCE((SELECT max({column.name}) FROM "
                                         f"{table.name}), 0) + 1, false)"), {"s": sequence})
    if not conn.execute(marker.update().where(marker.c.table_name == name).values(done=True)).rowcount:
        conn.execute(marker.insert().values(table_name=name, source=digest, copied=0, done=True))
