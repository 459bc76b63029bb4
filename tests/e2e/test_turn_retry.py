"""A turn that fails unexpectedly in a running process (the commit of its reply refused, as by a full disk) is
tried again there, and a message that used up its attempts gets an honest reply: end to end against the
loopback fake Bot API and the fake LLM, with the fault made by SQLite itself."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import logging

import pytest

from delivery import inbox
from delivery.inbox import UNHANDLED_REPLY, Inbox
from ground.config import Settings
from ground.tunables import INBOX_REPLAYS_MAX
from kith.app.lifecycle import App
from llm.client import import_litellm
from people import history
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.database import open_db
from tests.support.messages import inbound
from tests.support.telegram_app import start_telegram_app, telegram_settings
from tests.support.waiting import until

import_litellm()  # seconds, once: a first reply must not race the test's timeouts

ANA = 701

# The reply's row is refused the way a full disk refuses the commit that records it: the transaction fails.
FAULT = ("CREATE TRIGGER disk_full BEFORE INSERT ON messages WHEN NEW.role = 'assistant' "
         "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")

# A full disk as SQLite itself reports it (SQLITE_FULL, an OperationalError, not a trigger's ABORT): the database
# may grow by a few pages only, and recording a reply drags in a ballast that needs far more.
FULL_DISK = ("CREATE TABLE ballast (b BLOB)",
             "CREATE TRIGGER disk_full BEFORE INSERT ON messages WHEN NEW.role = 'assistant' "
             "BEGIN INSERT INTO ballast VALUES (randomblob(4000000)); END")
FULL_DISK_SPARE_PAGES = 200  # room for everything else a turn writes

def _settings(make_settings, fake_llm, tg: FakeTelegramApi) -> Settings:
    return telegram_settings(make_settings(fake_llm), tg, policy={"dm": "open"})


async def _start(settings: Settings, monkeypatch) -> App:
    app = await start_telegram_app(settings, monkeypatch)
    assert app.router is not None
    app.router.retry_backoff_s = app.router.retry_backoff_max_s = 0.5
    return app


async def _sql(app: App, statement: str) -> None:
    await app.db.run(lambda conn: conn.exec_driver_sql(statement))


async def _kept(app: App) -> int:
    return await app.db.run(lambda conn: conn.exec_driver_sql("SELECT count(*) FROM inbox").scalar())


async def test_a_turn_whose_reply_could_not_be_committed_is_answered_once_the_fault_clears(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, make_settings, monkeypatch,
        caplog: pytest.LogCaptureFixture) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api), monkeypatch)
    try:
        await _sql(app, FAULT)
        telegram_api.push_text(ANA, ANA, "are you there?")
        await until(lambda: "turn failed" in caplog.text, 15, every=0.02)
        await _sql(app, "DROP TRIGGER disk_full")
        sent = await telegram_api.wait_for_sent(1, timeout=15)
        await asyncio.sleep(1.0)  # time for anything doubled to show up
        assert [m.visible_text for m in telegram_api.sent] == ["echo: are you there?"] and sent[0].chat_id == ANA
        rows = await app.db.run(history.recent, f"telegram:{ANA}", 10)
        # Tried again from the row its first try recorded: the message is in history once.
        assert [(r.role, r.text) for r in rows] == [("user", "are you there?"), ("assistant", "echo: are you there?")]
        assert len(fake_llm.requests) == 2 and await _kept(app) == 0
    finally:
        await app.close()


async def test_a_turn_that_keeps_failing_gets_the_honest_reply_after_its_attempts(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, make_settings, monkeypatch) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api), monkeypatch)
    try:
        await _sql(app, FAULT)
        telegram_api.push_text(ANA, ANA, "are you there?")
        await telegram_api.wait_for_sent(1, timeout=15)
        await asyncio.sleep(1.0)
        assert [m.visible_text for m in telegram_api.sent] == [UNHANDLED_REPLY]
        assert len(fake_llm.requests) == INBOX_REPLAYS_MAX and await _kept(app) == 0
        rows = await app.db.run(history.recent, f"telegram:{ANA}", 10)
        assert [(r.role, r.text) for r in rows] == [("user", "are you there?")]
    finally:
        await app.close()


async def test_the_honest_reply_waits_out_a_fault_that_outlasts_the_attempts(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, make_settings, monkeypatch,
        caplog: pytest.LogCaptureFixture) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api), monkeypatch)
    try:
        # Nothing can be queued at all: neither the reply nor, once the attempts are used, the honest one.
        await _sql(app, "CREATE TRIGGER disk_full BEFORE INSERT ON outbox "
                        "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
        telegram_api.push_text(ANA, ANA, "are you there?")
        await until(lambda: "unhandled reply failed" in caplog.text, 15, every=0.02)
        assert telegram_api.sent == [] and await _kept(app) == 1  # still kept, never dropped
        await _sql(app, "DROP TRIGGER disk_full")
        await telegram_api.wait_for_sent(1, timeout=15)
        await asyncio.sleep(1.0)
        assert [m.visible_text for m in telegram_api.sent] == [UNHANDLED_REPLY]
        assert len(fake_llm.requests) == INBOX_REPLAYS_MAX and await _kept(app) == 0
    finally:
        await app.close()


async def test_a_message_a_previous_process_tried_too_often_gets_the_honest_reply_at_start(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, make_settings, monkeypatch, tmp_path) -> None:
    settings = _settings(make_settings, fake_llm, telegram_api)
    db = open_db(tmp_path / "data")
    try:
        book = Inbox(db)
        poison, waiting = (inbound(text, platform="telegram", chat_id=str(ANA), sender_id=str(ANA), message_id=i)
                           for text, i in (("crashes it", "1"), ("waited behind it", "2")))
        for message in (poison, waiting):
            await db.run(book.decided_within, message, True)
        for _ in range(INBOX_REPLAYS_MAX):
            await db.run(inbox.opened, 99, poison)
    finally:
        db.close()
    telegram_api.add_chat(ANA)
    app = await _start(settings, monkeypatch)
    try:
        await telegram_api.wait_for_sent(2, timeout=15)
        await asyncio.sleep(1.0)
        assert [m.visible_text for m in telegram_api.sent] == [UNHANDLED_REPLY, "echo: waited behind it"]
        assert len(fake_llm.requests) == 1 and await _kept(app) == 0
    finally:
        await app.close()


async def test_a_full_disk_is_one_log_line_with_ids_and_its_reason_never_a_traceback(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, make_settings, monkeypatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    app = await _start(_settings(make_settings, fake_llm, telegram_api), monkeypatch)
    try:
        for statement in FULL_DISK:
            await _sql(app, statement)
        pages = await app.db.run(lambda conn: conn.exec_driver_sql("PRAGMA page_count").scalar())
        await _sql(app, f"PRAGMA max_page_count = {pages + FULL_DISK_SPARE_PAGES}")
        telegram_api.push_text(ANA, ANA, "are you there?")
        await until(lambda: "turn failed" in caplog.text, 15, every=0.02)
        await _sql(app, "DROP TRIGGER disk_full")
        await telegram_api.wait_for_sent(1, timeout=15)
        assert [m.visible_text for m in telegram_api.sent] == ["echo: are you there?"]
        failed = [r.getMessage() for r in caplog.records if "turn failed" in r.getMessage()]
        assert all(f"chat={ANA}" in line and "error=OperationalError (database or disk is full)" in line
                   and "are you there" not in line for line in failed)  # the reason, never the words
        # The operator reads what happened on one line; SQLAlchemy's thirty lines per retry are gone.
        assert "Traceback" not in caplog.text
        assert [r.name for r in caplog.records if r.exc_info] == []
    finally:
        await app.close()
