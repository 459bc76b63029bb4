"""A Telegram outage longer than the quick retries, through the real channel against the fake Bot API:
every reply still arrives once, in order, when Telegram is back; a refusal ends only its own reply; a reply
waits what Telegram asked and no more."""

# The test receives the imported ``telegram_api`` fixture by argument name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import dataclasses
import itertools
import time

from channels.telegram.channel import TelegramChannel
from channels.telegram.settings import TelegramSettings
from delivery import outbox
from delivery.inbound import Cursors, InboundJournal
from delivery.outbox import OutboxStatus
from delivery.worker import DeliveryWorker
from ground.config import DeliverySettings
from ground.db import Database
from ground.tunables import SEND_LONG_BACKOFF_BASE_S
from ground.types import OutboundMessage, utcnow
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.channels import Inbox, running
from tests.support.clock import FakeClock
from tests.support.delivery import FakeSleep, send_anything

ALICE = 1001
BOB = 1002
SETTINGS = DeliverySettings(max_attempts=3, outbox_sweep_s=10.0)  # the test calls the sweep itself


def reply(chat: int, text: str) -> OutboundMessage:
    return OutboundMessage(platform="telegram", chat_id=str(chat), text=text)


async def test_an_outage_longer_than_the_quick_retries_loses_nothing(telegram_api: FakeTelegramApi,
                                                                      db: Database, journal: InboundJournal) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    api.add_chat(BOB)
    channel = TelegramChannel(TelegramSettings(base_url=api.base_url, poll_timeout_s=1), FAKE_BOT_TOKEN,
                              journal=journal, cursors=Cursors(db), commands=[])
    clock = FakeClock()
    sleep = FakeSleep(clock)
    async with running(channel, Inbox()) as channel:
        await channel.ready.wait()
        worker = DeliveryWorker(db, {"telegram": channel}, send_anything, settings=SETTINGS, sleep=sleep,
                                clock=clock, rng=lambda: 1.0)
        api.fail_next("sendMessage", status=403)  # Bob blocked the bot
        for _ in range(SETTINGS.max_attempts + 1):  # then Telegram is down for a while
            api.fail_next("sendMessage", status=502)
        refused = await worker.post(reply(BOB, "for Bob"))
        await worker.wait_idle()
        first = await worker.post(reply(ALICE, "sent during the outage"))
        second = await worker.post(reply(ALICE, "sent after it"))
        await worker.wait_idle()
        assert api.sent == []
        assert [e.id for e in db.run_sync(outbox.by_status, OutboxStatus.PENDING)] == [first, second]

        for wait in (SEND_LONG_BACKOFF_BASE_S, 2 * SEND_LONG_BACKOFF_BASE_S):  # each retry fails, then Telegram is back
            clock.advance(seconds=wait)
            assert await worker.sweep() == 1
            await worker.wait_idle()
        await worker.stop()

    assert [(m.chat_id, m.visible_text) for m in api.sent] == [(ALICE, "sent during the outage"),
                                                              (ALICE, "sent after it")]
    assert [e.id for e in db.run_sync(outbox.by_status, OutboxStatus.FAILED)] == [refused]  # at once, alone
    assert [e.id for e in db.run_sync(outbox.by_status, OutboxStatus.SENT)] == [first, second]


def _telegram(api: FakeTelegramApi, db: Database, journal: InboundJournal) -> TelegramChannel:
    return TelegramChannel(TelegramSettings(base_url=api.base_url, poll_timeout_s=1), FAKE_BOT_TOKEN,
                           journal=journal, cursors=Cursors(db), commands=[])


def _sends(api: FakeTelegramApi) -> list[tuple[int | None, float]]:
    """Each sendMessage call: (the status a scripted failure answered it with, or None; when it arrived)."""
    return [(c.failed_status, c.at) for c in api.calls if c.method == "sendMessage"]


async def test_a_reply_refused_with_retry_after_past_the_quick_retries_goes_a_second_after_telegram_is_back(
        telegram_api: FakeTelegramApi, db: Database, journal: InboundJournal) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    refusals = SETTINGS.max_attempts + 2
    async with running(_telegram(api, db, journal), Inbox()) as channel:
        await channel.ready.wait()
        worker = DeliveryWorker(db, {"telegram": channel}, send_anything, settings=SETTINGS)
        for _ in range(refusals):
            api.fail_next("sendMessage", status=429, retry_after=1)
        await worker.post(reply(ALICE, "worth the wait"))
        await api.wait_for_sent(1, timeout=refusals + 10)  # a grown backoff would park it for minutes
        await worker.stop()
    sends = _sends(api)
    assert [status for status, _at in sends] == [429] * refusals + [None]
    gaps = [later - earlier for (_s, earlier), (_t, later) in itertools.pairwise(sends)]
    # Every wait, the last one (Telegram back) too, is the second it asked for: never grown.
    assert all(1.0 <= gap < 1.5 for gap in gaps), gaps
    assert api.texts_to(ALICE) == ["worth the wait"]


async def test_telegram_answering_another_chat_sends_at_once_a_reply_parked_on_a_guessed_backoff(
        telegram_api: FakeTelegramApi, db: Database, journal: InboundJournal) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    api.add_chat(BOB)
    quick = dataclasses.replace(SETTINGS, backoff_base_s=0.05)
    async with running(_telegram(api, db, journal), Inbox()) as channel:
        await channel.ready.wait()
        worker = DeliveryWorker(db, {"telegram": channel}, send_anything, settings=quick)
        for _ in range(quick.max_attempts):  # Telegram is down past Alice's quick retries
            api.fail_next("sendMessage", status=502)
        alice = await worker.post(reply(ALICE, "for Alice"))
        await worker.wait_idle()  # her chat is parked on a long backoff
        parked = db.run_sync(outbox.get, alice)
        assert parked is not None and parked.next_attempt_at is not None
        assert (parked.next_attempt_at - utcnow()).total_seconds() > SEND_LONG_BACKOFF_BASE_S / 2 - 5

        await worker.post(reply(BOB, "for Bob"))  # Telegram is back: Bob's reply goes through
        await api.wait_for_sent(2, timeout=10)  # and Alice's right after it, not minutes later
        await worker.stop()
    assert [m.visible_text for m in api.sent] == ["for Bob", "for Alice"]
    bob_at, alice_at = [at for status, at in _sends(api) if status is None]
    assert alice_at - bob_at < 1.0
    assert time.monotonic() - bob_at < 10
