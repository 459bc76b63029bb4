"""Text no database can store as it came: lone surrogates (half a UTF-16 pair, valid JSON from the Bot API)
are answered with U+FFFD in their place, never dropped: chat text, commands and button presses, end to end
against the loopback fake Bot API and the fake LLM."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import dataclasses

from channels.discord.translate import place_of, translate_interaction
from channels.discord.translate import translate_message as translate_discord
from channels.slack.translate import translate_block_action, translate_event
from ground.config import Settings
from ground.types import ButtonPress, ChatKind, InboundMessage, well_formed
from kith.app.lifecycle import App
from llm.client import import_litellm
from people import history
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.discord_payloads import ALICE, DM, Payloads
from tests.support.slack_payloads import ME, RECEIVED, block_action, dm_event
from tests.support.telegram_app import start_telegram_app, telegram_settings

import_litellm()  # seconds, once: a first reply must not race the test's timeouts

ANA = 601


def _settings(make_settings, fake_llm, tg: FakeTelegramApi) -> Settings:
    return telegram_settings(make_settings(fake_llm), tg, policy={"dm": "open"})


async def _start(settings: Settings, monkeypatch) -> App:
    return await start_telegram_app(settings, monkeypatch)


def test_lone_surrogates_become_replacement_characters_and_nothing_else_changes() -> None:
    assert well_formed("hi \ud800 there \udfff") == "hi \ufffd there \ufffd"
    assert well_formed("caf\u00e9 \U0001f600") == "caf\u00e9 \U0001f600"
    message = InboundMessage(platform="telegram", bot_account="kith", chat_id="1", chat_kind=ChatKind.DM,
                             sender_id="1", sender_name="An\ud83da", text="x\ud800", message_id="7")
    assert (message.text, message.sender_name) == ("x\ufffd", "An\ufffda")
    assert dataclasses.replace(message, text="y\udc80").text == "y\ufffd"
    assert ButtonPress(platform="telegram", chat_id="1", sender_id="1", data="q:\ud800").data == "q:\ufffd"


def test_discord_and_slack_messages_and_presses_with_lone_surrogates_come_out_well_formed() -> None:
    p = Payloads()
    message = p.message(DM, ALICE, "hi \ud800 there")
    place = place_of(message.channel, None)
    assert place is not None
    translated = translate_discord(message, p.me, place)
    assert isinstance(translated, InboundMessage) and translated.text == "hi \ufffd there"
    press = translate_interaction(p.click(p.message(DM, p.fake.bot_id, "Sure?"), ALICE, "f:\udfff:no"), p.me, place)
    assert isinstance(press, ButtonPress) and press.data == "f:\ufffd:no"
    slack = translate_event(dm_event(text="hi \ud800 there"), ME, received_at=RECEIVED)
    assert isinstance(slack, InboundMessage) and slack.text == "hi \ufffd there"
    action = {"action_id": "f:\ud800:no", "block_id": "b1", "value": "f:\ud800:no", "type": "button",
              "action_ts": "1548426417.840180"}
    click = translate_block_action(block_action(actions=[action]))
    assert isinstance(click, ButtonPress) and click.data == "f:\ufffd:no"


async def test_a_message_with_a_lone_surrogate_is_answered_and_kept_with_the_bad_code_point_replaced(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api), monkeypatch)
    try:
        fake_llm.reply("Hello there!")
        telegram_api.push_text(ANA, ANA, "hi \ud800 there", first_name="An\udfffa")
        sent = await telegram_api.wait_for_sent(1, timeout=15)
        assert sent[0].chat_id == ANA and sent[0].visible_text == "Hello there!"
        asked = fake_llm.requests[0]["messages"][-1]["content"]
        assert asked == "hi \ufffd there"
        rows = await app.db.run(history.recent, f"telegram:{ANA}", 10)
        assert [(r.role, r.text) for r in rows] == [("user", "hi \ufffd there"), ("assistant", "Hello there!")]
        assert await app.db.run(lambda conn: conn.exec_driver_sql("SELECT count(*) FROM inbox").scalar()) == 0
    finally:
        await app.close()


async def test_a_command_and_a_button_press_with_lone_surrogates_are_answered(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch) -> None:
    app = await _start(_settings(make_settings, fake_llm, telegram_api), monkeypatch)
    try:
        telegram_api.push_text(ANA, ANA, "/goals add read Moby \ud800 Dick")
        sent = await telegram_api.wait_for_sent(1, timeout=15)
        assert sent[0].visible_text.startswith("Added goal #1: read Moby \ufffd Dick")
        # A confirmation button for a forget plan that no longer exists: answered with the refusal.
        telegram_api.push_callback_query(ANA, ANA, "f:\ud800:no")
        sent = await telegram_api.wait_for_sent(2, timeout=15)
        assert sent[1].chat_id == ANA and sent[1].visible_text
        await asyncio.sleep(0.3)
        assert len(telegram_api.sent) == 2 and fake_llm.requests == []
    finally:
        await app.close()
