"""Discord messages no gateway session handed over: read back from the channels' history, answered once.

Discord redelivers nothing to a new session: what it sent a process that died before journaling it, or
what was posted while the bot was away, is only in the channel. These tests post such messages with the
fake's ``post_unseen`` and start the real channel (discord.py) again on the same database.
"""

# Test functions receive the imported ``discord_api`` fixture by argument name, which ruff reads
# as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import discord
import pytest

from channels.discord.channel import DiscordChannel
from channels.discord.settings import DiscordSettings
from delivery.inbound import Cursors, InboundJournal
from delivery.inbox import Inbox as MessageInbox
from ground.db import Database
from ground.types import ChatKind, OutboundMessage, SendError
from tests.fakes.discord_api import FAKE_DISCORD_TOKEN, FakeDiscord, discord_api  # noqa: F401
from tests.support.channels import Inbox, running, send_rendered

ALICE = 200_000_000_000_000_001
BOB = 200_000_000_000_000_002
GUILD = 300_000_000_000_000_001
GENERAL = 300_000_000_000_000_002
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
    api.add_guild(GUILD, "Family", members=[ALICE, BOB], nicks={BOB: "Bobby"})
    api.add_text_channel(GUILD, GENERAL, "general")
    return World(api, api.open_dm(ALICE))


def _channel(db: Database, **kwargs: Any) -> DiscordChannel:
    """A channel as ``bot.py run`` builds it, over ``db``: a new one stands for a new process."""
    return DiscordChannel(DiscordSettings(ready_timeout_s=WAIT_S), FAKE_DISCORD_TOKEN,
                          journal=InboundJournal(db, inbox=MessageInbox(db)), cursors=Cursors(db),
                          stop_grace_s=1.0, guild_ready_timeout_s=0.05, reidentify_delay_s=0.05, **kwargs)


async def test_what_a_dead_process_never_took_in_is_caught_up_at_the_next_start(world: World, db: Database) -> None:
    api = world.api
    first = Inbox()
    async with running(_channel(db), first) as channel:
        api.push_message(world.alice_dm, ALICE, "hello")
        api.push_message(GENERAL, BOB, f"<@{api.bot_id}> morning", mentions=[api.bot_id])
        hello, _ = await first.wait_for(2)
        await send_rendered(channel, OutboundMessage(platform="discord", chat_id=hello.chat_id, text="Hi Alice",
                                                     chat_kind=ChatKind.DM, recipient_id=hello.sender_id))
    # Events the gateway sent the process just before it died, and messages posted while it was down.
    api.post_unseen(world.alice_dm, ALICE, "are you there?")
    api.post_unseen(GENERAL, ALICE, "just chatting")  # no mention: the policy's to decide, as ever
    api.post_unseen(GENERAL, BOB, f"<@{api.bot_id}> still on for tonight?", mentions=[api.bot_id])
    api.post_unseen(world.alice_dm, ALICE, "hello again")
    # And one the new session hears of as well, right after READY: both roads lead to one hand-over.
    def heard_live() -> None:
        api.push_message(world.alice_dm, ALICE, "anyone?")

    api.after_ready = heard_live

    second = Inbox()
    async with running(_channel(db), second):
        await second.wait_for(5)
        api.after_ready = None
        api.push_message(world.alice_dm, ALICE, "live again")
        await second.wait_for(6)
        await asyncio.sleep(0.1)  # a second hand-over of anything would have arrived by now

    dm = [m.text for m in second.messages if m.chat_kind is ChatKind.DM]
    assert dm == ["are you there?", "hello again", "anyone?", "live again"]  # in order, each once
    group = [(m.text, m.mentioned, m.chat_id) for m in second.messages if m.chat_kind is ChatKind.GROUP]
    # Translated as a gateway event is (a fetched message names no server nickname: the person's own name).
    assert group == [("just chatting", False, str(GENERAL)), ("@Kith still on for tonight?", True, str(GENERAL))]
    # Kept in the inbox from the journal entry on, as any message: a crash now still loses none of them.
    left = await MessageInbox(db).resume(await MessageInbox(db).leftovers(), ["discord"])
    assert sorted(m.text for m in left.undecided) == sorted(m.text for m in first.messages + second.messages)


