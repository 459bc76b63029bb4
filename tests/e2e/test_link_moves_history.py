"""A linked account's earlier words follow the person: after ``/link`` the person's ``/export`` holds what each of
their accounts said before the link, ``/forget`` reaches those words and their thread's summary, and a check-in
made before the link is not made again after it. Run end to end on the loopback fakes of Telegram and Discord
(the app from build_app, embedded Chroma and SQLite), and for ``bot.py people link|unlink`` with no bot running."""

# ruff: noqa: F811

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pytest
import sqlalchemy as sa

from channels.telegram.settings import TelegramSettings
from ground.config import DeliverySettings, HeartbeatSettings, MemorySettings
from ground.person_data import export_parts
from heartbeat import due
from kith.app.lifecycle import App
from kith.app.run import platform_channels
from kith.app.wiring import build_app, open_database
from kith.operator.people_cli import run_people
from llm.client import import_litellm
from memory import goals
from people import directory, history
from tests.fakes import discord_api as fake_discord
from tests.fakes.discord_api import FakeDiscord, discord_api  # noqa: F401
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.at_rest import rows_as_text

import_litellm()

TG_ANA = 6301
DC_ANA = 900_000_000_000_000_301
DISCORD_ANA = f"discord:{DC_ANA}"
TELEGRAM_ANA = f"telegram:{TG_ANA}"
QUICK = DeliverySettings(debounce_ms=20, backoff_base_s=0.05, backoff_max_s=0.2, max_attempts=4)


@dataclass
class World:
    """Ana's two accounts on one running kith: Telegram and Discord, each its own person until linked."""

    app: App
    tg: FakeTelegramApi
    dc: FakeDiscord
    dm: int  # the Discord DM channel between kith and Ana
    fake: FakeOpenAI

    def tg_texts(self) -> list[str]:
        return self.tg.texts_to(TG_ANA)

    def dc_texts(self) -> list[str]:
        return [m.content for m in self.dc.posted if m.channel_id == self.dm]

    async def on_telegram(self, text: str) -> str:
        """Ana writes on Telegram; kith's answer to it."""
        before = len(self.tg_texts())
        self.tg.push_text(TG_ANA, TG_ANA, text, first_name="Ana")
        await self.tg.wait_until(lambda: len(self.tg_texts()) > before, timeout=15)
        return self.tg_texts()[before]

    async def on_discord(self, text: str) -> str:
        before = len(self.dc_texts())
        self.dc.push_message(self.dm, DC_ANA, text)
        await self.dc.wait_until(lambda: len(self.dc_texts()) > before, timeout=15)
        return self.dc_texts()[before]

    def person(self, account: str) -> str:
        person = self.app.db.run_sync(directory.person_of, account)
        assert person is not None, account
        return person

    def thread_of(self, account: str) -> str:
        """The conversation key of the DM ``account`` wrote in."""
        m = history.messages
        return str(self.app.db.run_sync(lambda conn: conn.execute(
            sa.select(m.c.conversation).where(m.c.author == account, m.c.role == "user").limit(1)).scalar_one()))

    async def link_discord_to_telegram(self) -> None:
        """``/link`` asked on Telegram, its code sent from Discord, Yes pressed on Telegram."""
        code = (await self.on_telegram("/link")).split("Your link code is ")[1][:8]
        assert "confirm" in await self.on_discord(f"/link {code}")
        await self.tg.wait_until(lambda: any(t.startswith(f"Link {DISCORD_ANA} to you?") for t in self.tg_texts()))
        question = next(m for m in self.tg.sent if m.visible_text.startswith(f"Link {DISCORD_ANA} to you?"))
        yes = next(row[0]["callback_data"] for row in question.reply_markup["inline_keyboard"]
                   if row[0]["text"] == "Yes")
        self.tg.push_callback_query(TG_ANA, TG_ANA, yes)
        await self.tg.wait_until(lambda: f"Linked: {DISCORD_ANA} is you too." in self.tg_texts(), timeout=15)
        assert self.person(DISCORD_ANA) == self.person(TELEGRAM_ANA)

    async def link_telegram_to_discord(self) -> None:
        """The reverse: ``/link`` asked on Discord, its code sent from Telegram, ``/link yes`` typed on Discord."""
        code = (await self.on_discord("/link")).split("Your link code is ")[1][:8]
        assert "confirm" in await self.on_telegram(f"/link {code}")
        await self.dc.wait_until(lambda: any(t.startswith(f"Link {TELEGRAM_ANA} to you?") for t in self.dc_texts()))
        assert await self.on_discord("/link yes") == f"Linked: {TELEGRAM_ANA} is you too."
        assert self.person(DISCORD_ANA) == self.person(TELEGRAM_ANA)


