"""The Slack channel driving the real slack-bolt and slack_sdk against the loopback fake Slack."""

# Test functions receive the imported ``slack_api`` fixture by argument name, which ruff reads
# as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from channels.slack.channel import ChannelStartError, SlackChannel, check_token
from channels.slack.formatting import MESSAGE_MAX_CHARS as SLACK_MAX_CHARS
from channels.slack.settings import SlackSettings
from delivery.inbound import InboundJournal
from delivery.inbox import Inbox as MessageInbox
from delivery.worker import DeliveryWorker
from ground.config import DeliverySettings
from ground.db import Database
from ground.types import Button, ButtonPress, ChatKind, InboundMessage, OutboundMessage, SendError
from tests.fakes.slack_api import (
    BOT_USER_ID,
    FAKE_APP_TOKEN,
    FAKE_BOT_TOKEN,
    FAKE_SIGNING_SECRET,
    MENTION,
    TEAM_ID,
    FakeSlack,
    slack_api,  # noqa: F401
)
from tests.support.channels import Inbox, running, send_rendered
from tests.support.delivery import send_anything

ALICE = "U0ALICE"
BOB = "U0BOB"
GENERAL = "C0GENERAL"
WAIT_S = 5.0
PING_S = 0.2  # Socket Mode keep-alive in tests: a dropped socket is noticed within this


@dataclass
class Stores:
    db: Database
    journal: InboundJournal


@pytest.fixture
def stores(db: Database, journal: InboundJournal) -> Stores:
    return Stores(db, journal)


@pytest.fixture
def people(slack_api: FakeSlack) -> FakeSlack:
    slack_api.add_user(ALICE, "alice", real_name="Alice Liddell")
    slack_api.add_user(BOB, "bob", real_name="Bob Marley", display_name="")
    slack_api.add_channel(GENERAL, "general")
    return slack_api


def _settings(api: FakeSlack, **overrides: Any) -> SlackSettings:
    return replace(SlackSettings(api_url=api.api_url), **overrides)


def _channel(api: FakeSlack, stores: Stores, *, settings: SlackSettings | None = None, **kwargs: Any) -> SlackChannel:
    kwargs.setdefault("app_token", FAKE_APP_TOKEN)
    kwargs.setdefault("signing_secret", FAKE_SIGNING_SECRET)
    token = kwargs.pop("token", FAKE_BOT_TOKEN)
    return SlackChannel(settings or _settings(api), token, journal=stores.journal, ping_interval_s=PING_S,
                        connect_wait_s=WAIT_S, stop_grace_s=1.0, **kwargs)


def _outbound(chat_id: str, text: str, **kwargs: Any) -> OutboundMessage:
    return OutboundMessage(platform="slack", chat_id=chat_id, text=text, **kwargs)


def _methods(api: FakeSlack) -> list[str]:
    return [c.method for c in api.calls]


# --- Socket Mode intake ----------------------------------------------------------------------------
async def test_dm_conversation_in_socket_mode(people: FakeSlack, stores: Stores) -> None:
    api = people
    release = asyncio.Event()
    inbox = Inbox(gate=release)
    async with running(_channel(api, stores), inbox) as channel:
        assert channel.ready.is_set() and api.open_sockets == 1
        asked = api.push_dm(ALICE, f"hey {MENTION}, is 2 &lt; 3 &amp; 4?")
        await asyncio.wait_for(inbox.started.wait(), WAIT_S)
        # Slack has its acknowledgement while the core is still busy with the message.
        await api.wait_for_ack(asked)
        assert inbox.messages == []
        release.set()
        (message,) = await inbox.wait_for(1)
        await channel.typing(message.chat_id, None)
        reply = _outbound(message.chat_id, "**Yes**, and `2 < 3`.", recipient_id=message.sender_id)
        await send_rendered(channel, reply)
        api.push_dm(ALICE, "thanks")
        await inbox.wait_for(2)

    event = asked.payload["event"]
    assert message == InboundMessage(
        platform="slack", bot_account=f"{TEAM_ID}:{BOT_USER_ID}", chat_id=event["channel"], chat_kind=ChatKind.DM,
        sender_id=f"{TEAM_ID}:{ALICE}", sender_name="alice", text="hey @kith, is 2 < 3 & 4?",
        message_id=f"{event['channel']}:{event['ts']}", thread_id=None, mentioned=True,
        timestamp=datetime.fromtimestamp(float(event["ts"]), UTC),
    )
    (posted,) = api.posted
    assert (posted.channel, posted.text, posted.mrkdwn, posted.thread_ts) == (
        event["channel"], "*Yes*, and `2 &lt; 3`.", True, None)
    assert _methods(api)[:2] == ["auth.test", "apps.connections.open"]
    opened = next(c for c in api.calls if c.method == "apps.connections.open")
    assert opened.token == FAKE_APP_TOKEN
    assert _methods(api).count("users.info") == 1  # the name is remembered, not asked for each message
    assert "chat.postMessage" in _methods(api) and len(api.acked()) == 2


