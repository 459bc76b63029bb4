"""Forgetting under races: what a person asks to forget stays gone when the forget lands while other work is
under way (a capture waiting on its model, a reply being written, an export being built). A bot killed in the
middle of a forget is tests/process/test_forget_killed.py."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import errno
import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from conversation.core import ConversationCore
from ground.background import BackgroundTasks
from ground.config import MemorySettings
from ground.db import Database
from ground.turns import CompletedTurn, Speaker
from ground.types import ChatKind
from heartbeat.consolidation import day_summaries
from llm.client import LLMClient
from memory.forgetting import journal as journal_module
from memory.forgetting import scrub as scrub_module
from memory.forgetting.journal import JOURNAL_DIR
from memory.forgetting.tombstones import tombstones
from memory.service import MemoryService
from memory.store.memory_store import MemoryStore
from people import directory, history
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.fakes.telegram_api import FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.clock import FakeClock
from tests.support.heartbeat import close_rig, make_rig
from tests.support.memory import answer, fact, memory_settings, reply, say, service  # noqa: F401
from tests.support.messages import inbound
from tests.support.telegram_app import start_telegram_app, telegram_settings
from tests.support.waiting import until

CONV = "console:ana"
ANA = 7301
CAPTURE_PROMPT_START = "The transcript and the stored memories"
SAID = "My cat is called Mruczek."
WORD = "Mruczek"


def _slow_capture(fake_llm: FakeOpenAI, delay_s: float) -> None:
    def route(body: dict[str, Any]) -> Scripted | None:
        if body["messages"][0]["content"].startswith(CAPTURE_PROMPT_START):
            return Scripted(text=answer(fact("Ana's cat is called Mruczek", "My cat is called Mruczek")),
                            delay_s=delay_s)
        return None

    fake_llm.route = route


def _open_dms_without_capture(make_settings: Any, fake_llm: FakeOpenAI, telegram_api: FakeTelegramApi) -> Any:
    """A Telegram bot anyone may DM, lexical memory, no capture: the chat tests' world."""
    return telegram_settings(make_settings(fake_llm), telegram_api,
                             memory=MemorySettings(embedder="none", capture=False), policy={"dm": "open"})


async def _everything_of(service: MemoryService, person: str) -> str:
    notes = [n.record for n in await service.list_notes(person)]
    memories = await service.list_memories(person, include_inactive=True)
    return "\n".join(t for r in [*notes, *memories] for t in (r.text, *r.evidence, *r.evidence_sentences))


