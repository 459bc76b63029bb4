"""Pure translation between Slack's Events API / interactivity payloads and the core's types.

No I/O here: :mod:`channels.slack.channel` receives the payloads through slack-bolt, and these functions decide
what each one means. Anything that is not a person's text addressed to the bot becomes a :class:`Skipped`
with a short, content-free reason the channel logs next to the event id.

What reaches the core:

* ``message`` events with ``channel_type == "im"``: a DM, always addressed to the bot.
* ``app_mention`` events outside DMs: a channel message that @-mentions the bot. Plain channel messages
  are not subscribed to; if a workspace subscribes them anyway they are skipped as ``not_addressed``.

A file shared with no text (an image, a voice clip) reaches the core like any message, with empty text and
``unreadable`` naming what it was, so the person hears that it did not get through rather than nothing. Every
file a message shares (with text or without) travels on it as an :class:`~ground.types.Attachment` whose ref is
its private URL; the core decides what it can read, and the channel fetches it (:mod:`channels.slack.files`).

Threads: a DM that is a thread reply stays in its thread; a DM at top level is answered at top level.
A mention in a channel is always answered in a thread: the thread it was written in, or, for a mention at
the channel's top level, a new thread under the mention itself (``thread_id`` = the mention's ``ts``).
A busy channel then holds one short thread per question rather than the bot's answers interleaved with
everyone else's talk, and each thread is its own conversation history in the core.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from channels.slack.settings import PLATFORM
from ground.types import Attachment, AttachmentKind, Button, ButtonPress, ChatKind, InboundMessage, OutboundMessage

# --- Slack's Block Kit limits (protocol facts, not tunables) ----------------------------------------
SECTION_TEXT_MAX_CHARS = 3_000
BUTTON_LABEL_MAX_CHARS = 75
ACTION_ID_MAX_CHARS = 255
ACTIONS_MAX_ELEMENTS = 25

# Message subtypes that still carry a person's own words; every other subtype is a system message,
# an edit, a deletion or another bot.
_PERSON_SUBTYPES = frozenset({"file_share", "thread_broadcast", "me_message"})
_SKIPPED_SUBTYPES = {"message_changed": "edited", "message_deleted": "deleted", "bot_message": "from_bot"}
_SPECIAL_MENTIONS = {"here": "@here", "channel": "@channel", "everyone": "@everyone"}
_ANGLE = re.compile(r"<([^<>]*)>")


@dataclass(frozen=True, slots=True)
class SlackIdentity:
    """Who the bot is, from auth.test: needed to tell its own messages and mentions from anyone else's."""

    team_id: str
    user_id: str  # the bot user ("U…")
    bot_id: str | None  # the bot ("B…"), which message events from the bot carry as bot_id
    name: str
    enterprise_id: str | None = None

    @property
    def account(self) -> str:
        return f"{self.team_id}:{self.user_id}"


@dataclass(frozen=True, slots=True)
class Skipped:
    """A payload the core never sees; ``reason`` is a fixed word, safe to log."""

    reason: str
    chat_id: str | None = None


def identity_from_auth_test(data: Mapping[str, Any]) -> SlackIdentity:
    """The bot's identity from auth.test's answer; ValueError when it names no bot user or team."""
    user_id, team_id = data.get("user_id"), data.get("team_id")
    if not isinstance(user_id, str) or not user_id or not isinstance(team_id, str) or not team_id:
        raise ValueError("auth.test named no user_id or team_id")
    bot_id = data.get("bot_id")
    enterprise_id = data.get("enterprise_id")
    return SlackIdentity(team_id=team_id, user_id=user_id, bot_id=bot_id if isinstance(bot_id, str) else None,
                         name=str(data.get("user") or user_id),
                         enterprise_id=enterprise_id if isinstance(enterprise_id, str) and enterprise_id else None)


