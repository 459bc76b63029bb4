"""A message with nothing kith can read (a voice message, a photo alone, a file) gets one honest line where a text
would have been answered, through the same policy, dedupe and inbox as text; never silence, never the model."""

# ruff: noqa: F811

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from telegram import Update

from channels.slack.settings import SlackSettings
from channels.telegram.translate import BotIdentity, Skipped, translate_update
from delivery import inbox
from ground.config import DeliverySettings, MediaSettings, MemorySettings
from ground.db import Database
from ground.types import ChatKind, InboundMessage
from ground.wording import unreadable_reply
from kith.app.lifecycle import App
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.operator.policy_cli import run_pairing
from llm.client import import_litellm
from people.history import messages
from policy.ratelimit import RATE_LIMIT_NOTICE
from policy.store import load
from tests.fakes import discord_api as fake_discord
from tests.fakes import slack_api as fake_slack
from tests.fakes.discord_api import attachment_payload, discord_api, sticker_item_payload  # noqa: F401
from tests.fakes.slack_api import FakeSlack, slack_api  # noqa: F401
from tests.fakes.telegram_api import FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.telegram_app import start_telegram_app, telegram_settings

import_litellm()  # seconds, once: a first reply must not race the test's timeouts

ANA = 501
BEN = 502
GROUP = -100_777
QUIET_S = 0.5  # time for a second answer, were there one, to show up


def _settings(make_settings, fake_llm, tg: FakeTelegramApi, **policy: Any):
    # Documents off: these are the honest lines for what kith does not read (tests/e2e/test_documents.py keeps them).
    return telegram_settings(make_settings(fake_llm), tg, policy={"allow_groups": [str(GROUP)], **policy},
                             memory=MemorySettings(embedder="none", capture=False),
                             media=MediaSettings(documents=False))


async def _quiet() -> None:
    await asyncio.sleep(QUIET_S)


# --- Telegram, through the whole app ------------------------------------------------------------------
async def test_a_voice_message_in_a_dm_gets_the_honest_line_once(telegram_api, fake_llm, make_settings,
                                                               monkeypatch) -> None:
    app = await start_telegram_app(_settings(make_settings, fake_llm, telegram_api, dm="open"), monkeypatch)
    try:
        telegram_api.push_media(ANA, ANA, "voice")
        (sent,) = await telegram_api.wait_for_sent(1)
        await _quiet()
        assert [m.visible_text for m in telegram_api.sent] == [unreadable_reply("voice message")]
        assert sent.chat_id == ANA and sent.reply_to_message_id is None  # a DM answer quotes nothing
        assert fake_llm.requests == []  # never the model
        assert app.db.run_sync(_kept) == []  # answered: nothing left for a restart to answer again
        assert app.db.run_sync(_history_of, f"telegram:{ANA}") == 0  # nothing recorded, so nothing to capture
    finally:
        await app.close()


async def test_unreadable_answers_keep_the_order_of_the_messages(telegram_api, fake_llm, make_settings,
                                                                monkeypatch) -> None:
    app = await start_telegram_app(_settings(make_settings, fake_llm, telegram_api, dm="open"), monkeypatch)
    try:
        fake_llm.reply("Hi Ana!", delay_s=0.3)
        telegram_api.push_text(ANA, ANA, "hi, listen to this")
        telegram_api.push_media(ANA, ANA, "video_note")
        telegram_api.push_media(ANA, ANA, "document")
        await telegram_api.wait_for_sent(3)
        await _quiet()
        assert [m.visible_text for m in telegram_api.sent] == [
            "Hi Ana!", unreadable_reply("video message"), unreadable_reply("file")]
        assert [r["messages"][-1]["content"] for r in fake_llm.requests] == ["hi, listen to this"]
    finally:
        await app.close()


