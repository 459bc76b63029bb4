"""The relational store: one SQLAlchemy Core engine (SQLite in WAL mode by default).

Everything runs on one worker thread so that asyncio code never blocks on the database and
SQLite sees one writer at a time. Only portable SQL through SQLAlchemy Core, so that
``database_url`` can point at PostgreSQL.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import itertools
import time
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

# The schema is declared once, by the modules that own each table, on this metadata.
metadata = sa.MetaData()


def as_utc(value: datetime) -> datetime:
    """The same moment as an aware UTC datetime; a naive value is taken to be UTC already."""
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


class UtcDateTime(sa.types.TypeDecorator[datetime]):
    """A moment in time, stored in UTC and read back as an aware UTC datetime on every database.

    SQLite keeps no offset: a plain ``DateTime(timezone=True)`` would store an aware value's wall time
    and read it back naive.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        return None if value is None else as_utc(value)

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        return None if value is None else as_utc(value)

T = TypeVar("T")


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL mode
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


class Database:
    def __init__(self, url: str) -> None:
        self.url = url
        if url.startswith("sqlite:///"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        # LIFO: other threads' rare checkouts keep reusing one connection, with its page cache warm.
        parsed = sa.engine.make_url(url)
        in_memory = parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")
        pool: dict[str, Any] = {} if in_memory else {"pool_use_lifo": True}  # in-memory SQLite has no queue pool
        self.engine: Engine = sa.create_engine(url, future=True, **pool)
        if self.engine.dialect.name == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kith-db")
        self._tracks_others = self.engine.dialect.name == "sqlite"
        self._connections = itertools.count(1)
        self._others: tuple[Hashable, float] | None = None  # others_version after the latest transaction, when
        self._marks: collections.Counter[str] = collections.Counter()
        # SQLite: the database thread keeps one connection of its own, so its data_version stays
        # comparable from one transaction to the next (and no pool checkout per transaction).
        self._thread_conn: Connection | None = None
        self._closed = False

    @property
    def serializes_writers(self) -> bool:
        """SQLite: one writer at a time, so ids become visible in the order they were given out."""
        return self._tracks_others

    def create_all(self) -> None:
        # Import the modules that declare tables so that metadata knows them all.
        import core.schema  # noqa: F401

        metadata.create_all(self.engine)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(conn, *args)`` inside one transaction on the database thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(self._on_thread, fn, *args, **kwargs))

    def _on_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if not self._tracks_others:
            return self.run_sync(fn, *args, **kwargs)  # a server database: pooled, pre-pinged connections
        conn = self._thread_conn
        if conn is None or conn.closed or conn.invalidated:
            conn = self._thread_conn = self.engine.connect()
        try:
            with conn.begin():
                result = fn(conn, *args, **kwargs)
                at = time.monotonic()  # before the PRAGMA: the age limit must never be stretched
                self._others = (self.others_version(conn), at)
                return result
        except sa.exc.DBAPIError as exc:
            if exc.connection_invalidated:
                self._drop_thread_conn()
            raise

    def _drop_thread_conn(self) -> None:
        conn, self._thread_conn = self._thread_conn, None
        if conn is not None:
            conn.close()

    def run_sync(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(conn, *args)`` in one transaction on a pooled connection, on the calling thread."""
        with self.engine.begin() as conn:
            return fn(conn, *args, **kwargs)

    async def run_versioned(self, topic: str, fn: Callable[..., T], *args: Any) -> tuple[Hashable | None, T]:
        """``run``, with ``topic``'s version (see ``version``) as of just before ``fn`` read anything.

        A commit landing during the read leaves the version stale, never the data: caching the
        result under it is safe.
        """
        marks = self.marks(topic)

        def read(conn: Connection) -> tuple[Hashable | None, T]:
            others = self.others_version(conn)
            return (None if others is None else (others, marks)), fn(conn, *args)

        return await self.run(read)

    def others_version(self, conn: Connection) -> Hashable | None:
        """A token that changes whenever another process commits, as this transaction sees it.

        Caches of data other processes also write stay valid while it stays the same, so a hot path
        can skip a read. ``None`` where the database cannot tell (anything but SQLite): read always.
        """
        if not self._tracks_others:
            return None
        info = conn.connection.info  # one per DBAPI connection: its counter means nothing to another
        stamp = info.get("kith_connection")
        if stamp is None:
            stamp = info["kith_connection"] = next(self._connections)
        # SQLite's data_version moves when any other connection commits; this one's commits leave it.
        # Straight to the driver: this runs after every transaction, and SQLAlchemy's statement path
        # costs ten times SQLite's answer.
        row = conn.connection.driver_connection.execute("PRAGMA data_version").fetchone()  # type: ignore[union-attr]
        return stamp, int(row[0])


    def mark(self, topic: str) -> None:
        """Note a write to ``topic`` by this process, which ``others_version`` cannot see."""
        self._marks[topic] += 1

    def marks(self, topic: str) -> int:
        return self._marks[topic]

    def version(self, topic: str, *, max_age_s: float) -> Hashable | None:
        """Changes when anyone, this process included, may have written ``topic``.

        As of this process's latest transaction; ``None`` (unknown) when that is older than
        ``max_age_s``, or the database cannot tell.
        """
        if self._others is None:
            return None
        others, at = self._others
        if time.monotonic() - at > max_age_s:
            return None
        return others, self._marks[topic]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._executor.submit(self._drop_thread_conn).result()  # on the thread that used it
        self._executor.shutdown(wait=True)
        self.engine.dispose()


__all__ = ["Connection", "Database", "metadata"]
