"""A Discord attachment whose signed CDN URL has expired by the time kith reads it (a turn taken up again a day after
an outage): the message it came in is read again through the API and its fresh URL fetched; a message deleted
meanwhile gets the honest line. kith as ``bot.py run`` builds it against the loopback fake Discord (its CDN refusing
expired URLs as Discord's does), litellm against the fake model."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable

import pytest
import sqlalchemy as sa

from ground.config import DeliverySettings, MemorySettings
from kith.app.lifecycle import App
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.settings import AppSettings
from memory.documents.book import documents
from tests.fakes import discord_api as fake_discord
from tests.fakes.discord_api import FakeDiscord, discord_py_pointed_at
from tests.fakes.openai_api import FakeOpenAI

ANA = 200_000_000_000_000_007
NOTES = b"## Boiler\n\nThe boiler is serviced every May by Jan."


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    api = FakeDiscord()
    await api.start()
    try:
        with discord_py_pointed_at(api):
            yield api
    finally:
        await api.stop()


def _settings(make_settings: Callable[..., AppSettings], fake_llm: FakeOpenAI) -> AppSettings:
    return dataclasses.replace(make_settings(fake_llm), policy={"discord": {"dm": "open"}},
                               delivery=DeliverySettings(debounce_ms=20, stream=[], backoff_base_s=0.05,
                                                         backoff_max_s=0.2, max_attempts=4),
                               memory=MemorySettings(embedder="none", capture=False))


async def _started(discord: FakeDiscord, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
                   monkeypatch: pytest.MonkeyPatch) -> tuple[int, App]:
    """Ana's DM, and kith running on the fake Discord."""
    discord.add_user(ANA, "ana", global_name="Ana")
    dm = discord.open_dm(ANA)
    monkeypatch.setenv("DISCORD_BOT_TOKEN", fake_discord.FAKE_DISCORD_TOKEN)
    settings = _settings(make_settings, fake_llm)
    app = await build_app(settings, warm_llm=False)
    try:
        assert await app.start(platform_channels(settings, app)) == ["discord"]
    except BaseException:
        await app.close()
        raise
    return dm, app


async def test_an_expired_attachment_url_is_signed_again_through_its_message_and_the_file_read(
        discord: FakeDiscord, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    dm, app = await _started(discord, fake_llm, make_settings, monkeypatch)
    try:
        stale = discord.attachment(dm, "boiler.md", "text/markdown", NOTES)
        discord.expire_attachment_urls()  # the URL the event carries is a day old by the time it is read
        discord.push_message(dm, ANA, "", attachments=[stale])
        await discord.wait_until(lambda: len(discord.seen_in(dm)) >= 1, 10)
        assert "“boiler.md” (#1" in discord.seen_in(dm)[0]
        assert [d.status for d in discord.downloads] == [404, 200]  # refused as expired, then read afresh
        assert [c.name for c in discord.calls].count("get_message") == 1
        assert await app.db.run(lambda c: c.execute(sa.select(documents.c.name)).scalars().all()) == ["boiler.md"]
    finally:
        await app.close()


async def test_an_expired_attachment_whose_message_was_deleted_gets_the_honest_line(
        discord: FakeDiscord, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    dm, app = await _started(discord, fake_llm, make_settings, monkeypatch)
    try:
        stale = discord.attachment(dm, "boiler.md", "text/markdown", NOTES)
        discord.expire_attachment_urls()
        sent = discord.push_message(dm, ANA, "", attachments=[stale])
        del discord.messages[int(sent["id"])]  # deleted before kith read it
        await discord.wait_until(lambda: len(discord.seen_in(dm)) >= 1, 10)
        assert "couldn't get that document" in discord.seen_in(dm)[0]
        assert await app.db.run(lambda c: c.execute(sa.select(sa.func.count()).select_from(documents))
                                .scalar_one()) == 0
    finally:
        await app.close()