# --- Events API → core types ------------------------------------------------------------------------
def translate_event(body: Mapping[str, Any], me: SlackIdentity, *,
                    received_at: datetime) -> InboundMessage | Skipped:
    """What one ``event_callback`` body means to the core. ``received_at`` stands in for a missing ``ts``."""
    event = body.get("event")
    if not isinstance(event, Mapping):
        return Skipped("malformed")
    kind = event.get("type")
    if kind not in ("message", "app_mention"):
        return Skipped("unsupported_event")
    channel = event.get("channel")
    if not isinstance(channel, str) or not channel:
        return Skipped("malformed")
    subtype = event.get("subtype")
    if subtype is not None and subtype not in _PERSON_SUBTYPES:
        return Skipped(_SKIPPED_SUBTYPES.get(str(subtype), "subtype"), channel)
    if event.get("bot_id") or event.get("bot_profile"):
        return Skipped("self" if event.get("bot_id") == me.bot_id else "from_bot", channel)
    user = event.get("user")
    if not isinstance(user, str) or not user:
        return Skipped("no_sender", channel)
    if user == me.user_id:
        return Skipped("self", channel)

    ts = event.get("ts")
    if not isinstance(ts, str) or not ts:
        return Skipped("malformed", channel)  # without ts a message can be neither named nor threaded
    thread_ts = event.get("thread_ts")
    thread_ts = thread_ts if isinstance(thread_ts, str) and thread_ts else None
    if kind == "message":
        if event.get("channel_type") != "im":
            # Channel and group-DM messages reach the core only as app_mention events.
            return Skipped("not_addressed", channel)
        chat_kind, thread_id = ChatKind.DM, thread_ts
    else:
        if is_dm_channel(channel):
            return Skipped("dm_mention", channel)  # the DM's own message event carries it; answer once
        chat_kind, thread_id = ChatKind.GROUP, thread_ts or ts

    raw_text = event.get("text")
    text = readable_text(raw_text, me) if isinstance(raw_text, str) else ""
    unreadable = ""
    if not text.strip():
        unreadable = unreadable_kind(event)
        if not unreadable:
            return Skipped("no_text", channel)
        text = ""
    team = _team_of(event, body) or me.team_id
    return InboundMessage(
        platform=PLATFORM,
        bot_account=me.account,
        chat_id=channel,
        chat_kind=chat_kind,
        sender_id=f"{team}:{user}",
        sender_name=profile_name(event) or user,
        text=text,
        message_id=f"{channel}:{ts}",
        thread_id=thread_id,
        mentioned=True,
        timestamp=ts_to_datetime(ts, received_at),
        reply_to_message_id=None,
        unreadable=unreadable,
        attachments=attachments_of(event),
    )


# Slack's own recordings are files of these subtypes (a clip recorded in the message box).
_CLIP_KINDS = {"slack_audio": "voice message", "slack_video": "video message"}
_MEDIA_KINDS = {"image": "image", "video": "video", "audio": "audio file"}


def unreadable_kind(event: Mapping[str, Any]) -> str:
    """What a message without text shared ("image", "voice message", "file"), or "" when it shared no file."""
    files = event.get("files")
    first = files[0] if isinstance(files, list) and files and isinstance(files[0], Mapping) else None
    if first is None:
        return "file" if event.get("subtype") == "file_share" else ""
    clip = _CLIP_KINDS.get(str(first.get("subtype")))
    if clip is not None:
        return clip
    mimetype = first.get("mimetype")
    return _MEDIA_KINDS.get(mimetype.partition("/")[0], "file") if isinstance(mimetype, str) else "file"


def attachments_of(event: Mapping[str, Any]) -> tuple[Attachment, ...]:
    """Every file the message shares that kith could download, in Slack's order: a handle, never the bytes.

    A file without a private URL (one hidden by the workspace's plan, deleted, or in a Slack Connect channel that
    asks for ``files.info`` first) is left out: there is nothing to fetch it by.
    """
    files = event.get("files")
    if not isinstance(files, list):
        return ()
    found = (file_attachment(item) for item in files if isinstance(item, Mapping))
    return tuple(a for a in found if a is not None)


def file_attachment(item: Mapping[str, Any]) -> Attachment | None:
    """One Slack file object as an Attachment, or None when it has no private URL."""
    ref = item.get("url_private_download") or item.get("url_private")
    if not isinstance(ref, str) or not ref:
        return None
    mime = item.get("mimetype") if isinstance(item.get("mimetype"), str) else ""
    name = item.get("name") if isinstance(item.get("name"), str) else ""
    size = item.get("size")
    return Attachment(kind=file_kind(mime, clip=str(item.get("subtype") or "")), ref=ref, name=name, mime=mime,
                      size=size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
                      duration_s=_duration_s(item))


def file_kind(mime: str, *, clip: str = "") -> AttachmentKind:
    """VOICE for a clip recorded in Slack or any audio (words a transcription model can read), IMAGE, else DOCUMENT."""
    media = mime.partition("/")[0].strip().lower()
    if clip == "slack_audio" or media == "audio":
        return AttachmentKind.VOICE
    return AttachmentKind.IMAGE if media == "image" else AttachmentKind.DOCUMENT


