"""One person across platforms: /link codes, policy and memory following the person, the people command."""

# ruff: noqa: F811

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import json
import logging

from channels.telegram.settings import TelegramSettings
from channels.terminal import TerminalChannel
from ground.config import DeliverySettings, MemorySettings
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.operator.people_cli import run_people
from llm.client import import_litellm
from people import directory
from tests.fakes.openai_api import Scripted
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, telegram_api  # noqa: F401
from tests.support.messages import inbound

import_litellm()

TG_USER = 4242


def _settings(make_settings, fake_llm, telegram_api, *, dm: str = "open", capture: bool = False):
    return dataclasses.replace(
        make_settings(fake_llm), telegram=TelegramSettings(base_url=telegram_api.base_url, poll_timeout_s=1),
        delivery=DeliverySettings(debounce_ms=20), memory=MemorySettings(embedder="none", capture=capture),
        policy={"telegram": {"dm": dm}})


async def _started(settings, monkeypatch, out: io.StringIO):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", FAKE_BOT_TOKEN)
    app = await build_app(settings, warm_llm=False)
    terminal = TerminalChannel(stdin=io.StringIO(""), stdout=out, user="ana", interactive=False)
    await app.start([terminal, *platform_channels(settings, app)])
    assert app.router is not None
    return app


async def test_a_code_links_only_after_the_first_account_says_yes(telegram_api, fake_llm, make_settings,
                                                                  monkeypatch) -> None:
    settings = _settings(make_settings, fake_llm, telegram_api, capture=True)

    def route(request):  # capture keeps the dog fact the person stated, quoting their own words
        if request["messages"][0]["content"].startswith("The transcript and the stored memories"):
            return Scripted(text=json.dumps({"memories": [
                {"kind": "fact", "text": "Ana's dog is Luna", "evidence": "my dog is Luna"}]}))
        return None

    fake_llm.route = route
    out = io.StringIO()
    app = await _started(settings, monkeypatch, out)
    try:
        assert app.router is not None
        await app.router.on_message(inbound("my dog is Luna, she is a beagle"))
        await app.background.drain()
        await app.router.on_message(inbound("/link"))
        code = out.getvalue().split("Your link code is ")[1][:8]

        telegram_api.push_text(TG_USER, TG_USER, f"/link {code.lower()}")
        await telegram_api.wait_for_sent(1)
        assert "confirm" in telegram_api.sent[0].visible_text
        # Asked on the console, the account that asked for the code; nothing is linked before it answers.
        assert app.worker is not None
        await app.worker.wait_idle()
        assert f"Link telegram:{TG_USER} to you?" in out.getvalue()
        console_person = app.db.run_sync(directory.person_of, "console:ana")
        assert app.db.run_sync(directory.person_of, f"telegram:{TG_USER}") != console_person

        await app.router.on_message(inbound("/link yes"))
        assert f"Linked: telegram:{TG_USER} is you too." in out.getvalue()
        await telegram_api.wait_for_sent(2)
        assert telegram_api.sent[1].visible_text.startswith("Linked")

        fake_llm.default = lambda _r: "Of course, how is Luna?"
        telegram_api.push_text(TG_USER, TG_USER, "it's me from telegram")
        await telegram_api.wait_for_sent(3, timeout=15)
        assert telegram_api.sent[2].visible_text == "Of course, how is Luna?"

        assert app.db.run_sync(directory.person_of, f"telegram:{TG_USER}") == console_person
        assert app.memory is not None
        notes = await app.memory.list_notes(console_person)
        assert [n.record.text for n in notes] == ["Ana's dog is Luna"]

        # A used code cannot link a second account.
        telegram_api.push_text(77, 77, f"/link {code}")
        await telegram_api.wait_until(lambda: bool(telegram_api.texts_to(77)))
        assert "unknown or has expired" in telegram_api.texts_to(77)[0]
    finally:
        await app.close()


async def test_an_account_the_policy_keeps_out_cannot_redeem_a_real_code(telegram_api, fake_llm, make_settings,
                                                                        monkeypatch) -> None:
    out = io.StringIO()
    app = await _started(_settings(make_settings, fake_llm, telegram_api, dm="pairing"), monkeypatch, out)
    try:
        assert app.router is not None
        await app.router.on_message(inbound("/link"))
        code = out.getvalue().split("Your link code is ")[1][:8]
        telegram_api.push_text(TG_USER, TG_USER, f"/link {code}")  # never paired
        await telegram_api.wait_for_sent(1)
        assert "pairing code" in telegram_api.sent[0].visible_text
        assert app.worker is not None
        await app.worker.wait_idle()
        assert "to you?" not in out.getvalue()  # the first account is not even asked
        console_person = app.db.run_sync(directory.person_of, "console:ana")
        assert [a.account for a in app.db.run_sync(directory.accounts_of, console_person)] == ["console:ana"]
    finally:
        await app.close()


