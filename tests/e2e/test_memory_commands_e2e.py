"""The memory commands and conflict questions end to end on Telegram: the app from build_app, the
real python-telegram-bot against the loopback fake Bot API, embedded Chroma and SQLite."""

# ruff: noqa: F811

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from channels.telegram.settings import TelegramSettings
from conversation.memory_commands import MemoryCommands, QuestionSender
from ground.config import DeliverySettings
from kith.app.lifecycle import App
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.operator.policy_cli import run_pairing
from kith.settings import AppSettings
from llm.client import import_litellm
from memory.capture.merge_gate import Outcome
from memory.controls import Requester
from memory.controls.questions import QuestionBook, QuestionStatus
from memory.core.records import MemoryCandidate, MemoryKind, Scope, Source, Status
from people import directory, history
from policy import store
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, RecordedMessage, telegram_api  # noqa: F401
from tests.support.clock import FakeClock
from tests.support.waiting import until

import_litellm()

ANA = 501
BEN = 502
GROUP = -100_777


@dataclasses.dataclass
class Running:
    app: App
    commands: MemoryCommands
    sender: QuestionSender
    book: QuestionBook
    clock: FakeClock


def _settings(make_settings, fake_llm, tg: FakeTelegramApi) -> AppSettings:
    s = make_settings(fake_llm)
    return dataclasses.replace(
        s, telegram=TelegramSettings(base_url=tg.base_url, poll_timeout_s=1),
        delivery=DeliverySettings(debounce_ms=30, backoff_base_s=0.05, backoff_max_s=0.2, max_attempts=4),
        policy={"telegram": {"allow_groups": [str(GROUP)], "dm": "open"}})


async def _start(settings: AppSettings, monkeypatch, clock: FakeClock) -> Running:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", FAKE_BOT_TOKEN)
    app = await build_app(settings, clock=clock, warm_llm=False)
    assert app.question_sender is not None and app.memory_commands is not None
    sender, commands = app.question_sender, app.memory_commands
    # Questions follow a reply after a short pause; in tests, a shorter one and no re-check spacing.
    sender.after_reply_s = 0.2
    sender.recheck_s = 0.0
    channels = platform_channels(settings, app)
    assert await app.start(channels) == ["telegram"]
    return Running(app, commands, sender, sender.book, clock)


@pytest.fixture
async def running(telegram_api, fake_llm, make_settings, monkeypatch) -> AsyncIterator[Running]:
    """kith on the fake Bot API with the default test settings, closed after the test."""
    run = await _start(_settings(make_settings, fake_llm, telegram_api), monkeypatch, FakeClock(datetime.now(UTC)))
    try:
        yield run
    finally:
        await run.app.close()


def _person(app: App, user: int) -> str:
    person = app.db.run_sync(directory.person_of, f"telegram:{user}")
    assert person is not None
    return person


def _questions(tg: FakeTelegramApi) -> list[RecordedMessage]:
    return [m for m in tg.sent if m.reply_markup and any(
        b[0]["callback_data"].startswith("q:") for b in m.reply_markup["inline_keyboard"])]


def _button(message: RecordedMessage, label: str) -> str:
    return next(row[0]["callback_data"] for row in message.reply_markup["inline_keyboard"] if row[0]["text"] == label)


async def _seed_conflict(app: App, person: str, a: str, b: str) -> None:
    assert app.memory is not None
    outcomes = []
    for i, text in enumerate((a, b)):
        said = Source("telegram", "x", f"seed-{i}", datetime.now(UTC))
        result = await app.memory.gate.admit(person, MemoryCandidate(
            kind=MemoryKind.PREFERENCE, text=text, evidence=(text,), sources=(said,), scope=Scope.DM))
        outcomes.append(result.outcome)
    assert outcomes == [Outcome.NEW, Outcome.CONFLICT]