async def test_a_capture_waiting_on_its_model_while_the_words_are_forgotten_does_not_bring_them_back(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana, said = await say(db, CONV, SAID, when=clock())
    last = await reply(db, "What a lovely name.", when=clock())
    _slow_capture(fake_llm, 0.6)
    capture = asyncio.create_task(service.capture.run(CONV, last))
    await until(lambda: len(fake_llm.requests) == 1, 10, every=0.01)  # the capture read it and waits on its model
    result = await service.apply_forget(await service.plan_forget(ana, WORD))
    assert result.places.history == 1
    report = await capture
    assert report.written == 0
    assert WORD not in await _everything_of(service, ana)
    await service.promote(ana)  # the night's promotion finds nothing to bring back either
    assert WORD not in await _everything_of(service, ana)
    assert WORD not in (await db.run(history.get, said)).text


async def test_a_fact_captured_while_a_word_of_its_sentence_was_forgotten_keeps_the_fact_not_the_word(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana, _said = await say(db, CONV, "I have a cat called Mruczek and she sleeps all day.", when=clock())
    last = await reply(db, "Cats know how to live.", when=clock())

    def route(body: dict[str, Any]) -> Scripted | None:
        if body["messages"][0]["content"].startswith(CAPTURE_PROMPT_START):
            return Scripted(text=answer(fact("Ana has a cat", "I have a cat")), delay_s=0.6)
        return None

    fake_llm.route = route
    capture = asyncio.create_task(service.capture.run(CONV, last))
    # read before the forget: its receipt sentence names her
    await until(lambda: len(fake_llm.requests) == 1, 10, every=0.01)
    await service.apply_forget(await service.plan_forget(ana, WORD))
    report = await capture

    assert report.written == 1  # the cat was not asked to be forgotten, only her name
    (note,) = await service.list_notes(ana)
    assert note.record.text == "Ana has a cat" and note.record.evidence == ("I have a cat",)
    assert WORD not in await _everything_of(service, ana)


async def test_a_note_captured_between_the_plan_and_its_confirmation_goes_with_it(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana, _said = await say(db, CONV, SAID, when=clock())
    last = await reply(db, "What a lovely name.", when=clock())
    plan = await service.plan_forget(ana, WORD)  # shown while the capture is still to come
    assert plan.note_ids == () and plan.places.history == 1
    _slow_capture(fake_llm, 0.0)
    assert (await service.capture.run(CONV, last)).written == 1
    clock.advance(seconds=5)
    await service.apply_forget(plan)  # the person says yes
    assert WORD not in await _everything_of(service, ana)
    await service.promote(ana)
    assert WORD not in await _everything_of(service, ana)


def _history_texts(conn: sa.Connection) -> list[str]:
    return [str(t) for t in conn.execute(sa.select(history.messages.c.text).order_by(history.messages.c.id)).scalars()]


async def test_a_reply_written_from_the_words_while_they_were_forgotten_does_not_keep_them(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    def route(body: dict[str, Any]) -> Scripted:
        if body["messages"][0]["content"].startswith(CAPTURE_PROMPT_START):
            return Scripted(text=answer())
        asked = body["messages"][-1]["content"]
        if asked == "What is my cat called?":  # the prompt's window still holds the name
            return Scripted(text="Your cat is called Mruczek, of course.", delay_s=0.6)
        return Scripted(text=f"echo: {asked}")

    fake_llm.route = route
    background = BackgroundTasks()
    core = ConversationCore(settings=service.settings, db=db, llm=LLMClient(service.settings.llm), clock=clock,
                            background=background, observers=[service.observer])
    await core.handle(inbound(SAID, chat_kind=ChatKind.DM))
    ana = (await core.speaker_of(inbound("x"))).person
    turn = asyncio.create_task(core.handle(inbound("What is my cat called?", chat_kind=ChatKind.DM)))
    await until(lambda: any(r["messages"][-1]["content"] == "What is my cat called?" for r in fake_llm.requests),
                10, every=0.01)
    result = await service.apply_forget(await service.plan_forget(ana, WORD))
    assert result.places.history == 2  # her message and kith's echo of it
    core.windows.drop(CONV)  # as the confirmation does for every thread the forget rewrote
    out = await turn
    assert WORD in out.text  # already on its way to her: acceptable, it was written before the forget
    await asyncio.wait_for(background.drain(), 10)
    assert not [t for t in await db.run(_history_texts) if WORD in t]
    # Said again after the forget, it is heard again: the late scrub touches only the reply that raced it.
    await core.handle(inbound("Mruczek came back to me today.", chat_kind=ChatKind.DM))
    await asyncio.wait_for(background.drain(), 10)
    assert [t for t in await db.run(_history_texts) if WORD in t] == [
        "Mruczek came back to me today.", "echo: Mruczek came back to me today."]


class _Killed(BaseException):
    """Stands for the process dying: nothing after it runs, not even an except Exception."""


async def _killed_half_way(service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock,
                           monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    """Ana's cat, remembered, then a forget of it killed after its records went and before any history row was
    rewritten: its journal entry is left, and the service closed. Ana, and the history row of her message."""
    ana, said = await say(db, CONV, SAID, when=clock())
    last = await reply(db, "What a lovely name.", when=clock())
    _slow_capture(fake_llm, 0.0)
    await service.capture.run(CONV, last)
    await service.promote(ana)
    assert WORD in await _everything_of(service, ana)
    clock.advance(days=1)
    plan = await service.plan_forget(ana, WORD)

    async def die(*_a: Any, **_k: Any) -> int:
        raise _Killed

    with monkeypatch.context() as m:
        m.setattr(service.store, "scrub_log", die)
        with pytest.raises(_Killed):
            await service.apply_forget(plan)
    await service.close()
    return ana, said


async def test_a_forget_cut_off_half_way_is_finished_by_the_next_start(
    tmp_path: Path, service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ana, said = await _killed_half_way(service, db, fake_llm, clock, monkeypatch)
    assert WORD in (await db.run(history.get, said)).text
    journal = Path(service.settings.storage.data_path()) / JOURNAL_DIR
    assert len(list(journal.iterdir())) == 1

    settings = memory_settings(tmp_path, llm_base=fake_llm.base_url)
    again = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=clock)
    try:
        assert WORD not in (await db.run(history.get, said)).text
        assert not [t for t in await db.run(_history_texts) if WORD in t]
        assert WORD not in await _everything_of(again, ana)
        assert list(journal.iterdir()) == []
        resumed = again.forgetter.resumed[ana].result
        # The killed process deleted the memory; the answer still names it among what went.
        assert (resumed.memories_deleted, resumed.leftover) == (1, 0) and resumed.places.history == 1
        assert resumed.describe().startswith("1 memory, 1 note")
        # Its tombstones were left once, not once per try.
        digests = await db.run(lambda c: c.execute(sa.select(tombstones.c.digest)).scalars().all())
        assert len(digests) == len(set(digests)) > 0
    finally:
        await again.close()


async def test_an_export_put_together_while_the_words_were_forgotten_does_not_carry_them(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, make_settings: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _open_dms_without_capture(make_settings, fake_llm, telegram_api)
    app = await start_telegram_app(settings, monkeypatch)
    try:
        telegram_api.push_text(ANA, ANA, f"{SAID} My sister lives in Lisbon.")
        await telegram_api.wait_until(lambda: len(telegram_api.sent) == 1)
        commands, memory = app.memory_commands, app.memory
        assert commands is not None and memory is not None
        ana = app.db.run_sync(directory.person_of, f"telegram:{ANA}")
        built = commands.controls.export

        async def forgotten_meanwhile(requester: Any) -> Any:
            file = await built(requester)  # read before the forget: it holds the words
            assert WORD.encode() in file.data
            await memory.apply_forget(await memory.plan_forget(ana, WORD))
            return file

        monkeypatch.setattr(commands.controls, "export", forgotten_meanwhile)
        out = await commands.export(inbound("/export", platform="telegram", chat_id=str(ANA), sender_id=str(ANA),
                                            sender_name="Ana"), "")
        assert out.attachment_bytes is not None
        assert WORD.encode() not in out.attachment_bytes and b"Lisbon" in out.attachment_bytes
        json.loads(out.attachment_bytes)  # still the whole document
    finally:
        await app.close()


async def test_with_capture_off_a_reply_that_raced_a_forget_still_loses_the_words(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, make_settings: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _open_dms_without_capture(make_settings, fake_llm, telegram_api)

    def route(body: dict[str, Any]) -> Scripted:
        asked = body["messages"][-1]["content"]
        if asked == "What is my cat called?":  # written from a window that still holds the name
            return Scripted(text="Your cat is called Mruczek, of course.", delay_s=0.8)
        return Scripted(text="Noted.")

    fake_llm.route = route
    app = await start_telegram_app(settings, monkeypatch)
    try:
        telegram_api.push_text(ANA, ANA, SAID)
        await telegram_api.wait_until(lambda: len(telegram_api.sent) == 1)
        memory = app.memory
        assert memory is not None
        ana = app.db.run_sync(directory.person_of, f"telegram:{ANA}")
        telegram_api.push_text(ANA, ANA, "What is my cat called?")
        await until(lambda: any(r["messages"][-1]["content"] == "What is my cat called?"
                                for r in fake_llm.requests), 10, every=0.01)
        await memory.apply_forget(await memory.plan_forget(ana, WORD))
        await telegram_api.wait_until(lambda: len(telegram_api.sent) == 2)
        await app.background.drain()
        assert not [t for t in app.db.run_sync(_history_texts) if WORD in t]
    finally:
        await app.close()


async def test_the_nightly_consolidation_waiting_on_its_model_while_the_words_are_forgotten_keeps_none(
        tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    night = datetime(2026, 11, 20, 3, 0, tzinfo=UTC)
    rig = await make_rig(tmp_path, fake_llm, start=night)
    try:
        ana, _said = await say(rig.db, CONV, f"{SAID} My sister lives in Lisbon.", name="Ana",
                               when=night - timedelta(hours=13))
        await reply(rig.db, "Lovely.", when=night - timedelta(hours=13))

        def route(body: dict[str, Any]) -> Scripted | None:
            if "You consolidate" in body["messages"][0]["content"]:
                return Scripted(text=json.dumps({
                    "summary": f"Ana's cat is called {WORD}; her sister lives in Lisbon.",
                    "memories": [fact("Ana's cat is called Mruczek", "My cat is called Mruczek"),
                                 fact("Ana's sister lives in Lisbon", "My sister lives in Lisbon")]}), delay_s=0.6)
            return None

        fake_llm.route = route
        run = asyncio.create_task(rig.heartbeat.consolidate())
        await until(lambda: any("You consolidate" in r["messages"][0]["content"] for r in fake_llm.requests),
                    10, every=0.01)
        await rig.memory.apply_forget(await rig.memory.plan_forget(ana, WORD))
        report = await run
        assert report.days_completed == 1
        kept = await _everything_of(rig.memory, ana)
        assert WORD not in kept and "Lisbon" in kept  # the rest of the day is still remembered
        assert WORD not in " ".join(await rig.db.run(day_summaries, (night - timedelta(days=1)).date(), ana))
    finally:
        await close_rig(rig)


# --- found in review: the journal, the start, the answer owed, how long the words are held ----------------------

async def test_a_forget_whose_journal_cannot_be_written_says_so_in_one_line_and_removes_nothing(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, make_settings: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _open_dms_without_capture(make_settings, fake_llm, telegram_api)
    app = await start_telegram_app(settings, monkeypatch)
    try:
        telegram_api.push_text(ANA, ANA, f"/remember My cat is called {WORD}")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) == 1)
        telegram_api.push_text(ANA, ANA, f"/forget {WORD}")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) == 2)

        def disk_full(_path: Path, _data: bytes) -> None:  # the data directory's disk has no room left
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(journal_module, "write_private_atomically", disk_full)
        telegram_api.push_text(ANA, ANA, "yes")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) == 3, timeout=20)
        said = telegram_api.texts_to(ANA)[-1]
        assert "\n" not in said and "disk is full" in said and "nothing" in said.lower(), said
        memory = app.memory
        assert memory is not None
        ana = app.db.run_sync(directory.person_of, f"telegram:{ANA}")
        assert WORD in await _everything_of(memory, ana)  # nothing half-done: it is all still there
        assert not list((settings.storage.data_path() / JOURNAL_DIR).glob("*.json"))
    finally:
        await app.close()


async def test_a_forget_whose_journal_entry_cannot_be_removed_afterwards_is_still_answered_and_cleared_later(
        tmp_path: Path, service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ana, said = await say(db, CONV, SAID, when=clock())
    plan = await service.plan_forget(ana, WORD)
    journal = service.settings.storage.data_path() / JOURNAL_DIR
    real_open, real_unlink = Path.open, Path.unlink

    def read_only_open(self: Path, mode: str = "r", *a: Any, **k: Any) -> Any:
        if self.parent == journal and mode != "rb" and mode != "r":
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_open(self, mode, *a, **k)

    def read_only_unlink(self: Path, missing_ok: bool = False) -> None:
        if self.parent == journal:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        real_unlink(self, missing_ok=missing_ok)

    # The disk turns read-only once the forget's own writes are done.
    done = service.forgetter._apply

    async def then_read_only(*a: Any, **k: Any) -> Any:
        result = await done(*a, **k)
        monkeypatch.setattr(Path, "open", read_only_open)
        monkeypatch.setattr(Path, "unlink", read_only_unlink)
        return result

    monkeypatch.setattr(service.forgetter, "_apply", then_read_only)
    result = await service.apply_forget(plan)  # the forget is done: the person hears so
    monkeypatch.undo()
    assert result.places.history == 1 and result.leftover == 0
    assert WORD not in (await db.run(history.get, said)).text
    await service.close()
    settings = memory_settings(tmp_path, llm_base=fake_llm.base_url)
    again = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=clock)
    try:
        assert list(journal.iterdir()) == []
    finally:
        await again.close()


async def test_a_forget_that_cannot_be_finished_at_start_keeps_its_entry_and_does_not_stop_kith_starting(
        tmp_path: Path, service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    await _killed_half_way(service, db, fake_llm, clock, monkeypatch)
    journal = service.settings.storage.data_path() / JOURNAL_DIR
    settings = memory_settings(tmp_path, llm_base=fake_llm.base_url)

    async def unavailable(*_a: Any, **_k: Any) -> int:
        raise RuntimeError("the vector store is unavailable")

    with monkeypatch.context() as m:
        m.setattr(MemoryStore, "delete_memories", unavailable)
        broken = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=clock)  # it starts
        await broken.close()
    assert len(list(journal.glob("*.json"))) == 1  # kept, to be finished at the next start
    assert any("could not be finished" in r.getMessage() for r in caplog.records)
    assert all(WORD not in r.getMessage() for r in caplog.records)
    again = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=clock)
    try:
        assert list(journal.iterdir()) == []
        assert not [t for t in await db.run(_history_texts) if WORD in t]
    finally:
        await again.close()


async def test_after_a_start_finished_a_forget_only_a_yes_said_before_that_start_hears_about_it(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, make_settings: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _open_dms_without_capture(make_settings, fake_llm, telegram_api)
    app = await start_telegram_app(settings, monkeypatch)
    try:
        telegram_api.push_text(ANA, ANA, f"/remember My cat is called {WORD}")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) == 1)
        memory = app.memory
        assert memory is not None
        ana = app.db.run_sync(directory.person_of, f"telegram:{ANA}")

        async def die(*_a: Any, **_k: Any) -> int:
            raise _Killed

        # The operator's forget (bot.py memory forget), cut off half-way: Ana confirmed nothing.
        with monkeypatch.context() as m:
            m.setattr(memory.store, "scrub_log", die)
            with pytest.raises(_Killed):
                await memory.apply_forget(await memory.plan_forget(ana, WORD))
    finally:
        await app.close()
    app = await start_telegram_app(settings, monkeypatch)
    try:
        assert app.memory is not None and ana in app.memory.forgetter.resumed
        # Minutes later Ana says yes to something else: it is not taken as a confirmation she never gave.
        telegram_api.push_text(ANA, ANA, "yes", date=int(time.time()) + 120)
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) == 2)
        assert telegram_api.texts_to(ANA)[-1] == "echo: yes"
    finally:
        await app.close()


