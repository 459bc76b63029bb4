"""Documents on Discord and on Slack, end to end (issue #35): a Markdown or PDF file sent in a DM is kept as the
person's document and its passages recalled in a later turn, as on Telegram (test_documents.py). kith as
``bot.py run`` builds it (build_app and the platform's own channel) against the loopback fake Discord (discord.py, its
CDN on the fake's address) and the fake Slack (slack-bolt and slack_sdk, private file URLs on the fake's address, served
to the bot token only), litellm against the fake model. The harness: tests/support/platform_dms.py."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import sqlalchemy as sa

from ground.config import DeliverySettings, MediaSettings, MemorySettings
from kith.app.lifecycle import App
from kith.settings import AppSettings
from llm.client import import_litellm
from memory.documents.book import documents
from people import history
from persona.labels import DOCUMENT_KEPT, DOCUMENTS_NOTICE
from tests.fakes import slack_api as fake_slack
from tests.fakes.openai_api import FakeOpenAI
from tests.support.pdf import pdf_of
from tests.support.platform_dms import PLATFORMS, PlatformDM, SlackDM, discord_dm, only_replies, platform_dm, slack_dm

import_litellm()

QUICK_DELIVERY = DeliverySettings(debounce_ms=20, stream=[], backoff_base_s=0.05, backoff_max_s=0.2, max_attempts=4)
RECIPES = b"""# Family recipes

## Pancakes

Two eggs, 200 g of flour, a pinch of cardamom and 300 ml of oat milk. Rest the batter for ten minutes.

## Lentil soup

