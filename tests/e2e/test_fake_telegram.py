"""The fake Telegram Bot API, proven against the real python-telegram-bot.

Every test drives PTB itself (or, for the encodings PTB never uses, a plain HTTP client) against
the loopback fake, so what passes here is what kith's Telegram adapter will see from Telegram.
"""

# Test functions receive the imported ``telegram_api`` fixture by argument name, which ruff reads
# as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import html
import warnings

import aiohttp
import pytest
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import (
    BadRequest,
    Conflict,
    EndPointNotFound,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
)
from telegram.ext import Application, ContextTypes, MessageHandler, filters
from telegram.warnings import PTBDeprecationWarning

from tests.fakes.telegram_api import (  # noqa: F401  (telegram_api is a fixture)
    MESSAGE_MAX_UTF16,
    FakeTelegramApi,
    parse_html,
    ptb_bot,
    retry_seconds,
    telegram_api,
)

ALICE = 1001
BOB = 1002
GROUP = -100_555


def _application(api: FakeTelegramApi) -> Application:
    builder = Application.builder().token(api.token).base_url(api.base_url)
    return builder.base_file_url(api.base_file_url).build()


async def test_polling_bot_replies_in_order_and_confirms_what_it_read(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api

    async def on_edit(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await context.bot.send_message(update.effective_chat.id, f"edited: {update.edited_message.text}")

    async def on_sticker(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await context.bot.send_message(update.effective_chat.id, f"sticker {update.message.sticker.emoji}")

    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await context.bot.send_message(
            update.effective_chat.id,
            f"<b>echo</b> {html.escape(update.message.text)}",
            parse_mode="HTML",
            reply_to_message_id=update.message.message_id,
        )

    app = _application(api)
    app.add_handler(MessageHandler(filters.UpdateType.EDITED_MESSAGE, on_edit))
    app.add_handler(MessageHandler(filters.Sticker.ALL, on_sticker))
    app.add_handler(MessageHandler(filters.TEXT & filters.UpdateType.MESSAGE, echo))
    async with app:
        await app.start()
        await app.updater.start_polling(poll_interval=0, timeout=1)
        first = api.push_text(ALICE, ALICE, "one")
        api.push_text(ALICE, ALICE, "two < three")
        api.push_edited_text(ALICE, first["message"]["message_id"], "one, corrected")
        api.push_sticker(ALICE, ALICE, emoji="🐢")
        sent = await api.wait_for_sent(4, timeout=5)
        await app.updater.stop()
        await app.stop()

    assert [m.visible_text for m in sent] == [
        "echo one", "echo two < three", "edited: one, corrected", "sticker 🐢",
    ]
    assert sent[1].text == "<b>echo</b> two &lt; three"
    assert sent[0].parse_mode == "HTML" and sent[0].chat_id == ALICE
    assert sent[0].reply_to_message_id == first["message"]["message_id"]
    assert sent[0].entities == ({"offset": 0, "length": 4, "type": "bold"},)
    # PTB's start-up: getMe on initialize, deleteWebhook before polling; on stop a last
    # non-blocking getUpdates confirms everything it read, so nothing is left to redeliver.
    methods = [call.method for call in api.calls]
    assert methods[:3] == ["getMe", "deleteWebhook", "getUpdates"]
    assert methods[-1] == "getUpdates" and api.calls[-1].params["timeout"] == "0"
    assert api.pending_updates == []


async def test_updates_stay_until_an_offset_confirms_them(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    first = api.push_text(ALICE, ALICE, "first")["update_id"]
    second = api.push_text(ALICE, ALICE, "second")["update_id"]
    async with ptb_bot(api) as bot:
        unconfirmed = await bot.get_updates(timeout=0)
        redelivered = await bot.get_updates(timeout=0)
        after_first = await bot.get_updates(offset=second, timeout=0)
        limited = await bot.get_updates(limit=1, timeout=0)
        after_both = await bot.get_updates(offset=second + 1, timeout=0)
        third = api.push_text(ALICE, ALICE, "third")["update_id"]
        only_new = await bot.get_updates(offset=second + 1, timeout=0)

    assert [u.update_id for u in unconfirmed] == [first, second]
    assert [u.update_id for u in redelivered] == [first, second]
    assert [u.update_id for u in after_first] == [second]
    assert [u.update_id for u in limited] == [second]
    assert after_both == ()
    assert [u.update_id for u in only_new] == [third]


async def test_long_poll_waits_for_an_update_or_times_out_empty(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    loop = asyncio.get_running_loop()
    async with ptb_bot(api) as bot:
        started = loop.time()
        nothing = await bot.get_updates(timeout=1)
        waited = loop.time() - started

        poll = asyncio.create_task(bot.get_updates(timeout=3600))  # only an update can end it in time
        await asyncio.sleep(0.05)
        assert not poll.done()
        pushed = api.push_text(ALICE, ALICE, "wake up")
        woken = await asyncio.wait_for(poll, 10)

    assert nothing == () and waited >= 0.9
    assert [u.update_id for u in woken] == [pushed["update_id"]]


async def test_allowed_updates_filters_what_arrives_after_it_is_set(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    async with ptb_bot(api) as bot:
        sent = await bot.send_message(ALICE, "pick one")
        await bot.get_updates(timeout=0, allowed_updates=["message"])
        api.push_callback_query(ALICE, ALICE, "yes", message_id=sent.message_id)
        text = api.push_text(ALICE, ALICE, "typed instead")
        only_messages = await bot.get_updates(timeout=0)

    assert [u.update_id for u in only_messages] == [text["update_id"]]


async def test_flood_limit_surfaces_as_retry_after(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    api.fail_next("sendMessage", status=429, retry_after=3)
    async with ptb_bot(api) as bot:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PTBDeprecationWarning)
            with pytest.raises(RetryAfter) as flood:
                await bot.send_message(ALICE, "too fast")
            retry_after = flood.value.retry_after
        delivered = await bot.send_message(ALICE, "after waiting")

    assert retry_seconds(retry_after) == 3
    # PTB does not retry a send by itself: the refused message is simply not delivered.
    assert [m.text for m in api.sent] == ["after waiting"]
    assert delivered.message_id == api.sent[0].message_id


async def test_gateway_failure_is_a_network_error_and_the_next_call_succeeds(
    telegram_api: FakeTelegramApi,
) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    api.fail_next("sendMessage", status=502)
    api.fail_next("sendMessage", status=403)
    async with ptb_bot(api) as bot:
        with pytest.raises(NetworkError, match="Bad Gateway"):
            await bot.send_message(ALICE, "lost")
        with pytest.raises(Forbidden, match="blocked by the user"):
            await bot.send_message(ALICE, "blocked")
        await bot.send_message(ALICE, "back")

    assert [m.text for m in api.sent] == ["back"]
    assert [c.failed_status for c in api.calls if c.method == "sendMessage"] == [502, 403, None]


@pytest.mark.parametrize(
    ("markup", "complaint"),
    [
        ("<foo>hi</foo>", 'unsupported start tag "foo" at byte offset 0'),
        ("<b>open", "can't find end tag corresponding to start tag b"),
        ("<b>x</i>", 'unmatched end tag at byte offset 4, expected "</b>", found "</i>"'),
        ("x </b>", "unexpected end tag at byte offset 2"),
        ("1 < 2", 'unsupported start tag "" at byte offset 2'),
        ('<span class="x">s</span>', 'tag "span" must have class "tg-spoiler" at byte offset 0'),
    ],
)
async def test_bad_html_is_refused_like_telegram(
    telegram_api: FakeTelegramApi, markup: str, complaint: str
) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    async with ptb_bot(api) as bot:
        with pytest.raises(BadRequest) as refused:
            await bot.send_message(ALICE, markup, parse_mode="HTML")

    # PTB strips "Bad Request: " and capitalize()s the rest, lower-casing Telegram's wording.
    assert refused.value.message == f"Can't parse entities: {complaint}"
    assert api.sent == []


async def test_length_limit_counts_visible_utf16_units(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    fits = "😀" * (MESSAGE_MAX_UTF16 // 2)  # two UTF-16 units each
    async with ptb_bot(api) as bot:
        await bot.send_message(ALICE, f"<b>{fits}</b>", parse_mode="HTML")  # tags do not count
        with pytest.raises(BadRequest, match="Message is too long"):
            await bot.send_message(ALICE, fits + "!")
        with pytest.raises(BadRequest, match="Message text is empty"):
            await bot.send_message(ALICE, "<b></b>", parse_mode="HTML")

    assert len(api.sent) == 1


def test_html_parser_reports_telegram_entities_in_utf16_offsets() -> None:
    markup = '😀 <b>bold <i>both</i></b> <a href="https://e.x/?a=1&amp;b=2">link</a> &amp;'
    visible, entities = parse_html(markup)
    assert visible == "😀 bold both link &"
    assert entities == [
        {"offset": 3, "length": 9, "type": "bold"},
        {"offset": 8, "length": 4, "type": "italic"},
        {"offset": 13, "length": 4, "type": "text_link", "url": "https://e.x/?a=1&b=2"},
    ]


async def test_pushed_updates_parse_into_what_ptb_filters_expect(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.add_chat(GROUP, "supergroup", title="Family")
    async with ptb_bot(api) as bot:
        bot_message = await bot.send_message(GROUP, "hello family")
        command = api.push_text(GROUP, ALICE, "/remember@kith_test_bot the cat is Tom", "supergroup")
        mention = api.push_text(GROUP, BOB, "hey @kith_test_bot", "supergroup")
        reply = api.push_text(GROUP, BOB, "thanks", "supergroup", reply_to_message_id=bot_message.message_id)
        topic = api.push_text(GROUP, ALICE, "in a topic", "supergroup", message_thread_id=77)
        joined = api.push_new_chat_members(GROUP, ALICE, [BOB, api.bot_user["id"]], "supergroup")
        updates = {u.update_id: u for u in await bot.get_updates(timeout=0)}

    command_update = updates[command["update_id"]]
    assert filters.COMMAND.check_update(command_update)
    assert command_update.message.parse_entities(["bot_command"]).popitem()[1] == "/remember@kith_test_bot"
    assert command_update.effective_chat.type == "supergroup"
    assert filters.Mention("kith_test_bot").check_update(updates[mention["update_id"]])
    replied = updates[reply["update_id"]].message.reply_to_message
    assert replied.from_user.id == api.bot_user["id"] and replied.text == "hello family"
    topic_message = updates[topic["update_id"]].message
    assert topic_message.is_topic_message and topic_message.message_thread_id == 77
    assert topic_message.chat.is_forum
    # The quirk an adapter must not mistake for "a reply to the bot": the topic's root message.
    assert topic_message.reply_to_message.forum_topic_created is not None
    assert topic_message.reply_to_message.from_user.id == ALICE
    members = updates[joined["update_id"]].message.new_chat_members
    assert [m.id for m in members] == [BOB, api.bot_user["id"]] and members[1].is_bot


async def test_button_press_answer_and_markup_edit(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="q1:yes")]])
    async with ptb_bot(api) as bot:
        question = await bot.send_message(ALICE, "Is Tom a cat?", reply_markup=keyboard)
        press = api.push_callback_query(ALICE, ALICE, "q1:yes", message_id=question.message_id)
        (update,) = await bot.get_updates(timeout=0)
        await bot.answer_callback_query(update.callback_query.id, text="Noted")
        with pytest.raises(BadRequest, match="Query is too old"):
            await bot.answer_callback_query(update.callback_query.id)
        edited = await bot.edit_message_reply_markup(ALICE, question.message_id, reply_markup=None)
        with pytest.raises(BadRequest, match="Message is not modified"):
            await bot.edit_message_reply_markup(ALICE, question.message_id, reply_markup=None)

    assert update.callback_query.data == "q1:yes"
    assert update.callback_query.message.reply_markup == keyboard
    assert update.callback_query.id == press["callback_query"]["id"]
    assert [(a.text, a.show_alert) for a in api.callback_answers] == [("Noted", False)]
    assert edited.reply_markup is None and edited.edit_date is not None
    assert api.sent[0].reply_markup == keyboard.to_dict()
    assert [(e.message_id, e.reply_markup) for e in api.markup_edits] == [(question.message_id, None)]


async def test_typing_commands_and_document_upload(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    async with ptb_bot(api) as bot:
        await bot.send_chat_action(ALICE, "typing")
        with pytest.raises(BadRequest, match="Wrong parameter action"):
            await bot.send_chat_action(ALICE, "dancing")
        await bot.set_my_commands([("remember", "Remember something"), ("forget", "Forget it")])
        with pytest.raises(BadRequest, match="Bot_command_invalid"):
            await bot.set_my_commands([("Bad Name", "nope")])
        message = await bot.send_document(
            ALICE, b"line one\n", filename="notes.txt", caption="<i>your notes</i>", parse_mode="HTML"
        )
        with pytest.raises(BadRequest, match="Chat not found"):
            await bot.send_message(999_999, "stranger")

    assert [(a.chat_id, a.action) for a in api.actions] == [(ALICE, "typing")]
    assert api.commands == [
        {"command": "remember", "description": "Remember something"},
        {"command": "forget", "description": "Forget it"},
    ]
    (document,) = api.documents
    assert (document.filename, document.content, document.caption) == (
        "notes.txt", b"line one\n", "<i>your notes</i>",
    )
    assert message.document.file_name == "notes.txt" and message.caption == "your notes"
    assert api.calls[-2].content_type == "multipart/form-data"


async def test_webhook_blocks_polling_until_deleted(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.push_text(ALICE, ALICE, "waiting")
    async with ptb_bot(api) as bot:
        with pytest.raises(BadRequest, match="Bad webhook: an https url must be provided"):
            await bot.set_webhook("http://insecure.invalid/hook")
        assert await bot.set_webhook("https://kith.invalid/hook")
        info = await bot.get_webhook_info()
        with pytest.raises(Conflict, match="webhook is active"):
            await bot.get_updates(timeout=0)
        await bot.delete_webhook(drop_pending_updates=True)
        after_delete = await bot.get_updates(timeout=0)

    assert info.url == "https://kith.invalid/hook" and info.pending_update_count == 1
    assert after_delete == ()


async def test_unknown_method_and_wrong_token(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    async with ptb_bot(api) as bot:
        with pytest.raises(EndPointNotFound):
            await bot.do_api_request("sendTelepathy")
    with pytest.raises(InvalidToken):
        async with Bot("7000000001:wrong", base_url=api.base_url):
            pass


async def test_polling_survives_the_server_going_away_and_coming_back(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    port = api.port

    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await context.bot.send_message(update.effective_chat.id, f"got {update.message.text}")

    app = _application(api)
    app.add_handler(MessageHandler(filters.TEXT, echo))
    async with app:
        await app.start()
        await app.updater.start_polling(poll_interval=0, timeout=1)
        api.push_text(ALICE, ALICE, "before")
        await api.wait_for_sent(1)
        await api.go_away()
        with pytest.raises(NetworkError):
            await app.bot.send_message(ALICE, "while away")
        api.push_text(ALICE, ALICE, "during")  # Telegram keeps queueing while the bot cannot reach it
        await api.come_back()
        sent = await api.wait_for_sent(2, timeout=5)
        await app.updater.stop()
        await app.stop()

    assert api.port == port
    assert [m.text for m in sent] == ["got before", "got during"]


async def test_a_second_poller_terminates_the_first(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    async with ptb_bot(api) as first, ptb_bot(api) as second:
        waiting = asyncio.create_task(first.get_updates(timeout=5))
        await asyncio.sleep(0.05)
        await second.get_updates(timeout=0)
        with pytest.raises(Conflict, match="terminated by other getUpdates request"):
            await waiting


async def test_json_and_query_string_requests_are_understood(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    async with aiohttp.ClientSession() as http:
        async with http.post(
            api.method_url("sendMessage"),
            json={"chat_id": ALICE, "text": "<b>json</b>", "parse_mode": "HTML", "message_thread_id": 5},
        ) as response:
            sent = await response.json()
        async with http.get(api.method_url("GETME")) as response:
            me = await response.json()
        async with http.get(f"{api.url}/nowhere") as response:
            missing = (response.status, await response.json())

    assert sent["ok"] and sent["result"]["text"] == "json" and sent["result"]["message_thread_id"] == 5
    assert api.sent[0].message_thread_id == 5
    assert me["result"]["username"] == "kith_test_bot"
    assert missing == (404, {"ok": False, "error_code": 404, "description": "Not Found"})
