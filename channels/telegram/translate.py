"""Pure translation between Telegram's Update objects (python-telegram-bot) and the core's types.

No I/O here: the channel in :mod:`channels.telegram.channel` fetches updates, and these functions decide what
each one means. Anything that is not a person's message addressed to a chat we serve becomes a
:class:`Skipped` with a short, content-free reason the channel logs next to the update id.

A message with nothing kith can read (a voice message, a photo without caption, a location...) still reaches
the core where a text would, with empty text and ``unreadable`` naming what it was, so the person hears that it
did not get through instead of nothing. A sticker is read as its emoji: that is what the person chose it to say.

The files a message carries (a voice note, an audio file, a photo, a document) ride along as
:class:`~ground.types.Attachment` handles (the ``file_id``), captioned or not: the core decides which it can read
and fetches those through the channel.
"""

from __future__ import annotations

import mimetypes
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from telegram import Audio, Bot, Document, Message, MessageEntity, PhotoSize, Update, Voice
from telegram.warnings import PTBDeprecationWarning

from channels.telegram.settings import PLATFORM
from ground.types import Attachment, AttachmentKind, ButtonPress, ChatKind, InboundMessage

# What polling asks Telegram for; everything else is never sent to us.
ALLOWED_UPDATES = ("message", "edited_message", "callback_query")

_GROUP_TYPES = frozenset({"group", "supergroup"})
# The attributes that make a message a service message (someone joined, the title changed...).
_SERVICE_FIELDS = (
    "new_chat_members", "left_chat_member", "new_chat_title", "new_chat_photo", "delete_chat_photo",
    "group_chat_created", "supergroup_chat_created", "migrate_to_chat_id", "migrate_from_chat_id",
    "pinned_message", "forum_topic_created", "forum_topic_edited", "forum_topic_closed",
    "forum_topic_reopened", "video_chat_started", "video_chat_ended", "message_auto_delete_timer_changed",
)
# What a message kith cannot read was, by the attribute that holds it, as the person would name it. First match
# wins: an animation carries a ``document`` too, a venue a ``location``. Anything not named here (a payment, a
# game, a shared chat, a future kind of message) stays skipped: kith must not answer what is no one's message.
_UNREADABLE_KINDS = (
    ("voice", "voice message"), ("video_note", "video message"), ("audio", "audio file"), ("animation", "GIF"),
    ("photo", "photo"), ("live_photo", "photo"), ("video", "video"), ("document", "file"), ("sticker", "sticker"),
    ("venue", "location"), ("location", "location"), ("contact", "contact"), ("poll", "poll"),
    ("story", "story"), ("checklist", "checklist"),
)
# The largest file a bot may fetch with getFile (the Bot API's documented 20 MB); a bigger one is refused by it.
GET_FILE_MAX_BYTES = 20 * 1024 * 1024
# Telegram sends every photo as JPEG, in several sizes, without naming its type.
_PHOTO_MIME = "image/jpeg"
_VOICE_MIME = "audio/ogg"  # a voice note is always OGG/Opus, whether or not its mime_type says so


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is, from getMe: needed to tell a mention of this bot from a mention of anyone else."""

    id: int
    username: str

    @property
    def handle(self) -> str:
        return f"@{self.username}".lower()


@dataclass(frozen=True, slots=True)
class Skipped:
    """An update the core never sees; ``reason`` is a fixed word, safe to log."""

    reason: str
    chat_id: str | None = None


Translated = InboundMessage | ButtonPress | Skipped


# --- raw JSON -------------------------------------------------------------------------------------
def update_id_of(raw: object) -> int | None:
    """The update's id when the JSON has a usable one; without it an update can be neither deduped nor confirmed."""
    if not isinstance(raw, Mapping):
        return None
    value = raw.get("update_id")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def parse_update(raw: object, bot: Bot | None) -> tuple[Update | None, str | None]:
    """One raw update, parsed once: ``(update, None)`` when PTB can make sense of it.

    One update of an unexpected shape must not poison its batch, which would then be fetched again
    forever: PTB's failure gives a bare update with the same id (journaled and confirmed like any
    other; it translates to ``Skipped("empty")``) and the error's type name. Without a usable id
    there is nothing to keep: ``(None, "no_update_id")``. ``raw`` may be changed by the parse.
    """
    update_id = update_id_of(raw)
    if update_id is None or not isinstance(raw, Mapping):
        return None, "no_update_id"
    try:
        return Update.de_json(dict(raw), bot), None
    except Exception as exc:  # PTB raises TypeError, KeyError, AttributeError, ValueError... for odd shapes
        bare = Update(update_id)
        if bot is not None:
            bare.set_bot(bot)
        return bare, type(exc).__name__


# --- Update → core types --------------------------------------------------------------------------
def translate_update(update: Update, me: BotIdentity, *, received_at: datetime) -> Translated:
    """What one update means to the core. ``received_at`` stands in for a message without a date."""
    if update.callback_query is not None:
        return _translate_button(update, me)
    if update.edited_message is not None:
        # The core already answered the original; answering an edit would reply twice to one thought.
        return Skipped("edited", _chat_of(update.edited_message))
    if update.channel_post is not None or update.edited_channel_post is not None:
        return Skipped("channel_post")
    if update.message is None:
        return Skipped("empty")
    return translate_message(update.message, me, received_at=received_at)