Red lentils, cumin, a tin of tomatoes. Simmer for twenty-five minutes.
"""
LEASE = pdf_of([["Tenancy agreement", "The flat at 12 Quay Street is let from 1 March."],
                ["Deposit and rent", "The deposit is returned within thirty days after the keys come back."],
                ["Pets", "A cat is allowed with the landlord's written consent."]])
CAPTION = "here's my new lease"


@pytest.fixture(params=PLATFORMS)
async def side(request: pytest.FixtureRequest) -> AsyncIterator[PlatformDM]:
    """Ana's DM on the platform's fake, started; stopped after the test."""
    async for started in platform_dm(request.param):
        yield started


@pytest.fixture
async def slack_side() -> AsyncIterator[SlackDM]:
    async for started in slack_dm():
        yield started


def _settings(make_settings: Callable[..., AppSettings], fake_llm: FakeOpenAI) -> AppSettings:
    return dataclasses.replace(make_settings(fake_llm), delivery=QUICK_DELIVERY, media=MediaSettings(),
                               memory=MemorySettings(embedder="none", capture=False))


def _system(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


async def _kept_count(app: App) -> int:
    return int(await app.db.run(lambda c: c.execute(sa.select(sa.func.count()).select_from(documents)).scalar_one()))


# Discord states a Markdown file's type with its charset; Slack lists it as plain text (its filetype "markdown").
MARKDOWN_MIME = {"discord": "text/markdown; charset=utf-8", "slack": "text/plain"}


async def test_a_markdown_file_alone_in_a_dm_is_kept_and_its_passage_recalled_in_a_later_turn(
        side: PlatformDM, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = await side.start(_settings(make_settings, fake_llm), monkeypatch)
    try:
        side.send_file(RECIPES, "recipes.md", MARKDOWN_MIME[side.name])
        [kept] = await only_replies(side, 1)
        assert "recipes.md" in kept and "#1" in kept and "/docs" in kept
        assert fake_llm.requests == []  # acknowledged without a model call
        assert side.downloads() == 1  # fetched through the platform's file serving, once
        assert await _kept_count(app) == 1

        fake_llm.reply("Two eggs, flour, cardamom and oat milk.")
        side.send_text("what goes in my pancakes?")
        assert (await only_replies(side, 2))[1] == "Two eggs, flour, cardamom and oat milk."
        system = _system(fake_llm.requests[-1])
        assert DOCUMENTS_NOTICE in system
        first = system[system.index(DOCUMENTS_NOTICE):].splitlines()[1]
        assert first.startswith('- "recipes.md" (under "Pancakes"): "') and "a pinch of cardamom" in first
        assert "Red lentils" not in first
        assert side.downloads() == 1  # the kept text answers: the file is not fetched again
    finally:
        await app.close()


async def test_a_pdf_with_a_caption_is_kept_and_the_caption_answered_by_the_model(
        side: PlatformDM, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = await side.start(_settings(make_settings, fake_llm), monkeypatch)
    try:
        fake_llm.reply("Got it, I'll keep your lease.")
        side.send_file(LEASE, "lease.pdf", "application/pdf", CAPTION)
        assert await only_replies(side, 1) == ["Got it, I'll keep your lease."]
        [request] = fake_llm.requests
        said = request["messages"][-1]
        assert (said["role"], said["content"]) == ("user", f"{DOCUMENT_KEPT} {CAPTION}")
        assert side.downloads() == 1
        assert await _kept_count(app) == 1
        rows = await app.db.run(history.recent, side.conversation, 5)
        assert [(r.text, r.medium) for r in rows if r.role == "user"] == [(CAPTION, "document")]

        fake_llm.reply("Within thirty days.")
        side.send_text("when do I get the deposit back?")
        await only_replies(side, 2)
        part = _system(fake_llm.requests[-1])
        part = part[part.index(DOCUMENTS_NOTICE):]
        assert '- "lease.pdf" (page 2 of 3): "Deposit and rent' in part and "thirty days" in part
    finally:
        await app.close()


async def test_discord_fetches_a_document_from_its_cdn_without_the_bot_token(
        fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    async for side in discord_dm():
        app = await side.start(_settings(make_settings, fake_llm), monkeypatch)
        try:
            side.send_file(b"Bike lock code hint: the year grandma was born.", "bike.txt", "text/plain")
            assert "bike.txt" in (await only_replies(side, 1))[0]
            [download] = side.api.downloads
            assert (download.status, download.authorization) == (200, None)  # the CDN wants no token
        finally:
            await app.close()


async def test_slack_sends_the_bot_token_for_a_document_to_the_files_host_only(
        slack_side: SlackDM, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    api = slack_side.api
    app = await slack_side.start(_settings(make_settings, fake_llm), monkeypatch)
    try:
        slack_side.send_file(RECIPES, "recipes.md", "text/plain")
        assert "recipes.md" in (await only_replies(slack_side, 1))[0]
        [download] = api.file_downloads
        assert (download.token, download.served) == (fake_slack.FAKE_BOT_TOKEN, True)
        assert download.path.startswith("/files-pri/")

        # Slack's file host answers the next GET with a redirect to another host over plain http ("localhost" is
        # the very same fake under another name: a request carried there would show up in its downloads). It is not
        # followed; the turn is tried again, as after any passing failure, and that GET is served.
        shared = api.file_payload(slack_side.ANA, "notes.md", "text/plain", content=RECIPES)
        api.redirect_next_download(shared["url_private_download"].replace("127.0.0.1", "localhost"))
        api.push(api.dm_event(slack_side.ANA, "", files=[shared]))
        second = (await only_replies(slack_side, 2))[1]
        assert "notes.md" in second and "#2" in second
        assert [(d.token, d.status) for d in api.file_downloads] == [
            (fake_slack.FAKE_BOT_TOKEN, 200), (fake_slack.FAKE_BOT_TOKEN, 302),
            (fake_slack.FAKE_BOT_TOKEN, 200)]  # nothing reached "localhost"

        # A file listed on a host that is not Slack's file host: refused before any request, the token never sent.
        elsewhere = api.file_payload(slack_side.ANA, "other.md", "text/plain", content=RECIPES)
        for key in ("url_private", "url_private_download"):
            elsewhere[key] = elsewhere[key].replace("127.0.0.1", "localhost")
        api.push(api.dm_event(slack_side.ANA, "", files=[elsewhere]))
        assert "couldn't get that document" in (await only_replies(slack_side, 3))[2]
        assert len(api.file_downloads) == 3
        assert await _kept_count(app) == 2
        assert fake_llm.requests == []
    finally:
        await app.close()
