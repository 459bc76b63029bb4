"""The core's own types: what every channel translates its platform's events into and back."""

from __future__ import annotations

import enum
import json
import re
import unicodedata
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from ground.tunables import DISPLAY_NAME_MAX_CHARS


class ChatKind(enum.StrEnum):
    DM = "dm"
    GROUP = "group"


def utcnow() -> datetime:
    return datetime.now(UTC)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def well_formed(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD.

    JSON may escape half of a UTF-16 pair ("\\ud800") and platforms pass such text on; Python
    keeps it, but it cannot be encoded as UTF-8, so the database (and any platform we answer on)
    would refuse it and the message would never be answered.
    """
    if text.isascii():  # nearly every id and most texts: a flag check, no scan
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text)
    return text


# Categories no name needs: controls (newline, ESC), format characters (bidi overrides, zero-width
# spaces), line and paragraph separators, surrogates and unassigned or private code points.
_UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
_KEPT_FORMAT = frozenset({"\u200d"})  # the zero-width joiner holds emoji sequences together
_SPACES = re.compile(r"\s+")


def printable_name(name: str) -> str:
    """A display name as data: one line, no control or format characters, at most ``DISPLAY_NAME_MAX_CHARS``.

    A name is the one thing a stranger fully controls that kith puts beside other people's words: one
    with a newline could start a line of its own in a prompt ("SYSTEM: ..."), one with ESC or OSC
    sequences could rewrite an operator's terminal.
    """
    if name.isprintable() and len(name) <= DISPLAY_NAME_MAX_CHARS and name == name.strip():
        return name  # nearly every name: one C-level scan
    kept = "".join(map(_name_char, name))
    return _SPACES.sub(" ", kept).strip()[:DISPLAY_NAME_MAX_CHARS].rstrip()


def _name_char(c: str) -> str:
    if c.isspace():
        return " "  # a newline or tab still parts two words
    return c if c in _KEPT_FORMAT or unicodedata.category(c) not in _UNPRINTABLE_CATEGORIES else ""


def quoted_name(name: str) -> str:
    """``name`` as a quoted string literal for a prompt: however it is spelt, it ends where its quote does."""
    return json.dumps(printable_name(name), ensure_ascii=False)


def _well_formed_fields(obj: object, names: tuple[str, ...]) -> None:
    # Every inbound message and button press is built through here, so no later step meets such text.
    for name in names:
        value = getattr(obj, name)
        if value is not None:
            clean = well_formed(value)
            if clean is not value:
                object.__setattr__(obj, name, clean)


class AttachmentKind(enum.StrEnum):
    VOICE = "voice"  # a voice note, or an audio file: words a transcription model can read
    IMAGE = "image"
    DOCUMENT = "document"


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file a message carries, as its platform names it: fetched through the channel only when it is read.

    ``ref`` is what the channel needs to fetch it (a Telegram ``file_id``, a Discord attachment URL, a Slack
    ``url_private``): a handle, never the bytes, so a message kept in the inbox stays small and a turn taken up
    after a crash fetches it again.
    """

    kind: AttachmentKind
    ref: str
    name: str = ""  # the file's name where the platform gives one ("voice.ogg" where it does not)
    mime: str = ""  # as the platform says ("audio/ogg"); may be empty
    size: int | None = None  # bytes, where the platform says before the download
    duration_s: float | None = None  # a voice note's length, where the platform says
    # Where the channel can ask for the file again when ``ref`` no longer works (a Discord message's
    # "<channel id>:<message id>": its signed CDN URLs expire after about a day); "" where there is no need.
    origin: str = ""

    def __post_init__(self) -> None:
        _well_formed_fields(self, ("ref", "name", "mime", "origin"))

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind.value, "ref": self.ref, "name": self.name, "mime": self.mime, "size": self.size,
                "duration_s": self.duration_s, "origin": self.origin}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Attachment:
        size, duration = data.get("size"), data.get("duration_s")
        return cls(AttachmentKind(str(data["kind"])), str(data["ref"]), str(data.get("name") or ""),
                   str(data.get("mime") or ""), int(size) if size is not None else None,
                   float(duration) if duration is not None else None, str(data.get("origin") or ""))


