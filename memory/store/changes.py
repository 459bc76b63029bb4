"""Which memories changed, in order, for every kith process: a log in the relational store.

Each process keeps its own view of people's memories in memory (:mod:`memory.store.person_index`: records,
BM25 and vectors). Another process (``bot.py memory forget``, ``bot.py people link``, the
heartbeat) changes Chroma behind that view's back. So every store write, once it reached
Chroma, appends ``(person, memory id)`` here under its writer's token; before serving recall
from memory, a store reads the entries other writers appended since its cursor and re-reads
just those memories from Chroma. When nothing changed that read is one small indexed query on
the database thread, far cheaper than any Chroma call.

On PostgreSQL two writers can commit their sequence numbers out of order, so a reader there
also re-reads a short overlap behind its cursor and skips the entries it already applied
(SQLite has one writer at a time: its numbers commit in order, and it needs none). The log
keeps the newest ``CHANGE_LOG_KEEP`` entries; a reader whose cursor fell behind what was
trimmed, or that has more to catch up on than it may re-read, is told to start over from
Chroma (:attr:`Catchup.complete` is false).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, UtcDateTime, metadata
from ground.person_data import PersonData
from ground.tunables import (
    CHANGE_LOG_KEEP,
    CHANGE_LOG_OVERLAP,
    CHANGE_LOG_TRIM_EVERY,
    SHARED_CACHE_TRUST_S,
)

TOPIC = "memory_changes"  # Database.mark topic of this process's own appends

memory_changes = sa.Table(
    "memory_changes",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("writer", sa.String(32), nullable=False),
    sa.Column("person", sa.String(64), nullable=False),
    sa.Column("memory_id", sa.String(128), nullable=False),
    sa.Column("changed_at", UtcDateTime(), nullable=False),
)


CHANGES_DATA = PersonData(
    "memory_changes", tables=(memory_changes,),
    stays="a short log of which memory ids changed, for every process to read again; a move logs both people",
    left_out="bookkeeping: the memories it names are in the export themselves",
    kept_by_forget="memory ids and times, no words")


@dataclass(frozen=True, slots=True)
class Change:
    seq: int
    person: str  # whose memory it was or became (a move logs both)
    memory_id: str


@dataclass(frozen=True, slots=True)
class Catchup:
    head: int  # the newest sequence number in the log when it was read
    changes: list[Change]  # other writers' entries after cursor - overlap, oldest first
    complete: bool  # false: entries after the cursor were trimmed, or more than the reader may re-read
    version: Hashable | None = None  # the log's version before this read (None: unknown)


def _create(conn: Connection) -> int:
    memory_changes.create(conn, checkfirst=True)
    return _head(conn)


def _head(conn: Connection) -> int:
    return int(conn.execute(sa.select(sa.func.max(memory_changes.c.seq))).scalar() or 0)


def _append(
    conn: Connection, writer: str, entries: Sequence[tuple[str, str]], now: datetime, keep: int, trim_every: int
) -> None:
    rows = [{"writer": writer, "person": p, "memory_id": m, "changed_at": now} for p, m in entries]
    conn.execute(memory_changes.insert(), rows)
    head = _head(conn)
    if head // trim_every != (head - len(rows)) // trim_every:
        conn.execute(memory_changes.delete().where(memory_changes.c.seq <= head - keep))


# Built once: every recall catches up. First the bounds, one subquery each: SQLite answers a lone
# min() or max() from the key, but both in one select scan the whole log.
_BOUNDS = sa.select(
    sa.select(sa.func.max(memory_changes.c.seq)).scalar_subquery(),
    sa.select(sa.func.min(memory_changes.c.seq)).scalar_subquery(),
)
_AFTER = (
    sa.select(memory_changes.c.seq, memory_changes.c.person, memory_changes.c.memory_id)
    .where(
        memory_changes.c.seq > sa.bindparam("after"),
        memory_changes.c.seq <= sa.bindparam("head"),
        memory_changes.c.writer != sa.bindparam("writer"),
    )
    .order_by(memory_changes.c.seq)
    .limit(sa.bindparam("limit"))
)


def _since(conn: Connection, cursor: int, writer: str, limit: int, overlap: int) -> Catchup:
    # The head first: an entry committed after this read is the next call's.
    head, oldest = conn.execute(_BOUNDS).one()
    head = int(head or 0)
    trimmed = oldest is not None and cursor + 1 < int(oldest)
    rows = conn.execute(
        _AFTER, {"after": max(0, cursor - overlap), "head": head, "writer": writer, "limit": limit + 1}
    ).all()
    changes = [Change(int(seq), str(person), str(memory_id)) for seq, person, memory_id in rows]
    return Catchup(head, changes[:limit], complete=not trimmed and len(changes) <= limit)


class ChangeLog:
    """The memory change log of every kith process sharing this database."""

    def __init__(
        self,
        db: Database,
        *,
        keep: int = CHANGE_LOG_KEEP,
        trim_every: int = CHANGE_LOG_TRIM_EVERY,
        overlap: int | None = None,
    ) -> None:
        self.db = db
        self.keep = keep
        self.trim_every = trim_every
        if overlap is None:
            overlap = 0 if db.engine.dialect.name == "sqlite" else CHANGE_LOG_OVERLAP
        self.overlap = overlap

    async def prepare(self) -> int:
        """Create the table if this database lacks it; returns the current head (a new reader's cursor)."""
        return await self.db.run(_create)

    async def append(self, writer: str, entries: Sequence[tuple[str, str]], now: datetime) -> None:
        """Record that ``writer`` changed these ``(person, memory id)`` pairs in Chroma."""
        if entries:
            await self.db.run(_append, writer, list(entries), now, self.keep, self.trim_every)
            self.db.mark(TOPIC)  # after the commit: a reader that missed the entries reads again

    def version(self) -> Hashable | None:
        """Unchanged since a catch-up's ``Catchup.version``: nobody appended since, skip the read."""
        return self.db.version(TOPIC, max_age_s=SHARED_CACHE_TRUST_S)

    async def since(self, cursor: int, writer: str, limit: int) -> Catchup:
        """Other writers' entries after ``cursor`` (and in the overlap behind it), at most ``limit``."""
        version, found = await self.db.run_versioned(TOPIC, _since, cursor, writer, limit, self.overlap)
        return replace(found, version=version)


__all__ = ["CHANGES_DATA", "Catchup", "Change", "ChangeLog", "memory_changes"]
