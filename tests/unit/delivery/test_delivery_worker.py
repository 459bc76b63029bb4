"""Delivery: replies arrive complete, in order, once — through rate limits, outages and restarts."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from conversation.typing_indicator import TypingIndicator
from delivery import outbox
from delivery.outbox import OutboxStatus
from delivery.worker import RETRY_AFTER, DeliveryWorker, backoff_delay, long_backoff_delay, retry_delay
from ground.config import DeliverySettings
from ground.db import Connection, Database
from ground.tunables import (
    FAILED_LANE_RETRY_S,
    SEND_LONG_BACKOFF_BASE_S,
    SEND_LONG_BACKOFF_MAX_S,
    SEND_MAX_LATE_H,
    SEND_RETRY_AFTER_MARGIN_S,
)
from ground.types import OutboundMessage, SendError
from tests.support import database
from tests.support.clock import FakeClock
from tests.support.delivery import FakeChannel, FakeSleep, SteppedSleep, send_anything
from tests.support.waiting import until

BACKENDS = ("sqlite", "postgres")  # the relational store under test: both (tests/conftest.py)

# How long a test waits for something that should happen: generous, since it bounds only a failure's time (on
# PostgreSQL each step is a round trip, and CI runs two test workers on two cores beside the database server).
WAIT_S = 20.0
DB_TABLES = (outbox.outbox, outbox.outbox_doubts)  # the worker needs the outbox's tables and no other (``db``)
SETTINGS = DeliverySettings(max_attempts=4, backoff_base_s=1.0, backoff_max_s=60.0, outbox_sweep_s=0.0)


def open_db(path: Path) -> Database:
    """The test's database file as another process opens it, with the same ``DB_TABLES`` as the ``db`` fixture."""
    return database.open_db(path, *DB_TABLES)


def reply(text: str, chat_id: str = "c1") -> OutboundMessage:
    return OutboundMessage(platform="telegram", chat_id=chat_id, text=text)


def make_worker(db: Database, channel: FakeChannel, *,
                may_send: Callable[[OutboundMessage], Awaitable[bool]] | None = None,
                rng: Callable[[], float] = lambda: 1.0,
                settings: DeliverySettings = SETTINGS, **kwargs: Any) -> tuple[DeliveryWorker, FakeSleep]:
    clock = FakeClock()
    sleep = FakeSleep(clock)
    worker = DeliveryWorker(db, {channel.name: channel}, may_send or send_anything, settings=settings, sleep=sleep,
                            clock=clock, rng=rng, **kwargs)
    return worker, sleep


def entry(db: Database, entry_id: int) -> outbox.OutboxEntry:
    found = db.run_sync(outbox.get, entry_id)
    assert found is not None
    return found


async def test_three_chunks_arrive_in_order_and_are_recorded(db: Database) -> None:
    channel = FakeChannel()
    worker, sleep = make_worker(db, channel)
    entry_id = await worker.post(reply("one|two|three"), source="in-7")
    await worker.wait_idle()
    assert channel.texts() == ["<b>one</b>", "<b>two</b>", "<b>three</b>"]
    stored = entry(db, entry_id)
    assert stored.status is OutboxStatus.SENT
    assert (stored.chunks_sent, stored.sent_ids, stored.source) == (3, ("pm1", "pm2", "pm3"), "in-7")
    assert sleep.waits == []


async def test_a_sender_whose_chunk_was_recorded_by_another_stops(db: Database) -> None:
    channel = FakeChannel()
    worker, _ = make_worker(db, channel)
    gate = channel.hold("one")
    entry_id = await worker.post(reply("one|two|three"), source=None)
    await channel.reached["one"].wait()
    # Meanwhile another process delivered chunk 0 of the same entry and recorded it.
    assert db.run_sync(outbox.record_chunk, entry_id, 0, ["theirs1"], now=FakeClock()())
    gate.set()
    await worker.wait_idle()
    assert [plain for plain, _ in channel.attempts] == ["one"]  # chunks 1 and 2 are left to the other sender
    stored = entry(db, entry_id)
    assert (stored.status, stored.chunks_sent, stored.sent_ids) == (OutboxStatus.PENDING, 1, ("theirs1",))