async def test_channel_mention_is_answered_in_a_thread_and_other_chatter_ignored(
    people: FakeSlack, stores: Stores
) -> None:
    api = people
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        chatter = api.push(api.channel_message_event(GENERAL, BOB, "just chatting, no mention"))
        other_bot = api.push(api.bot_message_event(GENERAL, "beep from another bot"))
        own = api.push(api.bot_message_event(GENERAL, "kith's own echo", own=True))
        top = api.push_mention(GENERAL, ALICE, f"{MENTION} what is a river?")
        in_thread = api.push_mention(GENERAL, BOB, f"{MENTION} and a lake?", thread_ts="1789999999.000100")
        dm = api.push_dm(BOB, "first draft")
        edit = api.push(api.edit_event(dm.payload["event"]["channel"], dm.payload["event"]["ts"], "second draft"))
        delete = api.push(api.delete_event(dm.payload["event"]["channel"], dm.payload["event"]["ts"]))
        await api.wait_until(lambda: len(api.acked()) == 8)
        messages = await inbox.wait_for(3)
        await asyncio.sleep(0.1)  # room for anything wrongly let through to arrive
        river = next(m for m in messages if "river" in m.text)
        await send_rendered(channel, _outbound(river.chat_id, "Water that moves.", thread_id=river.thread_id,
                                           chat_kind=ChatKind.GROUP, reply_to_message_id=river.message_id))

    assert sorted(inbox.texts) == ["@kith and a lake?", "@kith what is a river?", "first draft"]
    lake = next(m for m in inbox.messages if "lake" in m.text)
    assert (river.chat_kind, river.chat_id, river.mentioned) == (ChatKind.GROUP, GENERAL, True)
    assert river.thread_id == top.payload["event"]["ts"]  # a new thread under the mention
    assert lake.thread_id == "1789999999.000100"  # the thread it was asked in
    assert lake.sender_name == "Bob Marley"  # no display name: the real name
    (posted,) = api.posted
    assert (posted.channel, posted.thread_ts) == (GENERAL, top.payload["event"]["ts"])
    assert all(e.acked_at is not None for e in (chatter, other_bot, own, in_thread, edit, delete))


async def test_redelivered_event_is_handled_once(people: FakeSlack, stores: Stores) -> None:
    api = people
    inbox = Inbox()
    async with running(_channel(api, stores), inbox):
        first = api.push_dm(ALICE, "only once please")
        await inbox.wait_for(1)
        retry = api.redeliver(first)  # Slack did not see the ack in time and sends it again
        await api.wait_for_ack(retry)
        await asyncio.sleep(0.1)

    assert retry.retry_attempt == 1 and retry.event_id == first.event_id
    assert inbox.texts == ["only once please"]


async def test_an_event_the_journal_cannot_record_is_left_for_slack_to_retry(
    people: FakeSlack, stores: Stores
) -> None:
    api = people
    inbox = Inbox()
    # The journal's table out of reach for a moment, as another process would see it mid-migration.
    with sqlite3.connect(stores.db.url.removeprefix("sqlite:///")) as other:
        other.execute("ALTER TABLE inbound_events RENAME TO inbound_events_held")
    async with running(_channel(api, stores), inbox):
        first = api.push_dm(ALICE, "do not lose me")
        await asyncio.sleep(0.3)
        assert first.acked_at is None and inbox.messages == []
        with sqlite3.connect(stores.db.url.removeprefix("sqlite:///")) as other:
            other.execute("ALTER TABLE inbound_events_held RENAME TO inbound_events")
        retry = api.redeliver(first)
        await api.wait_for_ack(retry)
        await inbox.wait_for(1)

    assert inbox.texts == ["do not lose me"]