def _duration_s(item: Mapping[str, Any]) -> float | None:
    # Slack gives a recorded clip's length as duration_ms; nothing for an uploaded audio file.
    value = item.get("duration_ms")
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return value / 1000
    return None


def translate_block_action(body: Mapping[str, Any]) -> ButtonPress | Skipped:
    """A ``block_actions`` payload (a person clicked one of our buttons) as a ButtonPress."""
    if body.get("type") != "block_actions":
        return Skipped("unsupported_interaction")
    container = body.get("container") if isinstance(body.get("container"), Mapping) else {}
    channel_obj = body.get("channel") if isinstance(body.get("channel"), Mapping) else {}
    channel = channel_obj.get("id") or container.get("channel_id")
    if not isinstance(channel, str) or not channel:
        return Skipped("no_channel")  # a button on a modal or the App Home has no chat to answer in
    user = body.get("user") if isinstance(body.get("user"), Mapping) else {}
    user_id = user.get("id")
    if not isinstance(user_id, str) or not user_id:
        return Skipped("no_sender", channel)
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], Mapping):
        return Skipped("no_action", channel)
    action = actions[0]
    if action.get("type") != "button":
        return Skipped("not_a_button", channel)
    data = action.get("value") or action.get("action_id")
    if not isinstance(data, str) or not data:
        return Skipped("no_button_data", channel)
    team_obj = body.get("team") if isinstance(body.get("team"), Mapping) else {}
    team = user.get("team_id") or team_obj.get("id") or ""
    press_id = action.get("action_ts") or body.get("trigger_id") or ""
    return ButtonPress(platform=PLATFORM, chat_id=channel, sender_id=f"{team}:{user_id}", data=data,
                       chat_kind=ChatKind.DM if is_dm_channel(channel) else ChatKind.GROUP, event_id=str(press_id))


def is_dm_channel(channel_id: str) -> bool:
    """DM conversation ids start with D; channels (public and private) with C, legacy private groups with G."""
    return channel_id.startswith("D")


