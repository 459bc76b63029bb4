"""Inbound reliability: a redelivered platform event is answered once; cursors survive restarts."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy.engine import Connection

from delivery import inbound
from delivery.inbound import Cursors, InboundJournal, cursors, inbound_events
from ground.db import Database
from tests.support import database
from tests.support.clock import FakeClock

BACKENDS = ("sqlite", "postgres")  # the relational store under test: both (tests/conftest.py)


def open_db(path: Path) -> Database:
    """kith's database file with the journal's and cursors' tables only: they need no other."""
    return database.open_db(path, inbound_events, cursors)


async def test_a_redelivered_event_is_recognised(tmp_path: Path) -> None:
    db = open_db(tmp_path)
    try:
        journal = InboundJournal(db)
        assert await journal.record("telegram", "1001")
        assert not await journal.record("telegram", "1001")
        assert await journal.record("slack", "1001")  # ids are only unique within a platform
    finally:
        db.close()
    reopened = open_db(tmp_path)
    try:
        assert not await InboundJournal(reopened).record("telegram", "1001")  # remembered across restarts
    finally:
        reopened.close()


@pytest.fixture
def two_processes(tmp_path: Path) -> Iterator[tuple[Database, Database]]:
    """Two engines on one file, each with its own database thread: what two kith processes would be."""
    first, second = open_db(tmp_path), open_db(tmp_path)
    yield first, second
    first.close()
    second.close()


async def test_concurrent_records_of_one_event_admit_exactly_one(two_processes: tuple[Database, Database]) -> None:
    journals = [InboundJournal(db) for db in two_processes]
    for n in range(15):
        event = f"Ev{n}"
        outcomes = await asyncio.gather(*(journals[i % 2].record("slack", event) for i in range(6)))
        assert outcomes.count(True) == 1, event


async def test_a_batch_is_recorded_with_its_cursor_and_redeliveries_are_named(tmp_path: Path) -> None:
    db = open_db(tmp_path)
    try:
        journal, stored = InboundJournal(db), Cursors(db)
        assert await journal.record("telegram", "11")  # taken in one at a time earlier (webhook mode)
        fresh = await journal.record_batch("telegram", ["10", "11", "12", "12"], cursor="tg", cursor_to=13)
        assert fresh == {"10", "12"}
        assert await stored.get("tg") == 13
        assert await journal.record_batch("telegram", ["12", "13"], cursor="tg", cursor_to=14) == {"13"}
        # Telegram restarts update ids lower after a long silence: the stored offset follows the batch,
        # or the next start would confirm (drop) every new update below the old offset.
        assert await journal.record_batch("telegram", ["5"], cursor="tg", cursor_to=6) == {"5"}
        assert await stored.get("tg") == 6
        assert not await journal.record("telegram", "10")
    finally:
        db.close()


async def test_concurrent_batches_of_the_same_events_admit_each_once(
        two_processes: tuple[Database, Database]) -> None:
    journals = [InboundJournal(db) for db in two_processes]
    for n in range(10):
        batch = [f"{n}-{i}" for i in range(5)]
        outcomes = await asyncio.gather(*(journals[i % 2].record_batch("telegram", batch, cursor="tg",
                                                                        cursor_to=n + 1) for i in range(4)))
        taken = [event for outcome in outcomes for event in outcome]
        assert sorted(taken) == sorted(batch), n  # every event once, whichever process won it
    assert await Cursors(two_processes[0]).get("tg") == 10


async def test_a_batch_raced_by_another_process_is_recorded_again_whole(
        two_processes: tuple[Database, Database], monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = two_processes
    real = inbound._record_new
    raced = []

    def racing(conn: Connection, platform: str, event_ids: list[str], now: datetime) -> list[str]:
        if raced:
            return real(conn, platform, event_ids, now)
        raced.append(True)
        seen = {r.event_id for r in inbound._SEEN.all(conn, {"platform": platform, "event_ids": list(event_ids)})}
        # Between our read and our write, the other process takes in "b" and commits.
        theirs.run_sync(inbound._insert_event, platform, "b", now)
        inbound._INSERT_EVENT.insert_many(conn, [{"platform": platform, "event_id": e, "received_at": now}
                                                 for e in event_ids if e not in seen])
        return []

    monkeypatch.setattr(inbound, "_record_new", racing)
    fresh = await InboundJournal(ours).record_batch("telegram", ["a", "b", "c"], cursor="tg", cursor_to=4)
    assert fresh == {"a", "c"}  # "b" is the other process's; nothing was lost to the collision
    assert raced and await Cursors(ours).get("tg") == 4
    assert not await InboundJournal(ours).record("telegram", "a")


async def test_old_entries_are_pruned_recent_ones_kept(tmp_path: Path) -> None:
    db = open_db(tmp_path)
    try:
        clock = FakeClock()
        journal = InboundJournal(db, clock=clock, retention_days=7)
        assert await journal.record("discord", "old")
        clock.advance(days=6)
        assert await journal.record("discord", "recent")
        clock.advance(days=2)
        assert await journal.prune() == 1
        assert not await journal.record("discord", "recent")
        assert await journal.record("discord", "old")  # forgotten after the retention
    finally:
        db.close()


async def test_a_batchs_offset_survives_a_restart(tmp_path: Path) -> None:
    db = open_db(tmp_path)
    try:
        journal = InboundJournal(db)
        assert await Cursors(db).get("telegram:offset") is None
        await journal.record_batch("telegram", ["1"], cursor="telegram:offset", cursor_to=2**40)
        await journal.record_batch("telegram", ["2"], cursor="other", cursor_to=3)
    finally:
        db.close()
    reopened = open_db(tmp_path)
    try:
        assert await Cursors(reopened).get("telegram:offset") == 2**40
        assert await Cursors(reopened).get("other") == 3
    finally:
        reopened.close()
