"""The Telegram channel driving the real python-telegram-bot against the loopback fake Bot API."""

# Test functions receive the imported ``telegram_api`` fixture by argument name, which ruff reads
# as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from channels.telegram.channel import ChannelStartError, OffsetStep, TelegramChannel, check_token, offset_step
from channels.telegram.settings import TelegramSettings
from delivery.inbound import Cursors, InboundJournal
from ground.db import Database
from ground.types import Button, ButtonPress, ChatKind, InboundMessage, OutboundMessage, RenderedChunk, SendError
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.channels import Inbox, running

ALICE = 1001
BOB = 1002
GROUP = -100_555
BOT_ID = int(FAKE_BOT_TOKEN.split(":")[0])
WAIT_S = 5.0


@dataclass
class Stores:
    db: Database
    journal: InboundJournal
    cursors: Cursors


@pytest.fixture
def stores(db: Database, journal: InboundJournal) -> Stores:
    return Stores(db, journal, Cursors(db))


def _settings(api: FakeTelegramApi, **overrides: Any) -> TelegramSettings:
    return replace(TelegramSettings(base_url=api.base_url, poll_timeout_s=1), **overrides)


def _channel(api: FakeTelegramApi, stores: Stores, *, token: str = FAKE_BOT_TOKEN, **kwargs: Any) -> TelegramChannel:
    settings = kwargs.pop("settings", None) or _settings(api)
    kwargs.setdefault("commands", [("start", "Say hello"), ("help", "What I can do"), ("remember", "Keep a fact")])
    return TelegramChannel(settings, token, journal=stores.journal, cursors=stores.cursors,
                           poll_backoff_base_s=0.05, poll_backoff_max_s=0.2, stop_grace_s=1.0, **kwargs)


def _offsets(api: FakeTelegramApi) -> list[int]:
    """The offset of every getUpdates so far."""
    return [int(c.params.get("offset") or 0) for c in api.calls if c.method == "getUpdates"]


def _outbound(chat_id: int, text: str, **kwargs: Any) -> OutboundMessage:
    return OutboundMessage(platform="telegram", chat_id=str(chat_id), text=text, **kwargs)


# --- intake --------------------------------------------------------------------------------------
async def test_dm_arrives_with_its_fields_and_setup_registers_commands(
    telegram_api: FakeTelegramApi, stores: Stores
) -> None:
    api = telegram_api
    api.push_text(ALICE, ALICE, "hello there", first_name="Alice", date=1_790_000_000)
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        (message,) = await inbox.wait_for(1)
        assert channel.identity is not None and channel.identity.username == "kith_test_bot"

    assert message == InboundMessage(
        platform="telegram", bot_account=str(BOT_ID), chat_id=str(ALICE), chat_kind=ChatKind.DM,
        sender_id=str(ALICE), sender_name="Alice", text="hello there", message_id=f"{ALICE}:1",
        thread_id=None, mentioned=True, timestamp=datetime.fromtimestamp(1_790_000_000, UTC),
    )
    assert [c["command"] for c in api.commands] == ["start", "help", "remember"]
    methods = [c.method for c in api.calls]
    assert methods[:4] == ["getMe", "deleteWebhook", "setMyCommands", "getUpdates"]
    poll = next(c for c in api.calls if c.method == "getUpdates")
    assert set(json.loads(poll.params["allowed_updates"])) == {"message", "edited_message", "callback_query"}


