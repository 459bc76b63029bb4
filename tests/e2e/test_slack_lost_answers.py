"""Slack sends whose answer is slow or lost, through the real delivery worker, slack_sdk and the fake Slack.

chat.postMessage has no idempotency key: a send that timed out after it left may have been posted. The
channel marks every chunk with message metadata and looks for it before sending it again; where it cannot
look (no history scope), the resend is the one duplicate left, and the worker counts it.
"""

# Test functions receive the imported ``slack_api`` fixture by argument name, which ruff reads
# as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest

from channels.slack.channel import SlackChannel, web_timeout
from channels.slack.settings import SlackSettings
from channels.slack.translate import SlackIdentity, delivery_marker, delivery_metadata, posted_with_marker
from delivery import outbox
from delivery.inbound import InboundJournal
from delivery.worker import MAYBE_DELIVERED, DeliveryWorker
from ground.config import DeliverySettings
from ground.db import Database
from ground.tunables import SLACK_HTTP_TIMEOUT_S, SLACK_SEND_TIMEOUT_S
from ground.types import ChatKind, OutboundMessage, SendError, utcnow
from tests.fakes.slack_api import FAKE_APP_TOKEN, FAKE_BOT_TOKEN, FakeSlack, slack_api  # noqa: F401
from tests.support.channels import Inbox, running
from tests.support.delivery import send_anything

ALICE = "U0ALICE"
GENERAL = "C0GENERAL"
SEND_TIMEOUT_S = 0.5  # the tests' answer budget: a late answer comes after it, a prompt one well within
LATE_S = 2.0
PROMPT_S = 0.1
QUICK = DeliverySettings(max_attempts=4, backoff_base_s=0.01, backoff_max_s=0.05)


@pytest.fixture
def people(slack_api: FakeSlack) -> FakeSlack:
    slack_api.add_user(ALICE, "alice", real_name="Alice Liddell")
    slack_api.add_channel(GENERAL, "general")
    return slack_api


def _channel(api: FakeSlack, journal: InboundJournal, **kwargs: Any) -> SlackChannel:
    settings = SlackSettings(api_url=api.api_url)
    return SlackChannel(settings, FAKE_BOT_TOKEN, journal=journal, app_token=FAKE_APP_TOKEN, ping_interval_s=0.2,
                        connect_wait_s=5.0, stop_grace_s=1.0, send_timeout_s=SEND_TIMEOUT_S, **kwargs)


async def _no_wait(seconds: float) -> None:
    return None


async def _deliver(db: Database, channel: SlackChannel, message: OutboundMessage) -> int:
    worker = DeliveryWorker(db, {"slack": channel}, send_anything, sleep=_no_wait, settings=QUICK)
    entry_id = await worker.post(message)
    await worker.wait_idle()
    return entry_id


async def _deliver_dm_answered_after(api: FakeSlack, db: Database, journal: InboundJournal, delay_s: float,
                                     text: str) -> tuple[int, outbox.OutboxEntry | None, list[tuple[int, int]]]:
    """One reply to Alice's DM through the worker while Slack answers chat.postMessage after ``delay_s``: its
    outbox id, its outbox entry and the doubts counted for it."""
    message = OutboundMessage(platform="slack", chat_id=api.dm_channel(ALICE), text=text)
    async with running(_channel(api, journal), Inbox()) as channel:
        api.answer_slowly("chat.postMessage", delay_s)
        entry_id = await _deliver(db, channel, message)
        return entry_id, await db.run(outbox.get, entry_id), await db.run(outbox.doubts, entry_id)


def _post_calls(api: FakeSlack) -> list[str]:
    return [c.method for c in api.calls if c.method.startswith(("chat.", "conversations.history",
                                                                  "conversations.replies"))]


def _doubted(caplog: pytest.LogCaptureFixture) -> int:
    return sum("delivery maybe doubled" in r.getMessage() for r in caplog.records)


async def test_a_dm_reply_answered_too_late_is_found_posted_and_not_sent_twice(
    people: FakeSlack, db: Database, journal: InboundJournal, caplog: pytest.LogCaptureFixture
) -> None:
    api = people
    chat = api.dm_channel(ALICE)
    caplog.set_level(logging.INFO)
    entry_id, entry, doubts = await _deliver_dm_answered_after(api, db, journal, LATE_S, "once only")

    # Slack posted it although kith never heard so; the look before the resend found it.
    assert [(p.channel, p.text) for p in api.posted] == [(chat, "once only")]
    assert _post_calls(api) == ["chat.postMessage", "conversations.history"]
    assert entry is not None and entry.status is outbox.OutboxStatus.SENT
    assert entry.sent_ids == (f"{chat}:{api.posted[0].ts}",)
    # The lost answer still counts as a doubt, the kind a platform without idempotency can cause.
    assert doubts == [(entry_id, 0)] and _doubted(caplog) == 1