@pytest.fixture
async def world(telegram_api, discord_api, fake_llm, make_settings, monkeypatch) -> AsyncIterator[World]:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", FAKE_BOT_TOKEN)
    monkeypatch.setenv("DISCORD_BOT_TOKEN", fake_discord.FAKE_DISCORD_TOKEN)
    discord_api.add_user(DC_ANA, "ana", global_name="Ana")
    dm = discord_api.open_dm(DC_ANA)
    settings = dataclasses.replace(
        make_settings(fake_llm), telegram=TelegramSettings(base_url=telegram_api.base_url, poll_timeout_s=1),
        delivery=QUICK, memory=MemorySettings(embedder="none", capture=False),
        heartbeat=HeartbeatSettings(timezone="UTC"),
        policy={"telegram": {"dm": "open"}, "discord": {"dm": "open"}})
    app = await build_app(settings, warm_llm=False)
    try:
        assert sorted(await app.start(platform_channels(settings, app))) == ["discord", "telegram"]
        yield World(app, telegram_api, discord_api, dm, fake_llm)
    finally:
        await app.close()


async def test_her_export_holds_what_both_accounts_said_before_the_link(world: World) -> None:
    world.fake.default = lambda _r: "Noted."
    await world.on_discord("Mój rower to stara Romet Wigry, jeżdżę nim nad morze.")
    await world.on_telegram("Ich backe sonntags Roggenbrot für die Nachbarn.")
    discord_thread = world.thread_of(DISCORD_ANA)
    last = world.app.db.run_sync(history.recent, discord_thread, 1)[0].id
    world.app.db.run_sync(history.advance_summary, discord_thread, expected_through=0, new_through=last,
                          text="Ana rides an old Romet Wigry to the sea.", now=datetime.now(UTC))
    discord_person = world.person(DISCORD_ANA)

    await world.link_discord_to_telegram()

    await world.on_telegram("/export")
    await world.tg.wait_until(lambda: bool(world.tg.documents), timeout=15)
    exported = json.loads(world.tg.documents[0].content or b"")
    said = {(m["account"], m["text"]) for m in exported["messages"] if m["from"] == "person"}
    assert (DISCORD_ANA, "Mój rower to stara Romet Wigry, jeżdżę nim nad morze.") in said
    assert (TELEGRAM_ANA, "Ich backe sonntags Roggenbrot für die Nachbarn.") in said
    # kith's answers in her Discord DM are hers to export too, and so is that thread's summary.
    assert any(m["from"] == "kith" and m["platform"] == "discord" for m in exported["messages"])
    assert [s["summary"] for s in exported["summaries"]] == ["Ana rides an old Romet Wigry to the sea."]
    # Nothing of hers is left under the person id the Discord account had.
    left = await export_parts(world.app.db, world.app.person_data, discord_person)
    assert left["messages"] == [] and left["summaries"] == []


async def test_forget_reaches_words_the_linked_account_said_before_the_link(world: World) -> None:
    data = world.app.settings.storage.data_path()
    world.fake.default = lambda _r: "Sounds lovely."
    await world.on_discord("I keep my kayak in a shed by the lighthouse. My brother lives in Gdynia.")
    discord_thread = world.thread_of(DISCORD_ANA)
    last = world.app.db.run_sync(history.recent, discord_thread, 1)[0].id
    world.app.db.run_sync(history.advance_summary, discord_thread, expected_through=0, new_through=last,
                          text="Ana keeps her kayak by the lighthouse; her brother lives in Gdynia.",
                          now=datetime.now(UTC))
    await world.on_telegram("Hallo von Telegram")

    await world.link_discord_to_telegram()

    plan = await world.on_telegram("/forget lighthouse")
    assert plan.startswith("If I forget")
    assert "1 history row" in plan and "1 summary" in plan
    offer = next(m for m in world.tg.sent if m.visible_text == plan)
    yes = next(row[0]["callback_data"] for row in offer.reply_markup["inline_keyboard"]
               if row[0]["text"] == "Yes, forget them")
    world.tg.push_callback_query(TG_ANA, TG_ANA, yes)
    await world.tg.wait_until(lambda: any(t.startswith("Forgotten") for t in world.tg_texts()), timeout=15)

    rows = rows_as_text(data / "kith.db", "messages", "summaries")
    assert "lighthouse" not in rows.lower()
    assert "Gdynia" in rows  # the rest of what she said stays
    assert "[forgotten]" in world.app.db.run_sync(history.get_summary, discord_thread).text