async def test_media_in_a_group_is_answered_only_when_addressed_to_kith(telegram_api, fake_llm, make_settings,
                                                                       monkeypatch) -> None:
    # require_mention off: the policy lets every text here through, so only "addressed or not" keeps kith quiet.
    settings = _settings(make_settings, fake_llm, telegram_api, require_mention=False)
    app = await start_telegram_app(settings, monkeypatch)
    try:
        telegram_api.push_media(GROUP, BEN, "photo", "supergroup", chat_title="flat")
        telegram_api.push_sticker(GROUP, BEN, "😂", "supergroup", chat_title="flat")
        fake_llm.reply("Morning, Ben.")
        telegram_api.push_text(GROUP, BEN, "morning all", "supergroup", chat_title="flat")
        (greeting,) = await telegram_api.wait_for_sent(1)
        await _quiet()
        assert [m.visible_text for m in telegram_api.sent] == ["Morning, Ben."]
        (request,) = fake_llm.requests  # the text alone reached the model: no photo, no sticker
        assert request["messages"][-1]["content"].endswith("morning all")

        photo = telegram_api.push_media(GROUP, BEN, "photo", "supergroup", reply_to_message_id=greeting.message_id)
        sent = await telegram_api.wait_for_sent(2)
        await _quiet()
        assert len(telegram_api.sent) == 2 and sent[1].visible_text == unreadable_reply("photo")
        assert sent[1].reply_to_message_id == photo["message"]["message_id"]  # in a group it quotes what it answers
        assert len(fake_llm.requests) == 1
    finally:
        await app.close()


async def test_an_unpaired_strangers_voice_message_gets_the_pairing_answer(telegram_api, fake_llm, make_settings,
                                                                          monkeypatch) -> None:
    app = await start_telegram_app(_settings(make_settings, fake_llm, telegram_api), monkeypatch)  # dm="pairing"
    try:
        telegram_api.push_media(ANA, ANA, "voice")
        (sent,) = await telegram_api.wait_for_sent(1)
        access, _ = app.db.run_sync(load)
        (pending,) = access.pending
        assert pending.code in sent.visible_text  # what a text from a stranger gets, and nothing else
        telegram_api.push_media(ANA, ANA, "photo")  # within the reminder interval: as for text, nothing
        await _quiet()
        assert len(telegram_api.sent) == 1 and fake_llm.requests == []
        assert app.db.run_sync(_kept) == []

        args = argparse.Namespace(pairing_action="approve", code=pending.code, owner=False)
        assert await asyncio.to_thread(run_pairing, app.db, args) == 0
        telegram_api.push_media(ANA, ANA, "location")
        sent = await telegram_api.wait_for_sent(2)
        assert sent[1].visible_text == unreadable_reply("location")
    finally:
        await app.close()


async def test_the_rate_limit_counts_unreadable_messages_as_it_counts_text(telegram_api, fake_llm, make_settings,
                                                                            monkeypatch) -> None:
    settings = _settings(make_settings, fake_llm, telegram_api, dm="open", rate_limit_burst=1,
                         rate_limit_per_minute=1.0)
    app = await start_telegram_app(settings, monkeypatch)
    try:
        for kind in ("voice", "photo", "voice"):
            telegram_api.push_media(ANA, ANA, kind)
        await telegram_api.wait_for_sent(2)
        await telegram_api.wait_until(lambda: not telegram_api.pending_updates)
        await _quiet()
        # The first is answered, the second gets the notice (posted at once, so maybe first), the third nothing.
        assert sorted(m.visible_text for m in telegram_api.sent) == sorted(
            [unreadable_reply("voice message"), RATE_LIMIT_NOTICE])
        assert app.db.run_sync(_kept) == []
    finally:
        await app.close()


async def test_a_redelivered_voice_message_is_answered_once(telegram_api, fake_llm, make_settings,
                                                            monkeypatch) -> None:
    app = await start_telegram_app(_settings(make_settings, fake_llm, telegram_api, dm="open"), monkeypatch)
    try:
        update = telegram_api.push_media(ANA, ANA, "voice")
        telegram_api.push_update(update)  # the same update_id again
        await telegram_api.wait_for_sent(1)
        await telegram_api.wait_until(lambda: not telegram_api.pending_updates)
        await _quiet()
        assert len(telegram_api.sent) == 1
    finally:
        await app.close()