async def test_a_blocked_chat_does_not_hold_up_another_and_each_keeps_its_order(db: Database) -> None:
    channel = FakeChannel()
    worker, _ = make_worker(db, channel)
    gate = channel.hold("a1")
    await worker.post(reply("a1|a2", chat_id="A"))
    await worker.post(reply("b1|b2", chat_id="B"))
    await worker.post(reply("a3", chat_id="A"))
    await worker.post(reply("b3", chat_id="B"))
    await asyncio.wait_for(channel.reached["b3"].wait(), timeout=WAIT_S)
    await asyncio.sleep(0)
    # Chat B is done while chat A is still stuck on its first chunk, and A sent nothing out of turn.
    assert channel.texts("B") == ["<b>b1</b>", "<b>b2</b>", "<b>b3</b>"]
    assert channel.texts("A") == []
    assert "a3" not in {plain for plain, _ in channel.attempts}
    gate.set()
    await worker.wait_idle()
    assert channel.texts("A") == ["<b>a1</b>", "<b>a2</b>", "<b>a3</b>"]


async def test_rate_limit_waits_retry_after_then_delivers_once(db: Database) -> None:
    channel = FakeChannel()
    channel.fail("two", SendError("429", retry_after=30.0))
    worker, sleep = make_worker(db, channel, rng=lambda: 0.0)  # jitter alone would not wait at all
    entry_id = await worker.post(reply("one|two"))
    await worker.wait_idle()
    assert sleep.waits == [30.0 + SEND_RETRY_AFTER_MARGIN_S]
    assert channel.texts() == ["<b>one</b>", "<b>two</b>"]
    stored = entry(db, entry_id)
    assert stored.status is OutboxStatus.SENT and stored.attempts == 0


async def test_server_errors_back_off_exponentially_then_deliver(db: Database) -> None:
    channel = FakeChannel()
    channel.fail("hi", SendError("502"), SendError("503"), ConnectionResetError())
    worker, sleep = make_worker(db, channel)  # rng 1.0: the top of each jitter range
    entry_id = await worker.post(reply("hi"))
    await worker.wait_idle()
    assert sleep.waits == [1.0, 2.0, 4.0]
    assert channel.texts() == ["<b>hi</b>"]
    assert entry(db, entry_id).status is OutboxStatus.SENT


def test_backoff_is_full_jitter_capped() -> None:
    def delay(attempt: int, r: float) -> float:
        return backoff_delay(attempt, base_s=1.0, max_s=60.0, rng=lambda: r)

    assert [delay(n, 1.0) for n in (1, 2, 3, 7, 8, 20)] == [1.0, 2.0, 4.0, 60.0, 60.0, 60.0]
    assert delay(4, 0.5) == 4.0
    assert delay(4, 0.0) == 0.0


def test_a_named_retry_after_is_waited_exactly_however_often_and_only_guesses_grow() -> None:
    def delay(failures: int, retry_after: float | None = None, r: float = 1.0) -> float:
        return retry_delay(failures, retry_after, quick=4, base_s=1.0, max_s=60.0, rng=lambda: r)

    # The platform's word, neither grown by the failures before it nor shortened by jitter.
    exactly = [1.0 + SEND_RETRY_AFTER_MARGIN_S] * 5
    assert [delay(n, retry_after=1.0) for n in (0, 1, 4, 7, 100)] == exactly
    assert [delay(n, retry_after=1.0, r=0.0) for n in (0, 1, 4, 7, 100)] == exactly
    assert delay(2, retry_after=120.0) == 120.0 + SEND_RETRY_AFTER_MARGIN_S  # beyond our own cap: its word wins
    assert delay(0, retry_after=0.0) == SEND_RETRY_AFTER_MARGIN_S  # never a hot loop
    # Guessed waits: quick retries, then the long backoff.
    assert [delay(n) for n in (1, 2, 3, 4, 5, 6)] == [1.0, 2.0, 4.0, SEND_LONG_BACKOFF_BASE_S,
                                                      2 * SEND_LONG_BACKOFF_BASE_S, 4 * SEND_LONG_BACKOFF_BASE_S]


async def test_a_reply_refused_with_retry_after_past_the_quick_retries_waits_only_what_the_platform_asked(
        db: Database) -> None:
    channel = FakeChannel()
    refusals = SETTINGS.max_attempts + 3
    channel.fail("hi", *[SendError("429", retry_after=1.0) for _ in range(refusals)])
    worker, sleep = make_worker(db, channel, settings=SWEEPING)  # a long backoff would park the chat
    entry_id = await worker.post(reply("hi"))
    await worker.wait_idle()
    assert sleep.waits == [1.0 + SEND_RETRY_AFTER_MARGIN_S] * refusals
    assert channel.texts() == ["<b>hi</b>"]
    assert entry(db, entry_id).status is OutboxStatus.SENT


