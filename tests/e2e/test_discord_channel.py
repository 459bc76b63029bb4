"""The Discord channel driving the real discord.py against the loopback fake Discord (REST + gateway)."""

# Test functions receive the imported ``discord_api`` fixture by argument name, which ruff reads
# as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import discord.gateway
import pytest
import yarl

from channels.discord.channel import ChannelStartError, DiscordChannel, check_token
from channels.discord.settings import DiscordSettings
from delivery.inbound import InboundJournal
from delivery.inbox import Inbox as MessageInbox
from ground.db import Database
from ground.types import Button, ButtonPress, ChatKind, InboundMessage, OutboundMessage, SendError
from tests.fakes.discord_api import FAKE_DISCORD_TOKEN, FakeDiscord, discord_api  # noqa: F401
from tests.support.channels import Inbox, running, send_rendered

ALICE = 200_000_000_000_000_001
BOB = 200_000_000_000_000_002
OTHER_BOT = 200_000_000_000_000_009
GUILD = 300_000_000_000_000_001
GENERAL = 300_000_000_000_000_002
THREAD = 300_000_000_000_000_003
HIDDEN_THREAD = 300_000_000_000_000_004
WAIT_S = 5.0


@dataclass
class World:
    api: FakeDiscord
    alice_dm: int


@pytest.fixture
def world(discord_api: FakeDiscord) -> World:
    api = discord_api
    api.add_user(ALICE, "alice", global_name="Alice")
    api.add_user(BOB, "bob", global_name="Bob")
    api.add_user(OTHER_BOT, "otherbot", bot=True)
    api.add_guild(GUILD, "Family", members=[ALICE, BOB, OTHER_BOT], nicks={BOB: "Bobby"})
    api.add_text_channel(GUILD, GENERAL, "general")
    api.add_thread(GUILD, GENERAL, THREAD, "weekend plans")
    api.add_thread(GUILD, GENERAL, HIDDEN_THREAD, "older plans", announce=False)
    return World(api, api.open_dm(ALICE))


def _channel(journal: InboundJournal, *, token: str = FAKE_DISCORD_TOKEN, ready_timeout_s: float = WAIT_S,
             **kwargs: Any) -> DiscordChannel:
    settings = DiscordSettings(ready_timeout_s=ready_timeout_s)
    return DiscordChannel(settings, token, journal=journal, stop_grace_s=1.0, guild_ready_timeout_s=0.05,
                          reidentify_delay_s=0.05, **kwargs)


def _group_reply(to: InboundMessage, text: str, **kwargs: Any) -> OutboundMessage:
    return OutboundMessage(platform="discord", chat_id=to.chat_id, text=text, thread_id=to.thread_id,
                           reply_to_message_id=to.message_id, chat_kind=ChatKind.GROUP, recipient_id=to.sender_id,
                           **kwargs)


# --- intake --------------------------------------------------------------------------------------------
async def test_dm_conversation(world: World, journal: InboundJournal) -> None:
    api = world.api
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        sent = api.push_message(world.alice_dm, ALICE, "hello there")
        (message,) = await inbox.wait_for(1)
        reply = OutboundMessage(platform="discord", chat_id=message.chat_id, text="Hi **Alice**!",
                                chat_kind=ChatKind.DM, recipient_id=message.sender_id)
        (posted_id,) = await send_rendered(channel, reply)
        await api.wait_until(lambda: api.calls[-1].name == "create_message")
        await asyncio.sleep(0.05)  # the echo of our own message has arrived and must not count

    assert message == InboundMessage(
        platform="discord", bot_account=str(api.bot_id), chat_id=str(world.alice_dm), chat_kind=ChatKind.DM,
        sender_id=str(ALICE), sender_name="Alice", text="hello there",
        message_id=f"{world.alice_dm}:{sent['id']}", thread_id=None, mentioned=True,
        timestamp=datetime.fromisoformat(sent["timestamp"]),
    )
    (posted,) = api.posted
    assert (posted.channel_id, posted.content, posted.reply_to) == (world.alice_dm, "Hi **Alice**!", None)
    assert posted_id == f"{world.alice_dm}:{posted.id}"
    assert inbox.texts == ["hello there"]
    (identify,) = api.identifies
    intents = discord.Intents._from_value(identify.intents)
    assert intents.message_content and intents.dm_messages and intents.guild_messages