async def test_a_capture_waiting_longer_than_a_plan_is_kept_still_brings_nothing_back(
        service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock) -> None:
    service.forgetter.recent.keep_s = 0.1  # the model answers after the forget's words would have been let go
    ana, _said = await say(db, CONV, SAID, when=clock())
    last = await reply(db, "What a lovely name.", when=clock())
    _slow_capture(fake_llm, 0.6)
    capture = asyncio.create_task(service.capture.run(CONV, last))
    await until(lambda: len(fake_llm.requests) == 1, 10, every=0.01)
    await service.apply_forget(await service.plan_forget(ana, WORD))
    assert (await capture).written == 0
    assert WORD not in await _everything_of(service, ana)


async def test_a_forgets_words_are_let_go_when_their_time_is_up_even_if_nothing_asks_again(
        service: MemoryService, db: Database, clock: FakeClock) -> None:
    recent = service.forgetter.recent
    recent.keep_s = 0.1
    ana, _said = await say(db, CONV, SAID, when=clock())
    await service.apply_forget(await service.plan_forget(ana, WORD))
    assert recent.held == 1
    await asyncio.sleep(0.3)
    assert recent.held == 0


async def test_an_export_raced_by_a_forget_says_what_its_file_holds(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, make_settings: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _open_dms_without_capture(make_settings, fake_llm, telegram_api)
    app = await start_telegram_app(settings, monkeypatch)
    try:
        telegram_api.push_text(ANA, ANA, f"/remember My cat is called {WORD}")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) == 1)
        telegram_api.push_text(ANA, ANA, "/remember My sister lives in Lisbon")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) == 2)
        commands, memory = app.memory_commands, app.memory
        assert commands is not None and memory is not None
        ana = app.db.run_sync(directory.person_of, f"telegram:{ANA}")
        built = commands.controls.export

        async def forgotten_meanwhile(requester: Any) -> Any:
            file = await built(requester)
            await memory.apply_forget(await memory.plan_forget(ana, WORD))
            return file

        monkeypatch.setattr(commands.controls, "export", forgotten_meanwhile)
        out = await commands.export(inbound("/export", platform="telegram", chat_id=str(ANA), sender_id=str(ANA),
                                            sender_name="Ana"), "")
        assert out.attachment_bytes is not None
        document = json.loads(out.attachment_bytes)
        assert len(document["memories"]) == 1
        assert "1 memory and" in out.text, out.text
    finally:
        await app.close()


