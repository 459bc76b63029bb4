"""kith never repeats a secret back, on any path that posts: a heartbeat check-in (from a running bot, and from
``bot.py heartbeat`` with no bot, whose row waits for the next start) and a conflict question each reach the
outbox through ``delivery.outbox.enqueue``, which redacts the text as it writes it. So while the message waits,
neither its row nor any frame of kith.db's write-ahead log holds the secret in clear. The ``/export`` reply's file
is not redacted there (it is the person's own data): it is built from stores that keep only redacted text, the
message of theirs still waiting in the inbox included.

The app is built with no channel started: every posted row stays pending, as it would while a platform is down.
A secret here is a published test value (a Visa test card), so the repository holds no real one."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator

import pytest

from delivery import outbox
from delivery.posting import Outbound, PostedAtNextStart
from heartbeat.service import build_heartbeat
from heartbeat.settings import HeartbeatSettings
from kith.app.lifecycle import App
from kith.app.wiring import build_app
from memory.core import Status
from tests.fakes.openai_api import FakeOpenAI
from tests.support.at_rest import files_holding
from tests.support.lived import Lived, command, dm, person
from tests.support.memory import record

CARD = "4111 1111 1111 1111"
PIN = "4821"  # Ana's bank PIN, in the message of hers that waits in the inbox (tests.support.lived)


def kith_db_files_holding(app: App, secret: str) -> list[str]:
    """kith.db and its write-ahead log, while the app runs, if any frame of a waiting row left ``secret``."""
    held = files_holding(app.settings.storage.data_path(), secret.lower().encode())
    return [name for name in held if name.startswith("kith.db")]


async def pending(app: App) -> list[outbox.OutboxEntry]:
    return await app.db.run(outbox.by_status, outbox.OutboxStatus.PENDING)


@pytest.fixture
async def app(fake_llm: FakeOpenAI, make_settings) -> AsyncIterator[App]:
    settings = dataclasses.replace(make_settings(fake_llm), heartbeat=HeartbeatSettings(timezone="UTC"))
    built = await build_app(settings, warm_llm=False)
    try:
        yield built
    finally:
        await built.close()


@pytest.mark.parametrize("host", ["bot", "no bot"])
async def test_a_check_in_that_repeats_a_card_waits_in_the_outbox_redacted(app: App, fake_llm: FakeOpenAI,
                                                                         host: str) -> None:
    fake_llm.reply("Good luck with it.")
    hello = dm("I need to renew my gym membership", "801", name="Ana")
    await app.core.handle(hello)
    today = app.clock().date()
    await command(app, dm(f"/goals add renew the gym membership due {today.isoformat()}", "801", name="Ana"))
    outbound: Outbound = app.worker if host == "bot" else PostedAtNextStart(app.clock)
    heartbeat = build_heartbeat(settings=app.settings, db=app.db, llm=app.llm, memory=app.memory, clock=app.clock,
                                outbound=outbound)
    fake_llm.reply(f"Did the gym take your card {CARD} for the renewal?")

    report = await heartbeat.tick(any_hour=True)

    assert report.outcomes == {"posted": 1}
    (check_in,) = [e for e in await pending(app) if "gym" in e.message.text]
    assert CARD not in check_in.message.text and "[redacted]" in check_in.message.text
    assert check_in.message.chat_id == "801"
    assert kith_db_files_holding(app, CARD) == []


async def test_a_conflict_question_over_words_that_hold_a_card_waits_in_the_outbox_redacted(
        app: App, fake_llm: FakeOpenAI) -> None:
    """Words a store kept from before they were redacted (an older kith) are still not repeated back."""
    fake_llm.reply("Noted.")
    hello = dm("hi", "802", name="Ana")
    await app.core.handle(hello)
    ana = await person(app, hello)
    first, second = (record(ana, "Ana pays the gym with her Visa", evidence=[f"I pay the gym with card {CARD}"]),
                     record(ana, "Ana pays the gym in cash", evidence=["I pay the gym in cash"]))
    await app.memory.store.add_memories([dataclasses.replace(first, conflicts_with=(second.id,)),
                                         dataclasses.replace(second, conflicts_with=(first.id,))])
    assert all(m.status is Status.ACTIVE for m in await app.memory.active_memories(ana))

    asked = await app.question_sender.maybe_ask(ana, force=True)

    assert asked is not None and CARD in asked.message.text  # the words as the store held them
    (question,) = [e for e in await pending(app) if "disagree" in e.message.text]
    assert CARD not in question.message.text and "[redacted]" in question.message.text
    assert kith_db_files_holding(app, CARD) == []


async def test_the_export_reply_waits_in_the_outbox_with_no_secret_in_its_text_or_its_file(lived: Lived) -> None:
    app = lived.app
    reply = await command(app, dm("/export", "501", name="Ana"))
    assert reply.attachment_bytes is not None

    await app.worker.post(reply, source="test")

    (waiting,) = [e for e in await pending(app) if e.message.attachment_name]
    assert waiting.message.text == reply.text and waiting.message.attachment_bytes
    # As a number of its own: four digits in a row also turn up inside a timestamp's microseconds or a hex id.
    pin = re.compile(rf"\b{PIN}\b")
    assert not pin.search(waiting.message.text) and not pin.search(waiting.message.attachment_bytes.decode())
    assert b"Lisbon" in waiting.message.attachment_bytes  # it is her file: her words are in it
