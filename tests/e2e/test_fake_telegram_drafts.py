"""The fake Telegram's sendMessageDraft, proven against the real python-telegram-bot.

Drafts are what kith streams a reply into in a private chat: a preview the person sees grow, which the final
sendMessage replaces and which Telegram drops after 30 s on its own.
"""

# ruff: noqa: F811  (telegram_api is a fixture received by argument name)

from __future__ import annotations

import warnings

import pytest
from telegram.error import BadRequest, InvalidToken, RetryAfter
from telegram.warnings import PTBDeprecationWarning

from tests.fakes.telegram_api import (  # noqa: F401  (telegram_api is a fixture)
    DRAFT_LIFETIME_S,
    MESSAGE_MAX_UTF16,
    ChatView,
    FakeTelegramApi,
    ptb_bot,
    retry_seconds,
    telegram_api,
)

ALICE = 1001
GROUP = -100_555


async def test_a_draft_grows_then_the_message_takes_its_place(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    async with ptb_bot(api) as bot:
        assert await bot.send_message_draft(ALICE, 7, "") is True  # Telegram's "Thinking..." placeholder
        assert await bot.send_message_draft(ALICE, 7, "<b>Hel</b>", parse_mode="HTML") is True
        assert api.seen_in(ALICE) == ChatView(messages=(), draft="Hel")
        await bot.send_message_draft(ALICE, 7, "<b>Hello</b> wor", parse_mode="HTML")
        assert api.seen_in(ALICE).draft == "Hello wor"
        await bot.send_message(ALICE, "<b>Hello</b> world", parse_mode="HTML")

    assert api.seen_in(ALICE) == ChatView(messages=("Hello world",), draft=None)
    assert api.seen_in(ALICE).text == "Hello world"
    assert [(d.chat_id, d.draft_id, d.visible_text) for d in api.drafts_to(ALICE)] == [
        (ALICE, 7, ""), (ALICE, 7, "Hel"), (ALICE, 7, "Hello wor")]
    assert api.drafts[1].entities == ({"offset": 0, "length": 3, "type": "bold"},)
    assert api.drafts[0].time <= api.drafts[1].time <= api.drafts[2].time
    assert api.live_draft(ALICE) is None


async def test_a_draft_left_alone_vanishes_after_thirtyretry_seconds(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    async with ptb_bot(api) as bot:
        await bot.send_message_draft(ALICE, 3, "half an ans")
    api.advance_clock(DRAFT_LIFETIME_S - 1)
    assert api.seen_in(ALICE).draft == "half an ans"
    api.advance_clock(1)
    assert api.seen_in(ALICE) == ChatView(messages=(), draft=None)
    assert len(api.drafts) == 1  # the record stays; only the screen forgets


@pytest.mark.parametrize("text", ["<b>unclosed", "a <c> b", "</b>", "<b>x</i>", 'x <a href="http://e">y'])
async def test_draft_markup_fails_exactly_as_send_message_fails(telegram_api: FakeTelegramApi, text: str) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    async with ptb_bot(api) as bot:
        with pytest.raises(BadRequest) as as_message:
            await bot.send_message(ALICE, text, parse_mode="HTML")
        with pytest.raises(BadRequest) as as_draft:
            await bot.send_message_draft(ALICE, 1, text, parse_mode="HTML")
    assert str(as_draft.value) == str(as_message.value)
    assert str(as_draft.value).startswith("Can't parse entities")
    assert api.drafts == [] and api.sent == []


async def test_half_escaped_text_is_taken_as_send_message_takes_it(telegram_api: FakeTelegramApi) -> None:
    # An ampersand that starts no entity is kept as text by Telegram, in a draft as in a message.
    api = telegram_api
    api.add_chat(ALICE)
    async with ptb_bot(api) as bot:
        await bot.send_message_draft(ALICE, 1, "fish &amp chips &", parse_mode="HTML")
        await bot.send_message(ALICE, "fish &amp chips &", parse_mode="HTML")
    assert api.drafts[0].visible_text == api.sent[0].visible_text


async def test_drafts_only_in_private_chats_and_with_a_draft_id(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    api.add_chat(GROUP, "supergroup")
    async with ptb_bot(api) as bot:
        with pytest.raises(BadRequest, match="Textdraft_peer_invalid"):
            await bot.send_message_draft(GROUP, 1, "hi")
        with pytest.raises(BadRequest, match="draft_id"):
            await bot.send_message_draft(ALICE, 0, "hi")
        with pytest.raises(BadRequest, match="Chat not found"):
            await bot.send_message_draft(4242, 1, "hi")
        with pytest.raises(BadRequest, match="too long"):
            await bot.send_message_draft(ALICE, 1, "x" * (MESSAGE_MAX_UTF16 + 1))
        assert await bot.send_message_draft(ALICE, 1, "x" * MESSAGE_MAX_UTF16)
    assert len(api.drafts) == 1


async def test_scripted_flood_limit_and_a_server_that_refuses_drafts(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    api.fail_next("sendMessageDraft", status=429, retry_after=4)
    async with ptb_bot(api) as bot:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PTBDeprecationWarning)
            with pytest.raises(RetryAfter) as limited:
                await bot.send_message_draft(ALICE, 1, "hi")
            assert retry_seconds(limited.value.retry_after) == 4

        # A Bot API server without the method answers 404 Not Found, which PTB raises as InvalidToken.
        api.refuse("sendMessageDraft")
        with pytest.raises(InvalidToken, match="Not Found"):
            await bot.send_message_draft(ALICE, 1, "hi")
        assert await bot.send_message(ALICE, "the message still goes")  # the refusal is the draft's only
        api.refuse("sendMessageDraft", 400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        with pytest.raises(BadRequest, match="Textdraft_peer_invalid"):
            await bot.send_message_draft(ALICE, 1, "hi")
        api.accept("sendMessageDraft")
        assert await bot.send_message_draft(ALICE, 1, "hi")

    failed = [c.failed_status for c in api.calls if c.method == "sendMessageDraft"]
    assert failed == [429, 404, 400, None]
    assert api.seen_in(ALICE) == ChatView(messages=("the message still goes",), draft="hi")


async def test_a_message_in_another_chat_leaves_the_draft(telegram_api: FakeTelegramApi) -> None:
    api = telegram_api
    api.add_chat(ALICE)
    api.add_chat(1002)
    async with ptb_bot(api) as bot:
        await bot.send_message_draft(ALICE, 9, "still typing")
        await bot.send_message(1002, "elsewhere")
    assert api.seen_in(ALICE).draft == "still typing"