async def test_an_album_is_one_message_and_gets_one_line(telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    app = await start_telegram_app(_settings(make_settings, fake_llm, telegram_api, dm="open"), monkeypatch)
    try:
        for _ in range(4):
            telegram_api.push_media(ANA, ANA, "photo", media_group_id="13579")
        await telegram_api.wait_for_sent(1)
        await telegram_api.wait_until(lambda: not telegram_api.pending_updates)
        await _quiet()
        assert [m.visible_text for m in telegram_api.sent] == [unreadable_reply("album")]
    finally:
        await app.close()


async def test_a_sticker_is_read_as_its_emoji(telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    app = await start_telegram_app(_settings(make_settings, fake_llm, telegram_api, dm="open"), monkeypatch)
    try:
        fake_llm.reply("Glad it made you laugh!")
        telegram_api.push_sticker(ANA, ANA, "😂")
        telegram_api.push_media(ANA, ANA, "sticker")  # a custom emoji sticker says nothing kith can read
        await telegram_api.wait_for_sent(2)
        await _quiet()
        assert [m.visible_text for m in telegram_api.sent] == ["Glad it made you laugh!", unreadable_reply("sticker")]
        assert [r["messages"][-1]["content"] for r in fake_llm.requests] == ["😂"]
    finally:
        await app.close()


async def test_an_unreadable_message_kept_before_a_crash_is_answered_at_the_next_start(
        telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    settings = _settings(make_settings, fake_llm, telegram_api, dm="open")
    app = await start_telegram_app(settings, monkeypatch)
    await app.close()
    # As a process killed right after the policy let the message through leaves it: kept, decided, unanswered.
    telegram_api.add_chat(ANA, "private")
    kept = InboundMessage(platform="telegram", bot_account=str(telegram_api.bot_user["id"]), chat_id=str(ANA),
                          chat_kind=ChatKind.DM, sender_id=str(ANA), sender_name="Ana", text="",
                          message_id=f"{ANA}:41", mentioned=True, unreadable="voice message")
    other = Database(settings.storage.resolved_database_url())
    try:
        other.run_sync(inbox.keep, kept, datetime.now(UTC))
    finally:
        other.close()
    app = await start_telegram_app(settings, monkeypatch)
    try:
        (sent,) = await telegram_api.wait_for_sent(1)
        await _quiet()
        assert sent.visible_text == unreadable_reply("voice message") and sent.chat_id == ANA
        assert len(telegram_api.sent) == 1 and fake_llm.requests == []
        assert app.db.run_sync(_kept) == []
    finally:
        await app.close()


# --- Discord and Slack, through the whole app ---------------------------------------------------------
DISCORD_ANA = 900_000_000_000_000_001
SLACK_ANA = "U0ANA"


async def _start_app(settings, monkeypatch, env: dict[str, str], platform: str) -> App:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    app = await build_app(settings, warm_llm=False)
    assert await app.start(platform_channels(settings, app)) == [platform]
    return app


def _app_settings(make_settings, fake_llm, **replaced: Any):
    return dataclasses.replace(make_settings(fake_llm), delivery=DeliverySettings(debounce_ms=20),
                               memory=MemorySettings(embedder="none", capture=False),
                               media=MediaSettings(documents=False), **replaced)


async def test_a_discord_dm_with_only_an_attachment_gets_the_line(discord_api, fake_llm, make_settings,
                                                                  monkeypatch) -> None:
    discord_api.add_user(DISCORD_ANA, "ana", global_name="Ana")
    dm = discord_api.open_dm(DISCORD_ANA)
    settings = _app_settings(make_settings, fake_llm, policy={"discord": {"dm": "open"}})
    app = await _start_app(settings, monkeypatch, {"DISCORD_BOT_TOKEN": fake_discord.FAKE_DISCORD_TOKEN}, "discord")
    try:
        discord_api.push_message(dm, DISCORD_ANA, "", attachments=[
            attachment_payload(discord_api.snowflake(), "IMG_2041.jpg", "image/jpeg", channel_id=dm)])
        discord_api.push_message(dm, DISCORD_ANA, "", sticker_items=[sticker_item_payload(749054660769218631,
                                                                                          "Wave")])
        discord_api.push_message(dm, DISCORD_ANA, "", flags=1 << 13, attachments=[  # Discord's voice message
            attachment_payload(discord_api.snowflake(), "voice-message.ogg", "audio/ogg", channel_id=dm)])
        posted = await discord_api.wait_for_posted(3, timeout=15)
        await _quiet()
        assert [p.content for p in discord_api.posted] == [
            unreadable_reply("image"), unreadable_reply("sticker"), unreadable_reply("voice message")]
        assert {p.channel_id for p in posted} == {dm} and fake_llm.requests == []
    finally:
        await app.close()


async def test_a_slack_dm_file_share_with_no_text_gets_the_line(slack_api: FakeSlack, fake_llm, make_settings,
                                                                monkeypatch) -> None:
    slack_api.add_user(SLACK_ANA, "ana")
    settings = _app_settings(make_settings, fake_llm, policy={"slack": {"dm": "open"}},
                             slack=SlackSettings(api_url=slack_api.api_url))
    app = await _start_app(settings, monkeypatch, {"SLACK_BOT_TOKEN": fake_slack.FAKE_BOT_TOKEN,
                                                   "SLACK_APP_TOKEN": fake_slack.FAKE_APP_TOKEN}, "slack")
    try:
        shared = slack_api.push(slack_api.dm_event(SLACK_ANA, "", files=[
            slack_api.file_payload(SLACK_ANA, "budget.xlsx", "application/vnd.ms-excel")]))
        slack_api.push(slack_api.dm_event(SLACK_ANA, "", files=[
            slack_api.file_payload(SLACK_ANA, "audio_message.webm", "audio/webm", subtype="slack_audio")]))
        posts = await slack_api.wait_for_posts(2, timeout=15)
        slack_api.redeliver(shared)  # Slack retrying the first event: still answered once
        await slack_api.wait_until(lambda: len(slack_api.acked()) == 3)
        await _quiet()
        assert [p.text for p in slack_api.posted] == [unreadable_reply("file"), unreadable_reply("voice message")]
        assert {p.channel for p in posts} == {slack_api.dm_channel(SLACK_ANA)} and fake_llm.requests == []
    finally:
        await app.close()


# --- what each platform's message is taken for --------------------------------------------------------
ME = BotIdentity(id=7_000_000_001, username="kith_test_bot")
DATE = 1_790_000_000
PERSON = {"id": 1001, "is_bot": False, "first_name": "Alice"}
DM = {"id": 1001, "type": "private", "first_name": "Alice"}
GROUP_CHAT = {"id": -100555, "type": "supergroup", "title": "Family"}
FILE = {"file_id": "f", "file_unique_id": "u"}


def _telegram(chat: dict[str, Any], **content: Any):
    raw = {"update_id": 1, "message": {"message_id": 5, "date": DATE, "chat": chat, "from": PERSON, **content}}
    return translate_update(Update.de_json(raw, None), ME, received_at=datetime.now(UTC))


@pytest.mark.parametrize(("content", "what"), [
    ({"voice": {**FILE, "duration": 3}}, "voice message"),
    ({"video_note": {**FILE, "length": 240, "duration": 3}}, "video message"),
    ({"audio": {**FILE, "duration": 180}}, "audio file"),
    ({"animation": {**FILE, "width": 1, "height": 1, "duration": 1}, "document": FILE}, "GIF"),
    ({"photo": [{**FILE, "width": 1, "height": 1}], "caption": "  "}, "photo"),
    ({"video": {**FILE, "width": 1, "height": 1, "duration": 1}}, "video"),
    ({"document": FILE}, "file"),
    ({"venue": {"location": {"latitude": 1.0, "longitude": 2.0}, "title": "Café", "address": "Main St 1"},
      "location": {"latitude": 1.0, "longitude": 2.0}}, "location"),
    ({"contact": {"phone_number": "+1", "first_name": "Lena"}}, "contact"),
])
def test_telegram_names_what_it_cannot_read(content: dict[str, Any], what: str) -> None:
    message = _telegram(DM, **content)
    assert isinstance(message, InboundMessage)
    assert (message.text, message.unreadable, message.mentioned) == ("", what, True)


@pytest.mark.parametrize("content", [
    {"new_chat_title": "Family (new)"},  # a service message is no one's words
    {"successful_payment": {"currency": "EUR", "total_amount": 100, "invoice_payload": "p",
                            "telegram_payment_charge_id": "t", "provider_payment_charge_id": "p"}},
    {},
])
def test_telegram_leaves_what_is_no_ones_message_unanswered(content: dict[str, Any]) -> None:
    assert isinstance(_telegram(DM, **content), Skipped)


def _kept(conn) -> list[str]:
    return [r.message_id for r in conn.execute(inbox.inbox.select()).all()]


def _history_of(conn, author: str) -> int:
    return conn.execute(sa.select(sa.func.count()).select_from(messages).where(messages.c.author == author)
                        ).scalar_one()
