"""Pure translation between discord.py's objects and the core's types.

No I/O here: :mod:`channels.discord.channel` runs the gateway and the REST calls, and these functions decide
what each event means and how each reply is addressed. Anything that is not a person's message becomes a
:class:`Skipped` with a short, content-free reason the channel logs next to the event id. A message with
nothing kith can read (an attachment or a sticker alone, a voice message) reaches the core where a text would,
with empty text and ``unreadable`` naming what it was, so the person hears that it did not get through. Every
file a message carries (with text or without) travels on it as an :class:`~ground.types.Attachment` whose ref
is the CDN URL; the core decides what it can read, and the channel fetches it (:mod:`channels.discord.files`).

Where a message lives (:class:`Place`):

* a DM: ``chat_id`` is the DM channel's id (what a reply is posted to); the person's user id travels
  as ``sender_id`` and, outbound, as ``recipient_id``;
* a server channel: ``chat_id`` is the channel's id;
* a thread: ``chat_id`` is the thread's parent channel and ``thread_id`` the thread's own channel id,
  the same shape as a Telegram forum topic. The conversation key stays per thread, a server's
  policy that names a channel covers its threads, and replies are posted to the thread itself.

Message ids are ``"<channel_id>:<message_id>"`` where the channel is the one the message was posted
in (the thread for a thread message), which is all a reply reference needs.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import discord

from channels.discord.settings import PLATFORM
from channels.http import answer_lost
from ground.tunables import DISCORD_DEFAULT_RETRY_AFTER_S
from ground.types import Attachment, AttachmentKind, Button, ButtonPress, ChatKind, InboundMessage, SendError

# --- Discord's own limits (protocol facts, not tunables) ---------------------------------------------
MAX_BUTTONS = 25  # five action rows of five buttons
BUTTON_LABEL_MAX_CHARS = 80
CUSTOM_ID_MAX_CHARS = 100

_SPOKEN_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})
_THREAD_TYPES = frozenset({discord.ChannelType.public_thread, discord.ChannelType.private_thread,
                           discord.ChannelType.news_thread})
_SERVER_CHANNEL_TYPES = frozenset({discord.ChannelType.text, discord.ChannelType.news, discord.ChannelType.voice,
                                   discord.ChannelType.stage_voice})
_ESCAPED_MENTION = "@\u200b"  # how clean_content defuses @everyone and @here


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is, from READY: needed to tell a mention of this bot from a mention of anyone else."""

    id: int
    name: str


@dataclass(frozen=True, slots=True)
class Place:
    """Where a message was posted, as the core addresses it."""

    kind: ChatKind
    chat_id: int  # the DM channel, the server channel, or a thread's parent channel
    thread_id: int | None = None  # a thread's own channel id

    @property
    def channel_id(self) -> int:
        """The Discord channel messages are actually posted to."""
        return self.thread_id if self.thread_id is not None else self.chat_id


@dataclass(frozen=True, slots=True)
class Skipped:
    """An event the core never sees; ``reason`` is a fixed word, safe to log."""

    reason: str
    chat_id: str | None = None


def gateway_intents() -> discord.Intents:
    """What the gateway is asked for: the defaults plus message content (privileged: enable it in the
    Developer Portal, or the gateway closes with 4014)."""
    intents = discord.Intents.default()
    intents.message_content = True
    intents.dm_messages = True
    intents.guild_messages = True
    return intents


def allowed_mentions() -> discord.AllowedMentions:
    """A reply notifies only the person it answers: no @everyone/@here, no roles, no one the model names."""
    return discord.AllowedMentions(everyone=False, roles=False, users=False, replied_user=True)


# --- where things are -------------------------------------------------------------------------------
def place_of(channel: object, guild_id: int | None) -> Place | None:
    """The Place of a channel discord.py handed us; None when it knows too little (an uncached thread).

    None means: fetch the channel (GET /channels/{id}) and ask again with what came back.
    """
    if isinstance(channel, discord.DMChannel):
        return Place(ChatKind.DM, channel.id)
    if isinstance(channel, discord.Thread):
        return Place(ChatKind.GROUP, channel.parent_id, channel.id)
    if isinstance(channel, discord.GroupChannel):
        return None  # bots cannot be in group DMs; nothing sensible to address
    if isinstance(channel, discord.abc.GuildChannel):
        return Place(ChatKind.GROUP, channel.id)
    if isinstance(channel, discord.PartialMessageable):
        kind = channel.type
        if kind is discord.ChannelType.private or (kind is None and guild_id is None and channel.guild_id is None):
            return Place(ChatKind.DM, channel.id)
        if kind in _SERVER_CHANNEL_TYPES:
            return Place(ChatKind.GROUP, channel.id)
        return None  # a thread's parent, or the type itself, is unknown
    return None