async def test_a_check_in_made_before_the_link_is_not_made_again(world: World) -> None:
    assert world.app.heartbeat is not None
    world.fake.default = lambda _r: "Okay."
    await world.on_telegram("Ugh, paperwork.")
    due = (date.today() - timedelta(days=2)).isoformat()
    assert "renew my passport" in await world.on_telegram(f"/goals add renew my passport due {due}")
    await world.on_discord("hey, it's me on Discord")

    world.fake.default = lambda _r: "Did the passport renewal happen?"
    before = await world.app.heartbeat.tick(any_hour=True)
    assert before.outcomes == {"posted": 1}
    await world.tg.wait_until(lambda: "Did the passport renewal happen?" in world.tg_texts(), timeout=15)

    world.fake.default = lambda _r: "Okay."
    await world.link_telegram_to_discord()  # her goal moves to the Discord account's person

    world.fake.default = lambda _r: "Did the passport renewal happen?"
    after = await world.app.heartbeat.tick(any_hour=True)
    assert after.due_people == 0 and after.llm_calls == 0
    asked = [t for t in world.tg_texts() + world.dc_texts() if "passport renewal" in t]
    assert asked == ["Did the passport renewal happen?"]


def test_the_words_stay_with_the_person_through_people_link_and_unlink(make_settings) -> None:
    """``bot.py people link`` moves the account's earlier words to the person; ``unlink`` moves nothing back."""
    settings = make_settings()
    db = open_database(settings)
    try:
        now = datetime.now(UTC)
        for account, chat, text in (("slack:T1:U1", "D1", "Tengo un huerto en la azotea."),
                                    ("telegram:42", "42", "hi")):
            person = db.run_sync(directory.resolve, account, "Ana", now)
            platform = account.partition(":")[0]
            db.run_sync(lambda conn, a=account, c=chat, t=text, p=person, pl=platform: history.append(
                conn, conversation=f"{pl}:{c}", role="user", author=a, platform=pl, chat_id=c, text=t,
                created_at=now, person=p))
    finally:
        db.close()
    assert run_people(settings, argparse.Namespace(people_action="link", account="slack:T1:U1",
                                                   to="telegram:42")) == 0

    def spoken(account: str) -> list[str]:
        async def read() -> list[str]:
            app = await build_app(settings, warm_llm=False)
            try:
                person = await app.db.run(directory.person_of, account)
                assert person is not None
                parts = await export_parts(app.db, app.person_data, person)
                return [m["text"] for m in parts["messages"] if m["from"] == "person"]
            finally:
                await app.close()

        return asyncio.run(read())

    assert spoken("telegram:42") == ["Tengo un huerto en la azotea.", "hi"]
    assert run_people(settings, argparse.Namespace(people_action="unlink", account="slack:T1:U1")) == 0
    # What the account said while it was hers stays hers; it starts afresh as a person of its own.
    assert spoken("telegram:42") == ["Tengo un huerto en la azotea.", "hi"]
    assert spoken("slack:T1:U1") == []


def test_a_link_keeps_one_mark_the_later_of_an_item_both_people_had_checked_in_about(make_settings) -> None:
    """Two people who both had a check-in about the same goal (it was the other's before an earlier link) are
    joined: the link does not fail, and the goal's later check-in is the one that counts."""
    settings = make_settings()
    db = open_database(settings)
    earlier, later = datetime(2026, 11, 1, 9, tzinfo=UTC), datetime(2026, 11, 3, 9, tzinfo=UTC)
    try:
        ana = db.run_sync(directory.resolve, "telegram:42", "Ana", earlier)
        old = db.run_sync(directory.resolve, "slack:T1:U1", "ana.s", earlier)
        goal = db.run_sync(goals.add, ana, "Renew the passport", earlier.date(), earlier)
        assert goal is not None
        db.run_sync(due.mark_handled, ana, [f"goal:{goal.id}"], earlier)
        db.run_sync(due.mark_handled, old, [f"goal:{goal.id}", "conflict:m_1:m_2"], later)
    finally:
        db.close()
    assert run_people(settings, argparse.Namespace(people_action="link", account="slack:T1:U1",
                                                   to="telegram:42")) == 0
    db = open_database(settings)
    try:
        marks = db.run_sync(due.check_ins_of, ana)
        assert sorted((m["item"], m["handled_at"]) for m in marks) == [
            ("conflict:m_1:m_2", later.isoformat()), (f"goal:{goal.id}", later.isoformat())]
        assert db.run_sync(due.check_ins_of, old) == []
        handled = db.run_sync(due.handled_of, [ana])
        item = due.DueItem(ana, due.ItemKind.GOAL, f"goal:{goal.id}", "Renew the passport")
        # Asked two days ago by the later mark: not yet again (the earlier one alone would say it is time).
        assert due.select_due([item], handled, later + timedelta(days=2), questions_left=1) == {}
        assert due.select_due([item], {(ana, item.key): earlier}, later + timedelta(days=2), questions_left=1)
    finally:
        db.close()
