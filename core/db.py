"""The relational store: one SQLAlchemy Core engine (SQLite in WAL mode by default).

Everything runs on one worker thread so that asyncio code never blocks on the database and
SQLite sees one writer at a time. Only portable SQL through SQLAlchemy Core, so that
``database_url`` can point at PostgreSQL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

# The schema is declared once, by the modules that own each table, on this metadata.
metadata = sa.MetaData()

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
        self.engine: Engine = sa.create_engine(url, future=True)
        if self.engine.dialect.name == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kith-db")

    def create_all(self) -> None:
        # Import the modules that declare tables so that metadata knows them all.
        import core.schema  # noqa: F401

        metadata.create_all(self.engine)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(conn, *args)`` inside one transaction on the database thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(self.run_sync, fn, *args, **kwargs))

    def run_sync(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with self.engine.begin() as conn:
            return fn(conn, *args, **kwargs)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self.engine.dispose()


__all__ = ["Connection", "Database", "metadata"]
