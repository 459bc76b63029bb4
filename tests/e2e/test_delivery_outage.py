"""A Telegram outage longer than the quick retries, through the real channel against the fake Bot API:
every reply still arrives once, in order, when Telegram is back; a refusal ends only its own reply."""

# The test receives the imported ``telegram_api`` fixture by argument name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

from channels.telegram.channel import TelegramChannel
from channels.telegram.settings import TelegramSettings
from delivery import outbox
from delivery.inbound import Cursors, InboundJournal
from delivery.outbox import OutboxStatus
from delivery.worker import DeliveryWorker
from ground.config import DeliverySettings
from ground.db import Database
from ground.tunables import SEND_LONG_BACKOFF_BASE_S
from ground.types import OutboundMessage
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
