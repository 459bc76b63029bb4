"""Replies that stream on Telegram: the real python-telegram-bot, the loopback Bot API with its message drafts, a
fake model that streams at a fixed pace. A private chat sees the reply grow as a draft, then exactly one message
with the whole reply and no draft left; flood control ends the preview without growing the ban; a server without
drafts, and a group, get the whole reply once."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable

import pytest

from ground.config import Settings
from kith.app.lifecycle import App
from llm.client import import_litellm
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.fakes.telegram_api import FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.telegram_app import start_telegram_app, telegram_settings

import_litellm()  # seconds, once: the first reply must not race the test's timeouts

ANA = 501
GROUP = -100_777
REPLY = ("Here is **the plan** for Monday: call [Ola](https://example.com/ola) about `the cello`, then book "
         "the train to Gdańsk & pack <everything>. That is all for today, and it is plenty.")


@pytest.fixture
async def app(fake_llm: FakeOpenAI, make_settings: Callable[..., Settings], telegram_api: FakeTelegramApi,  # noqa: F811
              monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    settings = telegram_settings(make_settings(fake_llm), telegram_api, policy={"dm": "open",
                                                                               "allow_groups": [str(GROUP)]})
    settings = dataclasses.replace(settings, delivery=dataclasses.replace(settings.delivery, stream_gap_s=0.15,
                                                                          stream_give_up_s=3.0))
    started = await start_telegram_app(settings, monkeypatch)
    yield started
    await started.close()


def streamed(fake_llm: FakeOpenAI, text: str = REPLY, *, chunk_chars: int = 6, delay_s: float = 0.05) -> None:
    fake_llm.queue.append(Scripted(text=text, chunk_chars=chunk_chars, chunk_delay_s=delay_s))


async def answered(tg: FakeTelegramApi, chat: int, before: int = 0) -> list[str]:
    await tg.wait_until(lambda: len(tg.texts_to(chat)) > before, timeout=45)
    await asyncio.sleep(0.5)  # time for anything doubled, or a draft after the message, to show up
    return tg.texts_to(chat)


async def test_a_private_reply_grows_as_a_draft_then_is_one_whole_message(
        app: App, fake_llm: FakeOpenAI, telegram_api: FakeTelegramApi) -> None:  # noqa: F811
    streamed(fake_llm)
    telegram_api.push_text(ANA, ANA, "what's the plan?")
    sent = await answered(telegram_api, ANA)
    final = sent[-1]
    assert len(sent) == 1 and final.startswith("Here is the plan for Monday") and final.endswith("plenty.")
    drafts = [d.visible_text for d in telegram_api.drafts_to(ANA)]
    assert len(drafts) >= 3, drafts  # it grew while the model wrote it
    # Every preview is the start of the reply as it is finally shown: no "**", "`" or "[" flashing up.
    assert all(final.startswith(d.rstrip()) for d in drafts), drafts
    assert fake_llm.requests[-1]["stream"] is True
    view = telegram_api.seen_in(ANA)
    assert view.draft is None and view.messages == (final,)  # the draft is gone, the message is there once


async def test_flood_control_during_a_stream_ends_the_preview_and_the_reply_still_comes_once(
        app: App, fake_llm: FakeOpenAI, telegram_api: FakeTelegramApi) -> None:  # noqa: F811
    streamed(fake_llm, delay_s=0.08)
    telegram_api.fail_next("sendMessageDraft", 429, retry_after=6)  # past the give-up (3 s): the preview ends
    telegram_api.push_text(ANA, ANA, "what's the plan?")
    sent = await answered(telegram_api, ANA)
    assert len(sent) == 1 and sent[0].endswith("plenty.")
    calls = [c.method for c in telegram_api.calls if c.method.lower() == "sendmessagedraft"]
    assert len(calls) == 1  # the refused one only: no preview kept editing into the ban
    assert telegram_api.seen_in(ANA).draft is None


async def test_a_short_wait_pauses_the_preview_and_it_goes_on(
        app: App, fake_llm: FakeOpenAI, telegram_api: FakeTelegramApi) -> None:  # noqa: F811
    streamed(fake_llm, delay_s=0.08)
    telegram_api.fail_next("sendMessageDraft", 429, retry_after=1)
    telegram_api.push_text(ANA, ANA, "what's the plan?")
    sent = await answered(telegram_api, ANA)
    assert len(sent) == 1 and sent[0].endswith("plenty.")
    assert len(telegram_api.drafts_to(ANA)) >= 1  # previews went on after the one-second wait


async def test_a_server_without_drafts_gets_the_whole_reply_once(
        app: App, fake_llm: FakeOpenAI, telegram_api: FakeTelegramApi) -> None:  # noqa: F811
    telegram_api.refuse("sendMessageDraft")
    streamed(fake_llm)
    telegram_api.push_text(ANA, ANA, "what's the plan?")
    sent = await answered(telegram_api, ANA)
    assert len(sent) == 1 and sent[0].endswith("plenty.") and telegram_api.drafts_to(ANA) == []
    refused = [c for c in telegram_api.calls if c.method.lower() == "sendmessagedraft"]
    assert len(refused) == 1  # asked once, then the reply came whole


async def test_a_group_keeps_whole_replies(app: App, fake_llm: FakeOpenAI,
                                           telegram_api: FakeTelegramApi) -> None:  # noqa: F811
    streamed(fake_llm)
    telegram_api.push_text(GROUP, ANA, "@kith_test_bot what is the plan?", chat_type="supergroup", chat_title="Flat")
    sent = await answered(telegram_api, GROUP)
    assert len(sent) == 1 and sent[0].endswith("plenty.") and telegram_api.drafts_to(GROUP) == []