class _HeldBeforeCheckpoint:
    """The forget's database, holding it between its rewrite and its checkpoint until let go: the moment a reply
    recorded right after the rewrite has its after-reply check run."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.reached = asyncio.Event()
        self.go = asyncio.Event()

    async def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if fn is scrub_module.checkpoint:
            self.reached.set()
            await self.go.wait()
        return await self.db.run(fn, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)  # the rest of the database as it is


async def test_a_reply_recorded_just_after_the_forgets_rewrite_but_before_it_was_done_loses_the_words(
        service: MemoryService, db: Database, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    ana, _said = await say(db, CONV, SAID, when=clock())
    await reply(db, "What a lovely name.", when=clock())
    _ana, asked = await say(db, CONV, "What is my cat called?", when=clock())
    held = _HeldBeforeCheckpoint(db)
    monkeypatch.setattr(service.forgetter, "db", held)
    forget = asyncio.create_task(service.apply_forget(await service.plan_forget(ana, WORD)))
    await asyncio.wait_for(held.reached.wait(), 10)  # rewritten, not yet done
    answered = await reply(db, "Your cat is called Mruczek, of course.", when=clock())
    turn = CompletedTurn(Speaker(ana, CONV, "Ana"), inbound("What is my cat called?", chat_kind=ChatKind.DM),
                         asked, "Your cat is called Mruczek, of course.", answered)
    check = asyncio.create_task(service.capture.forgotten_meanwhile(turn))
    await asyncio.sleep(0.05)
    held.go.set()
    await asyncio.wait_for(forget, 10)
    await asyncio.wait_for(check, 10)
    assert not [t for t in await db.run(_history_texts) if WORD in t]