async def test_server_messages_carry_mention_and_reply_gating(world: World, journal: InboundJournal) -> None:
    api = world.api
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        api.push_message(GENERAL, ALICE, "just chatting")
        first = (await inbox.wait_for(1))[0]
        await send_rendered(channel, _group_reply(first, "I'm here"))
        (bot_message,) = await api.wait_for_posted(1)
        api.push_message(GENERAL, BOB, f"hey <@{api.bot_id}> how are you", mentions=[api.bot_id])
        api.push_message(GENERAL, ALICE, "thanks", reply_to=bot_message.id)
        api.push_message(GENERAL, ALICE, "and again", reply_to=bot_message.id, resolve_reply=False)
        api.push_message(GENERAL, BOB, "thanks Alice", reply_to=int(first.message_id.split(":")[1]),
                         mentions=[ALICE])
        api.push_message(GENERAL, BOB, f"<@&{api.role_of_bot(GUILD)}> ping", role_mentions=[api.role_of_bot(GUILD)])
        api.push_message(GENERAL, ALICE, "@everyone dinner!", mention_everyone=True)
        api.push_message(GENERAL, OTHER_BOT, f"<@{api.bot_id}> beep", mentions=[api.bot_id])  # never reaches us
        api.push_message(GENERAL, ALICE, "hook", webhook_id=400_000_000_000_000_001)  # nor does a webhook
        api.push_message(GENERAL, BOB, "last one")
        messages = await inbox.wait_for(8)
        await asyncio.sleep(0.05)

    assert [(m.text, m.mentioned) for m in messages] == [
        ("just chatting", False),
        ("hey @Kith how are you", True),
        ("thanks", True),
        ("and again", True),  # resolved from discord.py's cache of the bot's own message
        ("thanks Alice", False),  # a reply to a person
        ("@kith_test_bot ping", True),  # the bot's managed role
        ("@everyone dinner!", False),
        ("last one", False),
    ]
    assert {m.chat_kind for m in messages} == {ChatKind.GROUP}
    assert {m.chat_id for m in messages} == {str(GENERAL)}
    assert [m.sender_name for m in messages[:2]] == ["Alice", "Bobby"]  # the server nickname wins
    assert messages[2].reply_to_message_id == f"{GENERAL}:{bot_message.id}"
    assert all(m.thread_id is None for m in messages)


async def test_thread_messages_are_answered_in_the_thread(world: World, journal: InboundJournal) -> None:
    api = world.api
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        in_thread = api.push_message(THREAD, ALICE, "saturday?")
        in_hidden = api.push_message(HIDDEN_THREAD, BOB, "and this one?")  # a thread discord.py never heard of
        known, hidden = await inbox.wait_for(2)
        await send_rendered(channel, _group_reply(known, "Saturday works"))
        await send_rendered(channel, _group_reply(hidden, "Looking"))
        await channel.typing(known.chat_id, known.thread_id)

    assert (known.chat_id, known.thread_id, known.message_id) == (str(GENERAL), str(THREAD),
                                                                  f"{THREAD}:{in_thread['id']}")
    assert (hidden.chat_id, hidden.thread_id, hidden.message_id) == (str(GENERAL), str(HIDDEN_THREAD),
                                                                     f"{HIDDEN_THREAD}:{in_hidden['id']}")
    assert known.conversation_key == f"discord:{GENERAL}:{THREAD}"
    assert [c.path for c in api.calls if c.name == "get_channel"] == [f"/api/v10/channels/{HIDDEN_THREAD}"]
    first, second = api.posted
    assert (first.channel_id, first.reply_to) == (THREAD, int(in_thread["id"]))
    assert (second.channel_id, second.reply_to) == (HIDDEN_THREAD, int(in_hidden["id"]))
    # Only the person answered is notified: no @everyone, no roles, no one else the text names.
    assert first.allowed_mentions == {"parse": [], "replied_user": True}
    assert api.typing == [THREAD]


async def test_redelivered_message_is_handled_once(world: World, journal: InboundJournal) -> None:
    api = world.api
    inbox = Inbox()
    async with running(_channel(journal), inbox):
        original = api.push_message(world.alice_dm, ALICE, "only once")
        api.redeliver(original)
        api.push_message(world.alice_dm, ALICE, "after")
        await inbox.wait_for(2)
        await asyncio.sleep(0.05)

    assert inbox.texts == ["only once", "after"]