# --- discord.py → core types ------------------------------------------------------------------------
def translate_message(message: discord.Message, me: BotIdentity, place: Place) -> InboundMessage | Skipped:
    """What one MESSAGE_CREATE means to the core."""
    chat_id = str(place.chat_id)
    not_a_person = sender_skip(message, me)
    if not_a_person is not None:
        return Skipped(not_a_person, chat_id)
    if message.type not in _SPOKEN_TYPES:
        return Skipped("service", chat_id)  # pins, joins, thread created, boosts...
    text = readable_text(message)
    unreadable = ""
    if not text.strip():
        unreadable = unreadable_kind(message)
        # In a server only what is addressed to kith (a reply to it) is answered. A forward, whose words are in a
        # snapshot, is none of these kinds and stays skipped.
        if not unreadable or not (place.kind is ChatKind.DM or is_addressed_to(message, me)):
            return Skipped("no_text", chat_id)
        text = ""
    reply_to = replied_message_id(message)
    author = message.author
    return InboundMessage(
        platform=PLATFORM,
        bot_account=str(me.id),
        chat_id=chat_id,
        chat_kind=place.kind,
        sender_id=str(author.id),
        sender_name=author.display_name or author.name or str(author.id),
        text=text,
        message_id=f"{place.channel_id}:{message.id}",
        thread_id=None if place.thread_id is None else str(place.thread_id),
        mentioned=place.kind is ChatKind.DM or is_addressed_to(message, me),
        timestamp=message.created_at,
        reply_to_message_id=reply_to,
        unreadable=unreadable,
        attachments=attachments_of(message),
    )


def attachments_of(message: discord.Message) -> tuple[Attachment, ...]:
    """Every file the message carries, in Discord's order: a handle (the CDN URL, and the message to ask for a fresh
    one when it has expired), never the bytes."""
    voice = message.flags.voice
    origin = f"{message.channel.id}:{message.id}"
    return tuple(_attachment(item, voice_message=voice, origin=origin) for item in message.attachments)


def _attachment(item: discord.Attachment, *, voice_message: bool, origin: str) -> Attachment:
    mime = item.content_type or ""
    return Attachment(kind=attachment_kind(mime, voice=voice_message or item.is_voice_message()), ref=item.url,
                      name=item.filename, mime=mime, size=item.size,
                      duration_s=float(item.duration) if item.duration is not None else None, origin=origin)


def attachment_kind(mime: str, *, voice: bool = False) -> AttachmentKind:
    """VOICE for a voice message or any audio (words a transcription model can read), IMAGE, else DOCUMENT."""
    media = mime.partition("/")[0].strip().lower()
    if voice or media == "audio":
        return AttachmentKind.VOICE
    return AttachmentKind.IMAGE if media == "image" else AttachmentKind.DOCUMENT


def unreadable_kind(message: discord.Message) -> str:
    """What a message without text was ("voice message", "image", "sticker"), or "" when it is none of those."""
    if message.flags.voice:
        return "voice message"
    if message.attachments:
        media = (message.attachments[0].content_type or "").partition("/")[0]
        return {"image": "image", "video": "video", "audio": "audio file"}.get(media, "file")
    if message.stickers:
        return "sticker"  # a message carries a sticker's name and id, not an emoji kith could read instead
    if message.poll is not None:
        return "poll"
    return ""


def sender_skip(message: discord.Message, me: BotIdentity) -> str | None:
    """Why a message is skipped for who sent it (checked before anything costs a request), or None."""
    author = message.author
    if author.id == me.id:
        return "own"
    if message.webhook_id is not None:
        return "webhook"
    if author.bot or author.system:
        return "from_bot"  # bots answering bots is a loop waiting to happen
    return None


def readable_text(message: discord.Message) -> str:
    """The text as a person reads it: ``<@123>`` becomes ``@Name``, ``<#456>`` becomes ``#general``.

    discord.py's clean_content also defuses @everyone with a zero-width space; that guard belongs to
    what is sent, not to what is remembered, so it is undone here.
    """
    return message.clean_content.replace(_ESCAPED_MENTION, "@")


def is_addressed_to(message: discord.Message, me: BotIdentity) -> bool:
    """The bot is @-mentioned (itself or its managed role) or the message replies to one of its messages."""
    if any(user.id == me.id for user in message.mentions):
        return True
    if any(role.tags is not None and role.tags.bot_id == me.id for role in message.role_mentions):
        return True
    replied = replied_message(message)
    return replied is not None and replied.author.id == me.id