async def test_two_conflicting_memories_give_one_dm_question_settled_by_its_button(
        telegram_api, fake_llm, running: Running) -> None:
    run, app, clock = running, running.app, running.clock
    assert {"memory", "why", "forget", "export", "pause"} <= {c["command"] for c in telegram_api.commands}
    telegram_api.push_text(ANA, ANA, "/remember My favourite editor is Vim")
    await telegram_api.wait_for_sent(1)
    clock.advance(minutes=1)  # said later, so it is "the second"
    telegram_api.push_text(ANA, ANA, "/remember My favourite editor is Emacs")
    sent = await telegram_api.wait_for_sent(2)
    (question,) = _questions(telegram_api)
    assert question is sent[1] and question.chat_id == ANA
    assert "Vim" in question.visible_text and "Emacs" in question.visible_text
    assert "you said “My favourite editor is Vim”" in question.visible_text
    labels = [row[0]["text"] for row in question.reply_markup["inline_keyboard"]]
    assert labels == ["The first", "The second", "Both are true", "Neither"]

    assert await run.sender.sweep() == 0  # one open question at a time, one question per pair
    person = _person(app, ANA)
    vim, emacs = sorted(await app.memory.list_memories(person), key=lambda r: r.text)[::-1]
    assert (vim.text, emacs.text) == ("My favourite editor is Vim", "My favourite editor is Emacs")

    telegram_api.push_callback_query(ANA, ANA, _button(question, "The second"))
    sent = await telegram_api.wait_for_sent(3)
    assert sent[2].chat_id == ANA and "Emacs" in sent[2].visible_text
    old, new = await app.memory.get(vim.id), await app.memory.get(emacs.id)
    assert old is not None and old.status is Status.SUPERSEDED and old.valid_to is not None
    assert new is not None and new.status is Status.ACTIVE
    assert old.conflicts_with == () and new.conflicts_with == ()
    (asked,) = await run.book.of_person(person)
    assert asked.status is QuestionStatus.ANSWERED and asked.answered_by == f"telegram:{ANA}"
    assert fake_llm.requests == []  # nothing of this went to the model


async def test_a_typed_answer_works_and_a_question_never_goes_to_a_group(
        telegram_api, fake_llm, running: Running) -> None:
    run, app = running, running.app
    fake_llm.reply("Hi Ana.")
    telegram_api.push_text(ANA, ANA, "hi")
    await telegram_api.wait_for_sent(1)
    fake_llm.reply("Hello group.")
    telegram_api.push_text(GROUP, ANA, "@kith_test_bot hello all", "supergroup", chat_title="flat")
    await telegram_api.wait_for_sent(2)
    fake_llm.reply("Hello Ben.")
    telegram_api.push_text(GROUP, BEN, "@kith_test_bot and me", "supergroup", chat_title="flat")
    await telegram_api.wait_for_sent(3)
    ana, ben = _person(app, ANA), _person(app, BEN)
    await _seed_conflict(app, ben, "Ben's favourite editor is Vim", "Ben's favourite editor is Emacs")
    assert await run.sender.sweep() == 0  # Ben never wrote in a DM: no question, and never in the group
    await _seed_conflict(app, ana, "I work at Acme as a backend engineer", "I work at Globex as a backend engineer")

    fake_llm.reply("Good, thanks.")
    telegram_api.push_text(GROUP, ANA, "@kith_test_bot how are you?", "supergroup", chat_title="flat")
    await telegram_api.wait_until(lambda: len(_questions(telegram_api)) == 1 and any(
        m.visible_text == "Good, thanks." for m in telegram_api.sent))
    (question,) = _questions(telegram_api)
    assert question.chat_id == ANA  # after a group reply, asked in Ana's DM
    assert all(m.chat_id != GROUP for m in _questions(telegram_api))

    asked_model = len(fake_llm.requests)
    telegram_api.push_text(ANA, ANA, "2")
    await telegram_api.wait_until(lambda: telegram_api.sent[-1].visible_text.startswith("Got it"))
    assert "Globex as a backend engineer” is right" in telegram_api.sent[-1].visible_text
    assert telegram_api.sent[-1].chat_id == ANA and len(fake_llm.requests) == asked_model
    facts = {r.text: r for r in await app.memory.list_memories(ana, include_inactive=True)}
    assert facts["I work at Acme as a backend engineer"].status is Status.SUPERSEDED
    assert facts["I work at Globex as a backend engineer"].status is Status.ACTIVE
    assert all(r.conflicts_with == () for r in facts.values())
    assert not [m for m in telegram_api.sent if m.chat_id == BEN]