async def test_malformed_and_odd_events_do_not_stop_intake(world: World, journal: InboundJournal) -> None:
    api = world.api
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        api.push_raw("MESSAGE_CREATE", {"id": "1", "channel_id": str(GENERAL)})  # no type, author, content
        api.push_raw("MESSAGE_CREATE", "nonsense")
        api.push_raw("MESSAGE_CREATE", {"id": "x", "channel_id": "y", "type": 0})
        api.push_raw("INTERACTION_CREATE", {"type": 3, "data": {}})
        api.push_raw("SOMETHING_NEW", {"id": "2"})
        api.push_message(GENERAL, ALICE, "")  # a sticker or an image alone: no text
        api.push_message(GENERAL, ALICE, "pinned a message", message_type=6)  # a system message
        api.push_message(GENERAL, ALICE, "still listening")
        await inbox.wait_for(1)
        await asyncio.sleep(0.05)
        assert channel.ready.is_set()

    assert inbox.texts == ["still listening"]
    assert len(api.identifies) == 1  # the connection never had to be rebuilt


async def test_handlers_keep_each_channels_order_without_blocking_others(
    world: World, journal: InboundJournal
) -> None:
    api = world.api
    release = asyncio.Event()
    inbox = Inbox(gate=lambda m: release if m.text == "alice 1" else None)
    async with running(_channel(journal), inbox):
        api.push_message(world.alice_dm, ALICE, "alice 1")
        api.push_message(world.alice_dm, ALICE, "alice 2")
        api.push_message(GENERAL, BOB, "bob 1")
        await inbox.wait_for(1)
        assert inbox.texts == ["bob 1"]  # Alice's slow turn holds up only Alice
        release.set()
        await inbox.wait_for(3)

    assert inbox.texts == ["bob 1", "alice 1", "alice 2"]


# --- buttons -----------------------------------------------------------------------------------------
async def test_button_click_is_acknowledged_and_handed_over(world: World, journal: InboundJournal) -> None:
    api = world.api
    inbox = Inbox()
    question = OutboundMessage(platform="discord", chat_id=str(world.alice_dm), text="Is Tom a cat?",
                               buttons=(Button("Yes", "q1:yes"), Button("No", "q1:no")), recipient_id=str(ALICE))
    async with running(_channel(journal), inbox) as channel:
        await send_rendered(channel, question)
        (posted,) = await api.wait_for_posted(1)
        click = api.push_button_click(posted.id, ALICE, "q1:yes")
        await inbox.wait_for(1)
        await api.wait_until(lambda: bool(api.interaction_callbacks))

    assert posted.custom_ids == ["q1:yes", "q1:no"]
    assert inbox.presses == [ButtonPress(platform="discord", chat_id=str(world.alice_dm), sender_id=str(ALICE),
                                         data="q1:yes", chat_kind=ChatKind.DM)]
    (ack,) = api.interaction_callbacks
    assert (ack.interaction_id, ack.type) == (int(click["id"]), 6)  # a deferred update: the spinner stops
    assert inbox.messages == []


async def test_button_click_in_a_thread_names_the_parent_channel(world: World, journal: InboundJournal) -> None:
    api = world.api
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        api.push_message(THREAD, ALICE, "remember this?")
        (asked,) = await inbox.wait_for(1)
        await send_rendered(channel, _group_reply(asked, "Keep it?", buttons=(Button("Keep", "m:keep"),)))
        (posted,) = await api.wait_for_posted(1)
        api.push_button_click(posted.id, BOB, "m:keep")
        await inbox.wait_for(2)

    assert inbox.presses == [ButtonPress(platform="discord", chat_id=str(GENERAL), sender_id=str(BOB),
                                         data="m:keep", chat_kind=ChatKind.GROUP)]