async def test_button_click_becomes_a_button_press(people: FakeSlack, stores: Stores) -> None:
    api = people
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        api.push_dm(ALICE, "remember that I like tea")
        (message,) = await inbox.wait_for(1)
        await send_rendered(channel, _outbound(message.chat_id, "Keep this?",
                                           buttons=(Button("Keep", "m:keep:7"), Button("Forget", "m:forget:7"))))
        (posted,) = api.posted
        click = api.push(api.block_action_payload(ALICE, posted, value="m:forget:7"))
        await api.wait_for_ack(click)
        await inbox.wait_for(2)

    assert posted.text == "Keep this?"
    assert [e["value"] for e in posted.blocks[1]["elements"]] == ["m:keep:7", "m:forget:7"]
    (press,) = inbox.presses
    assert press == ButtonPress(platform="slack", chat_id=message.chat_id, sender_id=f"{TEAM_ID}:{ALICE}",
                                data="m:forget:7", chat_kind=ChatKind.DM,
                                event_id=click.payload["actions"][0]["action_ts"])


async def test_socket_reconnects_after_a_drop_a_refresh_and_slack_going_away(
    people: FakeSlack, stores: Stores
) -> None:
    api = people
    inbox = Inbox()
    async with running(_channel(api, stores), inbox):
        api.push_dm(ALICE, "before")
        await inbox.wait_for(1)

        await api.drop_sockets()  # the network cuts the socket without a close
        api.push_dm(ALICE, "after a drop")
        await inbox.wait_for(2)

        await api.request_refresh()  # Slack asks for a fresh connection
        await api.wait_until(lambda: api.connections >= 3)
        api.push_dm(ALICE, "after a refresh")
        await inbox.wait_for(3)

        await api.go_away()
        api.push_dm(ALICE, "while away")  # held by Slack until the app is reachable again
        await asyncio.sleep(3 * PING_S)
        await api.come_back()
        await inbox.wait_for(4)

    assert inbox.texts == ["before", "after a drop", "after a refresh", "while away"]
    assert api.connections >= 4
    assert api.tickets_issued == api.connections  # every reconnection asked apps.connections.open for a new URL


async def test_stop_lets_a_running_handler_finish(people: FakeSlack, stores: Stores) -> None:
    api = people
    finished: list[str] = []
    started = asyncio.Event()

    async def slow(message: InboundMessage) -> None:
        started.set()
        await asyncio.sleep(0.2)
        finished.append(message.text)

    channel = _channel(api, stores)
    await channel.start(slow)
    api.push_dm(ALICE, "slow one")
    await asyncio.wait_for(started.wait(), WAIT_S)
    await channel.stop()

    assert finished == ["slow one"]
    assert api.open_sockets == 0


# --- HTTP mode -------------------------------------------------------------------------------------
async def test_http_events_are_verified_before_anything_reads_them(people: FakeSlack, stores: Stores) -> None:
    api = people
    inbox = Inbox()
    settings = _settings(api, mode="http", http_port=0)
    async with running(_channel(api, stores, settings=settings, app_token=None), inbox) as channel:
        url = f"http://127.0.0.1:{channel.http_port}/slack/events"
        challenge = await api.post_event(url, api.url_verification_body("3eZbrw1aBm2rZgRNFdxV"))
        signed = api.dm_event(ALICE, "signed and fresh")
        forged = api.dm_event(ALICE, "forged")
        stale = api.dm_event(ALICE, "stale")
        statuses = [
            (await api.post_event(url, signed))[0],
            (await api.post_event(url, signed, retry_num=1))[0],  # Slack retrying: acknowledged, not redone
            (await api.post_event(url, forged, secret="not-the-signing-secret"))[0],
            (await api.post_event(url, forged, signature="v0=" + "0" * 64))[0],
            (await api.post_event(url, stale, timestamp=int(time.time()) - 6 * 60))[0],
            (await api.post_event(url, stale, signature="v0=x", timestamp=-1))[0],
        ]
        await inbox.wait_for(1)
        await send_rendered(channel, _outbound(inbox.messages[0].chat_id, "Pick one",
                                           buttons=(Button("Tea", "drink:tea"),)))
        click = api.block_action_payload(ALICE, api.posted[0], value="drink:tea")
        click_status, _ = await api.post_event(url, click)
        await inbox.wait_for(2)
        await asyncio.sleep(0.1)

    assert challenge[0] == 200 and json.loads(challenge[1]) == {"challenge": "3eZbrw1aBm2rZgRNFdxV"}
    assert statuses == [200, 200, 401, 401, 401, 401]
    assert inbox.texts == ["signed and fresh"]
    assert click_status == 200 and [p.data for p in inbox.presses] == ["drink:tea"]
    assert "apps.connections.open" not in _methods(api)


