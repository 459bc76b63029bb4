"""Voice notes on Telegram, end to end (issue #35): the real python-telegram-bot against the fake Bot API (getFile
and its file server), the transcription through litellm against the fake OpenAI-compatible model's
/v1/audio/transcriptions, and kith as ``bot.py run`` wires it.

The fake transcribes by reading the "audio" as UTF-8 (``transcript of <file name>: <bytes>``), so each test's
words are its own.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

from ground.config import MediaSettings, MemorySettings
from kith.app.lifecycle import App
from kith.settings import AppSettings
from people import history
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.fakes.telegram_api import FakeTelegramApi
from tests.support.memory import fact
from tests.support.telegram_app import start_telegram_app, telegram_settings

ANA = 5_501
CAPTURE_SYSTEM = "The transcript and the stored memories"


def _settings(make_settings: Callable[..., AppSettings], fake_llm: FakeOpenAI, tg: FakeTelegramApi,
              **media: Any) -> AppSettings:
    base = make_settings(fake_llm)
    voice = MediaSettings(transcription_model="openai/whisper-1", transcription_api_base=fake_llm.base_url,
                          **media)
    return telegram_settings(base, tg, policy={"dm": "open"}, media=voice)


async def _answer(tg: FakeTelegramApi, before: int) -> str:
    await tg.wait_until(lambda: len(tg.texts_to(ANA)) > before)
    return tg.texts_to(ANA)[before]


async def test_a_voice_note_is_heard_answered_and_recorded_as_a_voice_message(
        fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeTelegramApi() as tg:
        app: App = await start_telegram_app(_settings(make_settings, fake_llm, tg), monkeypatch)
        try:
            fake_llm.reply("Gdańsk! How is Ola settling in?")
            tg.push_voice(ANA, ANA, "my sister Ola moved to Gdańsk".encode(), duration=4)
            assert await _answer(tg, 0) == "Gdańsk! How is Ola settling in?"
            [(model, name, audio)] = fake_llm.transcription_requests
            assert (model, audio) == ("whisper-1", "my sister Ola moved to Gdańsk".encode())
            # The model read the person's words, as a turn of theirs; never the honest "I can only read text".
            said = fake_llm.requests[-1]["messages"][-1]["content"]
            assert "my sister Ola moved to Gdańsk" in said and "only read text" not in tg.texts_to(ANA)[0]
            rows = await app.db.run(history.recent, f"telegram:{ANA}", 5)
            mine = [r for r in rows if r.role == "user"]
            assert [(r.text, r.medium) for r in mine] == [(f"transcript of {name}: my sister Ola moved to Gdańsk",
                                                          "voice")]
            assert len(tg.downloads) == 1  # fetched once, kept nowhere
        finally:
            await app.close()


async def test_what_is_remembered_from_a_voice_note_says_it_was_one(
        fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeTelegramApi() as tg:
        settings = dataclasses.replace(_settings(make_settings, fake_llm, tg),
                                       memory=MemorySettings(embedder="none", capture=True))
        app = await start_telegram_app(settings, monkeypatch)

        def route(request: dict[str, Any]) -> Scripted | None:
            if request["messages"][0]["content"].startswith(CAPTURE_SYSTEM):
                return Scripted(text=json.dumps({"memories": [
                    fact("PERSON's sister Ola moved to Gdańsk", "my sister Ola moved to Gdańsk")]}))
            return Scripted(text="Noted.")

        fake_llm.route = route
        try:
            tg.push_voice(ANA, ANA, "so, my sister Ola moved to Gdańsk last week".encode())
            await _answer(tg, 0)
            await app.background.drain()
            notes = await app.memory.store.notes_of(await _person(app))
            assert notes, "nothing was captured from the voice note"
            assert {s.medium for n in notes for s in n.record.sources} == {"voice"}
        finally:
            await app.close()


async def _person(app: App) -> str:
    from people import directory

    return await app.db.run(lambda conn: directory.resolve(conn, f"telegram:{ANA}", "Ana", app.clock()))


async def test_a_note_too_long_is_told_its_limit_and_never_downloaded(
        fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeTelegramApi() as tg:
        app = await start_telegram_app(_settings(make_settings, fake_llm, tg, voice_max_seconds=60), monkeypatch)
        try:
            tg.push_voice(ANA, ANA, b"a very long story", duration=61)
            answer = await _answer(tg, 0)
            assert "longer than I can listen to (1 minute at most)" in answer
            assert tg.downloads == [] and fake_llm.transcription_requests == [] and fake_llm.requests == []
        finally:
            await app.close()


async def test_a_transcription_that_keeps_failing_for_a_while_still_gets_the_turn_answered(
        fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeTelegramApi() as tg:
        app = await start_telegram_app(_settings(make_settings, fake_llm, tg), monkeypatch)
        try:
            fake_llm.transcripts.extend([503, 503])  # the turn fails twice and is tried again each time
            fake_llm.reply("Got it: the dentist on Tuesday.")
            tg.push_voice(ANA, ANA, b"remind me about the dentist on Tuesday")
            await tg.wait_until(lambda: len(tg.texts_to(ANA)) > 0, timeout=60)
            assert tg.texts_to(ANA)[0] == "Got it: the dentist on Tuesday."
            assert len(fake_llm.transcription_requests) == 3
            assert len(tg.texts_to(ANA)) == 1  # answered once, no honest failure line beside it
        finally:
            await app.close()


async def test_without_a_transcription_model_a_voice_note_keeps_its_honest_line(
        fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeTelegramApi() as tg:
        settings = telegram_settings(make_settings(fake_llm), tg, policy={"dm": "open"})
        app = await start_telegram_app(settings, monkeypatch)
        try:
            tg.push_voice(ANA, ANA, b"hello?")
            assert "I can only read text so far, so that voice message didn't reach me" in await _answer(tg, 0)
            assert tg.downloads == [] and fake_llm.transcription_requests == []
        finally:
            await app.close()

