"""Voice notes and photos on Discord and on Slack, end to end (issue #35): kith as ``bot.py run`` builds it (build_app
and the platform's own channel) against the loopback fake Discord (discord.py, its CDN on the fake's address) and the
fake Slack (slack-bolt and slack_sdk, private file URLs on the fake's address), the transcription through litellm
against the fake OpenAI-compatible model's /v1/audio/transcriptions. The Telegram path: test_voice_notes.py and
test_photos.py.

The fake model transcribes by reading the "audio" as UTF-8 (``transcript of <file name>: <bytes>``), so a transcript
names exactly the bytes the channel fetched."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from channels.slack.settings import SlackSettings
from ground.config import DeliverySettings, MediaSettings
from kith.app.lifecycle import App
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.settings import AppSettings
from llm.client import import_litellm
from people import history
from tests.fakes import discord_api as fake_discord
from tests.fakes import slack_api as fake_slack
from tests.fakes.discord_api import FakeDiscord, discord_py_pointed_at
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.slack_api import FakeSlack

import_litellm()

QUICK_DELIVERY = DeliverySettings(debounce_ms=20, stream=[], backoff_base_s=0.05, backoff_max_s=0.2, max_attempts=4)
BIKE = b"\xff\xd8\xff\xe0 a JPEG of a red bike \x00\x01\x02\xfe"
CAPTION = "look at my new bike"
ONLY_TEXT = "only read text"


class Side:
    """One platform's fake, with what the tests do there and see there."""

    name: str
    voice_file: str

    async def start(self, settings: AppSettings, monkeypatch: pytest.MonkeyPatch) -> App:
        raise NotImplementedError

    def send_voice(self, audio: bytes) -> None:
        raise NotImplementedError

    def send_photo(self, data: bytes, caption: str) -> None:
        raise NotImplementedError

    def fail_next_download(self, how: str) -> None:
        raise NotImplementedError

    def replies(self) -> list[str]:
        raise NotImplementedError

    def downloads(self) -> int:
        raise NotImplementedError

    @property
    def conversation(self) -> str:
        raise NotImplementedError

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 8.0) -> None:
        raise NotImplementedError


async def _started(side: Side, settings: AppSettings) -> App:
    app = await build_app(settings, warm_llm=False)
    try:
        assert await app.start(platform_channels(settings, app)) == [side.name]
    except BaseException:
        await app.close()
        raise
    return app


class DiscordSide(Side):
    name = "discord"
    voice_file = "voice-message.ogg"
    ANA = 200_000_000_000_000_001

    def __init__(self, api: FakeDiscord) -> None:
        self.api = api
        api.add_user(self.ANA, "ana", global_name="Ana")
        self.dm = api.open_dm(self.ANA)
        self.deleting = False  # the next message sent is deleted at once (fail_next_download)

    async def start(self, settings: AppSettings, monkeypatch: pytest.MonkeyPatch) -> App:
        monkeypatch.setenv("DISCORD_BOT_TOKEN", fake_discord.FAKE_DISCORD_TOKEN)
        return await _started(self, dataclasses.replace(settings, policy={"discord": {"dm": "open"}}))

    def send_voice(self, audio: bytes) -> None:
        sent = self.api.push_voice_message(self.dm, self.ANA, audio, duration_s=4.0)
        if self.deleting:  # deleted before kith read it: asked again, Discord no longer knows the message either
            del self.api.messages[int(sent["id"])]

    def send_photo(self, data: bytes, caption: str) -> None:
        self.api.push_message(self.dm, self.ANA, caption, attachments=[
            self.api.attachment(self.dm, "bike.jpg", "image/jpeg", data)])

    def fail_next_download(self, how: str) -> None:
        assert how == "404"
        self.api.fail_downloads(404)
        self.deleting = True

    def replies(self) -> list[str]:
        return self.api.seen_in(self.dm)

    def downloads(self) -> int:
        return len(self.api.downloads)

    @property
    def conversation(self) -> str:
        return f"discord:{self.dm}"

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 8.0) -> None:
        await self.api.wait_until(predicate, timeout)