def profile_name(event: Mapping[str, Any]) -> str | None:
    """The sender's name when the event carries their profile (Slack adds it to most messages from clients)."""
    profile = event.get("user_profile")
    if not isinstance(profile, Mapping):
        return None
    for key in ("display_name", "real_name", "name"):
        value = profile.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def user_display_name(user: Mapping[str, Any]) -> str | None:
    """A person's name from users.info's ``user`` object: display name, then real name, then handle."""
    profile = user.get("profile") if isinstance(user.get("profile"), Mapping) else {}
    for value in (profile.get("display_name"), profile.get("real_name"), user.get("real_name"), user.get("name")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def readable_text(text: str, me: SlackIdentity) -> str:
    """Slack's wire text as a person reads it: mentions, channels and links unwrapped, entities decoded.

    The model should see "@kith what's up", not "<@U0KITHBOT> what&#39;s up"; a mention of anyone else keeps
    its label when Slack sent one, else the bare user id.
    """

    def unwrap(match: re.Match[str]) -> str:
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            user = target[1:]
            return f"@{me.name}" if user == me.user_id else f"@{label or user}"
        if target.startswith("#"):
            return f"#{label or target[1:]}"
        if target.startswith("!"):
            command = target[1:]
            if command in _SPECIAL_MENTIONS:
                return _SPECIAL_MENTIONS[command]
            return label or f"@{command.partition('^')[0]}"
        if target.startswith("mailto:"):
            return label or target.removeprefix("mailto:")
        if label and label != target:
            return f"{label} ({target})"
        return target

    return _unescape(_ANGLE.sub(unwrap, text))


def ts_to_datetime(ts: str | None, fallback: datetime) -> datetime:
    """A Slack ``ts`` ("1790000000.000100", seconds since the epoch) as an aware datetime."""
    try:
        seconds = float(ts) if ts else 0.0
    except ValueError:
        return fallback
    if seconds <= 0:
        return fallback
    return datetime.fromtimestamp(seconds, UTC)


def _team_of(event: Mapping[str, Any], body: Mapping[str, Any]) -> str | None:
    # In a Slack Connect channel a person from another workspace carries their own team as user_team.
    for value in (event.get("user_team"), event.get("team"), body.get("team_id")):
        if isinstance(value, str) and value:
            return value
    return None


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


# --- core types → Slack ------------------------------------------------------------------------------
def escape_text(text: str) -> str:
    """Plain text made literal for Slack, which reads ``<``, ``>`` and ``&`` as markup even with mrkdwn off."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def target_channel(message: OutboundMessage) -> str:
    """Where chat.postMessage should post: the chat, or for a DM known only by its person, their user id.

    chat.postMessage accepts a user id and posts into the bot's DM with that person.
    """
    if message.chat_id:
        return message.chat_id
    if message.recipient_id:
        return message.recipient_id.rpartition(":")[2]
    return ""


def thread_ts_for(message: OutboundMessage) -> str | None:
    """The thread a reply goes into: its thread, else (in a channel) the thread of the message it answers.

    Slack has no quoted reply; answering a channel message means answering in its thread.
    """
    if message.thread_id:
        return message.thread_id
    if message.chat_kind is ChatKind.GROUP and message.reply_to_message_id:
        channel, _, ts = message.reply_to_message_id.rpartition(":")
        if channel == message.chat_id and ts:
            return ts
    return None


def button_blocks(text: str, buttons: Sequence[Button], *, mrkdwn: bool = True) -> list[dict[str, Any]]:
    """Block Kit for a message with buttons: the text as a section, then the buttons in actions blocks.

    With blocks Slack shows the blocks instead of ``text``, so the text must be repeated in a section
    (at most SECTION_TEXT_MAX_CHARS; the channel chunks such messages to fit). Each button's ``value``
    is its data; its ``action_id`` is the data too when that is a valid, unique id, else a positional one.
    """
    section = {"type": "section", "text": {"type": "mrkdwn" if mrkdwn else "plain_text", "text": text}}
    elements: list[dict[str, Any]] = []
    used: set[str] = set()
    for index, button in enumerate(buttons):
        action_id = button.data
        if not action_id or len(action_id) > ACTION_ID_MAX_CHARS or action_id in used:
            action_id = f"kith_button_{index}"
        used.add(action_id)
        elements.append({
            "type": "button",
            "text": {"type": "plain_text", "text": _label(button.label), "emoji": True},
            "action_id": action_id,
            "value": button.data,
        })
    blocks: list[dict[str, Any]] = [section]
    for start in range(0, len(elements), ACTIONS_MAX_ELEMENTS):
        blocks.append({"type": "actions", "elements": elements[start : start + ACTIONS_MAX_ELEMENTS]})
    return blocks


def _label(label: str) -> str:
    label = label.strip() or "…"
    return label if len(label) <= BUTTON_LABEL_MAX_CHARS else label[: BUTTON_LABEL_MAX_CHARS - 1] + "…"


__all__ = [
    "PLATFORM",
    "SECTION_TEXT_MAX_CHARS",
    "Skipped",
    "SlackIdentity",
    "attachments_of",
    "button_blocks",
    "escape_text",
    "file_attachment",
    "file_kind",
    "identity_from_auth_test",
    "is_dm_channel",
    "profile_name",
    "readable_text",
    "target_channel",
    "thread_ts_for",
    "translate_block_action",
    "translate_event",
    "ts_to_datetime",
    "unreadable_kind",
    "user_display_name",
]


# --- Finding an earlier post ---------------------------------------------------------------------
# chat.postMessage has no idempotency key. Each chunk of an outbox entry carries this message metadata instead,
# so a send whose answer was lost can be looked for in the conversation before it is sent again.
DELIVERY_EVENT_TYPE = "kith_delivery"


def delivery_marker(delivery_key: str | None, index: int) -> str | None:
    """The marker of chunk ``index`` of an outbox entry, the same on every resend; None outside the outbox.

    A hash, not the key: metadata is readable by everyone in the conversation, and says nothing of the outbox.
    """
    if delivery_key is None:
        return None
    return hashlib.blake2b(f"{delivery_key}:{index}".encode(), digest_size=12).hexdigest()


def delivery_metadata(marker: str) -> dict[str, Any]:
    """chat.postMessage's ``metadata`` for a marked chunk."""
    return {"event_type": DELIVERY_EVENT_TYPE, "event_payload": {"chunk": marker}}


def posted_with_marker(messages: Sequence[Any], marker: str, me: SlackIdentity) -> str | None:
    """The ts of our own message carrying ``marker`` among a history page's messages (with their metadata)."""
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        ours = message.get("bot_id") == me.bot_id if me.bot_id else message.get("user") == me.user_id
        metadata = message.get("metadata")
        if not ours or not isinstance(metadata, Mapping) or metadata.get("event_type") != DELIVERY_EVENT_TYPE:
            continue
        payload = metadata.get("event_payload")
        ts = message.get("ts")
        if isinstance(payload, Mapping) and payload.get("chunk") == marker and isinstance(ts, str) and ts:
            return ts
    return None