async def test_a_typed_number_after_the_questions_facts_changed_goes_to_the_conversation(
        telegram_api, fake_llm, running: Running) -> None:
    run, app, clock = running, running.app, running.clock
    telegram_api.push_text(ANA, ANA, "/remember My favourite editor is Vim")
    await telegram_api.wait_for_sent(1)
    clock.advance(minutes=1)
    telegram_api.push_text(ANA, ANA, "/remember My favourite editor is Emacs")
    await telegram_api.wait_until(lambda: len(_questions(telegram_api)) == 1)
    ana = Requester(_person(app, ANA), f"telegram:{ANA}")
    pending = await run.commands.controls.plan_forget(ana, "Emacs")  # the question's facts change
    await run.commands.controls.confirm_forget(ana, pending.token)
    fake_llm.reply("Two of what?")
    telegram_api.push_text(ANA, ANA, "2")
    await telegram_api.wait_until(lambda: telegram_api.sent[-1].visible_text == "Two of what?")
    (asked,) = await run.book.of_person(ana.person or "")
    assert asked.status is QuestionStatus.VOID


async def test_a_reply_to_someone_with_nothing_disputed_asks_nothing_and_reads_no_questions(
        telegram_api, fake_llm, running: Running, monkeypatch) -> None:
    run, app = running, running.app
    looked: list[str] = []
    real = run.book.state_of
    monkeypatch.setattr(run.book, "state_of", lambda person: looked.append(person) or real(person))
    telegram_api.push_text(ANA, ANA, "/remember My favourite editor is Vim")
    await telegram_api.wait_for_sent(1)
    fake_llm.reply("Vim it is.")
    telegram_api.push_text(ANA, ANA, "what do I edit with?")
    await telegram_api.wait_for_sent(2)
    await asyncio.sleep(run.sender.after_reply_s + 0.2)  # past the pause a question would follow
    assert await run.sender.sweep() == 0
    assert _questions(telegram_api) == [] and looked == []  # no question book read on every reply
    await _seed_conflict(app, _person(app, ANA), "I work at Acme as a backend engineer",
                         "I work at Globex as a backend engineer")
    assert await run.sender.sweep() == 1 and looked == [_person(app, ANA)]