# --- sending -----------------------------------------------------------------------------------------
async def test_long_reply_is_chunked_at_slacks_limit_with_valid_code_blocks(
    people: FakeSlack, stores: Stores
) -> None:
    api = people
    code = "\n".join(f"    result_{i} = compute(value_{i}) * {i}  # step {i}" for i in range(160))
    text = ("Here is the plan.\n\n" + "\n\n".join(f"Paragraph {i}: " + "word " * 80 for i in range(12))
            + f"\n\n```python\ndef run():\n{code}\n```\n\nThat is all.")
    message = _outbound(api.dm_channel(ALICE), text)
    async with running(_channel(api, stores), Inbox()) as channel:
        chunks = channel.render(message)
        await send_rendered(channel, message)

    assert len(api.posted) == len(chunks) >= 3
    assert all(len(p.text) <= SLACK_MAX_CHARS for p in api.posted)
    assert all(p.text.count("```") % 2 == 0 for p in api.posted)  # every chunk opens and closes its fences
    joined = "\n".join(p.text for p in api.posted)
    assert [line for line in joined.splitlines() if "result_" in line] == code.splitlines()
    assert api.posted[0].text.startswith("Here is the plan.") and api.posted[-1].text.endswith("That is all.")


async def test_rate_limited_reply_arrives_once_after_retry_after(people: FakeSlack, stores: Stores) -> None:
    api = people
    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    async with running(_channel(api, stores), Inbox()) as channel:
        api.fail_next("chat.postMessage", "ratelimited", retry_after=7)
        worker = DeliveryWorker(stores.db, {"slack": channel}, send_anything, sleep=no_wait,
                                settings=DeliverySettings(max_attempts=4, backoff_base_s=0.01, backoff_max_s=0.05))
        await worker.post(_outbound(api.dm_channel(ALICE), "worth the wait"))
        await worker.wait_idle()

    assert [p.text for p in api.posted] == ["worth the wait"]
    assert [c.failed for c in api.calls if c.method == "chat.postMessage"] == ["ratelimited", None]
    assert waits and waits[0] >= 7.0  # Slack's Retry-After, not our shorter backoff


@pytest.mark.parametrize(
    ("error", "status", "expected"),
    [
        ("ratelimited", 429, (3.0, False, False)),
        ("channel_not_found", None, (None, True, False)),
        ("not_in_channel", None, (None, True, False)),
        ("is_archived", None, (None, True, False)),
        ("invalid_auth", None, (None, True, False)),
        ("internal_error", 500, (None, False, False)),
        ("service_unavailable", 503, (None, False, False)),
        ("invalid_blocks", None, (None, False, True)),
    ],
)
async def test_send_failures_map_to_send_error(
    people: FakeSlack, stores: Stores, error: str, status: int | None, expected: tuple[float | None, bool, bool]
) -> None:
    api = people
    message = _outbound(GENERAL, "hello")
    async with running(_channel(api, stores), Inbox()) as channel:
        api.fail_next("chat.postMessage", error, status=status, retry_after=3)
        with pytest.raises(SendError) as failed:
            await channel.send_chunk(message, channel.render(message)[0], 0)

    assert (failed.value.retry_after, failed.value.permanent, failed.value.bad_formatting) == expected
    assert api.posted == []


async def test_chats_slack_refuses_are_permanent_failures(people: FakeSlack, stores: Stores) -> None:
    api = people
    api.add_channel("C0ARCHIVE", "old-stuff", is_archived=True)
    api.add_channel("C0PRIVATE", "secret", is_private=True, is_member=False)
    refused: dict[str, SendError] = {}
    async with running(_channel(api, stores), Inbox()) as channel:
        for chat_id in ("C0NOWHERE", "C0ARCHIVE", "C0PRIVATE"):
            message = _outbound(chat_id, "anyone?")
            with pytest.raises(SendError) as failed:
                await channel.send_chunk(message, channel.render(message)[0], 0)
            refused[chat_id] = failed.value

    assert all(error.permanent and error.retry_after is None for error in refused.values())
    assert [str(e) for e in refused.values()] == ["slack: channel_not_found", "slack: is_archived",
                                                  "slack: not_in_channel"]