@dataclass(frozen=True, slots=True)
class SeenImage:
    """An image fetched for one turn, to show a model that sees: held in memory for that turn only, never kept."""

    mime: str  # "image/jpeg"
    data: bytes = field(repr=False)


class AttachmentError(Exception):
    """An attachment could not be fetched. ``too_large``: it is past the limit asked for; ``gone``: the platform
    says it is not there or not kith's to read (deleted, an expired link, a missing scope), so trying again will
    not help. Either is answered with an honest line, never retried; otherwise the fetch failed and may be tried
    again, like any platform call. One line, free of secrets."""

    def __init__(self, message: str, *, too_large: bool = False, gone: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large
        self.gone = gone


@runtime_checkable
class AttachmentSource(Protocol):
    """A channel that can fetch the files its messages carry, through its platform's own API."""

    async def fetch_attachment(self, attachment: Attachment, max_bytes: int) -> bytes:
        """The file's bytes; ``AttachmentError(too_large=True)`` when it is larger than ``max_bytes`` (checked
        before and while it downloads, so a huge file is never held whole)."""
        ...


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """One message a person sent, as the core sees it, whatever the platform."""

    platform: str  # "telegram", "discord", "slack", "console"
    bot_account: str  # the bot's own id on that platform
    chat_id: str
    chat_kind: ChatKind
    sender_id: str  # platform-scoped id ("12345"; for Slack "T01:U02")
    sender_name: str
    text: str
    message_id: str  # the platform's id for this message (dedupe key)
    thread_id: str | None = None
    mentioned: bool = False  # the bot was @-mentioned or the message replies to the bot
    timestamp: datetime = field(default_factory=utcnow)
    reply_to_message_id: str | None = None
    # Earlier messages of the sender answered in this one turn (debounce), oldest first.
    merged_ids: tuple[str, ...] = ()
    # Set when a turn opened before a restart is answered now: its message's row in history.
    opened_row: int | None = None
    # Someone else's words the sender passed on (a Telegram forward): part of the conversation, never
    # the sender's own words, so never evidence for a memory about them.
    forwarded: bool = False
    # What the message was when it holds nothing kith can read: a fixed noun from its channel ("voice message",
    # "photo"), never the person's words. Its text is empty, and its answer is one honest line, not a turn.
    unreadable: str = ""
    # The files it carries, in the platform's order (:mod:`media` reads those it can: a voice note becomes words).
    attachments: tuple[Attachment, ...] = ()
    # How its words came: "" as typed; "voice" when they are a voice note's transcript (receipts say so).
    medium: str = ""

    def __post_init__(self) -> None:
        _well_formed_fields(self, _INBOUND_TEXT)
        if self.unreadable and self.text:
            raise ValueError("a message with text is not unreadable")
        name = printable_name(self.sender_name)
        if name is not self.sender_name:
            # A name of nothing but control characters is no name: the platform id stands in.
            object.__setattr__(self, "sender_name", name or self.sender_id)
        if self.merged_ids:
            object.__setattr__(self, "merged_ids", tuple(well_formed(i) for i in self.merged_ids))

    @property
    def answers(self) -> tuple[str, ...]:
        """The ids of every message this turn answers: the earlier ones merged into it, then its own."""
        return (*self.merged_ids, self.message_id)

    @property
    def account(self) -> str:
        """The sender's account key, e.g. ``telegram:123`` or ``slack:T1:U2``."""
        return f"{self.platform}:{self.sender_id}"

    @property
    def conversation_key(self) -> str:
        """The thread of history this message belongs to."""
        key = f"{self.platform}:{self.chat_id}"
        return f"{key}:{self.thread_id}" if self.thread_id else key


_INBOUND_TEXT = ("bot_account", "chat_id", "sender_id", "sender_name", "text", "message_id", "thread_id",
                 "reply_to_message_id", "unreadable")


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    data: str  # opaque callback payload the channel hands back as a ButtonPress


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """One reply the core wants delivered; the channel formats and chunks it."""

    platform: str
    chat_id: str
    text: str  # Markdown as the model wrote it
    thread_id: str | None = None
    reply_to_message_id: str | None = None
    buttons: tuple[Button, ...] = ()
    attachment_name: str | None = None
    attachment_bytes: bytes | None = None
    chat_kind: ChatKind = ChatKind.DM
    recipient_id: str | None = None  # the person's platform id for a DM whose chat id is not a user id
    notice: bool = False  # a policy notice (pairing code, rate limit) answering the sender's own message
    # The outbox entry this is delivered as, the same on every resend (after a crash too): a platform with an
    # idempotency key (Discord's nonce) derives it from this, so it drops a resend of what it already posted.
    delivery_key: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ButtonPress:
    """A person pressed a button the core attached to an OutboundMessage."""

    platform: str
    chat_id: str
    sender_id: str
    data: str
    chat_kind: ChatKind = ChatKind.DM
    event_id: str = ""  # the platform's id for this press (dedupe key)

    def __post_init__(self) -> None:
        _well_formed_fields(self, _PRESS_TEXT)


_PRESS_TEXT = ("chat_id", "sender_id", "data", "event_id")


@dataclass(frozen=True, slots=True)
class SentMessage:
    """What the platform answered for one delivered chunk."""

    platform_message_id: str


@dataclass(frozen=True, slots=True)
class RenderedChunk:
    """One platform-sized piece of an OutboundMessage, already in the platform's format."""

    text: str
    parse_mode: str | None  # what the platform is told the markup is ("HTML"); None where it takes its own
    plain: str  # the same piece without markup, for when the platform rejects the formatting
    # The message's final chunk. A chunk made on its own is a whole message.
    last: bool = True
    # Whether the message's buttons ride on this chunk: the last one, unless the platform cannot attach buttons
    # to a file that ends the message (Slack); then the last text chunk carries them.
    buttons: bool = True


InboundHandler = Callable[[InboundMessage], Awaitable[None]]
ButtonHandler = Callable[[ButtonPress], Awaitable[None]]


class ChannelStartError(Exception):
    """A channel cannot start; the message is one line, free of secrets."""


class SendError(Exception):
    """A send failed. ``retry_after`` is set when the platform asked us to wait (HTTP 429).

    ``maybe_delivered``: the request left but no answer came back in time, so the platform may
    have posted it. Not a refusal: it is sent again (the one duplicate a platform without an
    idempotency key allows), and counted apart from real failures.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, permanent: bool = False,
                 bad_formatting: bool = False, maybe_delivered: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.permanent = permanent
        self.bad_formatting = bad_formatting
        self.maybe_delivered = maybe_delivered


@runtime_checkable
class Channel(Protocol):
    """A platform adapter: turns platform events into InboundMessage and sends OutboundMessage."""

    name: str

    async def start(self, on_message: InboundHandler, on_button: ButtonHandler | None = None) -> None: ...

    async def stop(self) -> None: ...

    def render(self, message: OutboundMessage) -> list[RenderedChunk]:
        """Format and chunk a message to this platform's rules and limits."""
        ...

    async def send_chunk(self, message: OutboundMessage, chunk: RenderedChunk, index: int, *,
                         plain: bool = False) -> SentMessage:
        """Send one chunk (``chunk.plain`` when ``plain``); raise SendError on failure."""
        ...

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """Show a typing indicator once; the caller refreshes it."""
        ...


class EventJournal(Protocol):
    """Where a channel notes each platform event before acknowledging it (``delivery.inbound.InboundJournal``)."""

    async def record(self, platform: str, event_id: str, *, message: InboundMessage | None = None) -> bool:
        """Note the event; False when it was taken in before (a redelivery: drop it, still acknowledge it).

        ``message``, the one the event carries, is kept with it until the core has answered it, so a
        crash before that does not lose it.
        """
        ...

    async def record_batch(self, platform: str, event_ids: Sequence[str], *, cursor: str,
                           cursor_to: int, messages: Mapping[str, InboundMessage] | None = None) -> set[str]:
        """Note a batch and move a polling cursor past it at once; returns the ids not taken in before.

        ``messages``: event id -> the message that event carries, kept as for ``record``.
        """
        ...


def reply_to(message: InboundMessage, text: str, **extra: Any) -> OutboundMessage:
    """An answer in the chat (and thread) a message came from; in groups it quotes that message."""
    in_group = message.chat_kind is ChatKind.GROUP
    return OutboundMessage(platform=message.platform, chat_id=message.chat_id, text=text,
                           thread_id=message.thread_id, reply_to_message_id=message.message_id if in_group else None,
                           chat_kind=message.chat_kind, recipient_id=message.sender_id, **extra)
