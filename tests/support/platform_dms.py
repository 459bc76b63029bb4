"""One person's DM on the fake Discord or the fake Slack, as the end-to-end tests of files drive it.

kith starts as ``bot.py run`` builds it (build_app and the platform's own channel) against the loopback fake:
discord.py pointed at the fake Discord (its CDN on the fake's address), or slack-bolt and slack_sdk at the fake
Slack (private file URLs on the fake's address). A test sends text, files, voice notes and photos as the person,
and reads what the bot posted and how many files it fetched.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable

import pytest

from channels.slack.settings import SlackSettings
from kith.app.lifecycle import App
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.settings import AppSettings
from tests.fakes import discord_api as fake_discord
from tests.fakes import slack_api as fake_slack
from tests.fakes.discord_api import FakeDiscord, discord_py_pointed_at
from tests.fakes.slack_api import FakeSlack

PLATFORMS = ("discord", "slack")


class PlatformDM:
    """One platform's fake and Ana's DM on it."""

    name: str
    voice_file: str  # the name the platform gives a voice message's file

    async def start(self, settings: AppSettings, monkeypatch: pytest.MonkeyPatch) -> App:
        raise NotImplementedError

    def send_text(self, text: str) -> None:
        raise NotImplementedError

    def send_file(self, data: bytes, name: str, mime: str, text: str = "") -> None:
        raise NotImplementedError

    def send_voice(self, audio: bytes) -> None:
        raise NotImplementedError

    def send_photo(self, data: bytes, caption: str) -> None:
        raise NotImplementedError

    def fail_next_download(self, how: str) -> None:
        """The next file asked for is gone: ``"404"``, or on Slack also ``"login page"``."""
        raise NotImplementedError

    def replies(self) -> list[str]:
        """What the bot posted in the DM, in order."""
        raise NotImplementedError

    def downloads(self) -> int:
        """The file GETs the fake answered, served or not."""
        raise NotImplementedError

    @property
    def conversation(self) -> str:
        raise NotImplementedError

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 8.0) -> None:
        raise NotImplementedError


async def _started(dm: PlatformDM, settings: AppSettings) -> App:
    app = await build_app(settings, warm_llm=False)
    try:
        assert await app.start(platform_channels(settings, app)) == [dm.name]
    except BaseException:
        await app.close()
        raise
    return app


class DiscordDM(PlatformDM):
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

    def send_text(self, text: str) -> None:
        self.api.push_message(self.dm, self.ANA, text)

    def send_file(self, data: bytes, name: str, mime: str, text: str = "") -> None:
        self.api.push_message(self.dm, self.ANA, text, attachments=[self.api.attachment(self.dm, name, mime, data)])

    def send_voice(self, audio: bytes) -> None:
        sent = self.api.push_voice_message(self.dm, self.ANA, audio, duration_s=4.0)
        if self.deleting:  # deleted before kith read it: asked again, Discord no longer knows the message either
            del self.api.messages[int(sent["id"])]

    def send_photo(self, data: bytes, caption: str) -> None:
        self.send_file(data, "bike.jpg", "image/jpeg", caption)

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


class SlackDM(PlatformDM):
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

    def send_text(self, text: str) -> None:
        self.api.push_dm(self.ANA, text)

    def send_file(self, data: bytes, name: str, mime: str, text: str = "") -> None:
        self.api.push(self.api.dm_event(self.ANA, text, files=[self.api.file_payload(
            self.ANA, name, mime, content=data)]))

    def send_voice(self, audio: bytes) -> None:
        self.api.push(self.api.dm_event(self.ANA, "", files=[self.api.file_payload(
            self.ANA, self.voice_file, "audio/webm", subtype="slack_audio", content=audio, duration_ms=4000)]))

    def send_photo(self, data: bytes, caption: str) -> None:
        self.send_file(data, "bike.jpg", "image/jpeg", caption)

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


async def discord_dm() -> AsyncIterator[DiscordDM]:
    """Ana's DM on a started fake Discord, discord.py pointed at it; the fake stopped afterwards."""
    discord = FakeDiscord()
    await discord.start()
    try:
        with discord_py_pointed_at(discord):
            yield DiscordDM(discord)
    finally:
        await discord.stop()


async def slack_dm() -> AsyncIterator[SlackDM]:
    """Ana's DM on a started fake Slack; the fake stopped afterwards."""
    slack = FakeSlack()
    await slack.start()
    try:
        yield SlackDM(slack)
    finally:
        await slack.stop()


async def platform_dm(name: str) -> AsyncIterator[PlatformDM]:
    async for started in (discord_dm() if name == "discord" else slack_dm()):
        yield started


async def only_replies(dm: PlatformDM, n: int, settle_s: float = 0.4) -> list[str]:
    """The bot's first ``n`` messages in the DM, and no more after a short while (a doubled answer fails)."""
    await dm.wait_until(lambda: len(dm.replies()) >= n)
    await asyncio.sleep(settle_s)  # anything doubled shows up by now
    replies = dm.replies()
    assert len(replies) == n, replies
    return replies