async def test_a_named_wait_does_not_count_towards_the_guessed_backoff(db: Database) -> None:
    channel = FakeChannel()
    channel.fail("hi", SendError("502"), SendError("429", retry_after=5.0), SendError("429", retry_after=5.0),
                 SendError("503"))
    worker, sleep = make_worker(db, channel)  # rng 1.0: the top of each jitter range
    await worker.post(reply("hi"))
    await worker.wait_idle()
    named = 5.0 + SEND_RETRY_AFTER_MARGIN_S
    assert sleep.waits == [1.0, named, named, 2.0]  # the second guess is the second quick step, not the fourth
    assert channel.texts() == ["<b>hi</b>"]


SWEEPING = dataclasses.replace(SETTINGS, outbox_sweep_s=10.0)  # a sweep takes up parked chats (called by hand here)


async def test_an_outage_past_the_quick_retries_keeps_the_reply_pending_in_order_until_delivered(
        db: Database, caplog: pytest.LogCaptureFixture) -> None:
    channel = FakeChannel()
    channel.fail("secret words", *[SendError("502") for _ in range(SETTINGS.max_attempts + 1)])
    worker, sleep = make_worker(db, channel, settings=SWEEPING)  # rng 1.0: the top of each jitter range
    with caplog.at_level(logging.INFO, logger="kith.delivery"):
        first_id = await worker.post(reply("secret words"))
        next_id = await worker.post(reply("after"))
        await worker.wait_idle()
        assert sleep.waits == [1.0, 2.0, 4.0]  # the quick retries, then the chat is parked, not failed
        stored = entry(db, first_id)
        assert (stored.status, stored.attempts, stored.last_error) == (
            OutboxStatus.PENDING, SETTINGS.max_attempts, "SendError:transient")
        assert stored.next_attempt_at == sleep.clock() + timedelta(seconds=SEND_LONG_BACKOFF_BASE_S)
        assert channel.delivered == [] and entry(db, next_id).status is OutboxStatus.PENDING  # nothing out of turn

        sleep.clock.advance(seconds=SEND_LONG_BACKOFF_BASE_S - 1)
        assert await worker.sweep() == 0  # not due yet
        sleep.clock.advance(seconds=1)
        assert await worker.sweep() == 1
        await worker.wait_idle()  # one more failure: the wait doubles
        assert entry(db, first_id).next_attempt_at == sleep.clock() + timedelta(seconds=2 * SEND_LONG_BACKOFF_BASE_S)
        sleep.clock.advance(seconds=2 * SEND_LONG_BACKOFF_BASE_S)
        assert await worker.sweep() == 1
        await worker.wait_idle()
    assert channel.texts() == ["<b>secret words</b>", "<b>after</b>"]
    assert entry(db, first_id).status is OutboxStatus.SENT and entry(db, next_id).status is OutboxStatus.SENT
    assert "delivery failed" not in caplog.text and "secret" not in caplog.text


async def test_without_a_sweep_a_long_backoff_waits_in_the_chats_own_task(db: Database) -> None:
    channel = FakeChannel()
    channel.fail("hi", *[SendError("502") for _ in range(SETTINGS.max_attempts + 1)])
    worker, sleep = make_worker(db, channel)  # outbox_sweep_s = 0: nothing else would take the chat up
    entry_id = await worker.post(reply("hi"))
    await worker.wait_idle()
    assert sleep.waits == [1.0, 2.0, 4.0, SEND_LONG_BACKOFF_BASE_S, 2 * SEND_LONG_BACKOFF_BASE_S]
    assert entry(db, entry_id).status is OutboxStatus.SENT and channel.texts() == ["<b>hi</b>"]


def test_the_long_backoff_doubles_to_an_hour_with_jitter_in_its_upper_half() -> None:
    def delay(step: int, r: float) -> float:
        return long_backoff_delay(step, rng=lambda: r)

    assert [delay(n, 1.0) for n in (1, 2, 3, 4, 5, 30)] == [300.0, 600.0, 1200.0, 2400.0, 3600.0, 3600.0]
    assert delay(1, 0.0) == 150.0


