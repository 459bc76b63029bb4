"""The relational store: one SQLAlchemy Core engine (SQLite in WAL mode by default).

Transactions run on one worker thread so that asyncio code never blocks on the database and
SQLite sees one writer at a time. The few short ones on the path of every message (``run_short``)
run on the loop instead when SQLite's connection is free and no other process holds its write
lock: the two thread hand-offs of a transaction cost more than its statements. Only portable SQL
through SQLAlchemy Core, so that ``database_url`` can point at PostgreSQL.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import itertools
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ground.tunables import DB_SERVER_THREADS, SQLITE_BUSY_TIMEOUT_MS, SQLITE_CHECKPOINT_COMMITS

log = logging.getLogger("kith.db")

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

def add_missing_columns(conn: Connection) -> list[str]:
    """Add the columns a newer kith declares to tables an older one created; returns them as ``table.column``.

    There are no migrations: ``create_all`` only creates missing tables, and an old data directory
    must keep working (and keep its rows). Only columns that can be added to a table with rows (nullable,
    or with a server default) are declared after a table's first release; any other is left to fail loudly.
    """
    added: list[str] = []
    inspector = sa.inspect(conn)
    for table in metadata.sorted_tables:
        if not inspector.has_table(table.name):
            continue
        present = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in present and (column.nullable or column.server_default is not None):
                ddl = sa.schema.CreateColumn(column).compile(dialect=conn.dialect)
                name = conn.dialect.identifier_preparer.format_table(table)
                conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN {ddl}")
                added.append(f"{table.name}.{column.name}")
    if added:
        log.info("database columns added columns=%s", ",".join(added))
    return added


T = TypeVar("T")


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL mode
    cur.execute("PRAGMA foreign_keys=ON")
    # Deleted and rewritten rows are zeroed, not left in free pages: a forgotten fact must not stay in the file.
    cur.execute("PRAGMA secure_delete=ON")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cur.close()


class _Busy(Exception):
    """Another process holds SQLite's write lock: the transaction was rolled back without waiting."""


