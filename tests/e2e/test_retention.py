"""Retention: a running bot forgets, on schedule, what delivery needed only for a while."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable

from channels.terminal import TerminalChannel
from delivery import outbox, previews
from delivery.inbound import InboundJournal, inbound_events
from delivery.outbox import OutboxStatus
from delivery.previews import PreviewKey
from delivery.retention import Pruned, Retention
from ground.config import Settings
from ground.db import Database
from ground.tunables import INBOUND_DEDUPE_DAYS, RETENTION_INTERVAL_S
from ground.types import OutboundMessage
from kith.app.wiring import build_app
from tests.fakes.openai_api import FakeOpenAI
from tests.support.clock import FakeClock
from tests.support.delivery import SteppedSleep
from tests.support.waiting import until

# no other table is needed (the ``db`` fixture)
DB_TABLES = (inbound_events, outbox.outbox, outbox.outbox_doubts, previews.previews)


def reply(text: str) -> OutboundMessage:
    return OutboundMessage(platform="telegram", chat_id="c1", text=text)


def sent(db: Database, clock: FakeClock, text: str) -> int:
    entry_id = db.run_sync(outbox.enqueue, reply(text), source=None, now=clock())
    db.run_sync(outbox.mark_sent, entry_id, now=clock())
    return entry_id


async def until_waiting(sleep: SteppedSleep, waits: int) -> None:
    """Until the job is in its ``waits``-th sleep: every prune before it has finished."""
    await until(lambda: len(sleep.waits) >= waits, 10, what=f"the job to reach its wait number {waits}", every=0.01)


async def test_a_running_bot_prunes_the_journal_and_delivered_replies_every_hour(db: Database) -> None:
    clock = FakeClock()
    journal = InboundJournal(db, clock=clock)
    assert await journal.record("telegram", "update-1")
    first = sent(db, clock, "sent on day 0")
    waiting = db.run_sync(outbox.enqueue, reply("still pending"), source=None, now=clock())
    refused = db.run_sync(outbox.enqueue, reply("refused"), source=None, now=clock())
    db.run_sync(outbox.mark_failed, refused, error="SendError:permanent", now=clock())

    sleep = SteppedSleep()
    retention = Retention(db, journal, sent_retention_days=3, clock=clock, sleep=sleep)
    retention.start()
    try:
        await until_waiting(sleep, 1)  # the prune at start found nothing old enough
        assert db.run_sync(outbox.get, first) is not None

        clock.advance(days=2)
        second = sent(db, clock, "sent on day 2")
        clock.advance(days=2)  # day 4: the first reply is past the 3 days, the second is not
        await sleep.end_one()
        await until_waiting(sleep, 2)
        assert db.run_sync(outbox.get, first) is None and db.run_sync(outbox.get, second) is not None
        assert not await journal.record("telegram", "update-1")  # still inside the dedupe window

        clock.advance(days=INBOUND_DEDUPE_DAYS)
        await sleep.end_one()
        await until_waiting(sleep, 3)
        assert db.run_sync(outbox.get, second) is None
        assert await journal.record("telegram", "update-1")  # past the window: forgotten
        # What never went out stays for the next start or for review, however old.
        assert [e.id for e in db.run_sync(outbox.by_status, OutboxStatus.PENDING)] == [waiting]
        assert [e.id for e in db.run_sync(outbox.by_status, OutboxStatus.FAILED)] == [refused]
        assert sleep.waits == [RETENTION_INTERVAL_S] * 3
    finally:
        await retention.stop()
    assert [t for t in asyncio.all_tasks() if t.get_name() == "delivery:retention"] == []


async def test_a_long_unpruned_database_is_pruned_whole_in_short_transactions(db: Database) -> None:
    clock = FakeClock()
    journal = InboundJournal(db, clock=clock)
    for n in range(7):
        assert await journal.record("discord", f"event-{n}")
        clock.advance(minutes=1)
    for n in range(5):
        sent(db, clock, f"reply {n}")
    clock.advance(days=30)
    assert await journal.record("discord", "today")

    pruned = await Retention(db, journal, sent_retention_days=7, clock=clock, batch=2).prune()
    assert pruned == Pruned(events=7, sent=5)
    assert db.run_sync(outbox.by_status, OutboxStatus.SENT) == []
    assert not await journal.record("discord", "today")


async def test_a_failed_prune_is_tried_again_at_the_next_round(db: Database) -> None:
    clock = FakeClock()
    journal = InboundJournal(db, clock=clock)
    old = sent(db, clock, "old")
    clock.advance(days=8)
    db.run_sync(lambda conn: conn.exec_driver_sql("ALTER TABLE outbox_doubts RENAME TO doubts_away"))
    sleep = SteppedSleep()
    retention = Retention(db, journal, sent_retention_days=7, clock=clock, sleep=sleep)
    retention.start()
    try:
        await until_waiting(sleep, 1)
        assert db.run_sync(outbox.get, old) is not None  # the database said no this time
        db.run_sync(lambda conn: conn.exec_driver_sql("ALTER TABLE doubts_away RENAME TO outbox_doubts"))
        await sleep.end_one()
        await until_waiting(sleep, 2)
        assert db.run_sync(outbox.get, old) is None
    finally:
        await retention.stop()



async def test_a_bot_that_starts_prunes_what_is_past_its_time(fake_llm: FakeOpenAI,
                                                              make_settings: Callable[..., Settings]) -> None:
    clock = FakeClock()
    app = await build_app(make_settings(fake_llm), clock=clock, warm_llm=False)
    try:
        assert await app.journal.record("telegram", "update-1")
        old = sent(app.db, clock, "delivered a week and a day ago")
        clock.advance(days=max(INBOUND_DEDUPE_DAYS, app.settings.delivery.sent_retention_days) + 1)
        terminal = TerminalChannel(stdin=io.StringIO(""), stdout=io.StringIO(), user="ana", interactive=False)
        await app.start([terminal])
        await until(lambda: app.db.run_sync(outbox.get, old) is None, 10, what="the old outbox row to be pruned",
                    every=0.01)
        assert app.db.run_sync(outbox.get, old) is None
        assert await app.journal.record("telegram", "update-1")  # forgotten: past the dedupe window
    finally:
        await app.close()
    assert [t for t in asyncio.all_tasks() if t.get_name() == "delivery:retention"] == []


async def test_a_preview_row_whose_reply_never_went_is_pruned_once_no_send_can_use_it(db: Database) -> None:
    clock = FakeClock()
    journal = InboundJournal(db, clock=clock)
    old, fresh = PreviewKey("discord", "c1", "m1"), PreviewKey("discord", "c1", "m2")
    db.run_sync(previews.note, old, "p1", clock())  # its reply failed: nothing lets the row go
    clock.advance(seconds=previews.KEPT.total_seconds())
    db.run_sync(previews.note, fresh, "p2", clock())  # a reply that may still be sent
    clock.advance(minutes=1)

    pruned = await Retention(db, journal, sent_retention_days=7, clock=clock).prune()
    assert pruned.previews == 1
    assert db.run_sync(previews.noted, old) is None and db.run_sync(previews.noted, fresh) == "p2"