class _DiesBeforeJournaling(InboundJournal):
    """A process's journal that never gets to commit the next event: it dies with the event in hand."""

    def __init__(self, db: Database, *, after: int) -> None:
        super().__init__(db, inbox=MessageInbox(db))
        self._left = after
        self.reached = asyncio.Event()

    async def record_batch(self, *args: Any, **kwargs: Any) -> set[str]:
        if self._left == 0:
            self.reached.set()
            await asyncio.Event().wait()  # never: cancelled when the "process" ends
        self._left -= 1
        return await super().record_batch(*args, **kwargs)


async def test_an_event_the_gateway_gave_a_dying_process_is_answered_by_the_next(world: World,
                                                                                db: Database) -> None:
    api = world.api
    dying = _DiesBeforeJournaling(db, after=1)
    first = Inbox()
    channel = DiscordChannel(DiscordSettings(ready_timeout_s=WAIT_S), FAKE_DISCORD_TOKEN, journal=dying,
                             cursors=Cursors(db), stop_grace_s=0.05, guild_ready_timeout_s=0.05)
    async with running(channel, first):
        api.push_message(world.alice_dm, ALICE, "hello")
        await first.wait_for(1)
        api.push_message(world.alice_dm, ALICE, "are you still there?")  # sent on the session, never journaled
        await asyncio.wait_for(dying.reached.wait(), WAIT_S)

    second = Inbox()
    async with running(_channel(db), second):  # a fresh IDENTIFY: Discord replays nothing to it
        await second.wait_for(1)
        await asyncio.sleep(0.1)

    assert [r.accepted for r in api.resumes] == [] and len(api.identifies) == 2
    assert first.texts == ["hello"] and second.texts == ["are you still there?"]


async def test_a_session_discord_would_not_resume_is_caught_up(world: World, db: Database) -> None:
    api = world.api
    inbox = Inbox()
    async with running(_channel(db), inbox) as channel:
        api.push_message(world.alice_dm, ALICE, "before")
        await inbox.wait_for(1)
        api.invalidate_sessions()
        await api.drop_gateway(code=None)
        api.post_unseen(world.alice_dm, ALICE, "while the session was lost")  # never replayed: a fresh IDENTIFY
        await api.wait_until(lambda: len(api.identifies) == 2)
        await inbox.wait_for(2)
        await asyncio.wait_for(channel.ready.wait(), WAIT_S)
        api.push_message(world.alice_dm, ALICE, "after")
        await inbox.wait_for(3)
        await asyncio.sleep(0.1)

    assert inbox.texts == ["before", "while the session was lost", "after"]


async def test_catch_up_reaches_back_a_day_at_most(world: World, db: Database) -> None:
    api = world.api
    async with running(_channel(db), first := Inbox()):
        api.push_message(world.alice_dm, ALICE, "hello")
        await first.wait_for(1)
    old = discord.utils.time_snowflake(datetime.now(UTC) - timedelta(hours=25))
    api.post_unseen(world.alice_dm, ALICE, "a day and more ago", message_id=old)
    api.post_unseen(world.alice_dm, ALICE, "just now")

    inbox = Inbox()
    async with running(_channel(db), inbox):
        await inbox.wait_for(1)
        await asyncio.sleep(0.1)

    assert inbox.texts == ["just now"]


# --- sends answered late -------------------------------------------------------------------------------
async def test_a_send_answered_too_late_is_maybe_delivered_and_its_resend_posts_once(world: World,
                                                                                   db: Database) -> None:
    api = world.api
    entry = OutboundMessage(platform="discord", chat_id=str(world.alice_dm), text="Here you are",
                            chat_kind=ChatKind.DM, delivery_key="41@2025-01-01T00:00:00+00:00")
    async with running(_channel(db, send_timeout_s=0.3), Inbox()) as channel:
        api.answer_late("create_message", 2.0)  # Discord posts it, and answers after kith stopped waiting
        with pytest.raises(SendError) as late:
            await send_rendered(channel, entry)
        assert len(api.posted) == 1
        again = await send_rendered(channel, entry)  # the delivery worker's resend of a maybe-delivered send

    assert late.value.maybe_delivered and not late.value.permanent
    (posted,) = api.posted
    assert again == [f"{world.alice_dm}:{posted.id}"] and api.nonce_hits == 1