async def test_without_the_history_scope_a_late_reply_is_sent_again_and_counted(
    people: FakeSlack, db: Database, journal: InboundJournal, caplog: pytest.LogCaptureFixture
) -> None:
    api = people
    assert "channels:history" not in api.scopes  # the README's scopes read DMs only
    thread = api.mention_event(GENERAL, ALICE, "<@U0KITHBOT> hi")["event"]["ts"]
    message = OutboundMessage(platform="slack", chat_id=GENERAL, text="in the thread", thread_id=thread,
                              chat_kind=ChatKind.GROUP)
    caplog.set_level(logging.INFO)
    async with running(_channel(api, journal), Inbox()) as channel:
        api.answer_slowly("chat.postMessage", LATE_S)
        entry_id = await _deliver(db, channel, message)
        doubts = await db.run(outbox.doubts, entry_id)

    # The documented window: posted twice, and counted where anyone can see it.
    assert [(p.channel, p.thread_ts, p.text) for p in api.posted] == [(GENERAL, thread, "in the thread")] * 2
    assert [c.failed or c.method for c in api.calls if c.method == "conversations.replies"] == \
        ["conversations.replies"]
    assert doubts == [(entry_id, 0)] and _doubted(caplog) == 1


async def test_with_the_history_scope_a_late_thread_reply_is_found_in_its_thread(
    people: FakeSlack, db: Database, journal: InboundJournal
) -> None:
    api = people
    api.scopes.add("channels:history")
    thread = api.mention_event(GENERAL, ALICE, "<@U0KITHBOT> hi")["event"]["ts"]
    api.bot_message_event(GENERAL, "another bot's post is not ours")
    message = OutboundMessage(platform="slack", chat_id=GENERAL, text="in the thread", thread_id=thread,
                              chat_kind=ChatKind.GROUP)
    async with running(_channel(api, journal), Inbox()) as channel:
        api.answer_slowly("chat.postMessage", LATE_S)
        await _deliver(db, channel, message)
        await _deliver(db, channel, replace(message, text="the next reply"))

    assert [p.text for p in api.posted] == ["in the thread", "the next reply"]
    assert all(p.thread_ts == thread for p in api.posted)


async def test_a_reply_answered_within_the_budget_is_an_ordinary_delivery(
    people: FakeSlack, db: Database, journal: InboundJournal, caplog: pytest.LogCaptureFixture
) -> None:
    api = people
    caplog.set_level(logging.INFO)
    _entry_id, _entry, doubts = await _deliver_dm_answered_after(api, db, journal, PROMPT_S, "slow, fine")

    assert [p.text for p in api.posted] == ["slow, fine"]
    assert _post_calls(api) == ["chat.postMessage"]
    assert doubts == [] and _doubted(caplog) == 0


async def test_every_chunk_of_an_outbox_entry_carries_its_own_stable_marker(
    people: FakeSlack, db: Database, journal: InboundJournal
) -> None:
    api = people
    chat = api.dm_channel(ALICE)
    text = "\n\n".join(f"paragraph {i} " + "word " * 700 for i in range(3))  # several chunks
    async with running(_channel(api, journal), Inbox()) as channel:
        await _deliver(db, channel, OutboundMessage(platform="slack", chat_id=chat, text=text))
        await _deliver(db, channel, OutboundMessage(platform="slack", chat_id=chat, text="short"))

    markers = [p.metadata["event_payload"]["chunk"] for p in api.posted if p.metadata]
    assert len(api.posted) > 2 and len(markers) == len(api.posted) == len(set(markers))
    assert {p.metadata["event_type"] for p in api.posted if p.metadata} == {"kith_delivery"}


def test_a_send_waits_long_for_its_answer_and_briefly_to_connect() -> None:
    budget = web_timeout(SLACK_SEND_TIMEOUT_S)
    assert budget.sock_read == SLACK_SEND_TIMEOUT_S >= 30.0
    assert budget.connect == SLACK_HTTP_TIMEOUT_S < SLACK_SEND_TIMEOUT_S
    assert budget.total is not None and budget.total > budget.sock_read


async def test_a_refused_marker_costs_the_reply_nothing(
    people: FakeSlack, db: Database, journal: InboundJournal
) -> None:
    api = people
    chat = api.dm_channel(ALICE)
    async with running(_channel(api, journal), Inbox()) as channel:
        api.fail_next("chat.postMessage", "invalid_metadata_schema")
        entry_id = await _deliver(db, channel, OutboundMessage(platform="slack", chat_id=chat, text="still here"))
        entry = await db.run(outbox.get, entry_id)

    assert [(p.text, p.metadata) for p in api.posted] == [("still here", None)]
    assert entry is not None and entry.status is outbox.OutboxStatus.SENT