async def test_the_hourly_cap_and_one_open_question_hold_across_a_restart(
        telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    clock = FakeClock(datetime.now(UTC))
    settings = _settings(make_settings, fake_llm, telegram_api)
    run = await _start(settings, monkeypatch, clock)
    users = [601 + i for i in range(6)]
    for user in users:
        telegram_api.add_chat(user, "private")  # each has talked to kith in a DM before
        person = await run.app.db.run(directory.resolve, f"telegram:{user}", f"U{user}", clock())
        await run.app.db.run(history.append, conversation=f"telegram:{user}", role="user", author=f"telegram:{user}",
                             person=person, platform="telegram", chat_id=str(user), text="hi", created_at=clock())
        await _seed_conflict(run.app, person, f"My favourite colour is teal {user}",
                             f"My favourite colour is red {user}")
    await _seed_conflict(run.app, _person(run.app, users[0]), "My car brand is Volvo", "My car brand is Fiat")
    try:
        assert await run.sender.sweep() == 5
        await telegram_api.wait_until(lambda: len(_questions(telegram_api)) == 5)
    finally:
        await run.app.close()

    run = await _start(settings, monkeypatch, clock)  # a new process over the same data directory
    try:
        assert await run.sender.sweep() == 0
        clock.advance(minutes=61)
        assert await run.sender.sweep() == 1
        await telegram_api.wait_until(lambda: len(_questions(telegram_api)) == 6)
        await asyncio.sleep(0.2)
        recipients = [m.chat_id for m in _questions(telegram_api)]
        assert sorted(recipients) == users  # each asked once: the second pair of the first waits its turn
    finally:
        await run.app.close()


async def test_forget_shows_its_plan_and_deletes_only_after_the_person_confirms(
        telegram_api, fake_llm, running: Running) -> None:
    app = running.app
    telegram_api.push_text(ANA, ANA, "/remember I keep bees on the roof")
    telegram_api.push_text(ANA, ANA, "/remember My sister lives in Lisbon")
    await telegram_api.wait_for_sent(2)
    ana = _person(app, ANA)
    bees = next(r for r in await app.memory.list_memories(ana) if "bees" in r.text)

    telegram_api.push_text(ANA, ANA, "/forget bees")
    plan = (await telegram_api.wait_for_sent(3))[2]
    assert bees.id in plan.visible_text and "bees" in plan.visible_text and "Lisbon" not in plan.visible_text
    assert [row[0]["text"] for row in plan.reply_markup["inline_keyboard"]] == ["Yes, forget them", "Cancel"]
    assert await app.memory.get(bees.id) is not None  # shown, not done

    telegram_api.push_callback_query(BEN, BEN, _button(plan, "Yes, forget them"))  # someone else's press
    refusal = (await telegram_api.wait_for_sent(4))[3]
    assert refusal.chat_id == BEN and "bees" not in refusal.visible_text
    assert await app.memory.get(bees.id) is not None

    telegram_api.push_callback_query(ANA, ANA, _button(plan, "Cancel"))
    await telegram_api.wait_for_sent(5)
    assert await app.memory.get(bees.id) is not None

    telegram_api.push_text(ANA, ANA, "/forget bees")
    await telegram_api.wait_for_sent(6)
    telegram_api.push_text(ANA, ANA, "yes")
    done = (await telegram_api.wait_for_sent(7))[6]
    assert done.visible_text.startswith("Forgotten: 1 memory, ")
    assert await app.memory.get(bees.id) is None
    assert [r.text for r in await app.memory.list_memories(ana)] == ["My sister lives in Lisbon"]
    assert await app.memory.book.count(ana) >= 1  # a tombstone keeps it from coming back
    assert fake_llm.requests == []


async def test_export_and_the_dm_only_rule_and_another_users_attempts(
        telegram_api, fake_llm, running: Running) -> None:
    run, app = running, running.app
    telegram_api.push_text(ANA, ANA, "/remember My favourite editor is Vim")
    telegram_api.push_text(BEN, BEN, "/remember I collect vintage typewriters")
    await telegram_api.wait_for_sent(2)
    ana, ben = _person(app, ANA), _person(app, BEN)
    (vim,) = await app.memory.list_memories(ana)

    telegram_api.push_text(BEN, BEN, f"/pin {vim.id}")
    telegram_api.push_text(BEN, BEN, "/forget vim")
    telegram_api.push_text(BEN, BEN, f"/why {vim.id}")
    await telegram_api.wait_until(lambda: len([m for m in telegram_api.sent if m.chat_id == BEN]) == 4)
    to_ben = telegram_api.texts_to(BEN)[1:]
    assert all("favourite editor" not in text for text in to_ben)
    assert "Nothing I remember about you matches" in to_ben[1]
    telegram_api.push_text(ANA, ANA, "/remember My favourite editor is Emacs")
    await telegram_api.wait_until(lambda: len(_questions(telegram_api)) == 1)
    (question,) = _questions(telegram_api)
    telegram_api.push_callback_query(BEN, BEN, _button(question, "The first"))
    await telegram_api.wait_until(lambda: len([m for m in telegram_api.sent if m.chat_id == BEN]) == 5)
    facts = await app.memory.list_memories(ana)
    assert len(facts) == 2 and all(f.conflicts_with and not f.pinned for f in facts)  # untouched
    (open_question,) = await run.book.open_of(ana)
    assert open_question.status is QuestionStatus.OPEN

    telegram_api.push_text(GROUP, ANA, "/memory@kith_test_bot", "supergroup", chat_title="flat")
    await telegram_api.wait_until(lambda: any(m.chat_id == GROUP for m in telegram_api.sent))
    in_group = next(m for m in telegram_api.sent if m.chat_id == GROUP)
    assert "private chat" in in_group.visible_text and "editor" not in in_group.visible_text

    telegram_api.push_text(ANA, ANA, "/export")
    await telegram_api.wait_until(lambda: bool(telegram_api.documents))
    (document,) = telegram_api.documents
    assert document.chat_id == ANA and document.filename.endswith(".json")
    data = json.loads(document.content)
    assert sorted(m["text"] for m in data["memories"]) == ["My favourite editor is Emacs",
                                                           "My favourite editor is Vim"]
    assert [q["status"] for q in data["questions"]] == ["open"]
    raw = document.content.decode()
    assert ben not in raw and "typewriters" not in raw and f"telegram:{BEN}" not in raw
    assert fake_llm.requests == []


async def test_the_configured_pin_limit_is_the_one_pin_enforces(
        telegram_api, fake_llm, make_settings, monkeypatch) -> None:
    base = _settings(make_settings, fake_llm, telegram_api)
    settings = dataclasses.replace(base, recall=dataclasses.replace(base.recall, pinned_max=2))
    run = await _start(settings, monkeypatch, FakeClock(datetime.now(UTC)))
    try:
        for fact in ("I live in Porto", "My dog is called Bolt", "I teach chemistry"):
            telegram_api.push_text(ANA, ANA, f"/remember {fact}")
        await telegram_api.wait_for_sent(3)
        facts = sorted(await run.app.memory.list_memories(_person(run.app, ANA)), key=lambda r: r.created_at)
        for fact in facts:
            telegram_api.push_text(ANA, ANA, f"/pin {fact.id}")
        telegram_api.push_text(ANA, ANA, "/pin")
        sent = await telegram_api.wait_for_sent(7)
        assert "You already have 2 pinned memories" in sent[5].visible_text
        assert sent[6].visible_text.startswith("Pinned (2 of 2):")
        pinned = [f.id for f in await run.app.memory.list_memories(_person(run.app, ANA)) if f.pinned]
        assert sorted(pinned) == sorted(f.id for f in facts[:2])
    finally:
        await run.app.close()


async def test_an_old_button_does_nothing_once_its_presser_is_revoked(
        telegram_api, fake_llm, make_settings, monkeypatch, caplog) -> None:
    caplog.set_level(logging.INFO, logger="kith.policy")
    base = _settings(make_settings, fake_llm, telegram_api)
    settings = dataclasses.replace(base, policy={"telegram": {"allow_groups": [str(GROUP)]}})  # pairing DMs
    run = await _start(settings, monkeypatch, FakeClock(datetime.now(UTC)))
    app = run.app
    try:
        telegram_api.push_text(ANA, ANA, "hello")
        await telegram_api.wait_for_sent(1)
        (pending,) = app.db.run_sync(store.load)[0].pending
        approve = argparse.Namespace(pairing_action="approve", code=pending.code, owner=False)
        assert await asyncio.to_thread(run_pairing, app.db, approve) == 0
        telegram_api.push_text(ANA, ANA, "/remember My sister lives in Lisbon")
        await telegram_api.wait_for_sent(2)
        telegram_api.push_text(ANA, ANA, "/forget sister")
        plan = (await telegram_api.wait_for_sent(3))[2]
        (sister,) = await app.memory.list_memories(_person(app, ANA))

        revoke = argparse.Namespace(pairing_action="revoke", account=f"telegram:{ANA}")
        assert await asyncio.to_thread(run_pairing, app.db, revoke) == 0
        telegram_api.push_callback_query(ANA, ANA, _button(plan, "Yes, forget them"))
        # The press reached the policy and was refused: nothing after it runs.
        await until(lambda: any("policy refused press" in r.getMessage() for r in caplog.records), 5,
                    what="the press to reach the policy", every=0.01)
        assert await app.memory.get(sister.id) is not None
        assert len(telegram_api.sent) == 3
    finally:
        await app.close()
