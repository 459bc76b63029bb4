"""One person across platforms: /link codes, policy and memory following the person, the people command."""

# ruff: noqa: F811

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import json

from channels.terminal import TerminalChannel
from core import people
from core.app import build_app
from core.commands import platform_channels
from core.config import DeliverySettings, MemorySettings, TelegramSettings
from core.people_cli import run_people
from persona.llm import import_litellm
from tests.fakes.openai_api import Scripted
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, telegram_api  # noqa: F401
from tests.helpers import inbound

import_litellm()

TG_USER = 4242


async def test_link_code_joins_a_telegram_account_to_the_console_person(telegram_api, fake_llm, make_settings,
                                                                         monkeypatch) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", FAKE_BOT_TOKEN)
    settings = dataclasses.replace(
        make_settings(fake_llm), telegram=TelegramSettings(base_url=telegram_api.base_url, poll_timeout_s=1),
        delivery=DeliverySettings(debounce_ms=20), memory=MemorySettings(embedder="none", capture=True))

    def route(request):  # capture keeps the dog fact the person stated, quoting their own words
        if request["messages"][0]["content"].startswith("The transcript and the stored memories"):
            return Scripted(text=json.dumps({"memories": [
                {"kind": "fact", "text": "Ana's dog is Luna", "evidence": "my dog is Luna"}]}))
        return None

    fake_llm.route = route
    app = await build_app(settings, warm_llm=False)
    out = io.StringIO()
    terminal = TerminalChannel(stdin=io.StringIO(""), stdout=out, user="ana", interactive=False)
    await app.start_channels([terminal, *platform_channels(settings, app)])
    try:
        assert app.router is not None
        await app.router.on_message(inbound("my dog is Luna, she is a beagle"))
        await app.background.drain()
        await app.router.on_message(inbound("/link"))
        code = out.getvalue().split("Your link code is ")[1][:8]

        telegram_api.push_text(TG_USER, TG_USER, "hello?")  # not paired: a pairing code, nothing more
        await telegram_api.wait_for_sent(1)
        assert "pairing code" in telegram_api.sent[0].visible_text

        telegram_api.push_text(TG_USER, TG_USER, f"/link {code.lower()}")
        await telegram_api.wait_for_sent(2)
        assert telegram_api.sent[1].visible_text.startswith("Linked")

        fake_llm.default = lambda _r: "Of course, how is Luna?"
        telegram_api.push_text(TG_USER, TG_USER, "it's me from telegram")
        await telegram_api.wait_for_sent(3, timeout=15)
        assert telegram_api.sent[2].visible_text == "Of course, how is Luna?"  # policy follows the person

        console_person = app.db.run_sync(people.person_of, "console:ana")
        assert app.db.run_sync(people.person_of, f"telegram:{TG_USER}") == console_person
        assert app.memory is not None
        notes = await app.memory.list_notes(console_person)
        assert [n.record.text for n in notes] == ["Ana's dog is Luna"]

        # a used code cannot link a second account
        reply = await app.linker.redeem_message(inbound(f"/link {code}", platform="telegram", chat_id="77",
                                                        sender_id="77"))
        assert reply is not None and "unknown or has expired" in reply.text
    finally:
        await app.close()


def test_people_command_links_lists_and_unlinks(make_settings, capsys) -> None:
    from core.app import open_database

    settings = make_settings()
    db = open_database(settings)
    try:
        from datetime import UTC, datetime

        ana = db.run_sync(people.resolve, "console:ana", "Ana", datetime.now(UTC))
        db.run_sync(people.resolve, "slack:T1:U1", "ana.s", datetime.now(UTC))
    finally:
        db.close()
    assert run_people(settings, argparse.Namespace(people_action="link", account="slack:T1:U1",
                                                   to="console:ana")) == 0
    assert capsys.readouterr().out.startswith(f"linked slack:T1:U1 to {ana}")
    assert run_people(settings, argparse.Namespace(people_action="list")) == 0
    listing = capsys.readouterr().out
    assert listing.splitlines()[0] == "people: 1" and "console:ana" in listing and "slack:T1:U1" in listing
    assert run_people(settings, argparse.Namespace(people_action="unlink", account="slack:T1:U1")) == 0
    capsys.readouterr()
    assert run_people(settings, argparse.Namespace(people_action="list")) == 0
    assert capsys.readouterr().out.splitlines()[0] == "people: 2"
    assert run_people(settings, argparse.Namespace(people_action="link", account="x:1", to="nobody:1")) == 1


def test_people_link_moves_goals_and_pauses_too(make_settings, capsys) -> None:
    from datetime import UTC, datetime

    from core.app import open_database
    from heartbeat import goals
    from memory.controls import PauseBook

    settings = make_settings()
    db = open_database(settings)
    try:
        now = datetime.now(UTC)
        ana = db.run_sync(people.resolve, "console:ana", "Ana", now)
        old = db.run_sync(people.resolve, "slack:T1:U1", "ana.s", now)
        db.run_sync(goals.add, old, "Learn Rust", None, now)

        async def pause() -> None:
            await PauseBook(db).set(old, True, now)

        asyncio.run(pause())
    finally:
        db.close()
    assert run_people(settings, argparse.Namespace(people_action="link", account="slack:T1:U1",
                                                   to="console:ana")) == 0
    db = open_database(settings)
    try:
        assert [g.text for g in db.run_sync(goals.of_person, ana)] == ["Learn Rust"]
        assert db.run_sync(goals.of_person, old) == []

        async def paused() -> bool:
            book = PauseBook(db)
            await book.load()
            return book.is_paused(ana)

        assert asyncio.run(paused())
    finally:
        db.close()
