"""The relational store: moments in time read back as stored, and short transactions on the loop."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ground.db import Connection, Database
from kith.app.schema import create_schema
from people import history


async def test_times_read_back_as_the_same_moment_in_utc(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'kith.db'}")
    create_schema(db)
    warsaw_noon = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=1)))
    naive = datetime(2026, 3, 1, 12, 0)  # taken as UTC
    try:
        for i, when in enumerate((warsaw_noon, naive)):
            await db.run(lambda conn, i=i, when=when: history.append(
                conn, conversation="console:ana", role="user", author="console:ana", platform="console",
                chat_id="ana", text=f"m{i}", created_at=when))
        rows = await db.run(history.recent, "console:ana", 5)
    finally:
        db.close()
    assert [r.created_at for r in rows] == [datetime(2026, 3, 1, 11, 0, tzinfo=UTC),
                                            datetime(2026, 3, 1, 12, 0, tzinfo=UTC)]
    assert all(r.created_at.tzinfo is UTC for r in rows)


# --- short transactions on the loop (run_short) ------------------------------------------------
def _notes_db(tmp_path: Path, **kwargs: Any) -> Database:
    db = Database(f"sqlite:///{tmp_path / 'kith.db'}", **kwargs)
    create_schema(db)
    return db


def _note(conn: Connection, text: str) -> int:
    return history.append(conn, conversation="console:ana", role="user", author="console:ana",
                          platform="console", chat_id="ana", text=text, created_at=datetime.now(UTC))


def _texts(conn: Connection) -> list[str]:
    return [m.text for m in history.recent(conn, "console:ana", 100)]


class _Ticker:
    """Counts how often the loop got to run a task while something else was awaited."""

    def __init__(self) -> None:
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.01)
            self.ticks += 1

    def __enter__(self) -> _Ticker:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def test_a_short_transaction_waits_for_another_processs_lock_without_blocking_the_loop(
        tmp_path: Path) -> None:
    db = _notes_db(tmp_path)
    other = sqlite3.connect(tmp_path / "kith.db", isolation_level=None)  # another process's connection
    try:
        await db.run(_note, "before")  # on the thread first: its wait for locks must not stay behind
        other.execute("BEGIN IMMEDIATE")  # it holds the write lock for 0.3 s
        asyncio.get_running_loop().call_later(0.3, other.execute, "COMMIT")
        with _Ticker() as ticker:
            started = time.monotonic()
            await db.run_short(_note, "while locked")
            waited = time.monotonic() - started
        texts = await db.run_short(_texts)
    finally:
        other.close()
        db.close()
    assert texts == ["before", "while locked"]  # the attempt that met the lock kept nothing
    assert waited >= 0.25  # it waited for the lock to go
    assert ticker.ticks >= 15  # ... while the loop went on serving everything else


async def test_a_failed_short_transaction_keeps_nothing(tmp_path: Path) -> None:
    db = _notes_db(tmp_path)

    def half_then_fail(conn: Connection) -> None:
        _note(conn, "half")
        raise ValueError("the second half failed")

    try:
        with pytest.raises(ValueError):
            await db.run_short(half_then_fail)
        await db.run_short(_note, "whole")
        texts = await db.run(_texts)
    finally:
        db.close()
    assert texts == ["whole"]


async def test_short_transactions_wait_their_turn_behind_the_database_thread(tmp_path: Path) -> None:
    db = _notes_db(tmp_path)

    def slow(conn: Connection) -> None:
        _note(conn, "slow, on the thread")
        time.sleep(0.2)

    try:
        with _Ticker() as ticker:
            on_thread = asyncio.create_task(db.run(slow))
            await asyncio.sleep(0.02)  # the thread is inside its transaction
            await asyncio.gather(db.run_short(_note, "short one"), db.run_short(_note, "short two"))
            await on_thread
        texts = await db.run_short(_texts)
    finally:
        db.close()
    assert texts == ["slow, on the thread", "short one", "short two"]
    assert ticker.ticks >= 10  # the loop was never blocked by the thread's transaction


async def test_the_write_ahead_log_is_checkpointed_as_commits_go_by(tmp_path: Path) -> None:
    async def notes_in_the_database_file(name: str, checkpoint_commits: int) -> int:
        """How many of 300 notes the database file itself holds (the rest wait in the log)."""
        (tmp_path / name).mkdir()
        db = _notes_db(tmp_path / name, checkpoint_commits=checkpoint_commits)
        schema = sqlite3.connect(tmp_path / name / "kith.db")
        schema.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the empty tables in the file, in both cases
        schema.close()
        try:
            for i in range(300):
                await db.run_short(_note, f"note {i}")
            await db.run(_texts)  # after any checkpoint handed to the thread
            # The file alone, as a copy without its log, while kith's connection is open (its close checkpoints).
            shutil.copy(tmp_path / name / "kith.db", tmp_path / f"{name}-file-only.db")
        finally:
            db.close()
        probe = sqlite3.connect(tmp_path / f"{name}-file-only.db")
        try:
            return int(probe.execute("SELECT count(*) FROM messages").fetchone()[0])
        finally:
            probe.close()

    # SQLite's own automatic checkpoint is off on kith's connection: without kith's, the file waits
    # for the log to be copied in at close; with them it keeps up as commits go by.
    assert await notes_in_the_database_file("never", 10**9) == 0
    assert await notes_in_the_database_file("often", 20) >= 280


async def test_work_handed_to_the_database_thread_goes_before_a_later_short_transaction(
        tmp_path: Path) -> None:
    db = _notes_db(tmp_path)
    # The moment a burst made common: the thread has been handed a transaction but has not taken the
    # connection yet (frozen here by keeping the thread busy with something else for a while).
    busy = threading.Event()
    db._executor.submit(busy.wait, 5)
    try:
        on_thread = asyncio.create_task(db.run(_note, "on the thread"))
        await asyncio.sleep(0)  # handed to the thread; the connection itself is free
        short = asyncio.create_task(db.run_short(_note, "short"))
        await asyncio.sleep(0.05)
        busy.set()
        await asyncio.gather(on_thread, short)
        texts = await db.run(_texts)
    finally:
        busy.set()
        db.close()
    assert texts == ["on the thread", "short"]  # it went first: a stream of short ones cannot starve it


async def test_a_database_error_never_carries_what_was_written(tmp_path: Path) -> None:
    """Error texts reach the logs; the values in a failed statement are people's words."""
    db = Database(f"sqlite:///{tmp_path / 'kith.db'}")
    create_schema(db)
    try:
        with pytest.raises(sa.exc.IntegrityError) as caught:
            await db.run(lambda conn: conn.execute(sa.text("INSERT INTO accounts (account) VALUES (:a)"),
                                                   {"a": "my secret diary"}))
    finally:
        db.close()
    assert "my secret diary" not in str(caught.value)
