"""Replies that stream on Slack: the real slack-bolt and slack_sdk against the loopback fake (Web API + Socket
Mode). At a DM's top level the reply grows as one message kith updates (chat.update); in a thread it is Slack's own
stream (chat.startStream, then appendStream). Either way the outbox's final send updates that same message into the
whole reply, so the person sees exactly one message and nothing left streaming."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from channels.slack.settings import SlackSettings
from ground.config import DeliverySettings, MemorySettings, Settings
from kith.app.lifecycle import App
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from llm.client import import_litellm
from tests.fakes import slack_api as fake_slack
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.fakes.slack_api import ChannelView, FakeSlack, slack_api  # noqa: F401

import_litellm()

ANA = "U0ANA"
REPLY = ("Here is **the plan** for Monday: call Ola about `the cello`, then book the train to Gdańsk. "
         "That is all for today, and it is plenty.")
FINAL = "Here is *the plan* for Monday: call Ola about `the cello`, then book the train to Gdańsk. " \
        "That is all for today, and it is plenty."


StartApp = Callable[..., Awaitable[App]]


@pytest.fixture
async def start_app(slack_api: FakeSlack, fake_llm: FakeOpenAI, make_settings: Callable[..., Settings],
                    monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[StartApp]:
    """Starts kith on the fake Slack, with ``[slack]`` settings of the test's choosing; closed after the test."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", fake_slack.FAKE_BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", fake_slack.FAKE_APP_TOKEN)
    slack_api.add_user(ANA, "ana")
    started: list[App] = []

    async def start(**slack: object) -> App:
        settings = dataclasses.replace(
            make_settings(fake_llm), slack=SlackSettings(api_url=slack_api.api_url, **slack),  # type: ignore[arg-type]
            memory=MemorySettings(embedder="none", capture=False),
            delivery=DeliverySettings(debounce_ms=20, stream=["slack"], stream_gap_s=0.15, backoff_base_s=0.05,
                                      backoff_max_s=0.2),
            policy={"slack": {"dm": "open"}})
        built = await build_app(settings, warm_llm=False)
        started.append(built)
        assert await built.start(platform_channels(settings, built)) == ["slack"]
        return built

    yield start
    for built in started:
        await built.close()


@pytest.fixture
async def app(start_app: StartApp) -> App:
    return await start_app()


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
    assert _methods(slack_api, "chat.startStream") == []  # a top-level reply is no thread: no native stream


# --- Threaded replies: Slack's native stream ---------------------------------------------------------------------
def _methods(fake: FakeSlack, *methods: str) -> list[str]:
    return [c.method for c in fake.calls if c.method in methods]


def _thread(fake: FakeSlack) -> tuple[str, str]:
    """Ana's DM and a message of hers there that starts a thread (the bot never saw it)."""
    event = fake.dm_event(ANA, "a thread about Monday")["event"]
    return event["channel"], event["ts"]


async def _threaded_reply(fake: FakeSlack, fake_llm: FakeOpenAI, dm: str, parent: str, *, replies: int = 1,
                          reply: str = REPLY, final: str = FINAL, chunk_delay_s: float = 0.06) -> ChannelView:
    """Ana asks in the thread; the model answers ``reply`` slowly enough to be previewed; the thread once that
    reply's final stands (``replies`` replies of the bot there in all) and nothing more came."""
    fake_llm.queue.append(Scripted(text=reply, chunk_chars=6, chunk_delay_s=chunk_delay_s))
    fake.push_dm(ANA, "what's the plan?", thread_ts=parent)
    await fake.wait_until(lambda: fake.seen_in(dm, parent).messages[replies - 1:] == (final,)
                          and fake.seen_in(dm, parent).streaming == (), timeout=20)
    await asyncio.sleep(0.5)  # anything doubled shows up by now
    return fake.seen_in(dm, parent)