# --- sending -------------------------------------------------------------------------------------------
async def test_long_reply_is_chunked_with_valid_code_blocks(world: World, journal: InboundJournal) -> None:
    api = world.api
    inbox = Inbox()
    code = "\n".join(f"    value_{i} = compute({i})  # step {i}" for i in range(120))
    text = "Here is the script:\n\n```python\n" + code + "\n```\n\n" + "\n\n".join(
        f"Paragraph {i}: " + "word " * 50 for i in range(12))
    async with running(_channel(journal), inbox) as channel:
        api.push_message(GENERAL, ALICE, "show me")
        (asked,) = await inbox.wait_for(1)
        message = _group_reply(asked, text, buttons=(Button("More", "more"),))
        ids = await send_rendered(channel, message)

    posted = api.posted
    assert len(posted) == len(ids) >= 3
    assert all(len(p.content) <= 2_000 for p in posted)
    assert all(p.content.count("```") % 2 == 0 for p in posted)  # every chunk opens and closes its fences
    assert [p.reply_to for p in posted] == [int(asked.message_id.split(":")[1])] + [None] * (len(posted) - 1)
    assert [bool(p.components) for p in posted] == [False] * (len(posted) - 1) + [True]
    joined = "\n".join(p.content for p in posted)
    assert all(f"value_{i} = compute({i})" in joined for i in range(120))
    assert all(f"Paragraph {i}:" in joined for i in range(12))


async def test_attachment_follows_the_text_and_carries_the_buttons(world: World, journal: InboundJournal) -> None:
    api = world.api
    message = OutboundMessage(platform="discord", chat_id=str(world.alice_dm), text="Your notes:",
                              buttons=(Button("Thanks", "t"),), attachment_name="notes.txt",
                              attachment_bytes=b"line one\n", recipient_id=str(ALICE))
    async with running(_channel(journal), Inbox()) as channel:
        await send_rendered(channel, message)

    text, upload = api.posted
    assert (text.content, text.components, text.files) == ("Your notes:", (), ())
    assert [(f.filename, f.content) for f in upload.files] == [("notes.txt", b"line one\n")]
    assert upload.custom_ids == ["t"]


async def test_dm_addressed_by_user_id_opens_the_dm_first(world: World, journal: InboundJournal) -> None:
    api = world.api
    message = OutboundMessage(platform="discord", chat_id=str(BOB), text="Hello Bob", chat_kind=ChatKind.DM,
                              recipient_id=str(BOB))
    async with running(_channel(journal), Inbox()) as channel:
        await send_rendered(channel, message)
        await send_rendered(channel, message)

    assert [c.name for c in api.calls].count("create_dm") == 1  # remembered for the second message
    assert {p.channel_id for p in api.posted} == {api.dm_by_user[BOB]}


async def test_short_rate_limit_is_waited_out_and_the_message_arrives_once(
    world: World, journal: InboundJournal
) -> None:
    api = world.api
    message = OutboundMessage(platform="discord", chat_id=str(world.alice_dm), text="after the wait")
    async with running(_channel(journal), Inbox()) as channel:
        api.fail_next("create_message", 429, retry_after=0.3)
        started = time.monotonic()
        await send_rendered(channel, message)
        waited = time.monotonic() - started

    assert [p.content for p in api.posted] == ["after the wait"]
    assert [(c.status, c.scripted) for c in api.calls if c.name == "create_message"] == [(429, True), (200, False)]
    assert waited >= 0.3


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        ({"status": 429, "retry_after": 120.0}, (120.0, False)),  # longer than discord.py may sleep
        ({"status": 429, "retry_after": 7.0, "via": False}, (7.0, False)),  # a 429 discord.py does not retry
        ({"status": 403, "code": 50007}, (None, True)),  # the person blocks DMs
        ({"status": 404, "code": 10003}, (None, True)),
        ({"status": 503}, (None, False)),
    ],
)
async def test_send_failures_map_to_send_error(world: World, journal: InboundJournal, failure: dict[str, Any],
                                               expected: tuple[float | None, bool]) -> None:
    api = world.api
    message = OutboundMessage(platform="discord", chat_id=str(world.alice_dm), text="hello")
    async with running(_channel(journal), Inbox()) as channel:
        api.fail_next("create_message", **failure)
        with pytest.raises(SendError) as failed:
            await send_rendered(channel, message)

    assert (failed.value.retry_after, failed.value.permanent) == expected
    assert api.posted == []


async def test_sending_to_an_unknown_channel_is_permanent(world: World, journal: InboundJournal) -> None:
    message = OutboundMessage(platform="discord", chat_id="123456789012345678", text="hello?")
    async with running(_channel(journal), Inbox()) as channel:
        with pytest.raises(SendError) as failed:
            await send_rendered(channel, message)
        await channel.typing("123456789012345678", None)  # refused by Discord, not our caller's problem

    assert failed.value.permanent
    assert world.api.typing == []


