"""SlackChannel's native stream previews, method by method: the real slack_sdk client against the loopback fake.

The whole reply flow (preview, then the outbox's final send) is in test_streaming_slack; here are the edges one
reply rarely shows: a final sent twice (a restart after it went), a restart mid-stream, a reply that stops
beginning with what was streamed, rate limits, and refusals that are the chat's rather than the stream's.
"""

# ruff: noqa: F811  (slack_api is a fixture received by argument name)

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from channels.slack.channel import SlackChannel
from channels.slack.settings import SlackSettings
from delivery.inbound import InboundJournal
from ground.types import Button, ChatKind, OutboundMessage, SendError
from tests.fakes.slack_api import FAKE_APP_TOKEN, FAKE_BOT_TOKEN, ChannelView, FakeSlack, slack_api  # noqa: F401
from tests.support.channels import Inbox, running

ANA = "U0ANA"
GENERAL = "C0GENERAL"
STREAM_METHODS = ("chat.startStream", "chat.appendStream", "chat.stopStream")


def _channel(api: FakeSlack, journal: InboundJournal, **settings: object) -> SlackChannel:
    slack = replace(SlackSettings(api_url=api.api_url), **settings)  # type: ignore[arg-type]
    return SlackChannel(slack, FAKE_BOT_TOKEN, journal=journal, app_token=FAKE_APP_TOKEN, ping_interval_s=0.2,
                        connect_wait_s=5.0, stop_grace_s=1.0)


def _thread(api: FakeSlack) -> tuple[str, str]:
    api.add_user(ANA, "ana")
    event = api.dm_event(ANA, "a thread about Monday")["event"]
    return event["channel"], event["ts"]


def _calls(api: FakeSlack, *methods: str) -> list[str]:
    return [c.method for c in api.calls if c.method in methods]


async def _final(channel: SlackChannel, dm: str, parent: str, message_id: str, text: str,
                 buttons: tuple[Button, ...] = ()) -> None:
    message = OutboundMessage(platform="slack", chat_id=dm, text=text, thread_id=parent, buttons=buttons)
    [chunk] = channel.render(message)
    sent = await channel.replace_chunk(message, chunk, message_id)
    assert sent.platform_message_id == message_id.removesuffix(":stream")


async def test_a_final_sent_again_after_a_restart_changes_nothing_and_posts_nothing(
        slack_api: FakeSlack, journal: InboundJournal) -> None:
    dm, parent = _thread(slack_api)
    buttons = (Button("Yes", "yes"), Button("No", "no"))
    async with running(_channel(slack_api, journal), Inbox()) as channel:
        message_id = await channel.post_preview(dm, parent, "Here is **the plan**")
        assert message_id.endswith(":stream")
        await channel.edit_preview(dm, message_id, "Here is **the plan** for Monday")
        await _final(channel, dm, parent, message_id, "Here is **the plan** for Monday.", buttons)
    done = slack_api.seen_in(dm, parent)
    [stream] = slack_api.streams
    blocks = slack_api.message(dm, stream.ts)["blocks"]  # type: ignore[index]
    assert done == ChannelView(messages=("Here is *the plan* for Monday.",), streaming=())
    assert stream.pieces == ["Here is **the plan**", " for Monday"]

    # A new process, sending the same final again (it died before recording the first send).
    async with running(_channel(slack_api, journal), Inbox()) as restarted:
        await _final(restarted, dm, parent, message_id, "Here is **the plan** for Monday.", buttons)
    assert slack_api.seen_in(dm, parent) == done
    assert slack_api.message(dm, stream.ts)["blocks"] == blocks  # type: ignore[index]
    assert slack_api.posted == [] and len(slack_api.streams) == 1
    assert stream.pieces == ["Here is **the plan**", " for Monday"]  # nothing appended to the stopped stream
    assert _calls(slack_api, *STREAM_METHODS, "chat.postMessage") == [
        "chat.startStream", "chat.appendStream", "chat.stopStream", "chat.stopStream"]


async def test_a_restart_mid_stream_stops_it_and_edits_the_same_message_whole(
        slack_api: FakeSlack, journal: InboundJournal) -> None:
    dm, parent = _thread(slack_api)
    async with running(_channel(slack_api, journal), Inbox()) as channel:
        message_id = await channel.post_preview(dm, parent, "Once upon")
    async with running(_channel(slack_api, journal), Inbox()) as restarted:
        await restarted.edit_preview(dm, message_id, "Once upon a time")
        await restarted.edit_preview(dm, message_id, "Once upon a time there")
        await _final(restarted, dm, parent, message_id, "Once upon a time there was a fox.")
    [stream] = slack_api.streams
    assert stream.ended_by == "stop" and stream.pieces == ["Once upon"]  # not appended blind to an unknown stream
    assert slack_api.versions(dm, stream.ts) == ["", "Once upon", "Once upon a time", "Once upon a time there",
                                                 "Once upon a time there was a fox."]
    assert _calls(slack_api, *STREAM_METHODS) == ["chat.startStream", "chat.stopStream"]  # stopped once
    assert slack_api.seen_in(dm, parent) == ChannelView(("Once upon a time there was a fox.",), ())