async def test_without_the_first_accounts_yes_nothing_is_linked(telegram_api, fake_llm, make_settings,
                                                                monkeypatch) -> None:
    first, second = 5001, 5002
    app = await _started(_settings(make_settings, fake_llm, telegram_api), monkeypatch, io.StringIO())
    try:
        telegram_api.push_text(first, first, "/link")
        await telegram_api.wait_until(lambda: bool(telegram_api.texts_to(first)))
        code = telegram_api.texts_to(first)[0].split("Your link code is ")[1][:8]
        telegram_api.push_text(second, second, f"/link {code}")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(first)) == 2 and bool(
            telegram_api.texts_to(second)))
        question = [m for m in telegram_api.sent if m.chat_id == first][1]
        assert question.visible_text.startswith(f"Link telegram:{second} to you?")
        buttons = {row[0]["text"]: row[0]["callback_data"] for row in question.reply_markup["inline_keyboard"]}
        assert set(buttons) == {"Yes", "No"}

        # The claimer pressing the first account's Yes does nothing.
        telegram_api.push_callback_query(second, second, buttons["Yes"])
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(second)) == 2)
        assert telegram_api.texts_to(second)[1] == "Only the account that asked for this code can answer."
        first_person = app.db.run_sync(directory.person_of, f"telegram:{first}")
        assert app.db.run_sync(directory.person_of, f"telegram:{second}") != first_person

        telegram_api.push_callback_query(first, first, buttons["No"])
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(first)) == 3)
        assert telegram_api.texts_to(first)[2].startswith("Not linked")
        telegram_api.push_callback_query(first, first, buttons["Yes"])  # too late: the code is used up
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(first)) == 4)
        assert telegram_api.texts_to(first)[3] == "No link is waiting for your answer."
        assert app.db.run_sync(directory.person_of, f"telegram:{second}") != first_person
        assert len(app.db.run_sync(directory.accounts_of, first_person)) == 1
    finally:
        await app.close()


async def test_guessing_codes_stops_after_five_failures_and_is_logged(telegram_api, fake_llm, make_settings,
                                                                     monkeypatch, caplog) -> None:
    first, guesser = 5101, 5102
    app = await _started(_settings(make_settings, fake_llm, telegram_api), monkeypatch, io.StringIO())
    try:
        telegram_api.push_text(first, first, "/link")
        await telegram_api.wait_until(lambda: bool(telegram_api.texts_to(first)))
        code = telegram_api.texts_to(first)[0].split("Your link code is ")[1][:8]
        with caplog.at_level(logging.INFO, logger="kith.linking"):
            for i, guess in enumerate(["AAAAAAAA", "BBBBBBBB", "CCCCCCCC", "DDDDDDDD", "EEEEEEEE", code]):
                telegram_api.push_text(guesser, guesser, f"/link {guess}")
                await telegram_api.wait_until(lambda n=i: len(telegram_api.texts_to(guesser)) == n + 1)
        answers = telegram_api.texts_to(guesser)
        assert all("unknown or has expired" in a for a in answers[:5])
        assert answers[5].startswith("Too many link codes")  # the right code, after five wrong ones: refused
        assert len(telegram_api.texts_to(first)) == 1  # the first account was never asked
        failed = [r for r in caplog.records if r.getMessage().startswith("link code failed")]
        assert len(failed) == 5 and all(f"account=telegram:{guesser}" in r.getMessage() for r in failed)
        assert any(r.getMessage().startswith("link refused") and f"account=telegram:{guesser}" in r.getMessage()
                   for r in caplog.records)
        assert code not in caplog.text
    finally:
        await app.close()


def test_people_command_links_lists_and_unlinks(make_settings, capsys) -> None:
    from kith.app.wiring import open_database

    settings = make_settings()
    db = open_database(settings)
    try:
        from datetime import UTC, datetime

        ana = db.run_sync(directory.resolve, "console:ana", "Ana", datetime.now(UTC))
        db.run_sync(directory.resolve, "slack:T1:U1", "ana.s", datetime.now(UTC))
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

    from kith.app.wiring import open_database
    from memory import goals
    from memory.controls import PauseBook

    settings = make_settings()
    db = open_database(settings)
    try:
        now = datetime.now(UTC)
        ana = db.run_sync(directory.resolve, "console:ana", "Ana", now)
        old = db.run_sync(directory.resolve, "slack:T1:U1", "ana.s", now)
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