# --- the connection ------------------------------------------------------------------------------------
async def test_gateway_drop_is_resumed_and_missed_messages_arrive(world: World, journal: InboundJournal) -> None:
    api = world.api
    inbox = Inbox()
    async with running(_channel(journal), inbox):
        api.push_message(world.alice_dm, ALICE, "before")
        await inbox.wait_for(1)
        await api.drop_gateway(code=4000)
        api.push_message(world.alice_dm, ALICE, "while dropped")  # kept in the session, replayed on RESUME
        await api.wait_until(lambda: bool(api.resumes) and api.connected == 1)
        api.push_message(world.alice_dm, ALICE, "after")
        await inbox.wait_for(3)

    assert inbox.texts == ["before", "while dropped", "after"]
    assert [(r.path, r.accepted) for r in api.resumes] == [("/resume", True)]  # resume_gateway_url was used
    assert len(api.identifies) == 1


async def test_lost_session_reidentifies_and_keeps_delivering(world: World, journal: InboundJournal) -> None:
    api = world.api
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        api.push_message(world.alice_dm, ALICE, "before")
        await inbox.wait_for(1)
        api.invalidate_sessions()
        await api.drop_gateway(code=None)  # the TCP stream just dies
        await api.wait_until(lambda: len(api.identifies) == 2 and api.connected == 1)
        await asyncio.wait_for(channel.ready.wait(), WAIT_S)
        api.push_message(world.alice_dm, ALICE, "after")
        await inbox.wait_for(2)

    assert inbox.texts == ["before", "after"]
    assert [r.accepted for r in api.resumes] == [False]


async def test_discord_going_away_and_coming_back(world: World, journal: InboundJournal) -> None:
    api = world.api
    inbox = Inbox()
    async with running(_channel(journal), inbox) as channel:
        await api.go_away()
        await asyncio.sleep(0.2)
        assert not channel.ready.is_set()  # events are not flowing, and the channel says so
        await api.come_back()
        await asyncio.wait_for(channel.ready.wait(), 10)
        api.push_message(world.alice_dm, ALICE, "back again")
        await inbox.wait_for(1)

    assert inbox.texts == ["back again"]


async def test_stop_closes_the_gateway(world: World, journal: InboundJournal) -> None:
    api = world.api
    channel = _channel(journal)
    await channel.start(Inbox().on_message)
    assert api.connected == 1
    await channel.stop()
    await api.wait_until(lambda: api.connected == 0)

    assert not channel.ready.is_set()
    with pytest.raises(SendError, match="not started"):
        await send_rendered(channel, OutboundMessage(platform="discord", chat_id=str(world.alice_dm), text="late"))


async def test_stop_lets_a_running_handler_finish(world: World, journal: InboundJournal) -> None:
    started = asyncio.Event()
    finished: list[str] = []

    async def slow(message: InboundMessage) -> None:
        started.set()
        await asyncio.sleep(0.2)
        finished.append(message.text)

    channel = _channel(journal)
    await channel.start(slow)
    world.api.push_message(world.alice_dm, ALICE, "slow one")
    await asyncio.wait_for(started.wait(), WAIT_S)
    await channel.stop()

    assert finished == ["slow one"]