def replied_message(message: discord.Message) -> discord.Message | None:
    """The message this one replies to, from the event itself or discord.py's message cache."""
    ref = message.reference
    if ref is None or ref.message_id is None or ref.type is not discord.MessageReferenceType.reply:
        return None
    if isinstance(ref.resolved, discord.Message):
        return ref.resolved
    return ref.cached_message


def replied_message_id(message: discord.Message) -> str | None:
    ref = message.reference
    if ref is None or ref.message_id is None or ref.type is not discord.MessageReferenceType.reply:
        return None
    return f"{ref.channel_id}:{ref.message_id}"


def translate_interaction(interaction: discord.Interaction, me: BotIdentity, place: Place) -> ButtonPress | Skipped:
    """A click on one of our buttons, as the core's ButtonPress."""
    chat_id = str(place.chat_id)
    if interaction.type is not discord.InteractionType.component:
        return Skipped("not_component", chat_id)
    data: Mapping[str, Any] = interaction.data or {}  # type: ignore[assignment]
    if data.get("component_type") != discord.ComponentType.button.value:
        return Skipped("not_button", chat_id)
    custom_id = data.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return Skipped("no_button_data", chat_id)
    user = interaction.user
    if user is None or user is discord.utils.MISSING or user.bot or user.id == me.id:
        return Skipped("from_bot", chat_id)
    return ButtonPress(platform=PLATFORM, chat_id=chat_id, sender_id=str(user.id), data=custom_id,
                       chat_kind=place.kind)


# --- core types → discord.py ------------------------------------------------------------------------
def snowflake(value: str | None) -> int | None:
    """A Discord id from our string form; None for anything that is not a positive integer."""
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        return None
    return number if number > 0 else None


def message_ref(value: str | None) -> tuple[int | None, int] | None:
    """``(channel_id, message_id)`` from ``"<channel_id>:<message_id>"``; a bare id gives ``(None, id)``."""
    if not value:
        return None
    channel, _, message = value.rpartition(":")
    message_id = snowflake(message)
    if message_id is None:
        return None
    return snowflake(channel) if channel else None, message_id