def _is_busy(exc: sa.exc.OperationalError) -> bool:
    code = getattr(exc.orig, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class Database:
    def __init__(self, url: str, *, checkpoint_commits: int = SQLITE_CHECKPOINT_COMMITS) -> None:
        self.url = url
        self._checkpoint_commits = checkpoint_commits
        if url.startswith("sqlite:///"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        # LIFO: other threads' rare checkouts keep reusing one connection, with its page cache warm.
        parsed = sa.engine.make_url(url)
        in_memory = parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")
        pool: dict[str, Any] = {} if in_memory else {"pool_use_lifo": True}  # in-memory SQLite has no queue pool
        # hide_parameters: an error's text reaches the logs, and its parameters are people's words.
        self.engine: Engine = sa.create_engine(url, future=True, hide_parameters=True, **pool)
        if self.engine.dialect.name == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        self._tracks_others = self.engine.dialect.name == "sqlite"
        # SQLite takes one writer at a time: one thread, in order. A server database runs transactions side by side
        # (each on a pooled connection of its own), and a turn's reads wait on the network, not a disk lock: one
        # thread would queue every chat's turn behind every other's round trips (bench.telegram_e2e on PostgreSQL:
        # a third of the replies lost their memory part to the timeout in a burst, with one).
        threads = 1 if self._tracks_others else DB_SERVER_THREADS
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kith-db")
        self._inline = self._tracks_others and not in_memory  # in-memory SQLite: one connection per thread
        self._connections = itertools.count(1)
        self._others: tuple[Hashable, float] | None = None  # others_version after the latest transaction, when
        self._marks: collections.Counter[str] = collections.Counter()
        # SQLite: one connection of this object's own, so its data_version stays comparable from one
        # transaction to the next (and no pool checkout per transaction). The database thread uses it,
        # and the loop too (``run_short``) when the lock shows it free; never both at once.
        self._conn: Connection | None = None
        self._conn_lock = threading.Lock()
        self._commits = 0  # since the last checkpoint of the write-ahead log
        self._thread_jobs = 0  # ``run`` calls under way on the database thread (counted on the loop)
        self._thread_idle: asyncio.Event | None = None  # set when they are done, for ``run_short`` waiting
        self._closed = False

    @property
    def serializes_writers(self) -> bool:
        """SQLite: one writer at a time, so ids become visible in the order they were given out."""
        return self._tracks_others

    def create_all(self) -> None:
        """Create the tables declared so far on :data:`metadata` (by the modules imported), and new columns."""
        metadata.create_all(self.engine)
        with self.engine.begin() as conn:
            add_missing_columns(conn)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(conn, *args)`` inside one transaction on the database thread."""
        loop = asyncio.get_running_loop()
        self._thread_jobs += 1
        try:
            return await loop.run_in_executor(self._executor, functools.partial(self._on_thread, fn, *args, **kwargs))
        finally:
            self._thread_jobs -= 1
            if not self._thread_jobs and self._thread_idle is not None:
                self._thread_idle.set()
                self._thread_idle = None

    async def run_short(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``run`` for a transaction of a few indexed statements, such as each message's own.

        On SQLite it runs right here, on the loop, when the connection is free: handing it to the
        database thread and back cost more CPU than its statements (``bench.telegram_e2e``). It never
        waits for another process's write lock here: it gives up at once, with nothing kept, and
        runs again on the database thread, which waits. So ``fn`` must be safe to run twice.

        While the thread has work, this waits for it to finish once, without blocking the loop: the
        thread goes first. Taking the connection whenever it is free would starve the thread (the
        lock is not fair, and a busy loop frees and takes it again before the thread wakes), and
        queueing behind it would keep the connection busy for the next short transaction too.
        """
        if not self._inline or self._closed:
            return await self.run(fn, *args, **kwargs)
        if self._thread_jobs:
            if self._thread_idle is None:
                self._thread_idle = asyncio.Event()
            await self._thread_idle.wait()
        if self._closed or not self._conn_lock.acquire(blocking=False):
            return await self.run(fn, *args, **kwargs)
        try:
            return self._in_transaction(fn, args, kwargs, wait=False)
        except _Busy:
            pass
        finally:
            self._conn_lock.release()
        return await self.run(fn, *args, **kwargs)

    def _on_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if not self._tracks_others:
            return self.run_sync(fn, *args, **kwargs)  # a server database: pooled, pre-pinged connections
        with self._conn_lock:
            return self._in_transaction(fn, args, kwargs, wait=True)

    def _in_transaction(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], *,
                        wait: bool) -> T:
        """One transaction on this object's SQLite connection; the caller holds ``_conn_lock``.

        Only with ``wait`` (the database thread) does it wait for another process's write lock.
        """
        conn = self._conn
        if conn is None or conn.closed or conn.invalidated:
            conn = self._conn = self.engine.connect()
            # Checkpoints (and their fsyncs) are left to the database thread (``_checkpoint``), so a
            # commit made on the loop never waits for the disk. Nor does it wait for a lock: the
            # thread's transactions, far fewer, are the ones that set a timeout for their span.
            self._driver(conn).execute("PRAGMA wal_autocheckpoint=0")
            self._driver(conn).execute("PRAGMA busy_timeout=0")
        driver = self._driver(conn)
        if wait:
            driver.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        try:
            with conn.begin():
                result = fn(conn, *args, **kwargs)
                at = time.monotonic()  # before the PRAGMA: the age limit must never be stretched
                self._others = (self.others_version(conn), at)
        except sa.exc.DBAPIError as exc:
            if exc.connection_invalidated:
                self._drop_conn()
            elif not wait and isinstance(exc, sa.exc.OperationalError) and _is_busy(exc):
                raise _Busy from exc
            raise
        finally:
            if wait and self._conn is conn:
                driver.execute("PRAGMA busy_timeout=0")
        self._commits += 1
        if self._commits >= self._checkpoint_commits:
            self._commits = 0
            if wait:
                self._checkpoint_held()
            elif not self._closed:
                self._executor.submit(self._checkpoint)
        return result

    @staticmethod
    def _driver(conn: Connection) -> Any:
        return conn.connection.driver_connection

    def _checkpoint(self) -> None:
        with self._conn_lock:
            self._checkpoint_held()

    def _checkpoint_held(self) -> None:
        """Copy the write-ahead log into the database as far as no reader needs it (never waits)."""
        conn = self._conn
        if conn is None or conn.closed or conn.invalidated:
            return
        try:
            self._driver(conn).execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:  # the next one tries again; the log only grows meanwhile
            log.warning("sqlite checkpoint failed error=%s", type(exc).__name__)

    def _drop_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def run_from_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``run`` for a thread of kith's other than the loop and the database's own (the memory tables' calls, on
        the memory store's thread): ``fn(conn, *args)`` in one transaction, and wait for it.

        On SQLite it runs on the database thread, over this object's one connection: a second connection's commits
        would look like another process's to that one (``others_version``), and every cache keyed on it would miss.
        Never call it from the database thread: it would wait for itself."""
        if not self._tracks_others:
            return self.run_sync(fn, *args, **kwargs)
        return self._executor.submit(functools.partial(self._on_thread, fn, *args, **kwargs)).result()

    async def reclaim(self) -> None:
        """After rows holding forgotten words were deleted or rewritten: on PostgreSQL, VACUUM now, so the old
        versions of those rows leave the tables' pages at once instead of whenever autovacuum comes by. SQLite
        needs nothing here: its ``secure_delete`` zeroes them as they go, and the forget empties its log."""
        if self._tracks_others or self._closed:
            return

        def vacuum() -> None:
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("VACUUM")

        await asyncio.get_running_loop().run_in_executor(self._executor, vacuum)

    def run_sync(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(conn, *args)`` in one transaction on a pooled connection, on the calling thread."""
        with self.engine.begin() as conn:
            return fn(conn, *args, **kwargs)

    async def run_versioned(self, topic: str, fn: Callable[..., T], *args: Any,
                            short: bool = False) -> tuple[Hashable | None, T]:
        """``run`` (``run_short`` with ``short``), with ``topic``'s version (see ``version``) as of just
        before ``fn`` read anything.

        A commit landing during the read leaves the version stale, never the data: caching the
        result under it is safe. Reading ``version`` after the await is not: another transaction of
        this process may have moved it on in between.
        """
        marks = self.marks(topic)

        def read(conn: Connection) -> tuple[Hashable | None, T]:
            others = self.others_version(conn)
            return (None if others is None else (others, marks)), fn(conn, *args)

        return await (self.run_short(read) if short else self.run(read))

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
        row = self._driver(conn).execute("PRAGMA data_version").fetchone()
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

    def _close_conn(self) -> None:
        with self._conn_lock:
            self._drop_conn()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._executor.submit(self._close_conn).result()
        self._executor.shutdown(wait=True)
        self.engine.dispose()


__all__ = ["Connection", "Database", "metadata"]
