"""Telegram and Slack from one process: one person across both, one platform down while the other answers."""

# ruff: noqa: F811

from __future__ import annotations

import argparse
import dataclasses
import json

from channels.slack.settings import SlackSettings
from channels.telegram.settings import TelegramSettings
from ground.config import DeliverySettings, MemorySettings
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.operator.policy_cli import run_pairing
from llm.client import import_litellm
from people import directory
from policy.store import load
from tests.fakes import discord_api as fake_discord
from tests.fakes import slack_api as fake_slack
from tests.fakes.discord_api import discord_api  # noqa: F401
from tests.fakes.openai_api import Scripted
from tests.fakes.slack_api import FakeSlack, slack_api  # noqa: F401
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401

import_litellm()

TG_USER = 777
SLACK_USER = "U0ANA"
DISCORD_USER = 900_000_000_000_000_001
CAPTURE_PROMPT_START = "The transcript and the stored memories"


def _settings(make_settings, fake_llm, tg: FakeTelegramApi, slack: FakeSlack, capture: bool = False):
    return dataclasses.replace(
        make_settings(fake_llm), telegram=TelegramSettings(base_url=tg.base_url, poll_timeout_s=1),
        slack=SlackSettings(api_url=slack.api_url), delivery=DeliverySettings(debounce_ms=20),
        memory=MemorySettings(embedder="none", capture=capture),
        policy={"telegram": {"dm": "open"}, "slack": {"dm": "pairing"}})


def _env(monkeypatch) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", FAKE_BOT_TOKEN)
    monkeypatch.setenv("SLACK_BOT_TOKEN", fake_slack.FAKE_BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", fake_slack.FAKE_APP_TOKEN)


async def test_a_fact_said_on_telegram_is_recalled_on_slack_after_linking(
        telegram_api, slack_api, fake_llm, make_settings, monkeypatch) -> None:
    _env(monkeypatch)
    slack_api.add_user(SLACK_USER, "ana")
    settings = _settings(make_settings, fake_llm, telegram_api, slack_api, capture=True)
    # A code is redeemed only from an account the policy lets in.
    settings = dataclasses.replace(settings, policy={"telegram": {"dm": "open"}, "slack": {"dm": "open"}})

    def route(request):
        if request["messages"][0]["content"].startswith(CAPTURE_PROMPT_START):
            transcript = json.dumps(request["messages"])
            if "Biscuit" in transcript:
                return Scripted(text=json.dumps({"memories": [
                    {"kind": "fact", "text": "Ana's cat is named Biscuit", "evidence": "my cat Biscuit"}]}))
            return Scripted(text='{"memories": []}')
        return None

    fake_llm.route = route
    app = await build_app(settings, warm_llm=False)
    started = await app.start(platform_channels(settings, app))
    assert sorted(started) == ["slack", "telegram"]
    try:
        # The extractor names her by the display name it is shown; a name that is not hers would not be grounded.
        telegram_api.push_text(TG_USER, TG_USER, "my cat Biscuit knocked over a plant again", first_name="Ana")
        await telegram_api.wait_for_sent(1)
        await app.background.drain()
        telegram_api.push_text(TG_USER, TG_USER, "/link")
        await telegram_api.wait_for_sent(2)
        code = telegram_api.sent[1].visible_text.split("Your link code is ")[1][:8]

        slack_api.push_dm(SLACK_USER, f"/link {code}")
        posts = await slack_api.wait_for_posts(1)
        assert "confirm" in posts[0].text  # linked only once the Telegram account says yes
        question = (await telegram_api.wait_for_sent(3))[2]
        yes = next(row[0]["callback_data"] for row in question.reply_markup["inline_keyboard"]
                   if row[0]["text"] == "Yes")
        telegram_api.push_callback_query(TG_USER, TG_USER, yes)
        posts = await slack_api.wait_for_posts(2)
        assert posts[1].text.startswith("Linked")
        assert app.db.run_sync(directory.person_of, f"slack:{fake_slack.TEAM_ID}:{SLACK_USER}") == \
            app.db.run_sync(directory.person_of, f"telegram:{TG_USER}")

        fake_llm.default = lambda _r: "Biscuit again? Classic."
        slack_api.push_dm(SLACK_USER, "guess who knocked over the plant today, my cat")
        posts = await slack_api.wait_for_posts(3, timeout=15)
        replies = [r for r in fake_llm.requests if not r["messages"][0]["content"].startswith(CAPTURE_PROMPT_START)]
        assert replies[-1]["messages"][-1]["content"] == "guess who knocked over the plant today, my cat"
        system = replies[-1]["messages"][0]["content"]
        # Said on Telegram, recalled on Slack, in her own words (the label is kith's index, never the prompt's).
        assert '"my cat Biscuit knocked over a plant again"' in system and "on telegram" in system
        assert "Ana's cat is named Biscuit" not in system
    finally:
        await app.close()


async def test_one_platform_going_away_does_not_stop_the_other(telegram_api, slack_api, fake_llm, make_settings,
                                                               monkeypatch) -> None:
    _env(monkeypatch)
    slack_api.add_user(SLACK_USER, "ana")
    settings = _settings(make_settings, fake_llm, telegram_api, slack_api)
    settings = dataclasses.replace(settings, policy={"telegram": {"dm": "open"}, "slack": {"dm": "open"}})
    app = await build_app(settings, warm_llm=False)
    await app.start(platform_channels(settings, app))
    try:
        await telegram_api.go_away()
        fake_llm.default = lambda _r: "Slack still works."
        slack_api.push_dm(SLACK_USER, "anyone home?")
        posts = await slack_api.wait_for_posts(1, timeout=15)
        assert posts[0].text == "Slack still works."
        await telegram_api.come_back()
        fake_llm.default = lambda _r: "Telegram is back."
        telegram_api.push_text(TG_USER, TG_USER, "and here?")
        sent = await telegram_api.wait_for_sent(1, timeout=20)
        assert sent[0].visible_text == "Telegram is back."
    finally:
        await app.close()


async def test_discord_dm_through_the_whole_app(discord_api, fake_llm, make_settings, monkeypatch) -> None:
    monkeypatch.setenv("DISCORD_BOT_TOKEN", fake_discord.FAKE_DISCORD_TOKEN)
    discord_api.add_user(DISCORD_USER, "ana", global_name="Ana")
    dm = discord_api.open_dm(DISCORD_USER)
    settings = dataclasses.replace(
        make_settings(fake_llm), delivery=DeliverySettings(debounce_ms=20),
        memory=MemorySettings(embedder="none", capture=False), policy={"discord": {"dm": "pairing"}})
    app = await build_app(settings, warm_llm=False)
    assert await app.start(platform_channels(settings, app)) == ["discord"]
    try:
        discord_api.push_message(dm, DISCORD_USER, "hi there")
        posted = await discord_api.wait_for_posted(1, timeout=15)
        access, _ = app.db.run_sync(load)
        assert access.pending[0].code in posted[0].content  # a stranger gets a pairing code only
        assert fake_llm.requests == []
        access_code = access.pending[0].code
        assert run_pairing(app.db, argparse.Namespace(pairing_action="approve", code=access_code, owner=False)) == 0
        fake_llm.default = lambda _r: "Hello Ana, welcome."
        discord_api.push_message(dm, DISCORD_USER, "approved now?")
        posted = await discord_api.wait_for_posted(2, timeout=15)
        assert posted[1].content == "Hello Ana, welcome." and posted[1].channel_id == dm
    finally:
        await app.close()