class SlackSide(Side):
    name = "slack"
    voice_file = "audio_message.webm"
    ANA = "U0ANA"

    def __init__(self, api: FakeSlack) -> None:
        self.api = api
        api.add_user(self.ANA, "ana")
        self.dm = api.dm_channel(self.ANA)

    async def start(self, settings: AppSettings, monkeypatch: pytest.MonkeyPatch) -> App:
        monkeypatch.setenv("SLACK_BOT_TOKEN", fake_slack.FAKE_BOT_TOKEN)
        monkeypatch.setenv("SLACK_APP_TOKEN", fake_slack.FAKE_APP_TOKEN)
        return await _started(self, dataclasses.replace(settings, slack=SlackSettings(api_url=self.api.api_url),
                                                        policy={"slack": {"dm": "open"}}))

    def send_voice(self, audio: bytes) -> None:
        self.api.push(self.api.dm_event(self.ANA, "", files=[self.api.file_payload(
            self.ANA, self.voice_file, "audio/webm", subtype="slack_audio", content=audio, duration_ms=4000)]))

    def send_photo(self, data: bytes, caption: str) -> None:
        self.api.push(self.api.dm_event(self.ANA, caption, files=[self.api.file_payload(
            self.ANA, "bike.jpg", "image/jpeg", content=data)]))

    def fail_next_download(self, how: str) -> None:
        if how == "404":
            self.api.fail_downloads(404)
        else:
            assert how == "login page"
            self.api.answer_login_page()

    def replies(self) -> list[str]:
        return list(self.api.seen_in(self.dm).messages)

    def downloads(self) -> int:
        return len(self.api.file_downloads)

    @property
    def conversation(self) -> str:
        return f"slack:{self.dm}"

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 8.0) -> None:
        await self.api.wait_until(predicate, timeout)


@pytest.fixture(params=["discord", "slack"])
async def side(request: pytest.FixtureRequest) -> AsyncIterator[Side]:
    """The platform's fake, started (discord.py pointed at the fake Discord); stopped after the test."""
    if request.param == "discord":
        discord = FakeDiscord()
        await discord.start()
        try:
            with discord_py_pointed_at(discord):
                yield DiscordSide(discord)
        finally:
            await discord.stop()
    else:
        slack = FakeSlack()
        await slack.start()
        try:
            yield SlackSide(slack)
        finally:
            await slack.stop()


def _settings(make_settings: Callable[..., AppSettings], fake_llm: FakeOpenAI, **media: Any) -> AppSettings:
    return dataclasses.replace(make_settings(fake_llm), delivery=QUICK_DELIVERY, media=MediaSettings(**media))


def _hearing(make_settings: Callable[..., AppSettings], fake_llm: FakeOpenAI) -> AppSettings:
    return _settings(make_settings, fake_llm, transcription_model="openai/whisper-1",
                     transcription_api_base=fake_llm.base_url)


async def _only_reply(side: Side) -> str:
    """The one message the bot posted in the DM; a second one (a doubled or extra answer) fails the test."""
    await side.wait_until(lambda: len(side.replies()) >= 1)
    await asyncio.sleep(0.4)  # anything doubled shows up by now
    replies = side.replies()
    assert len(replies) == 1, replies
    return replies[0]


def _images(content: Any) -> list[str]:
    return [p["image_url"]["url"] for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []


def _texts(content: Any) -> list[str]:
    return [p["text"] for p in content if p.get("type") == "text"] if isinstance(content, list) else [content]


async def test_a_voice_message_is_transcribed_answered_and_recorded_as_voice(
        side: Side, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
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
        side: Side, how: str, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
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
        side: Side, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
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
        side: Side, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
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
