"""Replies that stream on Slack: the real slack-bolt and slack_sdk against the loopback fake (Web API + Socket
Mode). The reply grows as one message kith updates (chat.update); the outbox's final send updates that same message
into the whole reply, so the person sees exactly one message and nothing left streaming."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable

import pytest

from channels.slack.settings import SlackSettings
from ground.config import DeliverySettings, MemorySettings, Settings
from kith.app.lifecycle import App
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from llm.client import import_litellm
from tests.fakes import slack_api as fake_slack
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.fakes.slack_api import FakeSlack, slack_api  # noqa: F401

import_litellm()

ANA = "U0ANA"
REPLY = ("Here is **the plan** for Monday: call Ola about `the cello`, then book the train to Gdańsk. "
         "That is all for today, and it is plenty.")
FINAL = "Here is *the plan* for Monday: call Ola about `the cello`, then book the train to Gdańsk. " \
        "That is all for today, and it is plenty."


@pytest.fixture
async def app(slack_api: FakeSlack, fake_llm: FakeOpenAI, make_settings: Callable[..., Settings],
              monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    monkeypatch.setenv("SLACK_BOT_TOKEN", fake_slack.FAKE_BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", fake_slack.FAKE_APP_TOKEN)
    slack_api.add_user(ANA, "ana")
    settings = dataclasses.replace(
        make_settings(fake_llm), slack=SlackSettings(api_url=slack_api.api_url),
        memory=MemorySettings(embedder="none", capture=False),
        delivery=DeliverySettings(debounce_ms=20, stream=["slack"], stream_gap_s=0.15, backoff_base_s=0.05,
                                  backoff_max_s=0.2),
        policy={"slack": {"dm": "open"}})
    built = await build_app(settings, warm_llm=False)
    assert await built.start(platform_channels(settings, built)) == ["slack"]
    yield built
    await built.close()


async def test_the_reply_grows_in_one_message_that_ends_whole(app: App, slack_api: FakeSlack,
                                                               fake_llm: FakeOpenAI) -> None:
    dm = slack_api.dm_channel(ANA)
    fake_llm.queue.append(Scripted(text=REPLY, chunk_chars=6, chunk_delay_s=0.06))
    slack_api.push_dm(ANA, "what's the plan?")
    await slack_api.wait_until(lambda: slack_api.seen_in(dm).messages[-1:] == (FINAL,), timeout=20)
    await asyncio.sleep(0.5)  # anything doubled shows up by now
    view = slack_api.seen_in(dm)
    assert view.messages == (FINAL,) and view.streaming == ()
    (posted,) = [p for p in slack_api.posted if p.channel == dm]
    shown = slack_api.versions(dm, posted.ts)
    assert len(shown) >= 3, shown  # posted with the first words, updated as the model wrote