async def test_refused_blocks_then_plain_resend_without_them(people: FakeSlack, stores: Stores) -> None:
    api = people
    # A button value past Block Kit's 2,000 characters: Slack refuses the blocks, not the message.
    message = _outbound(GENERAL, "Tom & Jerry are **friends**", buttons=(Button("Huge", "x" * 2_500),))
    async with running(_channel(api, stores), Inbox()) as channel:
        (chunk,) = channel.render(message)
        with pytest.raises(SendError) as refused:
            await channel.send_chunk(message, chunk, 0)
        await channel.send_chunk(message, chunk, 0, plain=True)

    assert refused.value.bad_formatting and not refused.value.permanent
    (posted,) = api.posted
    assert (posted.text, posted.mrkdwn, posted.blocks) == ("Tom &amp; Jerry are friends", False, ())


async def test_buttons_ride_on_the_last_chunk_which_fits_a_section(people: FakeSlack, stores: Stores) -> None:
    api = people
    long_text = "\n\n".join(f"Paragraph {i}: " + "word " * 60 for i in range(30))
    message = _outbound(GENERAL, long_text, thread_id="1790000000.000500", buttons=(Button("Yes", "q:yes"),))
    async with running(_channel(api, stores), Inbox()) as channel:
        await send_rendered(channel, message)

    assert len(api.posted) >= 2
    assert [bool(p.blocks) for p in api.posted] == [False] * (len(api.posted) - 1) + [True]
    section, actions = api.posted[-1].blocks
    assert section["text"] == {"type": "mrkdwn", "text": api.posted[-1].text}
    assert [(e["action_id"], e["value"], e["text"]["text"]) for e in actions["elements"]] == [("q:yes", "q:yes", "Yes")]
    assert {p.thread_ts for p in api.posted} == {"1790000000.000500"}


async def test_attachment_is_uploaded_after_the_text(people: FakeSlack, stores: Stores) -> None:
    api = people
    message = _outbound(GENERAL, "Your notes:", thread_id="1790000000.000700", attachment_name="notes.txt",
                        attachment_bytes=b"line one\nline two\n")
    async with running(_channel(api, stores), Inbox()) as channel:
        chunks = channel.render(message)
        sent = [await channel.send_chunk(message, chunk, index) for index, chunk in enumerate(chunks)]

    assert [p.text for p in api.posted] == ["Your notes:"]
    (upload,) = api.uploads
    assert (upload.filename, upload.content, upload.channel, upload.thread_ts) == (
        "notes.txt", b"line one\nline two\n", GENERAL, "1790000000.000700")
    assert sent[-1].platform_message_id == f"file:{upload.file_id}"


async def test_buttons_sent_with_a_file_stay_on_the_last_text_post(people: FakeSlack, stores: Stores) -> None:
    api = people
    message = _outbound(GENERAL, "Your notes, and a question:", attachment_name="notes.txt",
                        attachment_bytes=b"line one\n", buttons=(Button("Yes", "q:yes"),))
    async with running(_channel(api, stores), Inbox()) as channel:
        for index, chunk in enumerate(channel.render(message)):
            await channel.send_chunk(message, chunk, index)

    # A file share carries no Block Kit: the buttons ride on the text, and the file follows.
    [post] = api.posted
    assert post.text == "Your notes, and a question:" and post.blocks
    assert [e["action_id"] for b in post.blocks if b.get("type") == "actions" for e in b["elements"]] == ["q:yes"]
    assert [u.filename for u in api.uploads] == ["notes.txt"]