def _entity_texts(text: str, entities: Sequence[MessageEntity]) -> dict[MessageEntity, str]:
    """PTB's ``parse_entities``, but for text holding a lone surrogate too (valid JSON, one UTF-16 unit):
    PTB's strict encoding raised on it and the message was ignored. InboundMessage replaces it later."""
    units = text.encode("utf-16-le", "surrogatepass")
    return {e: units[e.offset * 2:(e.offset + e.length) * 2].decode("utf-16-le", "surrogatepass") for e in entities}


def translate_message(message: Message, me: BotIdentity, *, received_at: datetime) -> Translated:
    chat = message.chat
    if chat is None:
        return Skipped("malformed")
    chat_id = str(chat.id)
    if chat.type == "private":
        kind = ChatKind.DM
    elif chat.type in _GROUP_TYPES:
        kind = ChatKind.GROUP
    elif chat.type == "channel":
        return Skipped("channel_post", chat_id)
    else:
        return Skipped("unsupported_chat", chat_id)
    sender = message.from_user
    if sender is None:
        return Skipped("no_sender", chat_id)
    if message.sender_chat is not None:
        return Skipped("anonymous", chat_id)  # an anonymous admin or a linked channel speaks as a chat
    if sender.is_bot:
        return Skipped("from_bot", chat_id)  # bots answering bots is a loop waiting to happen
    text = message.text if message.text is not None else message.caption
    unreadable = ""
    typed = True  # words the person wrote, which may address kith by name; a sticker or a photo alone cannot
    if not text or not text.strip():
        if any(getattr(message, name, None) for name in _SERVICE_FIELDS):
            return Skipped("service", chat_id)
        typed = False
        if message.sticker is not None and message.sticker.emoji:
            text = message.sticker.emoji
        else:
            unreadable = _unreadable_kind(message)
            if not unreadable:
                return Skipped("no_text", chat_id)
            text = ""

    entities = _entity_texts(text, message.entities if message.text is not None else message.caption_entities)
    mentioned = kind is ChatKind.DM  # everything in a private chat is addressed to the bot
    for entity, value in entities.items():
        if entity.type == MessageEntity.MENTION and value.lower() == me.handle:
            mentioned = True
        elif entity.type == MessageEntity.TEXT_MENTION and entity.user is not None and entity.user.id == me.id:
            mentioned = True
        elif entity.type == MessageEntity.BOT_COMMAND and "@" in value:
            command, _, addressee = value.partition("@")
            if f"@{addressee}".lower() == me.handle:
                mentioned = True
                text = text.replace(value, command)
            elif entity.offset == 0:
                return Skipped("other_bot_command", chat_id)  # "/start@someone_else_bot" is not for us

    reply_to = _real_reply(message)
    if reply_to is not None and reply_to.from_user is not None and reply_to.from_user.id == me.id:
        mentioned = True
    if not typed and not mentioned:
        # In a group kith answers only what is addressed to it; a photo or a sticker among the others' talk is not.
        return Skipped("sticker" if message.sticker is not None else "no_text", chat_id)
    message_id = f"{chat_id}:{message.message_id}"
    if unreadable and message.media_group_id:
        # An album comes as one message per item: one id for its uncaptioned items makes it one message to
        # answer (later items are dropped as its redeliveries), not one line per photo. No number in it, so
        # a reply in a group does not quote some other message.
        unreadable, message_id = "album", f"{chat_id}:album-{message.media_group_id}"
    thread_id = (
        str(message.message_thread_id)
        if message.is_topic_message and message.message_thread_id is not None
        else None
    )
    timestamp = message.date if message.date and message.date.timestamp() > 0 else received_at
    return InboundMessage(
        platform=PLATFORM,
        bot_account=str(me.id),
        chat_id=chat_id,
        chat_kind=kind,
        sender_id=str(sender.id),
        sender_name=_display_name(sender.full_name, sender.username, sender.id),
        text=text,
        message_id=message_id,
        thread_id=thread_id,
        mentioned=mentioned,
        timestamp=timestamp.astimezone(UTC),
        reply_to_message_id=None if reply_to is None else f"{chat_id}:{reply_to.message_id}",
        forwarded=message.forward_origin is not None,
        unreadable=unreadable,
        attachments=() if message.media_group_id else attachments_of(message),
    )


# --- files a message carries ------------------------------------------------------------------------
def attachments_of(message: Message) -> tuple[Attachment, ...]:
    """The files ``message`` carries that kith might read, as handles (their ``file_id``), never their bytes.

    A message holds at most one: a voice note, an audio file, a photo or a document. A GIF is not one: Telegram
    sends it as a document too, for clients that predate animations, but it is a video. An album's items are
    left out by the caller: its uncaptioned items are one message, which a single item's file would misdescribe.
    """
    if message.voice is not None:
        return (_voice(message.voice),)
    if message.audio is not None:
        return (_audio(message.audio),)
    if message.photo:
        return (_photo(message.photo),)
    if message.document is not None and message.animation is None:
        return (_document(message.document),)
    return ()