async def test_a_threaded_reply_streams_natively_and_ends_as_one_whole_message(
        app: App, slack_api: FakeSlack, fake_llm: FakeOpenAI) -> None:
    dm, parent = _thread(slack_api)
    view = await _threaded_reply(slack_api, fake_llm, dm, parent)

    assert view == ChannelView(messages=(FINAL,), streaming=())
    assert [p for p in slack_api.posted if p.channel == dm] == []  # no chat.postMessage: the stream is the message
    [stream] = slack_api.streams
    assert (stream.thread_ts, stream.mode, stream.ended_by) == (parent, "text", "stop")
    methods = _methods(slack_api, "chat.startStream", "chat.appendStream", "chat.stopStream", "chat.update")
    assert methods[0] == "chat.startStream" and methods[-2:] == ["chat.stopStream", "chat.update"], methods
    assert methods.count("chat.appendStream") >= 2, methods  # the reader saw it grow
    assert "chat.update" not in methods[:-1]  # the stream was never edited while it streamed
    assert REPLY.startswith(stream.text) and len(stream.text) > len(REPLY) // 2  # the model's Markdown, settled
    shown = slack_api.versions(dm, stream.ts)
    streamed = shown[:-1]  # as opened, then after each append and the stop; the final update last
    assert shown[-1] == FINAL and all(b.startswith(a) for a, b in itertools.pairwise(streamed)), shown


async def test_a_workspace_that_refuses_streams_gets_post_and_edit_and_is_not_asked_again(
        app: App, slack_api: FakeSlack, fake_llm: FakeOpenAI) -> None:
    slack_api.refuse("chat.startStream", "not_allowed")
    dm, parent = _thread(slack_api)
    first = await _threaded_reply(slack_api, fake_llm, dm, parent)
    assert first == ChannelView(messages=(FINAL,), streaming=())
    (posted,) = [p for p in slack_api.posted if p.channel == dm]
    assert posted.thread_ts == parent and len(slack_api.versions(dm, posted.ts)) >= 3

    second = await _threaded_reply(slack_api, fake_llm, dm, parent, replies=2)
    assert second == ChannelView(messages=(FINAL, FINAL), streaming=())
    assert len(_methods(slack_api, "chat.startStream")) == 1  # refused once: the process stopped asking
    assert slack_api.streams == []


async def test_a_stream_slack_closes_mid_reply_still_ends_whole_in_that_message(
        app: App, slack_api: FakeSlack, fake_llm: FakeOpenAI) -> None:
    dm, parent = _thread(slack_api)
    long_reply = REPLY + " " + REPLY
    long_final = FINAL + " " + FINAL
    fake_llm.queue.append(Scripted(text=long_reply, chunk_chars=6, chunk_delay_s=0.05))
    slack_api.push_dm(ANA, "what's the plan?", thread_ts=parent)
    await slack_api.wait_until(lambda: bool(slack_api.streams) and len(slack_api.streams[0].pieces) >= 2, timeout=20)
    [stream] = slack_api.streams
    slack_api.close_stream(dm, stream.ts)
    await slack_api.wait_until(lambda: slack_api.seen_in(dm, parent).messages == (long_final,), timeout=20)
    await asyncio.sleep(0.5)

    assert slack_api.seen_in(dm, parent) == ChannelView(messages=(long_final,), streaming=())
    assert [p for p in slack_api.posted if p.channel == dm] == [] and len(slack_api.streams) == 1
    assert stream.ended_by == "server"
    updates = [u.text for u in slack_api.updates if u.ts == stream.ts]
    assert updates[-1] == long_final and len(updates) >= 2  # previews after the close, then the final, all edits
    appended_after_close = [c for c in slack_api.calls
                            if c.method == "chat.appendStream" and c.params.get("ts") == stream.ts]
    assert len(appended_after_close) == len(stream.pieces)  # one refused append, then no more tries


async def test_with_native_stream_off_a_threaded_reply_is_posted_and_edited(
        start_app: StartApp, slack_api: FakeSlack, fake_llm: FakeOpenAI) -> None:
    await start_app(native_stream=False)
    dm, parent = _thread(slack_api)
    view = await _threaded_reply(slack_api, fake_llm, dm, parent)

    assert view == ChannelView(messages=(FINAL,), streaming=())
    assert _methods(slack_api, "chat.startStream", "chat.appendStream", "chat.stopStream") == []
    (posted,) = [p for p in slack_api.posted if p.channel == dm]
    assert posted.thread_ts == parent and len(slack_api.versions(dm, posted.ts)) >= 3