async def test_group_mentions_replies_topics_and_commands(telegram_api: FakeTelegramApi, stores: Stores) -> None:
    api = telegram_api
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        await channel.ready.wait()
        api.add_chat(GROUP, "supergroup", title="Family")
        bot_message = await channel.send_chunk(_outbound(GROUP, "hello"), RenderedChunk("hello", None, "hello"), 0)
        api.push_text(GROUP, ALICE, "just chatting", "supergroup")
        api.push_text(GROUP, BOB, "hey @Kith_Test_Bot how are you", "supergroup")
        api.push_text(GROUP, ALICE, "thanks", "supergroup", reply_to_message_id=int(bot_message.platform_message_id))
        api.push_text(GROUP, BOB, "thanks Alice", "supergroup", reply_to_message_id=2)  # replies to a person
        api.push_text(GROUP, ALICE, "/start@kith_test_bot", "supergroup")
        api.push_text(GROUP, ALICE, "/start@some_other_bot", "supergroup")  # not for us: never reaches the core
        api.push_text(GROUP, ALICE, "in a topic", "supergroup", message_thread_id=77)
        messages = await inbox.wait_for(6)
        await api.wait_until(lambda: not api.pending_updates)

    assert [(m.text, m.mentioned) for m in messages] == [
        ("just chatting", False),
        ("hey @Kith_Test_Bot how are you", True),
        ("thanks", True),
        ("thanks Alice", False),
        ("/start", True),
        ("in a topic", False),  # the topic's root message is not a reply to anyone
    ]
    assert {m.chat_kind for m in messages} == {ChatKind.GROUP}
    assert messages[2].reply_to_message_id == f"{GROUP}:{bot_message.platform_message_id}"
    assert messages[5].thread_id == "77" and messages[5].reply_to_message_id is None
    assert [m.thread_id for m in messages[:5]] == [None] * 5


async def test_button_press_is_answered_and_handed_over(telegram_api: FakeTelegramApi, stores: Stores) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        await channel.ready.wait()
        question = _outbound(ALICE, "Is Tom a cat?", buttons=(Button("Yes", "q1:yes"), Button("No", "q1:no")))
        (chunk,) = channel.render(question)
        sent = await channel.send_chunk(question, chunk, 0)
        query = api.push_callback_query(ALICE, ALICE, "q1:yes", message_id=int(sent.platform_message_id))
        await inbox.wait_for(1)
        await api.wait_until(lambda: bool(api.callback_answers))

    assert inbox.presses == [ButtonPress(platform="telegram", chat_id=str(ALICE), sender_id=str(ALICE),
                                         data="q1:yes", chat_kind=ChatKind.DM,
                                         event_id=query["callback_query"]["id"])]
    assert [a.callback_query_id for a in api.callback_answers] == [query["callback_query"]["id"]]
    assert inbox.messages == []


async def test_restart_neither_loses_nor_replays(telegram_api: FakeTelegramApi, stores: Stores) -> None:
    api = telegram_api
    first = api.push_text(ALICE, ALICE, "one")
    inbox_a = Inbox()
    async with running(_channel(api, stores), inbox_a):
        await inbox_a.wait_for(1)
    # Telegram keeps queueing while the bot is down.
    api.push_text(ALICE, ALICE, "two")
    api.push_text(BOB, BOB, "three")

    # A new process: new channel, new store objects over the same database file.
    db = Database(stores.db.url)
    try:
        inbox_b = Inbox()
        channel_b = _channel(api, Stores(db, InboundJournal(db), Cursors(db)))
        async with running(channel_b, inbox_b):
            await inbox_b.wait_for(2)
            await api.wait_until(lambda: not api.pending_updates)
            await asyncio.sleep(0.1)  # room for a wrongly replayed "one" to show up
        stored = await Cursors(db).get(f"telegram:{BOT_ID}:offset")
    finally:
        db.close()

    assert inbox_a.texts == ["one"]
    assert sorted(inbox_b.texts) == ["three", "two"]
    offsets = [int(c.params.get("offset") or 0) for c in api.calls if c.method == "getUpdates"]
    assert first["update_id"] + 1 in offsets  # channel B started from the stored offset
    assert stored == first["update_id"] + 3