def _voice(voice: Voice) -> Attachment:
    return Attachment(AttachmentKind.VOICE, voice.file_id, name="voice.ogg", mime=voice.mime_type or _VOICE_MIME,
                      size=voice.file_size, duration_s=_seconds(voice))


def _audio(audio: Audio) -> Attachment:
    mime = audio.mime_type or ""
    return Attachment(AttachmentKind.VOICE, audio.file_id, name=audio.file_name or _name_for("audio", mime),
                      mime=mime, size=audio.file_size, duration_s=_seconds(audio))


def _photo(sizes: Sequence[PhotoSize]) -> Attachment:
    """The largest of the sizes Telegram made of a photo that getFile will still hand out."""
    fitting = [s for s in sizes if s.file_size is None or s.file_size <= GET_FILE_MAX_BYTES] or list(sizes)
    best = max(fitting, key=lambda s: (s.width * s.height, s.file_size or 0))
    return Attachment(AttachmentKind.IMAGE, best.file_id, name="photo.jpg", mime=_PHOTO_MIME, size=best.file_size)


def _document(document: Document) -> Attachment:
    """A file sent as a file; an image sent that way (uncompressed) is still an image."""
    mime = document.mime_type or ""
    kind = AttachmentKind.IMAGE if mime.lower().startswith("image/") else AttachmentKind.DOCUMENT
    return Attachment(kind, document.file_id, name=document.file_name or _name_for("file", mime), mime=mime,
                      size=document.file_size)


def _name_for(stem: str, mime: str) -> str:
    """A name for a file Telegram gave none: its extension is how a reader (a transcription API) tells the format."""
    extension = mimetypes.guess_extension(mime) if mime else None
    return stem + (extension or "")


def _seconds(media: Voice | Audio) -> float:
    with warnings.catch_warnings():
        # PTB 22 warns that durations will become timedeltas; both are accepted.
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = media.duration
    return float(value.total_seconds()) if hasattr(value, "total_seconds") else float(value)


def _unreadable_kind(message: Message) -> str:
    """What a message without text was ("voice message", "photo"), or "" when it is nothing a person said."""
    return next((kind for name, kind in _UNREADABLE_KINDS if getattr(message, name, None)), "")


def _translate_button(update: Update, me: BotIdentity) -> Translated:
    query = update.callback_query
    assert query is not None
    message = query.message
    if message is None or message.chat is None:
        return Skipped("inline_button")  # a button on an inline-mode message has no chat to answer in
    chat_id = str(message.chat.id)
    if query.data is None:
        return Skipped("no_button_data", chat_id)
    if query.from_user is None or query.from_user.is_bot:
        return Skipped("from_bot", chat_id)
    kind = ChatKind.DM if message.chat.type == "private" else ChatKind.GROUP
    return ButtonPress(platform=PLATFORM, chat_id=chat_id, sender_id=str(query.from_user.id), data=query.data,
                       chat_kind=kind, event_id=str(query.id))


def _real_reply(message: Message) -> Message | None:
    """The message this one replies to, ignoring the forum quirk.

    In a forum topic Telegram makes every plain message "reply" to the topic's creation message,
    which says nothing about whom the person is talking to.
    """
    reply = message.reply_to_message
    if reply is None or reply.forum_topic_created is not None:
        return None
    return reply


def _chat_of(message: Message) -> str | None:
    return None if message.chat is None else str(message.chat.id)


def _display_name(full_name: str, username: str | None, user_id: int) -> str:
    name = full_name.strip()
    if name:
        return name
    return f"@{username}" if username else str(user_id)


# --- core types → Telegram ------------------------------------------------------------------------
def telegram_chat_id(chat_id: str) -> int | str:
    """Numeric chat ids as ints; an ``@channelname`` stays a string, as the Bot API takes both."""
    try:
        return int(chat_id)
    except ValueError:
        return chat_id


def telegram_message_id(message_id: str | None) -> int | None:
    """The Telegram message id in ``"<chat_id>:<message_id>"`` (our inbound ids) or a bare number."""
    if not message_id:
        return None
    try:
        return int(message_id.rpartition(":")[2])
    except ValueError:
        return None


def telegram_thread_id(thread_id: str | None) -> int | None:
    if not thread_id:
        return None
    try:
        return int(thread_id)
    except ValueError:
        return None


__all__ = [
    "ALLOWED_UPDATES",
    "GET_FILE_MAX_BYTES",
    "PLATFORM",
    "BotIdentity",
    "Skipped",
    "Translated",
    "attachments_of",
    "parse_update",
    "telegram_chat_id",
    "telegram_message_id",
    "telegram_thread_id",
    "translate_message",
    "translate_update",
    "update_id_of",
]
