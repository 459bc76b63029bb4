"""The fake Slack's streaming methods and chat.update, proven against slack_sdk's AsyncWebClient.

kith streams a Slack reply natively (chat.startStream / appendStream / stopStream) and falls back to editing
one posted message with chat.update; both must answer here as Slack does.
"""

# ruff: noqa: F811  (slack_api is a fixture received by argument name)

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack_api import (  # noqa: F401  (slack_api is a fixture)
    BOT_USER_ID,
    STREAM_LIFETIME_S,
    STREAM_TEXT_MAX_CHARS,
    TEAM_ID,
    ChannelView,
    FakeSlack,
    slack_api,
)

ANA = "U0ANA"


def _client(fake: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)


def _dm_from_ana(fake: FakeSlack, text: str = "tell me a story") -> tuple[str, str]:
    fake.add_user(ANA, "ana")
    event = fake.dm_event(ANA, text)["event"]
    return event["channel"], event["ts"]


async def _error_of(call) -> SlackApiError:  # type: ignore[no-untyped-def]
    with pytest.raises(SlackApiError) as refused:
        await call
    return refused.value


async def test_a_stream_grows_one_reply_in_the_thread_and_ends(slack_api: FakeSlack) -> None:
    fake = slack_api
    dm, parent = _dm_from_ana(fake)
    client = _client(fake)
    started = await client.chat_startStream(channel=dm, thread_ts=parent, markdown_text="Once")
    assert started.status_code == 200 and started["ok"] is True
    assert set(started.data) == {"ok", "channel", "ts"} and started["channel"] == dm
    ts = started["ts"]
    appended = await client.chat_appendStream(channel=dm, ts=ts, markdown_text=" upon")
    assert (appended["channel"], appended["ts"]) == (dm, ts)
    assert fake.seen_in(dm, parent) == ChannelView(messages=("Once upon",), streaming=("Once upon",))
    stopped = await client.chat_stopStream(channel=dm, ts=ts, markdown_text=" a time.")
    assert (stopped["channel"], stopped["ts"], stopped["message"]["text"]) == (dm, ts, "Once upon a time.")

    assert fake.seen_in(dm, parent) == ChannelView(messages=("Once upon a time.",), streaming=())
    assert fake.versions(dm, ts) == ["", "Once", "Once upon", "Once upon a time."]
    [stream] = fake.streams
    assert (stream.thread_ts, stream.pieces, stream.streaming, stream.ended_by) == (
        parent, ["Once", " upon", " a time."], False, "stop")
    replies = await client.conversations_replies(channel=dm, ts=parent)
    assert [(m["user"], m["text"]) for m in replies["messages"]] == [(ANA, "tell me a story"),
                                                                     (BOT_USER_ID, "Once upon a time.")]
    history = await client.conversations_history(channel=dm)
    assert [m["text"] for m in history["messages"]] == ["tell me a story"]  # a thread reply stays in its thread


async def test_slack_sdks_own_chat_stream_helper_works_against_the_fake(slack_api: FakeSlack) -> None:
    fake = slack_api
    dm, parent = _dm_from_ana(fake)
    streamer = await _client(fake).chat_stream(channel=dm, thread_ts=parent, buffer_size=8)
    for piece in ("The fox ", "jumped ", "over ", "the dog."):
        await streamer.append(markdown_text=piece)
    await streamer.stop()
    assert fake.seen_in(dm) == ChannelView(messages=("The fox jumped over the dog.",), streaming=())
    assert fake.streams[0].mode == "chunks"  # the helper sends markdown_text chunks, not markdown_text