def message_nonce(delivery_key: str | None, index: int) -> int | None:
    """The nonce of chunk ``index`` of an outbox entry: the same on every resend, so Discord (sent with
    ``enforce_nonce``) answers a resend it already posted with that message instead of posting it twice.

    63 bits of a hash: at most 19 digits, within Discord's 25 characters. None (discord.py then draws a random
    one) for a message that is not an outbox entry.
    """
    if delivery_key is None:
        return None
    digest = hashlib.blake2b(f"{delivery_key}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def catch_up_prefix(bot_id: int) -> str:
    """The start of every catch-up cursor of one bot: its newest message taken in, per channel."""
    return f"discord:{bot_id}:after:"


def catch_up_cursor(bot_id: int, channel_id: int, guild_id: int | None) -> str:
    """The cursor naming a channel messages were taken in from (and its server: 0 for a DM)."""
    return f"{catch_up_prefix(bot_id)}{guild_id or 0}:{channel_id}"


def followed_channel(name: str, prefix: str) -> tuple[int, int | None] | None:
    """``(channel_id, guild_id or None)`` from a catch-up cursor's name; None for any other name."""
    if not name.startswith(prefix):
        return None
    guild, _, channel = name[len(prefix):].partition(":")
    channel_id = snowflake(channel)
    if channel_id is None or not guild.isdigit():
        return None
    return channel_id, snowflake(guild)


def reply_reference(reply_to: str | None, channel_id: int) -> discord.MessageReference | None:
    """A reply to the triggering message; a deleted one makes a plain message, not a failed send."""
    ref = message_ref(reply_to)
    if ref is None:
        return None
    ref_channel, message_id = ref
    return discord.MessageReference(message_id=message_id, channel_id=ref_channel or channel_id,
                                    fail_if_not_exists=False)


def button_view(buttons: Sequence[Button]) -> discord.ui.View:
    """Our buttons as message components; a click comes back through ``on_interaction`` by custom_id.

    The view is stopped before it is sent, so discord.py serialises it but keeps no dispatch state
    for it: clicks are handled by custom_id, which also works for buttons an earlier process sent.
    Must be called with a running event loop (discord.py ties a view to it).
    """
    view = discord.ui.View(timeout=None)
    for button in buttons[:MAX_BUTTONS]:
        if not button.data or len(button.data) > CUSTOM_ID_MAX_CHARS:
            continue  # Discord refuses the whole message for one bad custom_id
        label = button.label if len(button.label) <= BUTTON_LABEL_MAX_CHARS else (
            button.label[: BUTTON_LABEL_MAX_CHARS - 1] + "…")
        view.add_item(discord.ui.Button(label=label or "…", custom_id=button.data,
                                        style=discord.ButtonStyle.secondary))
    view.stop()
    return view


# --- failures -------------------------------------------------------------------------------------------
def send_error_for(exc: BaseException) -> SendError:
    """The core's SendError for a failed REST send: wait and retry, retry, or never retry."""
    if isinstance(exc, discord.RateLimited):
        # discord.py waits out short 429s itself; this one asked for longer than we let it sleep.
        return SendError("discord: rate limited", retry_after=max(float(exc.retry_after), 0.0))
    if isinstance(exc, discord.HTTPException):
        status = exc.status
        if status == 429:
            return SendError("discord: rate limited", retry_after=retry_after_of(exc.response))
        if isinstance(exc, discord.Forbidden):
            return SendError(f"discord: forbidden (code {exc.code})", permanent=True)
        if isinstance(exc, discord.NotFound):
            return SendError(f"discord: not found (code {exc.code})", permanent=True)
        if status >= 500:
            return SendError(f"discord: server error {status}")
        if status == 408:
            return SendError("discord: request timeout")
        # 400 (invalid form body), 401 (token revoked)...: the same request fails the same way again.
        return SendError(f"discord: refused {status} (code {exc.code})", permanent=True)
    if isinstance(exc, aiohttp.ClientError | OSError | TimeoutError):
        # Sent with its nonce: a resend of what Discord posted after all gets that message back.
        return SendError(f"discord: network {type(exc).__name__}", maybe_delivered=answer_lost(exc))
    return SendError(f"discord: {type(exc).__name__}")


def retry_after_of(response: object) -> float:
    """Seconds a 429 asks us to wait, from its headers (discord.py keeps no body for a raised 429)."""
    headers = getattr(response, "headers", None) or {}
    for name in ("Retry-After", "X-RateLimit-Reset-After"):
        value = headers.get(name)
        if value is None:
            continue
        with contextlib.suppress(TypeError, ValueError):
            return max(float(value), 0.0)
    return DISCORD_DEFAULT_RETRY_AFTER_S


def start_failure(exc: BaseException, token_env: str) -> str:
    """One line saying why the client could not connect; never the token.

    discord.py can fail inside its own handling of a connection error (its reconnect path reads the
    websocket it never opened): the error it was handling is the reason a person can act on.
    """
    reasons = [_known_failure(e, token_env) for e in _chain(exc)]
    return next((r for r in reasons if r is not None), f"discord: could not connect ({type(exc).__name__})")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first.

    A context its raiser suppressed (``raise ... from None``) was declared beside the point, as a
    traceback would hide it.
    """
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        suppressed = current.__cause__ is None and current.__suppress_context__
        current = current.__cause__ if current.__cause__ is not None or suppressed else current.__context__
    return seen


def _known_failure(exc: BaseException, token_env: str) -> str | None:
    if isinstance(exc, discord.LoginFailure):
        return f"discord: the token in {token_env} was rejected"
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return ("discord: the Message Content intent is not enabled for this bot "
                "(Developer Portal → Bot → Privileged Gateway Intents)")
    if isinstance(exc, discord.ConnectionClosed):
        if exc.code == 4004:
            return f"discord: the gateway rejected the token in {token_env}"
        return f"discord: the gateway closed the connection (code {exc.code})"
    if isinstance(exc, discord.HTTPException):
        return f"discord: the API answered HTTP {exc.status} at login"
    if isinstance(exc, discord.GatewayNotFound | aiohttp.ClientError | OSError | TimeoutError):
        return f"discord: cannot reach Discord ({type(exc).__name__})"
    return None


__all__ = [
    "PLATFORM",
    "BotIdentity",
    "Place",
    "Skipped",
    "allowed_mentions",
    "attachment_kind",
    "attachments_of",
    "button_view",
    "catch_up_cursor",
    "catch_up_prefix",
    "followed_channel",
    "gateway_intents",
    "is_addressed_to",
    "message_ref",
    "place_of",
    "readable_text",
    "replied_message",
    "replied_message_id",
    "reply_reference",
    "retry_after_of",
    "send_error_for",
    "sender_skip",
    "snowflake",
    "start_failure",
    "translate_interaction",
    "translate_message",
    "unreadable_kind",
]