async def test_a_reply_that_no_longer_begins_with_the_stream_is_edited_whole_from_then_on(
        slack_api: FakeSlack, journal: InboundJournal) -> None:
    dm, parent = _thread(slack_api)
    async with running(_channel(slack_api, journal), Inbox()) as channel:
        message_id = await channel.post_preview(dm, parent, "The fox jumped")
        await channel.edit_preview(dm, message_id, "A fox jumped")  # the model started over
        await channel.edit_preview(dm, message_id, "A fox jumped over")
        await _final(channel, dm, parent, message_id, "A fox jumped over the dog.")
    [stream] = slack_api.streams
    assert stream.pieces == ["The fox jumped"]  # no garbage appended
    assert slack_api.versions(dm, stream.ts) == ["", "The fox jumped", "A fox jumped", "A fox jumped over",
                                                 "A fox jumped over the dog."]
    assert _calls(slack_api, *STREAM_METHODS) == ["chat.startStream", "chat.stopStream"]
    assert slack_api.seen_in(dm, parent) == ChannelView(("A fox jumped over the dog.",), ())


async def test_an_opening_not_closed_yet_waits_and_a_code_block_streams_whole(
        slack_api: FakeSlack, journal: InboundJournal) -> None:
    dm, parent = _thread(slack_api)
    async with running(_channel(slack_api, journal), Inbox()) as channel:
        message_id = await channel.post_preview(dm, parent, "Run **this")
        await channel.edit_preview(dm, message_id, "Run **this**:\n```\nmake")
        await channel.edit_preview(dm, message_id, "Run **this**:\n```\nmake all\n```\nDone")
    [stream] = slack_api.streams
    assert stream.pieces == ["Run", " **this**:\n", "```\nmake all\n```\nDone"]
    assert stream.streaming  # the final send stops it


async def test_rate_limits_surface_as_send_errors_and_the_stream_goes_on(
        slack_api: FakeSlack, journal: InboundJournal) -> None:
    dm, parent = _thread(slack_api)
    async with running(_channel(slack_api, journal), Inbox()) as channel:
        slack_api.fail_next("chat.startStream", retry_after=4)
        with pytest.raises(SendError) as limited:
            await channel.post_preview(dm, parent, "Once")
        assert limited.value.retry_after == 4 and not limited.value.permanent
        message_id = await channel.post_preview(dm, parent, "Once")  # streams stay on
        slack_api.fail_next("chat.appendStream", retry_after=7)
        with pytest.raises(SendError) as limited:
            await channel.edit_preview(dm, message_id, "Once upon")
        assert limited.value.retry_after == 7
        await channel.edit_preview(dm, message_id, "Once upon a time")
        slack_api.fail_next("chat.stopStream", retry_after=2)
        with pytest.raises(SendError) as limited:
            await _final(channel, dm, parent, message_id, "Once upon a time.")
        assert limited.value.retry_after == 2
        await _final(channel, dm, parent, message_id, "Once upon a time.")
    [stream] = slack_api.streams
    assert stream.pieces == ["Once", " upon a time"] and stream.ended_by == "stop"
    assert slack_api.posted == [] and slack_api.seen_in(dm, parent) == ChannelView(("Once upon a time.",), ())


async def test_a_refusal_that_is_slacks_hiccup_or_the_chats_keeps_streams_on(
        slack_api: FakeSlack, journal: InboundJournal, caplog: pytest.LogCaptureFixture) -> None:
    dm, parent = _thread(slack_api)
    caplog.set_level(logging.INFO, "kith.slack")
    async with running(_channel(slack_api, journal), Inbox()) as channel:
        slack_api.fail_next("chat.startStream", "internal_error")
        hiccup = await channel.post_preview(dm, parent, "posted the old way")
        assert not hiccup.endswith(":stream")
        with pytest.raises(SendError) as gone:
            await channel.post_preview("D0GONE", "1.000001", "a chat Slack does not know")
        assert gone.value.permanent
        streamed = await channel.post_preview(dm, parent, "streamed again")
    assert streamed.endswith(":stream")
    assert _calls(slack_api, "chat.startStream", "chat.postMessage") == [
        "chat.startStream", "chat.postMessage", "chat.startStream", "chat.postMessage", "chat.startStream"]
    assert "native streams off" not in caplog.text


async def test_a_workspace_refusing_streams_is_logged_once_without_text(
        slack_api: FakeSlack, journal: InboundJournal, caplog: pytest.LogCaptureFixture) -> None:
    dm, parent = _thread(slack_api)
    caplog.set_level(logging.INFO, "kith.slack")
    slack_api.refuse("chat.startStream", "missing_scope")
    async with running(_channel(slack_api, journal), Inbox()) as channel:
        first = await channel.post_preview(dm, parent, "a secret plan")
        second = await channel.post_preview(dm, parent, "another secret")
    assert not first.endswith(":stream") and not second.endswith(":stream")
    assert _calls(slack_api, "chat.startStream") == ["chat.startStream"]
    refusals = [r.getMessage() for r in caplog.records if "native streams off" in r.getMessage()]
    assert len(refusals) == 1 and "missing_scope" in refusals[0] and "secret" not in caplog.text


async def test_only_a_dm_thread_streams(slack_api: FakeSlack, journal: InboundJournal) -> None:
    dm, _ = _thread(slack_api)
    slack_api.add_channel(GENERAL, "general")
    mention = slack_api.mention_event(GENERAL, ANA, "<@U0KITHBOT> hi")["event"]
    async with running(_channel(slack_api, journal), Inbox()) as channel:
        top = await channel.post_preview(dm, None, "at the top")
        in_channel = await channel.post_preview(GENERAL, mention["ts"], "in a channel's thread")
        assert channel.previews(ChatKind.DM) and not channel.previews(ChatKind.GROUP)
    assert ":stream" not in top + in_channel and slack_api.streams == []
    assert [p.thread_ts for p in slack_api.posted] == [None, mention["ts"]]
