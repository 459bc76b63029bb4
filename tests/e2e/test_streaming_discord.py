"""Replies that stream on Discord: the real discord.py against the loopback fake (REST + gateway). Discord has no
drafts, so the reply grows as one message kith edits; the outbox's final send edits that same message into the
whole reply, so the person sees exactly one message; a preview the person deleted meanwhile gets a fresh message."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable

import pytest

from ground.config import DeliverySettings, MemorySettings, Settings
from kith.app.lifecycle import App
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from llm.client import import_litellm
from tests.fakes import discord_api as fake_discord
from tests.fakes.discord_api import FakeDiscord, discord_api  # noqa: F401
from tests.fakes.openai_api import FakeOpenAI, Scripted

import_litellm()

ANA = 200_000_000_000_000_001
REPLY = ("Here is **the plan** for Monday: call Ola about `the cello`, then book the train to Gdańsk. "
         "That is all for today, and it is plenty.")
FINAL = "Here is **the plan** for Monday: call Ola about `the cello`, then book the train to Gdańsk. " \
        "That is all for today, and it is plenty."


@pytest.fixture
async def app(discord_api: FakeDiscord, fake_llm: FakeOpenAI, make_settings: Callable[..., Settings],
              monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    monkeypatch.setenv("DISCORD_BOT_TOKEN", fake_discord.FAKE_DISCORD_TOKEN)
    discord_api.add_user(ANA, "ana", global_name="Ana")
    settings = dataclasses.replace(
        make_settings(fake_llm), memory=MemorySettings(embedder="none", capture=False),
        delivery=DeliverySettings(debounce_ms=20, stream=["discord"], stream_gap_s=0.15, backoff_base_s=0.05,
                                  backoff_max_s=0.2),
        policy={"discord": {"dm": "open"}})
    built = await build_app(settings, warm_llm=False)
    assert await built.start(platform_channels(settings, built)) == ["discord"]
    yield built
    await built.close()


def streamed(fake_llm: FakeOpenAI, text: str = REPLY) -> None:
    fake_llm.queue.append(Scripted(text=text, chunk_chars=6, chunk_delay_s=0.06))


async def settled_view(api: FakeDiscord, dm: int) -> list[str]:
    await api.wait_until(lambda: api.seen_in(dm) and api.seen_in(dm)[-1] == FINAL, timeout=20)
    await asyncio.sleep(0.5)  # anything doubled shows up by now
    return api.seen_in(dm)


async def test_the_reply_grows_in_one_message_that_ends_whole(app: App, discord_api: FakeDiscord,
                                                               fake_llm: FakeOpenAI) -> None:
    dm = discord_api.open_dm(ANA)
    streamed(fake_llm)
    discord_api.push_message(dm, ANA, "what's the plan?")
    assert await settled_view(discord_api, dm) == [FINAL]  # one message, the whole reply
    (posted,) = [p for p in discord_api.posted if p.channel_id == dm]
    shown = discord_api.edits_of(posted.id)
    assert len(shown) >= 3, shown  # it grew: posted with the first words, edited as the model wrote
    assert all(FINAL.startswith(s.rstrip("…").rstrip()) for s in shown), shown


async def test_a_preview_deleted_meanwhile_gives_way_to_a_new_whole_message(
        app: App, discord_api: FakeDiscord, fake_llm: FakeOpenAI) -> None:
    dm = discord_api.open_dm(ANA)
    fake_llm.queue.append(Scripted(text=REPLY, chunk_chars=6, chunk_delay_s=0.12))
    discord_api.push_message(dm, ANA, "what's the plan?")
    await discord_api.wait_for_posted(1, timeout=20)
    first = discord_api.posted[0].id
    discord_api.messages.pop(first)  # the person deleted the half reply while it grew
    view = await settled_view(discord_api, dm)
    assert view == [FINAL]