# --- start failures and doctor -------------------------------------------------------------------------
async def test_rejected_token_fails_start_without_leaking_it(
    world: World, journal: InboundJournal, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "MTAwMDAwMDAwMDAwMDAwMDAx.fake.wrong-token-for-kith-tests"
    channel = _channel(journal, token=wrong)
    with pytest.raises(ChannelStartError) as refused:
        await channel.start(Inbox().on_message)
    await channel.stop()

    assert "DISCORD_BOT_TOKEN" in str(refused.value) and "rejected" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert wrong not in str(refused.value) and wrong not in caplog.text
    assert world.api.identifies == []


async def test_message_content_intent_not_enabled_fails_start(world: World, journal: InboundJournal) -> None:
    world.api.message_content_allowed = False
    with pytest.raises(ChannelStartError) as refused:
        await _channel(journal).start(Inbox().on_message)

    assert "Message Content intent" in str(refused.value)


async def test_unreachable_gateway_fails_start_within_the_timeout(
    world: World, journal: InboundJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL("ws://127.0.0.1:9/gateway"))
    with pytest.raises(ChannelStartError) as refused:
        await _channel(journal, ready_timeout_s=0.5).start(Inbox().on_message)

    # Either the timeout, or discord.py giving up after its first reconnect backoff: both say what to check.
    assert str(refused.value) in ("discord: not ready within 0.5 s",
                                  "discord: cannot reach Discord (ClientConnectorError)")


async def test_check_token_for_doctor(discord_api: FakeDiscord) -> None:
    settings = DiscordSettings()
    assert await check_token(settings, FAKE_DISCORD_TOKEN) == (True, f"@kith_test_bot (id {discord_api.bot_id})")
    ok, detail = await check_token(settings, "nope.nope.nope")
    assert not ok and "rejected" in detail and "nope" not in detail
    ok, detail = await check_token(DiscordSettings(token_env="KITH_TEST_UNSET_DISCORD_TOKEN"))
    assert (ok, detail) == (False, "environment variable KITH_TEST_UNSET_DISCORD_TOKEN is not set")
    await discord_api.go_away()
    ok, detail = await check_token(settings, FAKE_DISCORD_TOKEN)
    assert not ok and "cannot reach" in detail


async def test_a_message_is_kept_from_its_journal_entry_until_the_core_decides_on_it(world: World,
                                                                                     db: Database) -> None:
    kept = MessageInbox(db)
    inbox = Inbox()
    async with running(_channel(InboundJournal(db, inbox=kept)), inbox):
        original = world.api.push_message(world.alice_dm, ALICE, "keep me")
        world.api.redeliver(original)
        (message,) = await inbox.wait_for(1)
        await asyncio.sleep(0.05)
    # The handler here never decides, as if the process died first: the next start takes it up once.
    assert (await kept.resume(await kept.leftovers(), ["discord"])).undecided == [message]


async def test_a_message_before_on_ready_is_journaled_and_answered(world: World, db: Database) -> None:
    api = world.api
    kept = MessageInbox(db)
    pushed: list[dict[str, Any]] = []
    # Right after READY, while discord.py still waits for the servers before on_ready (1 s here).
    api.after_ready = lambda: pushed.append(api.push_message(world.alice_dm, ALICE, "are you there?"))
    inbox = Inbox()
    channel = DiscordChannel(DiscordSettings(ready_timeout_s=WAIT_S), FAKE_DISCORD_TOKEN,
                             journal=InboundJournal(db, inbox=kept), stop_grace_s=1.0, guild_ready_timeout_s=1.0,
                             reidentify_delay_s=0.05)
    async with running(channel, inbox):
        (message,) = await inbox.wait_for(1)
        reply = OutboundMessage(platform="discord", chat_id=message.chat_id, text="I am.", chat_kind=ChatKind.DM,
                                recipient_id=message.sender_id)
        await send_rendered(channel, reply)

    assert message.text == "are you there?" and message.message_id == f"{world.alice_dm}:{pushed[0]['id']}"
    assert [p.content for p in api.posted] == ["I am."]
    # Journaled like any other event: kept until the core decides on it, and a redelivery is dropped.
    assert (await kept.resume(await kept.leftovers(), ["discord"])).undecided == [message]
    assert not await InboundJournal(db).record("discord", message.message_id.split(":")[1])


async def test_a_resent_outbox_entry_is_posted_once(world: World, journal: InboundJournal) -> None:
    api = world.api
    long_text = "\n\n".join(f"Paragraph {i}: " + "word " * 60 for i in range(10))
    entry = OutboundMessage(platform="discord", chat_id=str(world.alice_dm), text=long_text, chat_kind=ChatKind.DM,
                            delivery_key="17@2025-01-01T00:00:00+00:00")
    same_words_other_entry = replace(entry, delivery_key="18@2025-01-01T00:00:01+00:00")
    async with running(_channel(journal), Inbox()) as channel:
        first = await send_rendered(channel, entry)
        # Sent again whole, as after a crash before its progress was recorded or an answer that never came.
        again = await send_rendered(channel, entry)
        other = await send_rendered(channel, same_words_other_entry)
    assert set(other).isdisjoint(first)

    chunks = len(first)
    assert chunks > 1 and again == first  # Discord answered with the messages it had posted
    assert api.nonce_hits == chunks
    assert len(api.posted) == 2 * chunks  # another entry with the same words is a message of its own
    assert len({p.nonce for p in api.posted}) == 2 * chunks