async def test_a_reply_is_never_delivered_more_than_a_day_late(db: Database,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    channel = FakeChannel()
    channel.fail("hi", *[SendError("502") for _ in range(100)])  # an outage longer than a day
    worker, sleep = make_worker(db, channel)
    with caplog.at_level(logging.INFO, logger="kith.delivery"):
        entry_id = await worker.post(reply("hi"))
        await worker.wait_idle()
    stored = entry(db, entry_id)
    assert (stored.status, stored.last_error) == (OutboxStatus.FAILED, "expired")
    assert timedelta(hours=SEND_MAX_LATE_H) <= sleep.clock() - stored.created_at \
        <= timedelta(hours=SEND_MAX_LATE_H, seconds=SEND_LONG_BACKOFF_MAX_S)
    assert max(sleep.waits) == SEND_LONG_BACKOFF_MAX_S  # it kept trying, at most an hour apart
    expired = [r.getMessage() for r in caplog.records if r.getMessage().startswith("delivery expired")]
    assert len(expired) == 1 and f"id={entry_id} " in expired[0]

    # A process that comes back after a day does not send what is that late either.
    late_id = db.run_sync(outbox.enqueue, reply("yesterday's", chat_id="c2"), source=None, now=sleep.clock())
    sleep.clock.advance(hours=SEND_MAX_LATE_H, seconds=1)
    restarted, _ = make_worker(db, channel)
    restarted._clock = sleep.clock
    await restarted.start()
    await restarted.wait_idle()
    assert channel.texts("c2") == [] and entry(db, late_id).status is OutboxStatus.FAILED


async def test_shutdown_does_not_wait_for_a_chat_that_is_backing_off(db: Database) -> None:
    channel = FakeChannel()
    channel.fail("hi", SendError("502"))
    sleep = SteppedSleep()  # the backoff would never end on its own
    worker = DeliveryWorker(db, {"telegram": channel}, send_anything, settings=SETTINGS, sleep=sleep,
                            clock=FakeClock(), rng=lambda: 1.0)
    entry_id = await worker.post(reply("hi"))
    # The failure is written down on the database thread, then the wait begins.
    await until(lambda: bool(sleep.waits), 10, what="the worker to wait out its backoff", every=0.01)
    assert sleep.waits == [1.0]
    await asyncio.wait_for(worker.drain(), timeout=30)
    assert entry(db, entry_id).status is OutboxStatus.PENDING and channel.delivered == []
    worker2, _ = make_worker(db, channel)
    await worker2.start()
    await worker2.wait_idle()
    assert channel.texts() == ["<b>hi</b>"]


async def test_a_send_that_may_have_gone_through_is_resent_noted_and_never_given_up(
        db: Database, caplog: pytest.LogCaptureFixture) -> None:
    channel = FakeChannel()
    timed_out = [SendError("no answer in time", maybe_delivered=True) for _ in range(SETTINGS.max_attempts + 1)]
    channel.fail("two", *timed_out)
    worker, sleep = make_worker(db, channel)
    with caplog.at_level(logging.WARNING, logger="kith.delivery"):
        entry_id = await worker.post(reply("one|two"))
        await worker.wait_idle()
    assert channel.texts() == ["<b>one</b>", "<b>two</b>"]
    assert entry(db, entry_id).status is OutboxStatus.SENT
    # Each may have posted chunk 2: noted where a count of duplicates can find them, and logged by id.
    assert db.run_sync(outbox.doubts, entry_id) == [(entry_id, 1)] * len(timed_out)
    doubled = [r.getMessage() for r in caplog.records if r.getMessage().startswith("delivery maybe doubled")]
    assert doubled == [f"delivery maybe doubled id={entry_id} chunk=2/2 platform=telegram chat=c1"] * len(timed_out)
    assert len(sleep.waits) == len(timed_out)  # it still backs off: a slow platform is not hurried


async def test_permanent_error_fails_at_once(db: Database, caplog: pytest.LogCaptureFixture) -> None:
    channel = FakeChannel()
    channel.fail("hi", SendError("403 bot was blocked", permanent=True))
    worker, sleep = make_worker(db, channel)
    with caplog.at_level(logging.INFO, logger="kith.delivery"):
        entry_id = await worker.post(reply("hi"))
        await worker.wait_idle()
    stored = entry(db, entry_id)
    assert (stored.status, stored.attempts) == (OutboxStatus.FAILED, 1)
    assert stored.last_error == "SendError:permanent"
    assert sleep.waits == [] and channel.attempts == [("hi", False)]
    assert f"delivery refused id={entry_id} " in caplog.text


async def test_a_files_bytes_are_dropped_once_it_is_delivered_or_refused(db: Database) -> None:
    channel = FakeChannel()
    channel.fail("refused", SendError("403 bot was blocked", permanent=True))
    worker, _ = make_worker(db, channel)
    export = dataclasses.replace(reply("your export|in two parts"), attachment_name="kith-export.json",
                                 attachment_bytes=b'{"memories": []}')
    sent_id = await worker.post(export)
    refused_id = await worker.post(dataclasses.replace(export, text="refused", chat_id="c2"))
    await worker.wait_idle()
    sent, refused = entry(db, sent_id), entry(db, refused_id)
    assert (sent.status, refused.status) == (OutboxStatus.SENT, OutboxStatus.FAILED)
    assert sent.message.attachment_bytes is None and refused.message.attachment_bytes is None
    assert sent.message.attachment_name == "kith-export.json"  # what was sent stays on record


async def test_bad_formatting_resends_that_chunk_as_plain_text_at_once(db: Database) -> None:
    channel = FakeChannel()
    channel.fail("b", SendError("can't parse entities", bad_formatting=True))
    worker, sleep = make_worker(db, channel)
    entry_id = await worker.post(reply("a|b|c"))
    await worker.wait_idle()
    assert channel.texts() == ["<b>a</b>", "b", "<b>c</b>"]
    assert channel.attempts == [("a", False), ("b", False), ("b", True), ("c", False)]
    assert sleep.waits == []
    assert entry(db, entry_id).status is OutboxStatus.SENT


async def test_restart_resumes_after_the_last_sent_chunk_and_sends_queued_reply_once(tmp_path: Path) -> None:
    first_db = open_db(tmp_path)
    before = FakeChannel()
    before.hold("two")  # the process "dies" while chunk 2 is in flight
    worker, _ = make_worker(first_db, before)
    long_id = await worker.post(reply("one|two|three"))
    queued_id = await worker.post(reply("queued"))
    await asyncio.wait_for(before.reached["two"].wait(), timeout=WAIT_S)
    await worker.stop()
    first_db.close()
    assert before.texts() == ["<b>one</b>"]

    second_db = open_db(tmp_path)
    try:
        after = FakeChannel(id_prefix="new")
        restarted, _ = make_worker(second_db, after)
        assert await restarted.start() == 1
        await restarted.wait_idle()
        assert after.texts() == ["<b>two</b>", "<b>three</b>", "<b>queued</b>"]
        long_entry = entry(second_db, long_id)
        assert (long_entry.status, long_entry.sent_ids) == (OutboxStatus.SENT, ("pm1", "new1", "new2"))
        assert entry(second_db, queued_id).status is OutboxStatus.SENT

        # A third start finds nothing left to send.
        again = FakeChannel()
        third, _ = make_worker(second_db, again)
        assert await third.start() == 0
        await third.wait_idle()
        assert again.delivered == []
    finally:
        second_db.close()


async def start_over_a_backoff(db: Database, text: str, *, attempts: int, wait_s: float, error: str,
                               settings: DeliverySettings = SWEEPING) -> tuple[FakeChannel, FakeSleep]:
    """A new process's worker, started over a reply the last one left waiting ``wait_s`` after ``error``."""
    clock = FakeClock()
    entry_id = db.run_sync(outbox.enqueue, reply(text), source=None, now=clock())
    db.run_sync(outbox.schedule_retry, entry_id, attempts=attempts,
                next_attempt_at=clock() + timedelta(seconds=wait_s), error=error, now=clock())
    channel = FakeChannel()
    sleep = FakeSleep(clock)
    worker = DeliveryWorker(db, {"telegram": channel}, send_anything, settings=settings, sleep=sleep, clock=clock)
    await worker.start()
    await worker.wait_idle()
    return channel, sleep


async def test_restart_honours_a_retry_time_set_before_the_crash(db: Database) -> None:
    channel, sleep = await start_over_a_backoff(db, "hi", attempts=1, wait_s=45, error=RETRY_AFTER)
    assert sleep.waits == [45.0]  # the platform's due time, in the chat's own task: not a sweep's later
    assert channel.texts() == ["<b>hi</b>"]


class SleepThenHang(FakeSleep):
    """Moves the fake clock for the first ``n`` waits, then waits for ever: a process killed mid-wait."""

    def __init__(self, clock: FakeClock, n: int) -> None:
        super().__init__(clock)
        self.n = n

    async def __call__(self, seconds: float) -> None:
        if len(self.waits) >= self.n:
            self.waits.append(seconds)
            await asyncio.Event().wait()
        await super().__call__(seconds)


async def test_a_restart_during_a_named_wait_waits_just_what_remains_of_it(tmp_path: Path) -> None:
    first_db = open_db(tmp_path)
    before = FakeChannel()
    refusals = SETTINGS.max_attempts + 2  # past the quick retries
    before.fail("hi", *[SendError("429", retry_after=3.0) for _ in range(refusals)])
    clock = FakeClock()
    hangs = SleepThenHang(clock, refusals - 1)
    worker = DeliveryWorker(first_db, {"telegram": before}, send_anything, settings=SWEEPING, sleep=hangs,
                            clock=clock)
    entry_id = await worker.post(reply("hi"))
    await until(lambda: len(hangs.waits) == refusals, WAIT_S, what="the last wait", every=0.001)
    await worker.stop()  # "killed" while it waits on the platform's word
    first_db.close()
    assert before.delivered == []

    db = open_db(tmp_path)
    try:
        assert entry(db, entry_id).last_error == RETRY_AFTER
        clock.advance(seconds=2.0)  # the restart took 2 s
        after = FakeChannel()
        sleep = FakeSleep(clock)
        restarted = DeliveryWorker(db, {"telegram": after}, send_anything, settings=SWEEPING, sleep=sleep,
                                   clock=clock)
        await restarted.start()
        await restarted.wait_idle()
        assert sleep.waits == [pytest.approx(1.0 + SEND_RETRY_AFTER_MARGIN_S)]  # what remained of it, no more
        assert after.texts() == ["<b>hi</b>"]
    finally:
        db.close()


async def test_a_restart_sends_at_once_a_reply_an_older_kith_parked_behind_a_rate_limit(db: Database) -> None:
    # Written by a kith that grew a 429's wait into its long backoff: the platform's own time is lost.
    channel, sleep = await start_over_a_backoff(db, "hi", attempts=7, wait_s=212, error="SendError:rate_limited")
    assert sleep.waits == [] and channel.texts() == ["<b>hi</b>"]


async def test_the_first_success_on_a_platform_sends_at_once_what_waits_on_a_guessed_backoff(db: Database) -> None:
    channel = FakeChannel()
    channel.fail("for A", SendError("502"))
    channel.fail("for C", SendError("429", retry_after=30.0))
    steps = SteppedSleep()  # no wait ends by itself: only the wake can move chat A on
    worker = DeliveryWorker(db, {"telegram": channel}, send_anything, settings=SWEEPING, sleep=steps,
                            clock=FakeClock(), rng=lambda: 1.0)
    for_a = await worker.post(reply("for A", chat_id="A"))
    for_c = await worker.post(reply("for C", chat_id="C"))
    await until(lambda: len(steps.waits) == 2, WAIT_S, what="both chats to wait", every=0.001)
    assert sorted(steps.waits) == [1.0, 30.0 + SEND_RETRY_AFTER_MARGIN_S]
    await worker.post(reply("for B", chat_id="B"))  # the platform answers again
    await until(lambda: channel.texts("A") == ["<b>for A</b>"], WAIT_S, what="chat A's reply", every=0.001)
    # Marked sent right after the platform took it (a transaction of its own: on PostgreSQL a round trip later).
    await until(lambda: entry(db, for_a).status is OutboxStatus.SENT, WAIT_S, what="chat A's entry marked sent")
    assert channel.texts("C") == [] and entry(db, for_c).status is OutboxStatus.PENDING  # the platform's own word
    await worker.stop()


async def test_policy_refusal_is_recorded_and_never_sent(db: Database) -> None:
    channel = FakeChannel()
    async def not_to_strangers(message: OutboundMessage) -> bool:
        return message.chat_id != "stranger"

    worker, _ = make_worker(db, channel, may_send=not_to_strangers)
    refused = await worker.post(reply("hello stranger", chat_id="stranger"))
    allowed = await worker.post(reply("hello friend", chat_id="friend"))
    await worker.wait_idle()
    assert channel.delivered == [("friend", "<b>hello friend</b>")]
    stored = entry(db, refused)
    assert (stored.status, stored.last_error) == (OutboxStatus.FAILED, "policy")
    assert entry(db, allowed).status is OutboxStatus.SENT


async def test_a_reply_for_a_channel_that_is_down_waits_for_a_process_that_has_it(db: Database) -> None:
    channel = FakeChannel("telegram")
    without = DeliveryWorker(db, {}, send_anything, settings=SETTINGS)
    entry_id = await without.post(reply("later"))
    await without.wait_idle()
    assert entry(db, entry_id).status is OutboxStatus.PENDING
    worker, _ = make_worker(db, channel)
    await worker.start()
    await worker.wait_idle()
    assert channel.texts() == ["<b>later</b>"]


class BrokenTyping:
    name = "broken"

    def __init__(self, *, hang: bool = False) -> None:
        self.calls = 0
        self.hang = hang

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        self.calls += 1
        if self.hang:
            await asyncio.Event().wait()
        raise RuntimeError("platform said no")


async def test_typing_starts_at_once_refreshes_and_stops_on_exit() -> None:
    channel, sleep = FakeChannel(), SteppedSleep()
    async with TypingIndicator(channel, "c1", refresh_s=4.0, sleep=sleep):
        assert channel.typing_calls == 1  # before the caller's work begins
        await sleep.end_one()
        await sleep.end_one()
        assert channel.typing_calls == 3 and sleep.waits == [4.0, 4.0, 4.0]
    await sleep.end_one()
    assert channel.typing_calls == 3  # none after the reply is ready


async def test_typing_failures_never_reach_the_reply() -> None:
    failing, sleep = BrokenTyping(), SteppedSleep()
    async with TypingIndicator(failing, "c1", refresh_s=4.0, sleep=sleep) as indicator:
        await sleep.end_one()
    assert failing.calls == 2 and indicator.failures == 2

    hanging, sleep = BrokenTyping(hang=True), SteppedSleep()
    async with TypingIndicator(hanging, "c1", refresh_s=0.05, sleep=sleep) as indicator:
        # The first request is abandoned after one refresh interval.
        await until(lambda: bool(sleep.waits), 10, what="the indicator to wait out its refresh", every=0.01)
        assert hanging.calls == 1 and indicator.failures == 1 and sleep.waits == [0.05]
    await sleep.end_one()
    assert hanging.calls == 1

    failing = BrokenTyping()
    with pytest.raises(ValueError, match="the reply's own error"):
        async with TypingIndicator(failing, "c1", refresh_s=0.01):
            raise ValueError("the reply's own error")


async def test_restart_retries_at_once_a_reply_that_was_only_backing_off(db: Database) -> None:
    # The last process guessed at a network outage and backed off for 25 s before it went down.
    channel, sleep = await start_over_a_backoff(db, "still here", attempts=3, wait_s=25, error="ConnectError",
                                                settings=SETTINGS)
    assert sleep.waits == []  # no wait: a restart is a new chance
    assert channel.texts() == ["<b>still here</b>"]


async def test_an_outage_during_shutdown_leaves_the_reply_for_the_next_start_not_failed(db: Database) -> None:
    channel = FakeChannel()
    gate = channel.hold("bye")  # the send is under way when the shutdown begins
    channel.fail("bye", *[SendError("502") for _ in range(SETTINGS.max_attempts + 2)])
    worker, sleep = make_worker(db, channel)
    entry_id = await worker.post(reply("bye"))
    await channel.reached["bye"].wait()
    draining = asyncio.create_task(worker.drain())
    await asyncio.sleep(0)
    gate.set()
    await asyncio.wait_for(draining, 5)
    stored = entry(db, entry_id)
    assert stored.status is OutboxStatus.PENDING and sleep.waits == []  # no retries burnt on the way out
    channel.recover("bye")  # the platform is back
    worker2, _ = make_worker(db, channel)
    await worker2.start()
    await worker2.wait_idle()
    assert entry(db, entry_id).status is OutboxStatus.SENT and channel.texts() == ["<b>bye</b>"]


async def test_a_reply_queued_inside_another_transaction_is_sent_once_even_if_the_lane_moved_on(
        db: Database) -> None:
    channel = FakeChannel()
    release = channel.hold("first")
    worker, _sleep = make_worker(db, channel)
    await worker.post(reply("first"))
    await channel.reached["first"].wait()  # the lane is busy with the first reply
    queued = worker.posting(source="m2")
    await db.run(lambda conn: queued(conn, reply("second")))  # e.g. recorded with the reply in history
    release.set()
    await worker.wait_idle()  # the lane sends both and ends before the second's writer schedules it
    assert queued.schedule()
    await worker.wait_idle()
    assert channel.texts() == ["<b>first</b>", "<b>second</b>"]  # never the first twice


async def test_a_reply_queued_inside_another_transaction_is_sent_once_when_the_lanes_end_was_forgotten(
        db: Database) -> None:
    channel = FakeChannel()
    release = channel.hold("first")
    worker, _sleep = make_worker(db, channel, lane_ends_kept=1)
    await worker.post(reply("first"))
    await channel.reached["first"].wait()
    queued = worker.posting(source="m2")
    await db.run(lambda conn: queued(conn, reply("second")))
    release.set()
    await worker.wait_idle()  # the lane sends both and ends
    await worker.post(reply("elsewhere", chat_id="c2"))  # another chat's lane ends: the first lane's end is
    await worker.wait_idle()  # forgotten, as the memory holds one lane
    assert queued.schedule()
    await worker.wait_idle()
    assert channel.texts() == ["<b>first</b>", "<b>second</b>"]  # never the first twice
    assert channel.texts("c2") == ["<b>elsewhere</b>"]



async def test_a_reply_whose_transaction_rolled_back_is_never_sent(db: Database) -> None:
    """The commit that records a reply fails (a full disk): the row is gone, so nothing may go out."""
    channel = FakeChannel()
    worker, _sleep = make_worker(db, channel)
    queued = worker.posting(source="m1")

    def record_then_fail(conn: Connection) -> None:
        queued(conn, reply("never committed"))
        raise OSError("database or disk is full")

    with pytest.raises(OSError):
        await db.run(record_then_fail)
    assert queued.schedule(committed=False)  # something was enqueued, but the lane is read afresh
    await worker.wait_idle()
    assert channel.texts() == []
    queued = worker.posting(source="m1")
    await db.run(lambda conn: queued(conn, reply("committed")))
    assert queued.schedule(committed=False)  # a failure after the commit: what committed still goes out
    await worker.wait_idle()
    assert channel.texts() == ["<b>committed</b>"]


async def test_work_queued_by_another_process_goes_out_at_the_next_sweep(db: Database) -> None:
    channel = FakeChannel()
    worker, _ = make_worker(db, channel)
    await worker.start()
    release = channel.hold("being sent")
    await worker.post(reply("being sent"))
    await channel.reached["being sent"].wait()  # this process's own lane is busy with it
    # bot.py heartbeat, in a process of its own, queues replies while this one runs.
    clock = FakeClock()
    for message in (reply("checking in", chat_id="c2"), reply("after the one being sent"),
                    OutboundMessage(platform="slack", chat_id="C9", text="for a Slack process")):
        db.run_sync(outbox.enqueue, message, source="heartbeat", now=clock())

    assert await worker.sweep() == 1  # c2; c1's own task takes its new entry after the one it holds
    release.set()
    await worker.wait_idle()
    assert channel.texts("c2") == ["<b>checking in</b>"]
    assert channel.texts() == ["<b>being sent</b>", "<b>after the one being sent</b>"]
    assert await worker.sweep() == 0  # what is left waits for a process with a Slack channel
    assert [e.message.platform for e in db.run_sync(outbox.by_status, OutboxStatus.PENDING)] == ["slack"]


async def test_the_sweeper_leaves_shutdown_alone_and_ends_with_the_worker(db: Database) -> None:
    channel = FakeChannel()
    worker, _ = make_worker(db, channel, settings=dataclasses.replace(SETTINGS, outbox_sweep_s=0.02))
    await worker.start()
    clock = FakeClock()
    db.run_sync(outbox.enqueue, reply("queued elsewhere"), source="heartbeat", now=clock())
    # The periodic sweep, not a call from the test, takes it up.
    await until(lambda: bool(channel.texts()), 10, what="the sweep to send the queued reply", every=0.01)
    assert channel.texts() == ["<b>queued elsewhere</b>"]

    await worker.drain()  # shutting down: what is pending now belongs to the next start
    db.run_sync(outbox.enqueue, reply("queued during shutdown", chat_id="c2"), source="heartbeat", now=clock())
    await asyncio.sleep(0.2)
    assert channel.texts("c2") == []
    await worker.stop()
    assert [t for t in asyncio.all_tasks() if t.get_name() == "deliver:sweep"] == []
    assert len(db.run_sync(outbox.by_status, OutboxStatus.PENDING)) == 1


@pytest.mark.backends("sqlite")  # the row is broken behind the store's back, with SQLite's own driver
async def test_a_lane_whose_task_failed_is_not_retried_by_every_sweep(db: Database,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    channel = FakeChannel()
    worker, sleep = make_worker(db, channel)
    await worker.start()
    broken = db.run_sync(outbox.enqueue, reply("a row that does not decode yet"), source=None, now=sleep.clock())
    with sqlite3.connect(db.url.removeprefix("sqlite:///")) as other:
        other.execute("UPDATE outbox SET buttons = 'not json' WHERE id = ?", (broken,))
    db.run_sync(outbox.enqueue, reply("fine", chat_id="c2"), source=None, now=sleep.clock())

    with caplog.at_level(logging.ERROR, logger="kith.delivery"):
        assert await worker.sweep() == 2
        await worker.wait_idle()
        assert await worker.sweep() == 0  # not every interval, with a traceback each time
    assert channel.texts("c2") == ["<b>fine</b>"] and channel.texts() == []
    assert [r.getMessage().split(" error=")[0] for r in caplog.records] == [
        "delivery lane failed platform=telegram chat=c1"]

    with sqlite3.connect(db.url.removeprefix("sqlite:///")) as other:  # whatever broke it is mended
        other.execute("UPDATE outbox SET buttons = '[]' WHERE id = ?", (broken,))
    sleep.clock.advance(seconds=FAILED_LANE_RETRY_S - 1)
    assert await worker.sweep() == 0
    sleep.clock.advance(seconds=1)
    assert await worker.sweep() == 1
    await worker.wait_idle()
    assert channel.texts() == ["<b>a row that does not decode yet</b>"]
