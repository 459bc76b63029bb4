"""Telegram Update → core types, on raw Bot API JSON parsed by the real python-telegram-bot."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from telegram import Update

from channels.telegram.channel import base_urls
from channels.telegram.settings import TelegramSettings
from channels.telegram.translate import (
    GET_FILE_MAX_BYTES,
    BotIdentity,
    Skipped,
    parse_update,
    telegram_chat_id,
    telegram_message_id,
    translate_update,
)
from ground.types import Attachment, AttachmentKind, ButtonPress, ChatKind, InboundMessage

ME = BotIdentity(id=7000000001, username="kith_test_bot")
BOT_USER = {"id": ME.id, "is_bot": True, "first_name": "Kith", "username": ME.username}
ALICE = {"id": 1001, "is_bot": False, "first_name": "Alice", "last_name": "Liddell"}
GROUP = {"id": -100555, "type": "supergroup", "title": "Family"}
FORUM = {"id": -100777, "type": "supergroup", "title": "Forum", "is_forum": True}
DM = {"id": 1001, "type": "private", "first_name": "Alice"}
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
DATE = 1_790_000_000


def _message(chat: dict[str, Any], text: str | None = "hi", **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"message_id": 42, "from": ALICE, "chat": chat, "date": DATE}
    if text is not None:
        message["text"] = text
    message.update(extra)
    return message


def _translate(message: dict[str, Any], kind: str = "message") -> InboundMessage | ButtonPress | Skipped:
    update = Update.de_json({"update_id": 5, kind: message}, None)
    return translate_update(update, ME, received_at=NOW)


def _inbound(message: dict[str, Any]) -> InboundMessage:
    result = _translate(message)
    assert isinstance(result, InboundMessage), result
    return result


def test_dm_fields() -> None:
    message = _inbound(_message(DM, "hello"))
    assert (message.platform, message.bot_account, message.chat_id, message.chat_kind) == (
        "telegram", "7000000001", "1001", ChatKind.DM,
    )
    assert (message.sender_id, message.sender_name, message.text, message.message_id) == (
        "1001", "Alice Liddell", "hello", "1001:42",
    )
    assert message.timestamp == datetime.fromtimestamp(DATE, UTC)
    assert message.mentioned  # a private chat is addressed to the bot
    assert message.thread_id is None and message.reply_to_message_id is None


def test_group_mentions_by_handle_text_mention_and_reply() -> None:
    handle = "hey @KITH_test_bot"
    by_handle = _message(GROUP, handle, entities=[{"type": "mention", "offset": 4, "length": 14}])
    other = _message(GROUP, "hey @someone_else", entities=[{"type": "mention", "offset": 4, "length": 13}])
    text_mention = _message(GROUP, "hey Kith", entities=[
        {"type": "text_mention", "offset": 4, "length": 4, "user": BOT_USER}])
    bot_said = {"message_id": 7, "from": BOT_USER, "chat": GROUP, "date": DATE, "text": "earlier"}
    reply_to_bot = _message(GROUP, "thanks", reply_to_message=bot_said)
    reply_to_person = _message(GROUP, "thanks", reply_to_message={**bot_said, "from": ALICE})

    assert [_inbound(m).mentioned for m in (by_handle, other, text_mention, reply_to_bot, reply_to_person)] == [
        True, False, True, True, False,
    ]
    assert _inbound(by_handle).chat_kind is ChatKind.GROUP
    assert _inbound(reply_to_bot).reply_to_message_id == "-100555:7"


def test_forum_topic_root_is_not_a_reply_even_when_the_bot_opened_the_topic() -> None:
    root = {"message_id": 77, "from": BOT_USER, "chat": FORUM, "date": DATE, "message_thread_id": 77,
            "is_topic_message": True, "forum_topic_created": {"name": "Plans", "icon_color": 7322096}}
    message = _inbound(_message(FORUM, "in the topic", message_thread_id=77, is_topic_message=True,
                                reply_to_message=root))
    assert message.thread_id == "77"
    assert not message.mentioned
    assert message.reply_to_message_id is None
    assert message.conversation_key == "telegram:-100777:77"


def test_reply_thread_in_a_plain_supergroup_is_not_a_topic() -> None:
    # Outside forums Telegram also sets message_thread_id on replies; that is not a conversation of its own.
    message = _inbound(_message(GROUP, "reply", message_thread_id=12))
    assert message.thread_id is None


def test_commands_addressed_to_us_are_normalized_and_others_are_skipped() -> None:
    ours = _message(GROUP, "/remember@Kith_Test_Bot the cat is Tom",
                    entities=[{"type": "bot_command", "offset": 0, "length": 23}])
    theirs = _message(GROUP, "/start@other_bot", entities=[{"type": "bot_command", "offset": 0, "length": 16}])
    bare = _message(GROUP, "/help", entities=[{"type": "bot_command", "offset": 0, "length": 5}])

    normalized = _inbound(ours)
    assert (normalized.text, normalized.mentioned) == ("/remember the cat is Tom", True)
    assert _translate(theirs) == Skipped("other_bot_command", "-100555")
    assert (_inbound(bare).text, _inbound(bare).mentioned) == ("/help", False)


def test_caption_is_the_text_and_its_entities_count() -> None:
    photo = [{"file_id": "p", "file_unique_id": "u", "width": 1, "height": 1}]
    message = _inbound(_message(GROUP, None, photo=photo, caption="look @kith_test_bot",
                                caption_entities=[{"type": "mention", "offset": 5, "length": 14}]))
    assert (message.text, message.mentioned) == ("look @kith_test_bot", True)


@pytest.mark.parametrize(
    ("message", "kind", "reason"),
    [
        (_message(GROUP, None, sticker={"file_id": "s", "file_unique_id": "u", "width": 1, "height": 1,
                                     "is_animated": False, "is_video": False, "type": "regular"}),
         "message", "sticker"),
        (_message(GROUP, None, new_chat_members=[ALICE]), "message", "service"),
        (_message(DM, None), "message", "no_text"),
        (_message(DM, "   "), "message", "no_text"),
        (_message(DM, "edited"), "edited_message", "edited"),
        (_message({"id": -100900, "type": "channel", "title": "News"}, "post"), "channel_post", "channel_post"),
        ({**_message(DM, "from a bot"), "from": {"id": 5, "is_bot": True, "first_name": "Other"}},
         "message", "from_bot"),
        ({k: v for k, v in _message(GROUP, "no sender").items() if k != "from"}, "message", "no_sender"),
        (_message(GROUP, "anonymous admin", sender_chat=GROUP), "message", "anonymous"),
    ],
)
def test_what_the_core_never_sees(message: dict[str, Any], kind: str, reason: str) -> None:
    result = _translate(message, kind)
    assert isinstance(result, Skipped) and result.reason == reason


def test_button_press() -> None:
    query = {"id": "99", "from": ALICE, "chat_instance": "1", "data": "q1:yes",
             "message": {"message_id": 3, "from": BOT_USER, "chat": GROUP, "date": DATE, "text": "Q?"}}
    press = translate_update(Update.de_json({"update_id": 9, "callback_query": query}, None), ME, received_at=NOW)
    assert press == ButtonPress(platform="telegram", chat_id="-100555", sender_id="1001", data="q1:yes",
                                chat_kind=ChatKind.GROUP, event_id="99")
    inline = {k: v for k, v in query.items() if k != "message"} | {"inline_message_id": "x"}
    skipped = translate_update(Update.de_json({"update_id": 10, "callback_query": inline}, None), ME,
                               received_at=NOW)
    assert skipped == Skipped("inline_button")


def test_parse_keeps_good_updates_and_reduces_bad_ones_to_their_id() -> None:
    good = {"update_id": 1, "message": _message(DM, text="hello there")}
    no_date = {"update_id": 2, "message": {k: v for k, v in _message(DM).items() if k != "date"}}
    nonsense = {"update_id": 3, "message": "nonsense"}
    bad_entity = {"update_id": 4, "message": _message(DM, entities=[{"type": "mention"}])}

    parsed, error = parse_update(good, None)
    assert error is None and parsed is not None
    assert (parsed.update_id, parsed.message.text if parsed.message else None) == (1, "hello there")
    bare, error = parse_update(no_date, None)
    assert (bare.to_dict() if bare else None, error) == ({"update_id": 2}, "KeyError")
    for raw in (nonsense, bad_entity):
        bare, error = parse_update(raw, None)
        assert bare is not None and bare.to_dict() == {"update_id": raw["update_id"]} and error is not None
        assert translate_update(bare, ME, received_at=NOW) == Skipped("empty")
    assert parse_update({"message": _message(DM)}, None) == (None, "no_update_id")
    assert parse_update({"update_id": True}, None) == (None, "no_update_id")
    assert parse_update(["not", "a", "dict"], None) == (None, "no_update_id")


def test_outbound_ids() -> None:
    assert telegram_chat_id("-100555") == -100555 and telegram_chat_id("@news") == "@news"
    assert telegram_message_id("-100555:42") == 42 and telegram_message_id("42") == 42
    assert telegram_message_id("nope") is None and telegram_message_id(None) is None


def test_a_forward_is_marked_as_someone_elses_words() -> None:
    origin = {"type": "user", "date": DATE, "sender_user": {"id": 2002, "is_bot": False, "first_name": "Bob"}}
    forwarded = _inbound(_message(DM, "I am allergic to penicillin", forward_origin=origin))
    own = _inbound(_message(DM, "I am allergic to penicillin"))
    assert (forwarded.forwarded, own.forwarded) == (True, False)
    assert forwarded.text == own.text and forwarded.sender_id == own.sender_id  # still hers to be answered


# --- files a message carries ----------------------------------------------------------------------
def _file(file_id: str, size: int | None = None, **extra: Any) -> dict[str, Any]:
    return {"file_id": file_id, "file_unique_id": f"u-{file_id}", **({"file_size": size} if size else {}), **extra}


def test_each_file_a_message_carries_is_an_attachment_and_the_message_stays_unreadable() -> None:
    voice = _inbound(_message(DM, None, voice=_file("v", 2048, duration=4, mime_type="audio/ogg")))
    bare_voice = _inbound(_message(DM, None, voice=_file("v2", duration=1)))  # no type, no size
    audio = _inbound(_message(DM, None, audio=_file("a", 9000, duration=181, mime_type="audio/mpeg",
                                                   file_name="song.mp3")))
    nameless_audio = _inbound(_message(DM, None, audio=_file("a2", duration=2, mime_type="audio/mpeg")))
    document = _inbound(_message(DM, None, document=_file("d", 500, mime_type="application/pdf",
                                                         file_name="notes.pdf")))
    image_file = _inbound(_message(DM, None, document=_file("i", 700, mime_type="image/PNG", file_name="a.png")))
    nameless = _inbound(_message(DM, None, document=_file("n")))

    assert [(m.unreadable, m.text) for m in (voice, audio, document, nameless)] == [
        ("voice message", ""), ("audio file", ""), ("file", ""), ("file", "")]
    assert voice.attachments == (Attachment(AttachmentKind.VOICE, "v", "voice.ogg", "audio/ogg", 2048, 4.0),)
    assert bare_voice.attachments == (Attachment(AttachmentKind.VOICE, "v2", "voice.ogg", "audio/ogg", None, 1.0),)
    assert audio.attachments == (Attachment(AttachmentKind.VOICE, "a", "song.mp3", "audio/mpeg", 9000, 181.0),)
    assert nameless_audio.attachments[0].name == "audio.mp3"  # its extension tells a transcriber the format
    assert document.attachments == (Attachment(AttachmentKind.DOCUMENT, "d", "notes.pdf", "application/pdf", 500),)
    assert image_file.attachments == (Attachment(AttachmentKind.IMAGE, "i", "a.png", "image/PNG", 700),)
    assert nameless.attachments == (Attachment(AttachmentKind.DOCUMENT, "n", "file", "", None),)


def test_a_photo_is_its_largest_size_that_getfile_hands_out() -> None:
    sizes = [_file("small", 1_000, width=90, height=90), _file("big", 90_000, width=1280, height=960),
             _file("mid", 20_000, width=320, height=240)]
    huge = [*sizes, _file("huge", GET_FILE_MAX_BYTES + 1, width=5000, height=5000)]
    photo = _inbound(_message(DM, None, photo=sizes))
    capped = _inbound(_message(DM, None, photo=huge))

    assert photo.unreadable == "photo"
    assert photo.attachments == (Attachment(AttachmentKind.IMAGE, "big", "photo.jpg", "image/jpeg", 90_000),)
    assert capped.attachments[0].ref == "big"


def test_a_caption_keeps_the_text_and_the_file_rides_along() -> None:
    message = _inbound(_message(DM, None, caption="what do you hear?",
                                voice=_file("v", 100, duration=2, mime_type="audio/ogg")))
    assert (message.text, message.unreadable) == ("what do you hear?", "")
    assert [a.kind for a in message.attachments] == [AttachmentKind.VOICE]


@pytest.mark.parametrize("extra", [
    {"animation": _file("g", 10, width=1, height=1, duration=1),
     "document": _file("g", 10, mime_type="video/mp4", file_name="wave.mp4")},  # a GIF, sent as a document too
    {"video": _file("vid", 10, width=1, height=1, duration=1)},
    {"video_note": _file("vn", 10, length=1, duration=1)},
    {"location": {"latitude": 1.0, "longitude": 2.0}},
    {"photo": [_file("p", 10, width=1, height=1)], "media_group_id": "album-1"},  # an album stays one line
    {"document": _file("d", 10, file_name="x.pdf"), "media_group_id": "album-2", "caption": "the files"},
], ids=["gif", "video", "video_note", "location", "album", "captioned_album_item"])
def test_what_carries_no_attachment(extra: dict[str, Any]) -> None:
    message = _inbound(_message(DM, None, **extra))
    assert message.attachments == ()
    assert message.unreadable or message.text


@pytest.mark.parametrize(("base_url", "file_url"), [
    ("", "https://api.telegram.org/file/bot"),
    ("http://127.0.0.1:8081/bot", "http://127.0.0.1:8081/file/bot"),
    ("https://tg.example/api/bot{token}", "https://tg.example/api/file/bot{token}"),
    ("https://tg.example/custom/", "https://api.telegram.org/file/bot"),  # no twin to derive: Telegram's own
])
def test_the_file_url_follows_a_self_hosted_bot_api(base_url: str, file_url: str) -> None:
    assert base_urls(TelegramSettings(base_url=base_url))[1] == file_url