async def test_a_stream_that_ended_takes_no_more(slack_api: FakeSlack) -> None:
    fake = slack_api
    dm, parent = _dm_from_ana(fake)
    client = _client(fake)
    ts = (await client.chat_startStream(channel=dm, thread_ts=parent, markdown_text="a"))["ts"]
    await client.chat_stopStream(channel=dm, ts=ts)
    for call in (client.chat_appendStream(channel=dm, ts=ts, markdown_text="b"),
                 client.chat_stopStream(channel=dm, ts=ts),
                 client.chat_appendStream(channel=dm, ts="1.000001", markdown_text="b")):
        assert (await _error_of(call)).response["error"] == "message_not_in_streaming_state"

    # Slack closing a stream on its side: by the test's word, or five minutes after it started.
    closed = (await client.chat_startStream(channel=dm, thread_ts=parent, markdown_text="half"))["ts"]
    fake.close_stream(dm, closed)
    error = await _error_of(client.chat_appendStream(channel=dm, ts=closed, markdown_text=" more"))
    assert error.response["error"] == "message_not_in_streaming_state"
    aged = (await client.chat_startStream(channel=dm, thread_ts=parent, markdown_text="slow"))["ts"]
    await client.chat_appendStream(channel=dm, ts=aged, markdown_text=" and")
    fake.advance_clock(STREAM_LIFETIME_S)
    error = await _error_of(client.chat_appendStream(channel=dm, ts=aged, markdown_text=" steady"))
    assert error.response["error"] == "message_not_in_streaming_state"

    assert fake.seen_in(dm, parent).messages == ("a", "half", "slow and")  # what streamed stays
    assert [s.ended_by for s in fake.streams] == ["stop", "server", "server"]


async def test_start_stream_refusals(slack_api: FakeSlack) -> None:
    fake = slack_api
    dm, parent = _dm_from_ana(fake)
    fake.add_channel("C0GEN", "general")
    mention = fake.mention_event("C0GEN", ANA, "<@U0KITHBOT> hi")["event"]
    client = _client(fake)
    no_thread = await _error_of(client.api_call("chat.startStream", json={"channel": dm, "markdown_text": "x"}))
    assert no_thread.response["error"] == "invalid_arguments"
    unknown_parent = await _error_of(client.chat_startStream(channel=dm, thread_ts="1.000009"))
    assert unknown_parent.response["error"] == "invalid_thread_ts"
    missing = await _error_of(client.chat_startStream(channel="C0GEN", thread_ts=mention["ts"]))
    assert missing.response["error"] == "missing_recipient_user_id"
    missing = await _error_of(client.chat_startStream(channel="C0GEN", thread_ts=mention["ts"],
                                                      recipient_user_id=ANA))
    assert missing.response["error"] == "missing_recipient_team_id"
    too_long = await _error_of(client.chat_startStream(channel=dm, thread_ts=parent,
                                                       markdown_text="x" * (STREAM_TEXT_MAX_CHARS + 1)))
    assert too_long.response["error"] == "msg_too_long"
    assert fake.streams == []
    ok = await client.chat_startStream(channel="C0GEN", thread_ts=mention["ts"], recipient_user_id=ANA,
                                       recipient_team_id=TEAM_ID)
    assert fake.stream_at("C0GEN", ok["ts"]).recipient_user_id == ANA


async def test_a_stream_keeps_the_shape_it_was_opened_with(slack_api: FakeSlack) -> None:
    fake = slack_api
    dm, parent = _dm_from_ana(fake)
    client = _client(fake)
    ts = (await client.chat_startStream(channel=dm, thread_ts=parent, markdown_text="text"))["ts"]
    mismatch = await _error_of(client.chat_appendStream(channel=dm, ts=ts,
                                                        chunks=[{"type": "markdown_text", "text": "x"}]))
    assert mismatch.response["error"] == "streaming_mode_mismatch"
    nothing = await _error_of(client.chat_appendStream(channel=dm, ts=ts))
    assert nothing.response["error"] == "invalid_arguments"
    await client.chat_appendStream(channel=dm, ts=ts, markdown_text=" only")
    assert fake.seen_in(dm).messages == ("text only",)


