"""Voice notes and photos on Discord and on Slack, end to end (issue #35): kith as ``bot.py run`` builds it (build_app
and the platform's own channel) against the loopback fake Discord (discord.py, its CDN on the fake's address) and the
fake Slack (slack-bolt and slack_sdk, private file URLs on the fake's address), the transcription through litellm
against the fake OpenAI-compatible model's /v1/audio/transcriptions. The Telegram path: test_voice_notes.py and
test_photos.py.

The fake model transcribes by reading the "audio" as UTF-8 (``transcript of <file name>: <bytes>``), so a transcript
names exactly the bytes the channel fetched."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from ground.config import DeliverySettings, MediaSettings
from kith.settings import AppSettings
from llm.client import import_litellm
from people import history
from tests.fakes.openai_api import FakeOpenAI
from tests.support.platform_dms import PLATFORMS, PlatformDM, only_replies, platform_dm

import_litellm()

QUICK_DELIVERY = DeliverySettings(debounce_ms=20, stream=[], backoff_base_s=0.05, backoff_max_s=0.2, max_attempts=4)
BIKE = b"\xff\xd8\xff\xe0 a JPEG of a red bike \x00\x01\x02\xfe"
CAPTION = "look at my new bike"
ONLY_TEXT = "only read text"


@pytest.fixture(params=PLATFORMS)
async def side(request: pytest.FixtureRequest) -> AsyncIterator[PlatformDM]:
    """Ana's DM on the platform's fake, started; stopped after the test."""
    async for started in platform_dm(request.param):
        yield started


def _settings(make_settings: Callable[..., AppSettings], fake_llm: FakeOpenAI, **media: Any) -> AppSettings:
    return dataclasses.replace(make_settings(fake_llm), delivery=QUICK_DELIVERY, media=MediaSettings(**media))


def _hearing(make_settings: Callable[..., AppSettings], fake_llm: FakeOpenAI) -> AppSettings:
    return _settings(make_settings, fake_llm, transcription_model="openai/whisper-1",
                     transcription_api_base=fake_llm.base_url)


async def _only_reply(side: PlatformDM) -> str:
    """The one message the bot posted in the DM; a second one (a doubled or extra answer) fails the test."""
    return (await only_replies(side, 1))[0]


def _images(content: Any) -> list[str]:
    return [p["image_url"]["url"] for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []


def _texts(content: Any) -> list[str]:
    return [p["text"] for p in content if p.get("type") == "text"] if isinstance(content, list) else [content]


async def test_a_voice_message_is_transcribed_answered_and_recorded_as_voice(
        side: PlatformDM, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = await side.start(_hearing(make_settings, fake_llm), monkeypatch)
    try:
        said = f"my sister Ola moved to Gdańsk ({side.name})"
        fake_llm.reply("Gdańsk! How is Ola settling in?")
        side.send_voice(said.encode())
        assert await _only_reply(side) == "Gdańsk! How is Ola settling in?"

        [(model, name, audio)] = fake_llm.transcription_requests
        assert (model, name, audio) == ("whisper-1", side.voice_file, said.encode())  # exactly the bytes sent
        transcript = f"transcript of {side.voice_file}: {said}"
        last = fake_llm.requests[-1]["messages"][-1]
        assert last["role"] == "user" and transcript in last["content"]
        assert ONLY_TEXT not in side.replies()[0]
        rows = await app.db.run(history.recent, side.conversation, 5)
        assert [(r.text, r.medium) for r in rows if r.role == "user"] == [(transcript, "voice")]
        assert side.downloads() == 1
    finally:
        await app.close()


# Slack also answers a file its token may not open with its sign-in page (HTTP 200): gone as well.
@pytest.mark.parametrize(("side", "how"), [("discord", "404"), ("slack", "404"), ("slack", "login page")],
                         indirect=["side"])
async def test_a_voice_message_the_platform_no_longer_serves_gets_one_honest_line(
        side: PlatformDM, how: str, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = await side.start(_hearing(make_settings, fake_llm), monkeypatch)
    try:
        side.fail_next_download(how)
        side.send_voice(b"remind me about the dentist on Tuesday")
        answer = await _only_reply(side)
        assert "couldn't get that voice message" in answer
        assert side.downloads() == 1  # it was asked for, once: a file that is gone is not tried again
        assert fake_llm.transcription_requests == [] and fake_llm.requests == []
    finally:
        await app.close()


async def test_a_model_that_sees_is_shown_the_photo_with_its_caption(
        side: PlatformDM, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = await side.start(_settings(make_settings, fake_llm, vision=True), monkeypatch)
    try:
        fake_llm.reply("What a red! Is it new?")
        side.send_photo(BIKE, CAPTION)
        assert await _only_reply(side) == "What a red! Is it new?"
        shown = fake_llm.requests[-1]["messages"][-1]
        assert shown["role"] == "user" and isinstance(shown["content"], list)
        assert _images(shown["content"]) == ["data:image/jpeg;base64," + base64.b64encode(BIKE).decode()]
        assert _texts(shown["content"]) == [f"[sent a photo: it is shown with this message] {CAPTION}"]
        assert side.downloads() == 1
    finally:
        await app.close()


async def test_a_model_that_does_not_see_is_told_a_photo_came_and_nothing_is_downloaded(
        side: PlatformDM, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = await side.start(_settings(make_settings, fake_llm, vision=False), monkeypatch)
    try:
        fake_llm.reply("Sounds fun. What colour is it?")
        side.send_photo(BIKE, CAPTION)
        assert await _only_reply(side) == "Sounds fun. What colour is it?"
        said = fake_llm.requests[-1]["messages"][-1]
        assert (said["role"], said["content"]) == ("user", f"[sent a photo you cannot see] {CAPTION}")
        assert side.downloads() == 0
    finally:
        await app.close()