def test_only_our_own_message_with_that_very_marker_counts() -> None:
    me = SlackIdentity(team_id="T0KITH", user_id="U0KITHBOT", bot_id="B0KITH", name="kith")
    marker = delivery_marker("17@2026-01-01T00:00:00+00:00", 1)
    assert marker is not None and marker == delivery_marker("17@2026-01-01T00:00:00+00:00", 1)
    assert marker not in {delivery_marker("17@2026-01-01T00:00:00+00:00", 0),
                          delivery_marker("18@2026-01-01T00:00:01+00:00", 1)}
    assert delivery_marker(None, 0) is None
    ours = {"type": "message", "bot_id": "B0KITH", "ts": "1.000002", "metadata": delivery_metadata(marker)}
    page = [
        {**ours, "bot_id": "B0OTHER", "ts": "1.000001"},  # another app copying our metadata
        {**ours, "metadata": delivery_metadata("another chunk"), "ts": "1.000003"},
        {"type": "message", "user": "U0ALICE", "text": "no metadata", "ts": "1.000004"},
        "not a message",
    ]
    assert posted_with_marker(page, marker, me) is None
    assert posted_with_marker([*page, ours], marker, me) == "1.000002"


async def test_a_send_lost_just_before_a_restart_is_looked_for_by_the_next_process(
    people: FakeSlack, db: Database, journal: InboundJournal
) -> None:
    api = people
    chat = api.dm_channel(ALICE)
    entry_id = await db.run(outbox.enqueue, OutboundMessage(platform="slack", chat_id=chat, text="across"),
                            source=None, now=utcnow())
    entry = await db.run(outbox.get, entry_id)
    assert entry is not None
    # The first process: the post goes out, its answer is lost, the doubt is noted as its worker notes it; then
    # the process ends before the resend.
    async with running(_channel(api, journal), Inbox()) as first:
        api.answer_slowly("chat.postMessage", LATE_S)
        with pytest.raises(SendError) as lost:
            await first.send_chunk(entry.message, first.render(entry.message)[0], 0)
        assert lost.value.maybe_delivered
        now = utcnow()
        await db.run(outbox.schedule_retry, entry_id, attempts=0, next_attempt_at=now, error=MAYBE_DELIVERED,
                     now=now, doubted_chunk=0)

    async with running(_channel(api, journal), Inbox()) as second:
        worker = DeliveryWorker(db, {"slack": second}, send_anything, sleep=_no_wait, settings=QUICK)
        await worker.start()
        await worker.wait_idle()
        await worker.stop()
        done = await db.run(outbox.get, entry_id)

    assert [p.text for p in api.posted] == ["across"]
    assert _post_calls(api) == ["chat.postMessage", "conversations.history"]
    assert done is not None and done.status is outbox.OutboxStatus.SENT


async def test_a_look_that_fails_for_now_is_tried_again_rather_than_posting_blind(
    people: FakeSlack, db: Database, journal: InboundJournal, caplog: pytest.LogCaptureFixture
) -> None:
    api = people
    chat = api.dm_channel(ALICE)
    caplog.set_level(logging.INFO)
    async with running(_channel(api, journal), Inbox()) as channel:
        api.answer_slowly("chat.postMessage", LATE_S)
        api.fail_next("conversations.history", "internal_error", status=503)
        api.fail_next("conversations.history", "ratelimited", retry_after=1)
        entry_id = await _deliver(db, channel, OutboundMessage(platform="slack", chat_id=chat, text="patience"))
        doubts = await db.run(outbox.doubts, entry_id)

    assert [p.text for p in api.posted] == ["patience"]
    assert _post_calls(api) == ["chat.postMessage"] + ["conversations.history"] * 3
    assert doubts == [(entry_id, 0)] and _doubted(caplog) == 1


async def test_a_post_in_flight_when_the_process_died_is_looked_for_at_the_next_start_and_not_sent_twice(
    people: FakeSlack, db: Database, journal: InboundJournal
) -> None:
    api = people
    chat = api.dm_channel(ALICE)
    message = OutboundMessage(platform="slack", chat_id=chat, text="once only")
    async with running(_channel(api, journal), Inbox()) as channel:
        api.answer_slowly("chat.postMessage", LATE_S)
        dying = DeliveryWorker(db, {"slack": channel}, send_anything, sleep=_no_wait, settings=QUICK)
        await dying.start()
        entry_id = await dying.post(message)
        await api.wait_for_posts(1)
        await dying.stop()  # dies mid-send: Slack posted it, the answer never came, no doubt was noted
    assert await db.run(outbox.doubts, entry_id) == []

    async with running(_channel(api, journal), Inbox()) as channel:  # the next process
        worker = DeliveryWorker(db, {"slack": channel}, send_anything, sleep=_no_wait, settings=QUICK)
        await worker.start()
        await worker.wait_idle()
        later = await worker.post(replace(message, text="and then this"))
        await worker.wait_idle()
        await worker.stop()
        entry = await db.run(outbox.get, entry_id)

    assert [p.text for p in api.posted] == ["once only", "and then this"]
    assert entry is not None and entry.status is outbox.OutboxStatus.SENT
    assert entry.sent_ids == (f"{chat}:{api.posted[0].ts}",)
    # One look, for the entry the dead process left; none for what this process sent itself.
    assert _post_calls(api).count("conversations.history") == 1
    assert (await db.run(outbox.get, later)).status is outbox.OutboxStatus.SENT