async def test_rate_limits_and_a_workspace_that_will_not_stream(slack_api: FakeSlack) -> None:
    fake = slack_api
    dm, parent = _dm_from_ana(fake)
    client = _client(fake)
    fake.fail_next("chat.appendStream", retry_after=7)
    ts = (await client.chat_startStream(channel=dm, thread_ts=parent, markdown_text="a"))["ts"]
    limited = await _error_of(client.chat_appendStream(channel=dm, ts=ts, markdown_text="b"))
    assert limited.response.status_code == 429 and limited.response["error"] == "ratelimited"
    assert limited.response.headers["Retry-After"] == "7"
    await client.chat_appendStream(channel=dm, ts=ts, markdown_text="b")  # the stream outlived the refusal
    await client.chat_stopStream(channel=dm, ts=ts)

    fake.refuse("chat.startStream", "not_allowed")
    for _ in range(2):
        refused = await _error_of(client.chat_startStream(channel=dm, thread_ts=parent, markdown_text="x"))
        assert (refused.response.status_code, refused.response["error"]) == (200, "not_allowed")
    posted = await client.chat_postMessage(channel=dm, thread_ts=parent, text="the fallback still posts")
    fake.accept("chat.startStream")
    await client.chat_startStream(channel=dm, thread_ts=parent)

    assert [c.failed for c in fake.calls if c.method == "chat.startStream"] == [None, "not_allowed",
                                                                                "not_allowed", None]
    assert fake.seen_in(dm, parent).messages == ("ab", "the fallback still posts", "")
    assert fake.seen_in(dm, parent).streaming == ("",) and posted["ok"]


async def test_chat_update_edits_the_bots_message(slack_api: FakeSlack) -> None:
    fake = slack_api
    dm, parent = _dm_from_ana(fake)
    client = _client(fake)
    ts = (await client.chat_postMessage(channel=dm, thread_ts=parent, text="Hel"))["ts"]
    updated = await client.chat_update(channel=dm, ts=ts, text="Hello")
    assert (updated["channel"], updated["ts"], updated["text"]) == (dm, ts, "Hello")
    assert updated["message"]["text"] == "Hello" and updated["message"]["edited"]["user"] == BOT_USER_ID
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*Hello* world"}}]
    await client.chat_update(channel=dm, ts=ts, text="Hello world", blocks=blocks)

    assert fake.versions(dm, ts) == ["Hel", "Hello", "Hello world"]
    assert [(u.ts, u.text) for u in fake.updates] == [(ts, "Hello"), (ts, "Hello world")]
    assert fake.updates[-1].blocks == tuple(blocks)
    assert fake.seen_in(dm) == ChannelView(messages=("Hello world",), streaming=())
    replies = await client.conversations_replies(channel=dm, ts=parent)
    assert replies["messages"][-1]["text"] == "Hello world"

    fake.fail_next("chat.update", retry_after=2)
    limited = await _error_of(client.chat_update(channel=dm, ts=ts, text="x"))
    assert limited.response.status_code == 429 and limited.response.headers["Retry-After"] == "2"
    assert (await _error_of(client.chat_update(channel=dm, ts="1.000009", text="x"))).response[
        "error"] == "message_not_found"
    assert (await _error_of(client.chat_update(channel=dm, ts=parent, text="x"))).response[
        "error"] == "cant_update_message"
    with pytest.warns(UserWarning, match="`text` argument is missing"):  # slack_sdk's own nudge
        assert (await _error_of(client.chat_update(channel=dm, ts=ts, text=""))).response["error"] == "no_text"
    streaming = (await client.chat_startStream(channel=dm, thread_ts=parent, markdown_text="s"))["ts"]
    conflict = await _error_of(client.chat_update(channel=dm, ts=streaming, text="x"))
    assert conflict.response["error"] == "streaming_state_conflict"
    await client.chat_stopStream(channel=dm, ts=streaming)
    await client.chat_update(channel=dm, ts=streaming, text="rewritten after the stream")
    assert fake.seen_in(dm).messages == ("Hello world", "rewritten after the stream")