async def test_one_far_update_id_neither_strands_intake_nor_a_restart(
    telegram_api: FakeTelegramApi, stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kith")
    api = telegram_api
    ordinary = api.push_text(ALICE, ALICE, "one")["update_id"] + 1
    inbox_a = Inbox()
    async with running(_channel(api, stores), inbox_a):
        await inbox_a.wait_for(1)
        # A stray id far above the rest, alone in its batch; the server's own numbering goes on as before.
        stray = api.push_text(ALICE, ALICE, "stray")
        stray["update_id"] = 2**62
        await inbox_a.wait_for(2)
        # One quick poll confirms the stray id, then polling is back below it (else "two" would be confirmed
        # away with it on the server, or never fetched).
        await api.wait_until(lambda: _offsets(api)[-2:] == [2**62 + 1, ordinary])
        api.push_text(ALICE, ALICE, "two")
        await inbox_a.wait_for(3)
    # Telegram keeps queueing while the bot is down; the next start must not poll from above these.
    api.push_text(BOB, BOB, "three")
    db = Database(stores.db.url)
    try:
        inbox_b = Inbox()
        async with running(_channel(api, Stores(db, InboundJournal(db), Cursors(db))), inbox_b):
            await inbox_b.wait_for(1)
    finally:
        db.close()

    assert inbox_a.texts == ["one", "stray", "two"]
    assert inbox_b.texts == ["three"]
    assert f"telegram update_id jumped update_id={2**62}" in caplog.text


async def test_same_update_twice_from_the_server_is_handled_once(
    telegram_api: FakeTelegramApi, stores: Stores
) -> None:
    api = telegram_api
    original = api.push_text(ALICE, ALICE, "only once")
    api.push_update(original)  # the same update_id again
    api.push_text(ALICE, ALICE, "after")
    inbox = Inbox()
    async with running(_channel(api, stores), inbox):
        await inbox.wait_for(2)
        await api.wait_until(lambda: not api.pending_updates)

    assert inbox.texts == ["only once", "after"]


async def test_odd_and_malformed_updates_do_not_stop_intake(
    telegram_api: FakeTelegramApi, stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    # As bot.py sets them: kith's own logs at their most verbose, PTB's at WARNING (its DEBUG shows payloads).
    caplog.set_level(logging.DEBUG, logger="kith")
    caplog.set_level(logging.WARNING, logger="telegram")
    api = telegram_api
    chat = {"id": ALICE, "type": "private", "first_name": "Alice"}
    person = {"id": ALICE, "is_bot": False, "first_name": "Alice"}
    odd = [
        api.push_update({"message": {"message_id": 50, "date": 1, "chat": chat, "text": "no sender"}}),
        api.push_update({"message": "nonsense"}),
        api.push_update({"message": {"message_id": 51, "chat": chat, "from": person, "text": "no date"}}),
        api.push_update({"message": {"message_id": 52, "date": 1, "chat": chat, "from": person, "text": "x",
                                     "entities": [{"type": "mention"}]}}),
        api.push_sticker(GROUP, ALICE, chat_type="group"),  # not addressed to kith
        api.push_new_chat_members(GROUP, ALICE, [BOB, BOT_ID]),
    ]
    edited_source = api.push_text(ALICE, ALICE, "first version")
    odd.append(api.push_edited_text(ALICE, edited_source["message"]["message_id"], "second version"))
    api.push_text(ALICE, ALICE, "still listening")
    # A getUpdates answer of no known shape: that fetch fails, and the updates come with the next one.
    api.answer_next_oddly("getUpdates", {"updates": "elsewhere"})
    inbox = Inbox()
    async with running(_channel(api, stores), inbox):
        await inbox.wait_for(2)
        await api.wait_until(lambda: not api.pending_updates)
        await asyncio.sleep(0.05)

    assert inbox.texts == ["first version", "still listening"]
    # The log names update ids and reasons, never what anyone wrote (malformed updates included).
    for text in ("no sender", "no date", "first version", "second version", "still listening", "nonsense"):
        assert text not in caplog.text
    assert "telegram update malformed" in caplog.text
    assert "telegram poll failed error=TelegramError" in caplog.text  # the odd answer, then a fetch that worked
    # Ignored updates were journaled too, so a redelivery of any of them is dropped as well.
    for update in odd:
        assert not await stores.journal.record("telegram", str(update["update_id"]))


async def test_handler_does_not_block_polling_and_keeps_each_chats_order(
    telegram_api: FakeTelegramApi, stores: Stores
) -> None:
    api = telegram_api
    release = asyncio.Event()
    inbox = Inbox(gate=lambda m: release if m.text == "alice 1" else None)
    for text in ("alice 1", "alice 2"):
        api.push_text(ALICE, ALICE, text)
    api.push_text(BOB, BOB, "bob 1")
    async with running(_channel(api, stores), inbox):
        await inbox.wait_for(1)
        assert inbox.texts == ["bob 1"]  # Alice's slow turn holds up only Alice
        api.push_text(BOB, BOB, "bob 2")
        await inbox.wait_for(2)
        release.set()
        await inbox.wait_for(4)

    assert inbox.texts == ["bob 1", "bob 2", "alice 1", "alice 2"]


async def test_stop_lets_a_running_handler_finish(telegram_api: FakeTelegramApi, stores: Stores) -> None:
    api = telegram_api
    started = asyncio.Event()
    finished: list[str] = []

    async def slow(message: InboundMessage) -> None:
        started.set()
        await asyncio.sleep(0.2)
        finished.append(message.text)

    api.push_text(ALICE, ALICE, "slow one")
    channel = _channel(api, stores)
    await channel.start(slow)
    await asyncio.wait_for(started.wait(), WAIT_S)
    await channel.stop()

    assert finished == ["slow one"]


async def test_polling_recovers_from_errors_and_the_server_going_away(
    telegram_api: FakeTelegramApi, stores: Stores
) -> None:
    api = telegram_api
    inbox = Inbox()
    async with running(_channel(api, stores), inbox) as channel:
        await channel.ready.wait()
        api.push_text(ALICE, ALICE, "before")
        await inbox.wait_for(1)
        await api.go_away()
        api.push_text(ALICE, ALICE, "while away")  # Telegram keeps queueing
        await asyncio.sleep(0.3)
        # Coming back in a bad mood: a gateway error, a conflict, then flood control.
        api.fail_next("getUpdates", status=502)
        api.fail_next("getUpdates", status=409)
        api.fail_next("getUpdates", status=429, retry_after=1)
        await api.come_back()
        back = time.monotonic()
        await inbox.wait_for(2)
        waited = time.monotonic() - back

    assert inbox.texts == ["before", "while away"]
    assert waited >= 0.9  # the 429's retry_after was honoured
    assert [c.failed_status for c in api.calls if c.failed_status] == [502, 409, 429]


async def test_rejected_token_fails_start_without_leaking_it(
    telegram_api: FakeTelegramApi, stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "7000000001:fake-wrong-token-for-kith-tests"
    channel = _channel(telegram_api, stores, token=wrong)
    with pytest.raises(ChannelStartError) as refused:
        await channel.start(Inbox().on_message)
    await channel.stop()

    assert "TELEGRAM_BOT_TOKEN" in str(refused.value)
    assert wrong not in str(refused.value) and wrong not in caplog.text
    assert not [c for c in telegram_api.calls if c.method == "getUpdates"]


async def test_check_token_for_doctor(telegram_api: FakeTelegramApi) -> None:
    settings = _settings(telegram_api)
    assert await check_token(settings, FAKE_BOT_TOKEN) == (True, f"@kith_test_bot (id {BOT_ID})")
    ok, detail = await check_token(settings, "7000000001:nope")
    assert not ok and "rejected" in detail and "nope" not in detail
    ok, detail = await check_token(replace(settings, token_env="KITH_TEST_UNSET_TOKEN_VAR"))
    assert (ok, detail) == (False, "environment variable KITH_TEST_UNSET_TOKEN_VAR is not set")
    await telegram_api.go_away()
    ok, detail = await check_token(settings, FAKE_BOT_TOKEN)
    assert not ok and "cannot reach" in detail


# --- webhook -------------------------------------------------------------------------------------
async def test_webhook_accepts_the_secret_and_refuses_forgeries(
    telegram_api: FakeTelegramApi, stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = telegram_api
    monkeypatch.setenv("KITH_TEST_WEBHOOK_SECRET", "s3cret_token-1")
    settings = _settings(api, mode="webhook", webhook_url="https://kith.invalid/hook", webhook_port=0,
                         webhook_secret_env="KITH_TEST_WEBHOOK_SECRET")
    update = {"update_id": 5000, "message": {
        "message_id": 9, "date": 1_790_000_000, "chat": {"id": ALICE, "type": "private", "first_name": "Alice"},
        "from": {"id": ALICE, "is_bot": False, "first_name": "Alice"}, "text": "via webhook"}}
    forged = {**update, "update_id": 5001, "message": {**update["message"], "text": "forged"}}
    inbox = Inbox()
    async with running(_channel(api, stores, settings=settings), inbox) as channel:
        await channel.ready.wait()
        url = f"http://127.0.0.1:{channel.webhook_port}/hook"
        good = {"X-Telegram-Bot-Api-Secret-Token": "s3cret_token-1"}
        async with aiohttp.ClientSession() as http:
            statuses = []
            for body, headers in [
                (forged, {"X-Telegram-Bot-Api-Secret-Token": "guess"}),
                (forged, {}),
                (update, good),
                (update, good),  # Telegram retrying an update it thinks we missed
                ({"update_id": 5002, "message": "nonsense"}, good),
            ]:
                async with http.post(url, json=body, headers=headers) as response:
                    statuses.append(response.status)
        await inbox.wait_for(1)
        await asyncio.sleep(0.05)

    assert statuses == [401, 401, 200, 200, 200]
    assert inbox.texts == ["via webhook"]
    assert api.webhook_url == "https://kith.invalid/hook"
    set_webhook = next(c for c in api.calls if c.method == "setWebhook")
    assert set_webhook.params["secret_token"] == "s3cret_token-1"
    assert not [c for c in api.calls if c.method in ("getUpdates", "deleteWebhook")]


async def test_webhook_mode_without_a_secret_does_not_start(
    telegram_api: FakeTelegramApi, stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KITH_TEST_WEBHOOK_SECRET", raising=False)
    settings = _settings(telegram_api, mode="webhook", webhook_url="https://kith.invalid/hook", webhook_port=0,
                         webhook_secret_env="KITH_TEST_WEBHOOK_SECRET")
    with pytest.raises(ChannelStartError, match="KITH_TEST_WEBHOOK_SECRET"):
        await _channel(telegram_api, stores, settings=settings).start(Inbox().on_message)
    assert telegram_api.webhook_url == ""


# --- sending -------------------------------------------------------------------------------------
async def test_send_html_reply_in_a_thread(telegram_api: FakeTelegramApi, stores: Stores) -> None:
    api = telegram_api
    inbox = Inbox()
    asked = api.push_text(GROUP, ALICE, "question", "supergroup", message_thread_id=7)
    async with running(_channel(api, stores), inbox) as channel:
        (question,) = await inbox.wait_for(1)
        reply = _outbound(GROUP, "**Tom** is a cat & <b> is not a tag", thread_id=question.thread_id,
                          reply_to_message_id=question.message_id)
        (chunk,) = channel.render(reply)
        sent = await channel.send_chunk(reply, chunk, 0)

    (delivered,) = api.sent
    assert delivered.parse_mode == "HTML"
    assert delivered.visible_text == "Tom is a cat & <b> is not a tag"
    assert [e["type"] for e in delivered.entities] == ["bold"]
    assert delivered.message_thread_id == 7
    assert delivered.reply_to_message_id == asked["message"]["message_id"]
    assert sent.platform_message_id == str(delivered.message_id)


async def test_refused_markup_then_plain_resend(telegram_api: FakeTelegramApi, stores: Stores) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    message = _outbound(ALICE, "whatever")
    broken = RenderedChunk("<foo>hi</foo> there", "HTML", "hi there")
    async with running(_channel(api, stores), Inbox()) as channel:
        await channel.ready.wait()
        with pytest.raises(SendError) as refused:
            await channel.send_chunk(message, broken, 0)
        await channel.send_chunk(message, broken, 0, plain=True)

    assert refused.value.bad_formatting and not refused.value.permanent
    assert [(m.text, m.parse_mode) for m in api.sent] == [("hi there", None)]


@pytest.mark.parametrize(
    ("status", "description", "expected"),
    [
        (429, None, (7.0, False)),
        (403, None, (None, True)),
        (400, "Bad Request: chat not found", (None, True)),
        (502, None, (None, False)),
    ],
)
async def test_send_failures_map_to_send_error(
    telegram_api: FakeTelegramApi, stores: Stores, status: int, description: str | None,
    expected: tuple[float | None, bool],
) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    message = _outbound(ALICE, "hello")
    async with running(_channel(api, stores), Inbox()) as channel:
        await channel.ready.wait()
        api.fail_next("sendMessage", status=status, retry_after=7, description=description)
        with pytest.raises(SendError) as failed:
            await channel.send_chunk(message, channel.render(message)[0], 0)

    assert (failed.value.retry_after, failed.value.permanent) == expected
    assert not failed.value.bad_formatting
    assert api.sent == []


async def test_a_send_answered_too_late_is_maybe_delivered_and_an_unreachable_one_is_not(
    telegram_api: FakeTelegramApi, stores: Stores
) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    message = _outbound(ALICE, "hello")
    async with running(_channel(api, stores, send_timeout_s=0.3), Inbox()) as channel:
        await channel.ready.wait()
        api.answer_slowly("sendMessage", 3.0)
        with pytest.raises(SendError) as late:
            await channel.send_chunk(message, channel.render(message)[0], 0)
        await api.go_away()
        with pytest.raises(SendError) as unreachable:
            await channel.send_chunk(message, channel.render(message)[0], 0)
        await api.come_back()

    # Telegram posted the first: a resend may double it, and the delivery worker knows to count it so.
    assert [m.text for m in api.sent] == ["hello"]
    assert late.value.maybe_delivered and not late.value.permanent
    assert not unreachable.value.maybe_delivered and not unreachable.value.permanent


async def test_long_reply_buttons_and_attachment(telegram_api: FakeTelegramApi, stores: Stores) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    long_text = "\n\n".join(f"Paragraph {i}: " + "word " * 60 for i in range(30))
    message = _outbound(ALICE, long_text, reply_to_message_id=f"{ALICE}:1",
                        buttons=(Button("Keep", "m:keep"), Button("Forget", "m:forget")),
                        attachment_name="notes.txt", attachment_bytes=b"line one\n")
    async with running(_channel(api, stores), Inbox()) as channel:
        await channel.ready.wait()
        api.push_text(ALICE, ALICE, "the message replied to")
        chunks = channel.render(message)
        for index, chunk in enumerate(chunks):
            await channel.send_chunk(message, chunk, index)

    text_chunks = len(chunks) - 1
    assert text_chunks >= 2
    assert len(api.sent) == text_chunks
    assert [m.reply_to_message_id for m in api.sent] == [1] + [None] * (text_chunks - 1)
    assert all(m.reply_markup is None for m in api.sent)
    (document,) = api.documents
    assert (document.filename, document.content) == ("notes.txt", b"line one\n")
    upload = next(c for c in api.calls if c.method == "sendDocument")
    keyboard = json.loads(upload.params["reply_markup"])
    assert [row[0]["callback_data"] for row in keyboard["inline_keyboard"]] == ["m:keep", "m:forget"]


async def test_buttons_ride_on_the_last_text_chunk(telegram_api: FakeTelegramApi, stores: Stores) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    long_text = "\n\n".join(f"Paragraph {i}: " + "word " * 60 for i in range(30))
    message = _outbound(ALICE, long_text, buttons=(Button("Yes", "q:yes"),))
    async with running(_channel(api, stores), Inbox()) as channel:
        await channel.ready.wait()
        chunks = channel.render(message)
        for index, chunk in enumerate(chunks):
            await channel.send_chunk(message, chunk, index)

    assert len(api.sent) == len(chunks) >= 2
    assert [m.reply_markup is not None for m in api.sent] == [False] * (len(chunks) - 1) + [True]
    assert api.sent[-1].reply_markup == {"inline_keyboard": [[{"text": "Yes", "callback_data": "q:yes"}]]}


async def test_typing_in_a_topic_and_errors_are_swallowed(telegram_api: FakeTelegramApi, stores: Stores) -> None:
    api = telegram_api
    api.add_chat(GROUP, "supergroup", is_forum=True)
    async with running(_channel(api, stores), Inbox()) as channel:
        await channel.ready.wait()
        await channel.typing(str(GROUP), "77")
        await channel.typing("424242", None)  # unknown chat: refused by Telegram, not our caller's problem

    assert [(a.chat_id, a.action, a.message_thread_id) for a in api.actions] == [(GROUP, "typing", 77)]


def test_offset_follows_the_batch_down_and_only_leaves_a_far_id_behind() -> None:
    # Ids restarted lower after a long silence: followed down, as ever.
    assert offset_step([17, 18], 5_000) == OffsetStep(19, 19)
    # A far id after ordinary ones: they are kept as the restart point, the far one is confirmed once.
    assert offset_step([1_001, 2**62], 1_001) == OffsetStep(2**62 + 1, 1_002, jumped_to=2**62, resume_at=1_002)
    # The ids really moved up there: the batch after the jump comes from above it and is followed.
    assert offset_step([2**62 + 1], 1_002, high=2**62) == OffsetStep(2**62 + 2, 2**62 + 2)