# --- start and doctor ------------------------------------------------------------------------------
async def test_rejected_tokens_fail_start_without_leaking_them(
    people: FakeSlack, stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    api = people
    caplog.set_level(logging.DEBUG)
    wrong_bot = "xoxb-wrong_bot_token"
    wrong_app = "xapp-1-A0KITH-3000-WrongWrongWrong"
    with pytest.raises(ChannelStartError) as bot_refused:
        await _channel(api, stores, token=wrong_bot).start(Inbox().on_message)
    with pytest.raises(ChannelStartError) as app_refused:
        await _channel(api, stores, app_token=wrong_app).start(Inbox().on_message)

    assert str(bot_refused.value) == "slack: the token in SLACK_BOT_TOKEN was rejected (invalid_auth)"
    assert str(app_refused.value) == "slack: the app-level token in SLACK_APP_TOKEN was rejected (invalid_auth)"
    for secret in (wrong_bot, wrong_app, FAKE_BOT_TOKEN, FAKE_APP_TOKEN):
        assert secret not in caplog.text
    assert api.connections == 0


@pytest.mark.parametrize(
    ("overrides", "kwargs", "reason"),
    [
        ({"mode": "webhook"}, {}, "slack: slack.mode must be 'socket' or 'http', not 'webhook'"),
        ({"app_token_env": "KITH_TEST_UNSET_APP"}, {"app_token": None},
         "slack: Socket Mode needs an app-level token (xapp-…) in KITH_TEST_UNSET_APP"),
        ({"mode": "http", "http_port": 0, "signing_secret_env": "KITH_TEST_UNSET_SECRET"}, {"signing_secret": None},
         "slack: HTTP mode needs the app's signing secret in KITH_TEST_UNSET_SECRET"),
    ],
)
async def test_unusable_settings_fail_start_with_a_reason(
    people: FakeSlack, stores: Stores, monkeypatch: pytest.MonkeyPatch, overrides: dict[str, Any],
    kwargs: dict[str, Any], reason: str
) -> None:
    monkeypatch.delenv("KITH_TEST_UNSET_APP", raising=False)
    monkeypatch.delenv("KITH_TEST_UNSET_SECRET", raising=False)
    channel = _channel(people, stores, settings=_settings(people, **overrides), **kwargs)
    with pytest.raises(ChannelStartError) as refused:
        await channel.start(Inbox().on_message)
    assert str(refused.value) == reason
    assert people.calls == []


async def test_unreachable_slack_fails_start(people: FakeSlack, stores: Stores) -> None:
    await people.go_away()
    with pytest.raises(ChannelStartError, match="cannot reach the Web API"):
        await _channel(people, stores).start(Inbox().on_message)


async def test_check_token_for_doctor(people: FakeSlack, monkeypatch: pytest.MonkeyPatch) -> None:
    api = people
    settings = _settings(api)
    who = f"@kith in team {TEAM_ID} (user {BOT_USER_ID})"
    http = replace(settings, mode="http", http_port=3000)
    checks: list[Callable[[], Any]] = [
        lambda: check_token(settings, FAKE_BOT_TOKEN, app_token=FAKE_APP_TOKEN),
        lambda: check_token(http, FAKE_BOT_TOKEN, signing_secret=FAKE_SIGNING_SECRET),
        lambda: check_token(settings, "xoxb-nope", app_token=FAKE_APP_TOKEN),
        lambda: check_token(settings, FAKE_BOT_TOKEN, app_token="xapp-nope"),
        lambda: check_token(replace(settings, bot_token_env="KITH_TEST_UNSET_BOT")),
    ]
    monkeypatch.delenv("KITH_TEST_UNSET_BOT", raising=False)
    results = [await check() for check in checks]
    await api.go_away()
    unreachable = await check_token(settings, FAKE_BOT_TOKEN, app_token=FAKE_APP_TOKEN)

    assert results == [
        (True, f"{who}, Socket Mode"),
        (True, f"{who}, HTTP events on 127.0.0.1:3000"),
        (False, "Slack rejected the token in SLACK_BOT_TOKEN (invalid_auth)"),
        (False, f"{who}, but Slack rejected the app-level token in SLACK_APP_TOKEN (invalid_auth)"),
        (False, "environment variable KITH_TEST_UNSET_BOT is not set"),
    ]
    assert not unreachable[0] and "cannot reach" in unreachable[1]
    assert all("nope" not in detail for _ok, detail in results)


async def test_a_message_is_kept_from_its_journal_entry_until_the_core_decides_on_it(
    people: FakeSlack, db: Database
) -> None:
    kept = MessageInbox(db)
    inbox = Inbox()
    async with running(_channel(people, Stores(db, InboundJournal(db, inbox=kept))), inbox):
        first = people.push_dm(ALICE, "keep me")
        people.redeliver(first)
        (message,) = await inbox.wait_for(1)
        await asyncio.sleep(0.1)
    # The handler here never decides, as if the process died first: the next start takes it up once.
    (undecided,) = (await kept.resume(await kept.leftovers(), ["slack"])).undecided
    assert undecided.message_id == message.message_id and undecided.text == "keep me"

