"""A loopback fake of Discord (REST API v10 and the websocket gateway), for tests that drive the real discord.py.

One aiohttp server on 127.0.0.1 answers both halves:

* REST under ``/api/v10``: the routes a chat bot uses, with Discord's JSON error bodies, rate-limit
  headers and status codes, so discord.py's own request loop (429 handling, 5xx retries, exception
  mapping) runs unchanged. Every answer carries ``Content-Type: application/json`` exactly, because
  discord.py decodes a body only when the header is exactly that.
* The gateway at ``/gateway`` (and ``/resume``, the ``resume_gateway_url`` READY hands out): HELLO,
  IDENTIFY → READY + GUILD_CREATE, heartbeats, RESUME → replay + RESUMED or INVALID_SESSION, close
  codes 4004 (bad token) and 4014 (disallowed intent). With ``compress=zlib-stream`` in the query (what
  discord.py asks for unless a zstd module is installed) every payload is a binary frame of one shared
  zlib stream ending in a Z_SYNC_FLUSH, as on Discord; any other value gets plain JSON text frames,
  which discord.py reads as well.

Tests build a small world (``add_user``, ``add_guild``, ``add_text_channel``, ``add_thread``,
``open_dm``), push events (``push_message``, ``push_button_click``, ``redeliver``, ``push_raw``),
break things (``fail_next``, ``answer_late``, ``drop_gateway``, ``go_away``/``come_back``,
``invalidate_sessions``) and read what the bot did from ``posted``, ``edits`` (``edits_of``), ``deleted``,
``typing``, ``interaction_callbacks`` and ``calls``; ``seen_in`` is what a person reading a channel sees of the
bot, each message as last edited. ``post_unseen`` posts a person's message that no gateway session hears of (sent
while the bot was away); ``GET /channels/{id}/messages`` finds it, as Discord's history does.

Point discord.py here with :func:`discord_py_pointed_at` (the ``discord_api`` fixture does it): a plain
``discord.Client`` never asks ``GET /gateway/bot``; it connects to ``DiscordWebSocket.DEFAULT_GATEWAY``
and builds every REST URL from ``discord.http.Route.BASE``, both class attributes.

Discord's limits below are facts of the protocol the fake imitates, not tunables of kith: they are
kept apart from ``ground.tunables`` so a change to kith's own limits cannot make the fake agree with a bug.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import secrets
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import discord.gateway
import discord.http
import pytest_asyncio
import yarl
from aiohttp import WSMsgType, web

from tests.fakes.loopback import ChangeSignal, serve

# --- Discord's own limits and defaults ---------------------------------------------------------------
FAKE_DISCORD_TOKEN = "MTAwMDAwMDAwMDAwMDAwMDAx.fake.kith-discord-tests"
API_PREFIX = "/api/v10"
MESSAGE_MAX_CHARS = 2_000
BUTTON_LABEL_MAX_CHARS = 80
CUSTOM_ID_MAX_CHARS = 100
MAX_ACTION_ROWS = 5
MAX_ROW_COMPONENTS = 5
HEARTBEAT_INTERVAL_MS = 41_250
DISCORD_EPOCH_MS = 1_420_070_400_000
VOICE_MESSAGE_FLAG = 1 << 13  # a message's IS_VOICE_MESSAGE flag
INTENT_MESSAGE_CONTENT = 1 << 15
ATTACHMENT_SIZE_LIMIT = 10 * 1024 * 1024
DEFAULT_WAIT_S = 5.0
NONCE_WINDOW_S = 300.0  # enforce_nonce: "checked for uniqueness in the past few minutes"
MESSAGES_PAGE_DEFAULT = 50  # GET /channels/{id}/messages: limit's default and maximum
MESSAGES_PAGE_MAX = 100

JsonDict = dict[str, Any]

# Gateway opcodes
OP_DISPATCH = 0
OP_HEARTBEAT = 1
OP_IDENTIFY = 2
OP_RESUME = 6
OP_INVALID_SESSION = 9
OP_HELLO = 10
OP_HEARTBEAT_ACK = 11
_IGNORED_OPS = frozenset({3, 4, 8, 14})  # presence, voice state, member chunks, lazy requests

# REST route names a test can fail with fail_next()
ROUTES: tuple[tuple[str, str, str], ...] = (
    ("GET", "/users/@me", "get_me"),
    ("GET", "/oauth2/applications/@me", "application_info"),
    ("GET", "/gateway", "gateway"),
    ("GET", "/gateway/bot", "gateway_bot"),
    ("POST", "/users/@me/channels", "create_dm"),
    ("GET", "/channels/{channel_id}", "get_channel"),
    ("GET", "/channels/{channel_id}/messages", "channel_messages"),
    ("GET", "/channels/{channel_id}/messages/{message_id}", "get_message"),
    ("POST", "/channels/{channel_id}/messages", "create_message"),
    ("PATCH", "/channels/{channel_id}/messages/{message_id}", "edit_message"),
    ("DELETE", "/channels/{channel_id}/messages/{message_id}", "delete_message"),
    ("POST", "/channels/{channel_id}/typing", "typing"),
    ("POST", "/interactions/{interaction_id}/{interaction_token}/callback", "interaction_callback"),
)
_NO_AUTH = frozenset({"interaction_callback"})  # interaction tokens authorise themselves

_ERRORS: dict[int, tuple[str, int]] = {
    400: ("400: Bad Request", 0),
    401: ("401: Unauthorized", 0),
    403: ("Missing Permissions", 50013),
    404: ("404: Not Found", 0),
    500: ("500: Internal Server Error", 0),
    502: ("502: Bad Gateway", 0),
    503: ("503: Service Unavailable", 0),
}


# --- What the fake records ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RestCall:
    name: str  # route name from ROUTES, or "unknown"
    method: str
    path: str
    status: int
    scripted: bool = False  # answered by a fail_next() failure


@dataclass(frozen=True, slots=True)
class Download:
    """One GET of a file the fake serves on its CDN path."""

    attachment_id: int
    status: int
    authorization: str | None  # the Authorization header it carried: the CDN wants none


@dataclass(frozen=True, slots=True)
class UploadedFile:
    filename: str
    content: bytes


@dataclass(frozen=True, slots=True)
class PostedMessage:
    """One message the bot created through REST."""

    id: int
    channel_id: int
    content: str
    reply_to: int | None  # the referenced message id, when it was a reply that Discord accepted
    allowed_mentions: JsonDict | None
    components: tuple[JsonDict, ...]
    files: tuple[UploadedFile, ...]
    nonce: str | None

    @property
    def custom_ids(self) -> list[str]:
        return [c.get("custom_id", "") for row in self.components for c in row.get("components", [])]


@dataclass(frozen=True, slots=True)
class MessageEdit:
    """One accepted ``PATCH /channels/{channel_id}/messages/{message_id}``: the message as it reads after it."""

    message_id: int
    channel_id: int
    content: str
    components: tuple[JsonDict, ...]
    at: float  # time.monotonic() when it was accepted


@dataclass(frozen=True, slots=True)
class InteractionCallback:
    interaction_id: int
    type: int  # 6 = deferred message update, 4 = channel message, ...
    data: JsonDict | None


@dataclass(frozen=True, slots=True)
class Identify:
    intents: int
    path: str  # which gateway URL the client used


@dataclass(frozen=True, slots=True)
class Resume:
    session_id: str
    seq: int | None
    path: str
    accepted: bool


@dataclass(frozen=True, slots=True)
class ScriptedFailure:
    status: int
    retry_after: float = 1.0
    code: int | None = None
    via: bool = True  # False: a 429 without Discord's "Via" header, which discord.py takes for a Cloudflare ban
    is_global: bool = False


# --- payload builders (pure) ----------------------------------------------------------------------------
def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()


def user_payload(user_id: int, username: str, *, global_name: str | None = None, bot: bool = False) -> JsonDict:
    data: JsonDict = {"id": str(user_id), "username": username, "global_name": global_name, "discriminator": "0",
                      "avatar": None, "public_flags": 0, "flags": 0}
    if bot:
        data["bot"] = True
    return data


def member_payload(user: JsonDict | None, *, nick: str | None = None, roles: Sequence[int] = ()) -> JsonDict:
    """A guild member; ``user=None`` gives the partial member MESSAGE_CREATE carries next to ``author``."""
    data: JsonDict = {"nick": nick, "roles": [str(r) for r in roles], "joined_at": iso(1_700_000_000),
                      "deaf": False, "mute": False, "flags": 0, "pending": False, "avatar": None,
                      "premium_since": None, "communication_disabled_until": None}
    if user is not None:
        data["user"] = user
    return data


def attachment_payload(attachment_id: int, filename: str, content_type: str, *, size: int = 48_213,
                       channel_id: int = 0, url: str | None = None) -> JsonDict:
    """One file on a message, as Discord describes it. Its URL is Discord's CDN unless given: a file the fake
    serves is made with :meth:`FakeDiscord.attachment`, whose URL is on the fake's own address."""
    url = url or f"https://cdn.discordapp.com/attachments/{channel_id}/{attachment_id}/{filename}"
    return {"id": str(attachment_id), "filename": filename, "size": size, "url": url, "proxy_url": url,
            "content_type": content_type}


def sticker_item_payload(sticker_id: int, name: str) -> JsonDict:
    """A sticker on a message: Discord sends its id, name and format (1: PNG), no emoji."""
    return {"id": str(sticker_id), "name": name, "format_type": 1}


def role_payload(role_id: int, name: str, *, bot_id: int | None = None, position: int = 0) -> JsonDict:
    data: JsonDict = {"id": str(role_id), "name": name, "color": 0, "hoist": False, "position": position,
                      "permissions": "1071698660929", "managed": bot_id is not None, "mentionable": True,
                      "flags": 0, "icon": None, "unicode_emoji": None}
    if bot_id is not None:
        data["tags"] = {"bot_id": str(bot_id)}
    return data


def text_channel_payload(channel_id: int, guild_id: int, name: str, *, position: int = 0) -> JsonDict:
    return {"id": str(channel_id), "type": 0, "guild_id": str(guild_id), "name": name, "position": position,
            "permission_overwrites": [], "nsfw": False, "parent_id": None, "topic": None,
            "last_message_id": None, "rate_limit_per_user": 0, "flags": 0}


def thread_payload(thread_id: int, guild_id: int, parent_id: int, owner_id: int, name: str) -> JsonDict:
    return {"id": str(thread_id), "type": 11, "guild_id": str(guild_id), "parent_id": str(parent_id),
            "owner_id": str(owner_id), "name": name, "last_message_id": None, "message_count": 0,
            "member_count": 2, "rate_limit_per_user": 0, "flags": 0, "total_message_sent": 0,
            "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                                "archive_timestamp": iso(1_700_000_000), "locked": False}}


def dm_channel_payload(channel_id: int, recipient: JsonDict) -> JsonDict:
    return {"id": str(channel_id), "type": 1, "recipients": [recipient], "last_message_id": None, "flags": 0}


# --- world state ---------------------------------------------------------------------------------------
@dataclass
class _Guild:
    id: int
    name: str
    member_ids: list[int]
    channel_ids: list[int] = field(default_factory=list)
    thread_ids: list[int] = field(default_factory=list)
    nicks: dict[int, str] = field(default_factory=dict)
    bot_role_id: int = 0


@dataclass
class _Session:
    session_id: str
    seq: int = 0
    frames: list[JsonDict] = field(default_factory=list)  # every dispatch, for replay on RESUME
    connection: _Connection | None = None
    valid: bool = True


class _Connection:
    """One gateway websocket: an ordered outbound queue, optionally one zlib stream."""

    def __init__(self, ws: web.WebSocketResponse, request: web.Request, *, compress: bool) -> None:
        self.ws = ws
        self.path = request.path
        self.transport = request.transport
        self._zlib = zlib.compressobj() if compress else None
        self._queue: asyncio.Queue[JsonDict | int] = asyncio.Queue()
        self.session: _Session | None = None
        self.writer = asyncio.create_task(self._write())

    def send(self, frame: JsonDict) -> None:
        self._queue.put_nowait(frame)

    def close_after_pending(self, code: int) -> None:
        self._queue.put_nowait(code)

    async def stop_writing(self) -> None:
        self.writer.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, RuntimeError):
            await self.writer

    async def _write(self) -> None:
        while True:
            item = await self._queue.get()
            if self.ws.closed:
                return
            if isinstance(item, int):
                await self.ws.close(code=item)
                return
            data = json.dumps(item, separators=(",", ":")).encode()
            if self._zlib is not None:
                await self.ws.send_bytes(self._zlib.compress(data) + self._zlib.flush(zlib.Z_SYNC_FLUSH))
            else:
                await self.ws.send_str(data.decode())


class FakeDiscord:
    """The fake server; see the module docstring."""

    def __init__(self, *, token: str = FAKE_DISCORD_TOKEN, bot_id: int = 0, bot_username: str = "kith_test_bot",
                 bot_global_name: str = "Kith", message_content_allowed: bool = True,
                 echo_own_messages: bool = True) -> None:
        self.token = token
        self._ids = itertools.count(1)
        self.bot_id = bot_id or self.snowflake()
        self.application_id = self.bot_id
        self.bot_user = user_payload(self.bot_id, bot_username, global_name=bot_global_name, bot=True)
        self.message_content_allowed = message_content_allowed
        self.echo_own_messages = echo_own_messages  # Discord sends the bot its own messages too
        self.users: dict[int, JsonDict] = {self.bot_id: self.bot_user}
        self.guilds: dict[int, _Guild] = {}
        self.channels: dict[int, JsonDict] = {}
        self.messages: dict[int, JsonDict] = {}
        self.dm_by_user: dict[int, int] = {}
        self.interactions: dict[int, JsonDict] = {}
        # what the bot did
        self.calls: list[RestCall] = []
        self.posted: list[PostedMessage] = []
        self.edits: list[MessageEdit] = []
        self.deleted: list[int] = []  # ids of the bot's messages it deleted
        self.typing: list[int] = []
        self.interaction_callbacks: list[InteractionCallback] = []
        self.identifies: list[Identify] = []
        self.resumes: list[Resume] = []
        self.heartbeats = 0
        self.downloads: list[Download] = []  # GETs of attachment URLs the fake handed out
        self._files: dict[int, bytes] = {}  # attachment id -> what its CDN URL serves
        self._download_failures: list[int] = []
        self._chunked: set[int] = set()
        self._signed_until = 0  # a CDN URL whose expiry ("ex") is at or before this unix time is refused, as expired
        self.nonce_hits = 0  # sends Discord answered with the message an earlier send of the same nonce posted
        self._nonces: dict[tuple[int, str], tuple[int, float]] = {}  # (author, nonce) -> (message id, when)
        # Called right after READY is sent, before the servers' GUILD_CREATEs: events pushed here reach the
        # client in the seconds before discord.py's on_ready (its guild_ready_timeout), as on Discord.
        self.after_ready: Callable[[], None] | None = None
        # machinery
        self._failures: dict[str, list[ScriptedFailure]] = {}
        self._late: dict[str, list[float]] = {}  # route -> answer delays of its next calls (answer_late)
        self._sessions: dict[str, _Session] = {}
        self._session: _Session | None = None  # the newest session: where pushed events go
        self._connections: set[_Connection] = set()
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._signal = ChangeSignal()

    # -- lifecycle ----------------------------------------------------------------------------------
    async def start(self) -> FakeDiscord:
        """Listen on 127.0.0.1: a fresh port the first time, the same port on every later start."""
        app = web.Application(client_max_size=32 * 1024 * 1024)
        for method, path, name in ROUTES:
            app.router.add_route(method, API_PREFIX + path, self._rest(name))
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/resume", self._gateway)
        app.router.add_get("/attachments/{channel_id}/{attachment_id}/{filename}", self._cdn)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        runner = await serve(app, self._port, shutdown_timeout=0.1)
        self._port = runner.addresses[0][1]
        self._runner = runner
        return self

    async def stop(self) -> None:
        await self._close_connections(None)
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def go_away(self) -> None:
        """Discord becomes unreachable: gateway connections cut, nothing listening. Sessions stay resumable."""
        await self.stop()

    async def come_back(self) -> None:
        await self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def api_base(self) -> str:
        return f"{self.url}{API_PREFIX}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self._port}/gateway"

    @property
    def resume_gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self._port}/resume"

    @property
    def connected(self) -> int:
        """Gateway connections with a live session (identified or resumed)."""
        return sum(1 for c in self._connections if c.session is not None and not c.ws.closed)

    # -- the world ----------------------------------------------------------------------------------
    def snowflake(self) -> int:
        """A fresh id that, like Discord's, encodes the time it was made."""
        return ((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22) | (next(self._ids) & 0x3FFFFF)

    def add_user(self, user_id: int, username: str, *, global_name: str | None = None, bot: bool = False) -> JsonDict:
        self.users[user_id] = user_payload(user_id, username, global_name=global_name, bot=bot)
        return self.users[user_id]

    def add_guild(self, guild_id: int, name: str, *, members: Sequence[int] = (),
                  nicks: dict[int, str] | None = None) -> None:
        """A server the bot is in (sent as GUILD_CREATE at IDENTIFY, or now if the bot is connected)."""
        guild = _Guild(guild_id, name, [self.bot_id, *members], nicks=dict(nicks or {}),
                       bot_role_id=self.snowflake())
        self.guilds[guild_id] = guild
        if self._session is not None:
            self._dispatch("GUILD_CREATE", self._guild_create(guild))

    def add_text_channel(self, guild_id: int, channel_id: int, name: str) -> JsonDict:
        guild = self.guilds[guild_id]
        data = text_channel_payload(channel_id, guild_id, name, position=len(guild.channel_ids))
        self.channels[channel_id] = data
        guild.channel_ids.append(channel_id)
        if self._session is not None:
            self._dispatch("CHANNEL_CREATE", data)
        return data

    def add_thread(self, guild_id: int, parent_id: int, thread_id: int, name: str, *,
                   announce: bool = True) -> JsonDict:
        """A public thread; ``announce=False`` keeps discord.py from hearing of it (an uncached thread)."""
        guild = self.guilds[guild_id]
        data = thread_payload(thread_id, guild_id, parent_id, self.bot_id, name)
        self.channels[thread_id] = data
        if announce:
            guild.thread_ids.append(thread_id)
            if self._session is not None:
                self._dispatch("THREAD_CREATE", {**data, "newly_created": True})
        return data

    def open_dm(self, user_id: int) -> int:
        """The DM channel between the bot and a user (made on first use, as POST /users/@me/channels does)."""
        channel_id = self.dm_by_user.get(user_id)
        if channel_id is None:
            channel_id = self.snowflake()
            self.dm_by_user[user_id] = channel_id
            self.channels[channel_id] = dm_channel_payload(channel_id, self.users[user_id])
        return channel_id

    def role_of_bot(self, guild_id: int) -> int:
        return self.guilds[guild_id].bot_role_id

    def _guild_of(self, channel_id: int) -> _Guild | None:
        guild_id = self.channels.get(channel_id, {}).get("guild_id")
        return None if guild_id is None else self.guilds.get(int(guild_id))

    def _guild_create(self, guild: _Guild) -> JsonDict:
        members = [member_payload(self.users[m], nick=guild.nicks.get(m),
                                  roles=[guild.bot_role_id] if m == self.bot_id else [])
                   for m in guild.member_ids if m in self.users]
        return {
            "id": str(guild.id), "name": guild.name, "icon": None, "splash": None, "discovery_splash": None,
            "owner_id": str(guild.member_ids[-1]), "afk_channel_id": None, "afk_timeout": 300,
            "verification_level": 0, "default_message_notifications": 0, "explicit_content_filter": 0,
            "roles": [role_payload(guild.id, "@everyone"),
                      role_payload(guild.bot_role_id, self.bot_user["username"], bot_id=self.bot_id, position=1)],
            "emojis": [], "stickers": [], "features": [], "mfa_level": 0, "application_id": None,
            "system_channel_id": None, "system_channel_flags": 0, "rules_channel_id": None,
            "vanity_url_code": None, "description": None, "banner": None, "premium_tier": 0,
            "preferred_locale": "en-US", "public_updates_channel_id": None, "nsfw_level": 0,
            "premium_progress_bar_enabled": False, "joined_at": iso(1_700_000_000), "large": False,
            "unavailable": False, "member_count": len(members), "voice_states": [], "members": members,
            "channels": [self.channels[c] for c in guild.channel_ids],
            "threads": [self.channels[t] for t in guild.thread_ids], "presences": [], "stage_instances": [],
            "guild_scheduled_events": [], "soundboard_sounds": [],
        }

    # -- pushing events -------------------------------------------------------------------------------
    def push_message(self, channel_id: int, author_id: int, content: str, *, mentions: Sequence[int] = (),
                     role_mentions: Sequence[int] = (), reply_to: int | None = None, resolve_reply: bool = True,
                     message_id: int | None = None, webhook_id: int | None = None, message_type: int | None = None,
                     mention_everyone: bool = False, attachments: Sequence[JsonDict] = (),
                     sticker_items: Sequence[JsonDict] = (), flags: int = 0) -> JsonDict:
        """A MESSAGE_CREATE as Discord sends it. ``reply_to`` makes it a reply (type 19) carrying the
        ``referenced_message`` unless ``resolve_reply=False``; ``attachments`` and ``sticker_items`` as
        :func:`attachment_payload` and :func:`sticker_item_payload` make them; ``flags`` 8192 is a voice message."""
        payload = self.message_payload(channel_id, author_id, content, mentions=mentions,
                                       role_mentions=role_mentions, reply_to=reply_to, resolve_reply=resolve_reply,
                                       message_id=message_id, webhook_id=webhook_id, message_type=message_type,
                                       mention_everyone=mention_everyone, attachments=attachments)
        if sticker_items:
            payload["sticker_items"] = list(sticker_items)
        payload["flags"] = flags
        self.messages[int(payload["id"])] = payload
        self._dispatch("MESSAGE_CREATE", payload)
        return payload

    def message_payload(self, channel_id: int, author_id: int, content: str, *, mentions: Sequence[int] = (),
                        role_mentions: Sequence[int] = (), reply_to: int | None = None, resolve_reply: bool = True,
                        message_id: int | None = None, webhook_id: int | None = None,
                        message_type: int | None = None, mention_everyone: bool = False,
                        components: Sequence[JsonDict] = (), attachments: Sequence[JsonDict] = ()) -> JsonDict:
        guild = self._guild_of(channel_id)
        message_id = message_id or self.snowflake()
        author = self.users[author_id]
        data: JsonDict = {
            "id": str(message_id), "channel_id": str(channel_id), "author": author, "content": content,
            "timestamp": iso(((message_id >> 22) + DISCORD_EPOCH_MS) / 1000), "edited_timestamp": None,
            "tts": False, "mention_everyone": mention_everyone, "mention_roles": [str(r) for r in role_mentions],
            "attachments": list(attachments), "embeds": [], "pinned": False, "flags": 0,
            "type": 19 if reply_to is not None else 0, "components": list(components),
        }
        mentioned = []
        for user_id in mentions:
            user = dict(self.users[user_id])
            if guild is not None:
                user["member"] = member_payload(None, nick=guild.nicks.get(user_id))
            mentioned.append(user)
        data["mentions"] = mentioned
        if guild is not None:
            data["guild_id"] = str(guild.id)
            if webhook_id is None:
                data["member"] = member_payload(None, nick=guild.nicks.get(author_id))
        if webhook_id is not None:
            data["webhook_id"] = str(webhook_id)
        if reply_to is not None:
            original = self.messages.get(reply_to)
            ref_channel = original["channel_id"] if original else str(channel_id)
            data["message_reference"] = {"type": 0, "message_id": str(reply_to), "channel_id": ref_channel}
            if guild is not None:
                data["message_reference"]["guild_id"] = str(guild.id)
            if resolve_reply:
                data["referenced_message"] = (
                    {k: v for k, v in original.items() if k != "referenced_message"} if original else None)
        if message_type is not None:
            data["type"] = message_type
        return data

    def post_unseen(self, channel_id: int, author_id: int, content: str, **kwargs: Any) -> JsonDict:
        """A person's message posted while no gateway session hears of it (the bot was away, or its session
        ended before the event went out): it is only in the channel's history."""
        payload = self.message_payload(channel_id, author_id, content, **kwargs)
        self.messages[int(payload["id"])] = payload
        return payload

    def attachment(self, channel_id: int, filename: str, content_type: str, data: bytes, *,
                   duration_s: float | None = None, size: int | None = None, chunked: bool = False) -> JsonDict:
        """A file a person attaches, served with ``data`` at its URL on the fake's own address (signed in its
        query as Discord's CDN does). ``duration_s`` makes it a voice message's recording (``duration_secs`` and a
        ``waveform``); ``size`` is what Discord states, ``len(data)`` unless given. ``chunked``: served without a
        Content-Length, so only the bytes themselves say how long it is."""
        attachment_id = self.snowflake()
        self._files[attachment_id] = data
        if chunked:
            self._chunked.add(attachment_id)
        url = (f"{self.url}/attachments/{channel_id}/{attachment_id}/{filename}"
               f"?ex={int(time.time()) + 86_400:x}&is={int(time.time()):x}&hm={secrets.token_hex(32)}")
        payload = attachment_payload(attachment_id, filename, content_type, channel_id=channel_id,
                                     size=len(data) if size is None else size, url=url)
        if duration_s is not None:
            payload.update(duration_secs=duration_s, waveform="AAAAAAAAAAAA", flags=0)
        return payload

    def push_voice_message(self, channel_id: int, author_id: int, data: bytes, *, duration_s: float = 3.5,
                           size: int | None = None) -> JsonDict:
        """A voice message recorded in Discord's app: no text, the IS_VOICE_MESSAGE flag, one ``.ogg`` file."""
        voice = self.attachment(channel_id, "voice-message.ogg", "audio/ogg", data, duration_s=duration_s, size=size)
        return self.push_message(channel_id, author_id, "", attachments=[voice], flags=VOICE_MESSAGE_FLAG)

    def fail_downloads(self, status: int, *, times: int = 1) -> None:
        """The next ``times`` GETs of an attachment URL answer ``status`` instead of the file."""
        self._download_failures.extend([status] * times)

    def redeliver(self, payload: JsonDict) -> None:
        """The same MESSAGE_CREATE again (as after a resume that replays what was already handled)."""
        self._dispatch("MESSAGE_CREATE", payload)

    def push_raw(self, event: str, data: Any) -> None:
        """Any dispatch, however malformed."""
        self._dispatch(event, data)

    def push_button_click(self, message_id: int, user_id: int, custom_id: str) -> JsonDict:
        """A person clicks a button on one of the bot's messages: INTERACTION_CREATE (type 3, component)."""
        message = self.messages[message_id]
        channel_id = int(message["channel_id"])
        channel = self.channels[channel_id]
        guild = self._guild_of(channel_id)
        interaction_id = self.snowflake()
        data: JsonDict = {
            "id": str(interaction_id), "application_id": str(self.application_id), "type": 3,
            "token": f"interaction-token-{interaction_id}", "version": 1,
            "data": {"custom_id": custom_id, "component_type": 2},
            "channel_id": str(channel_id), "channel": channel, "message": message,
            "app_permissions": "1071698660929", "locale": "en-US", "entitlements": [],
            "authorizing_integration_owners": {"0": str(guild.id)} if guild else {"1": str(user_id)},
            "context": 0 if guild else 1, "attachment_size_limit": ATTACHMENT_SIZE_LIMIT,
        }
        if guild is not None:
            data["guild_id"] = str(guild.id)
            data["guild_locale"] = "en-US"
            data["member"] = {**member_payload(self.users[user_id], nick=guild.nicks.get(user_id)),
                              "permissions": "1071698660929"}
        else:
            data["user"] = self.users[user_id]
        self.interactions[interaction_id] = {"token": data["token"], "answered": False}
        self._dispatch("INTERACTION_CREATE", data)
        return data

    def _dispatch(self, event: str, data: Any) -> None:
        session = self._session
        if session is None:
            raise RuntimeError("no gateway session yet: start the client before pushing events")
        session.seq += 1
        frame = {"op": OP_DISPATCH, "t": event, "s": session.seq, "d": data}
        session.frames.append(frame)
        if session.connection is not None and not session.connection.ws.closed:
            session.connection.send(frame)

    # -- breaking things --------------------------------------------------------------------------------
    def fail_next(self, route: str, status: int, *, retry_after: float = 1.0, code: int | None = None,
                  via: bool = True, is_global: bool = False, times: int = 1) -> None:
        """The next ``times`` calls to ``route`` (a name from ROUTES) fail with ``status``."""
        if route not in {name for _, _, name in ROUTES}:
            raise ValueError(f"unknown route {route!r}")
        failure = ScriptedFailure(status, retry_after, code, via, is_global)
        self._failures.setdefault(route, []).extend([failure] * times)

    def answer_late(self, route: str, delay_s: float, *, times: int = 1) -> None:
        """The next ``times`` calls to ``route`` are carried out at once (a message is posted) but answered
        only after ``delay_s``."""
        if route not in {name for _, _, name in ROUTES}:
            raise ValueError(f"unknown route {route!r}")
        self._late.setdefault(route, []).extend([delay_s] * times)

    async def drop_gateway(self, code: int | None = 4000) -> None:
        """Cut every gateway connection: with a close frame of ``code``, or (None) by aborting the TCP stream.

        The session survives, as on Discord: the client may RESUME it and gets what it missed.
        """
        await self._close_connections(code)

    def invalidate_sessions(self) -> None:
        """Every existing session becomes unresumable: a RESUME gets op 9 and the client must IDENTIFY."""
        for session in self._sessions.values():
            session.valid = False

    async def _close_connections(self, code: int | None) -> None:
        for conn in list(self._connections):
            if conn.session is not None:
                conn.session.connection = None
            if code is None:
                if conn.transport is not None:
                    conn.transport.abort()
            else:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(conn.ws.close(code=code), 1.0)
            await conn.stop_writing()
        self._connections.clear()

    # -- waiting ---------------------------------------------------------------------------------------
    async def wait_until(self, predicate: Callable[[], bool], timeout: float = DEFAULT_WAIT_S) -> None:
        """Wait until ``predicate()`` holds; re-checked after every request and gateway frame handled."""
        await self._signal.wait_until(predicate, timeout)

    async def wait_for_posted(self, n: int, timeout: float = DEFAULT_WAIT_S) -> list[PostedMessage]:
        try:
            await self.wait_until(lambda: len(self.posted) >= n, timeout)
        except TimeoutError:
            raise TimeoutError(f"expected {n} posted messages within {timeout} s, got {len(self.posted)}") from None
        return list(self.posted)

    def edits_of(self, message_id: int) -> list[str]:
        """The contents a message of the bot's had, oldest first: as posted, then after each edit."""
        first = next((p.content for p in self.posted if p.id == message_id), None)
        later = [e.content for e in self.edits if e.message_id == message_id]
        return ([] if first is None else [first]) + later

    def seen_in(self, channel_id: int) -> list[str]:
        """What a person reading ``channel_id`` sees of the bot: each of its messages, oldest first, as last
        edited. ``seen_in(dm) == [whole_reply]`` says exactly one message holds the whole text."""
        mine = sorted(i for i, m in self.messages.items()
                      if int(m["channel_id"]) == channel_id and int(m["author"]["id"]) == self.bot_id)
        return [self.messages[i]["content"] for i in mine]

    def _notify(self) -> None:
        self._signal.notify()

    # -- the gateway -------------------------------------------------------------------------------------
    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(max_msg_size=0, autoping=True)
        await ws.prepare(request)
        conn = _Connection(ws, request, compress=request.query.get("compress") == "zlib-stream")
        self._connections.add(conn)
        conn.send({"op": OP_HELLO, "d": {"heartbeat_interval": HEARTBEAT_INTERVAL_MS}, "s": None, "t": None})
        try:
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    conn.close_after_pending(4002)  # discord.py only ever sends JSON text
                    continue
                try:
                    frame = json.loads(msg.data)
                except ValueError:
                    conn.close_after_pending(4002)
                    continue
                self._on_frame(conn, frame)
                self._notify()
        finally:
            if conn.session is not None and conn.session.connection is conn:
                conn.session.connection = None
            self._connections.discard(conn)
            await conn.stop_writing()
            self._notify()
        return ws

    def _on_frame(self, conn: _Connection, frame: Any) -> None:
        op = frame.get("op") if isinstance(frame, dict) else None
        data = frame.get("d") if isinstance(frame, dict) else None
        if op == OP_HEARTBEAT:
            self.heartbeats += 1
            conn.send({"op": OP_HEARTBEAT_ACK, "d": None, "s": None, "t": None})
        elif op == OP_IDENTIFY and isinstance(data, dict):
            self._identify(conn, data)
        elif op == OP_RESUME and isinstance(data, dict):
            self._resume(conn, data)
        elif op not in _IGNORED_OPS:
            conn.close_after_pending(4001)  # unknown opcode

    def _identify(self, conn: _Connection, data: JsonDict) -> None:
        if conn.session is not None:
            conn.close_after_pending(4005)  # already authenticated
            return
        if data.get("token") != self.token:
            conn.close_after_pending(4004)  # authentication failed
            return
        intents = int(data.get("intents") or 0)
        self.identifies.append(Identify(intents, conn.path))
        if intents & INTENT_MESSAGE_CONTENT and not self.message_content_allowed:
            conn.close_after_pending(4014)  # disallowed intent(s)
            return
        session = _Session(secrets.token_hex(16), connection=conn)
        self._sessions[session.session_id] = session
        self._session = session
        conn.session = session
        ready = {
            "v": 10, "user": {**self.bot_user, "verified": True, "mfa_enabled": False},
            "guilds": [{"id": str(g), "unavailable": True} for g in self.guilds], "session_id": session.session_id,
            "session_type": "normal", "resume_gateway_url": self.resume_gateway_url,
            "application": {"id": str(self.application_id), "flags": 0}, "private_channels": [],
            "relationships": [], "presences": [], "geo_ordered_rtc_regions": [], "user_settings": {},
        }
        self._dispatch("READY", ready)
        if self.after_ready is not None:
            self.after_ready()
        for guild in self.guilds.values():
            self._dispatch("GUILD_CREATE", self._guild_create(guild))

    def _resume(self, conn: _Connection, data: JsonDict) -> None:
        if data.get("token") != self.token:
            conn.close_after_pending(4004)
            return
        session = self._sessions.get(str(data.get("session_id")))
        seq = data.get("seq")
        accepted = session is not None and session.valid
        self.resumes.append(Resume(str(data.get("session_id")), seq, conn.path, accepted))
        if session is None or not session.valid:
            conn.send({"op": OP_INVALID_SESSION, "d": False, "s": None, "t": None})
            return
        if session.connection is not None and session.connection is not conn:
            session.connection.close_after_pending(4000)
        session.connection = conn
        conn.session = session
        for frame in session.frames:
            if seq is None or frame["s"] > seq:
                conn.send(frame)
        self._dispatch("RESUMED", {})

    # -- REST ----------------------------------------------------------------------------------------------
    def _rest(self, name: str) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.StreamResponse:
            response, scripted = await self._answer(name, request)
            self.calls.append(RestCall(name, request.method, request.path, response.status, scripted))
            self._notify()
            return response

        return handle

    async def _answer(self, name: str, request: web.Request) -> tuple[web.StreamResponse, bool]:
        if name not in _NO_AUTH and request.headers.get("Authorization") != f"Bot {self.token}":
            return _error(401), False
        queue = self._failures.get(name)
        if queue:
            return _scripted(queue.pop(0)), True
        handler = getattr(self, f"_r_{name}")
        response = await handler(request)
        delays = self._late.get(name)
        if delays:
            # Carried out at once, answered late: what the client sees of a slow or congested Discord.
            await asyncio.sleep(delays.pop(0))
        return response, False

    async def _r_get_me(self, request: web.Request) -> web.StreamResponse:
        return _json({**self.bot_user, "verified": True, "mfa_enabled": False, "locale": "en-US"})

    async def _r_application_info(self, request: web.Request) -> web.StreamResponse:
        owner = next((u for u in self.users.values() if not u.get("bot")), self.bot_user)
        return _json({"id": str(self.application_id), "name": self.bot_user["username"], "icon": None,
                      "description": "", "bot_public": True, "bot_require_code_grant": False, "owner": owner,
                      "verify_key": "00" * 32, "flags": 0, "team": None, "bot": self.bot_user,
                      "interactions_endpoint_url": None})

    async def _r_gateway(self, request: web.Request) -> web.StreamResponse:
        return _json({"url": self.gateway_url.removesuffix("/gateway")})

    async def _r_gateway_bot(self, request: web.Request) -> web.StreamResponse:
        return _json({"url": self.gateway_url.removesuffix("/gateway"), "shards": 1,
                      "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0,
                                              "max_concurrency": 1}})

    async def _r_create_dm(self, request: web.Request) -> web.StreamResponse:
        body = await _json_body(request)
        recipient = _int(body.get("recipient_id")) if isinstance(body, dict) else None
        if recipient is None or recipient not in self.users:
            return _error(400, "Invalid Recipient(s)", 50033)
        return _json(self.channels[self.open_dm(recipient)])

    async def _r_get_channel(self, request: web.Request) -> web.StreamResponse:
        channel = self.channels.get(_int(request.match_info["channel_id"]) or 0)
        return _json(channel) if channel is not None else _error(404, "Unknown Channel", 10003)

    async def _r_get_message(self, request: web.Request) -> web.StreamResponse:
        """One message, as the API returns it: its attachments' URLs signed afresh (Discord's documented way to a
        working URL once the one a gateway event carried has expired)."""
        message = self.messages.get(_int(request.match_info["message_id"]) or 0)
        if message is None or int(message["channel_id"]) != (_int(request.match_info["channel_id"]) or 0):
            return _error(404, "Unknown Message", 10008)
        fetched = self._as_fetched(message)
        fetched["attachments"] = [{**a, "url": self._signed(a["url"])} for a in fetched.get("attachments", [])]
        return _json(fetched)

    def _signed(self, url: str) -> str:
        """``url`` signed anew: valid for a day from now, and past any expiry the test has moved the CDN to."""
        base = url.partition("?")[0]
        now = max(int(time.time()), self._signed_until + 1)
        return f"{base}?ex={now + 86_400:x}&is={now:x}&hm={secrets.token_hex(32)}"

    def expire_attachment_urls(self) -> None:
        """A day passes for the CDN: every attachment URL handed out so far is refused from now on (404, "This
        content is no longer available."); a message fetched again carries new ones."""
        self._signed_until = int(time.time()) + 86_400 + 1

    async def _r_channel_messages(self, request: web.Request) -> web.StreamResponse:
        """A channel's history as Discord pages it: ``after`` gives the oldest messages past that id, ``before``
        (or neither) the newest before it; either way the page comes newest first."""
        channel_id = _int(request.match_info["channel_id"]) or 0
        if channel_id not in self.channels:
            return _error(404, "Unknown Channel", 10003)
        limit = _int(request.query.get("limit", MESSAGES_PAGE_DEFAULT))
        if limit is None or not 1 <= limit <= MESSAGES_PAGE_MAX:
            return _form_error("limit", "NUMBER_TYPE_MAX", f"Must be between 1 and {MESSAGES_PAGE_MAX}.")
        after, before = _int(request.query.get("after")), _int(request.query.get("before"))
        ids = sorted(i for i, m in self.messages.items() if int(m["channel_id"]) == channel_id
                     and (after is None or i > after) and (before is None or i < before))
        page = ids[:limit] if after is not None and before is None else ids[-limit:]
        return _json([self._as_fetched(self.messages[i]) for i in reversed(page)])

    @staticmethod
    def _as_fetched(message: JsonDict) -> JsonDict:
        # REST message objects carry neither guild_id nor member: those are gateway-only extra fields.
        return {k: v for k, v in message.items() if k not in ("guild_id", "member")}

    async def _r_typing(self, request: web.Request) -> web.StreamResponse:
        channel_id = _int(request.match_info["channel_id"]) or 0
        if channel_id not in self.channels:
            return _error(404, "Unknown Channel", 10003)
        self.typing.append(channel_id)
        return web.Response(status=204)

    async def _r_create_message(self, request: web.Request) -> web.StreamResponse:
        channel_id = _int(request.match_info["channel_id"]) or 0
        if channel_id not in self.channels:
            return _error(404, "Unknown Channel", 10003)
        files: list[UploadedFile] = []
        if request.content_type == "multipart/form-data":
            form = await request.post()
            try:
                body = json.loads(str(form.get("payload_json", "{}")))
            except ValueError:
                return _error(400, "Invalid Form Body", 50109)
            for key, value in form.items():
                if key.startswith("files[") and isinstance(value, web.FileField):
                    files.append(UploadedFile(value.filename, value.file.read()))
        else:
            body = await _json_body(request)
        if not isinstance(body, dict):
            return _error(400, "Invalid Form Body", 50109)
        content = body.get("content") or ""
        if not isinstance(content, str):
            return _form_error("content", "BASE_TYPE_BAD_TYPE", "Must be a string.")
        if len(content) > MESSAGE_MAX_CHARS:
            return _form_error("content", "BASE_TYPE_MAX_LENGTH", f"Must be {MESSAGE_MAX_CHARS} or fewer in length.")
        components = body.get("components") or []
        problem = _component_problem(components)
        if problem is not None:
            return _form_error("components", "COMPONENT_INVALID", problem)
        if not content.strip() and not files and not components and not body.get("embeds"):
            return _error(400, "Cannot send an empty message", 50006)
        reply_to = None
        reference = body.get("message_reference")
        if isinstance(reference, dict):
            referenced = _int(reference.get("message_id"))
            if referenced in self.messages:
                reply_to = referenced
            elif reference.get("fail_if_not_exists", True):
                return _form_error("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")
        nonce = body.get("nonce")
        if body.get("enforce_nonce") and nonce is not None:
            # The same author's same nonce within the window: that message comes back, no new one is posted.
            earlier = self._nonces.get((self.bot_id, str(nonce)))
            if earlier is not None and time.monotonic() - earlier[1] < NONCE_WINDOW_S:
                self.nonce_hits += 1
                return _json(self.messages[earlier[0]])
        message_id = self.snowflake()
        attachments = [{"id": str(self.snowflake()), "filename": f.filename, "size": len(f.content),
                        "url": f"{self.url}/attachments/{f.filename}", "proxy_url": f"{self.url}/a/{f.filename}"}
                       for f in files]
        payload = self.message_payload(channel_id, self.bot_id, content, reply_to=reply_to, message_id=message_id,
                                       components=components, attachments=attachments)
        payload["nonce"] = nonce
        self.messages[message_id] = payload
        if nonce is not None:
            self._nonces[(self.bot_id, str(nonce))] = (message_id, time.monotonic())
        self.posted.append(PostedMessage(message_id, channel_id, content, reply_to, body.get("allowed_mentions"),
                                         tuple(components), tuple(files), None if nonce is None else str(nonce)))
        if self.echo_own_messages and self._session is not None:
            self._dispatch("MESSAGE_CREATE", payload)
        return _json(payload)

    async def _r_edit_message(self, request: web.Request) -> web.StreamResponse:
        """Edit Message: only the bot's own message; ``content``/``components`` given replace, absent ones stay.

        Like Discord: an unknown message is 404 10008, another author's is 403 50005, the same content limits
        as a new message, and the bot hears MESSAGE_UPDATE on the gateway.
        """
        channel_id = _int(request.match_info["channel_id"]) or 0
        if channel_id not in self.channels:
            return _error(404, "Unknown Channel", 10003)
        message_id = _int(request.match_info["message_id"]) or 0
        message = self.messages.get(message_id)
        if message is None or int(message["channel_id"]) != channel_id:
            return _error(404, "Unknown Message", 10008)
        if int(message["author"]["id"]) != self.bot_id:
            return _error(403, "Cannot edit a message authored by another user", 50005)
        body = await _json_body(request)
        if not isinstance(body, dict):
            return _error(400, "Invalid Form Body", 50109)
        content = message["content"] if "content" not in body else (body["content"] or "")
        if not isinstance(content, str):
            return _form_error("content", "BASE_TYPE_BAD_TYPE", "Must be a string.")
        if len(content) > MESSAGE_MAX_CHARS:
            return _form_error("content", "BASE_TYPE_MAX_LENGTH", f"Must be {MESSAGE_MAX_CHARS} or fewer in length.")
        components = (message.get("components") or []) if "components" not in body else (body["components"] or [])
        problem = _component_problem(components)
        if problem is not None:
            return _form_error("components", "COMPONENT_INVALID", problem)
        if not content.strip() and not components and not message.get("attachments") and not message.get("embeds"):
            return _error(400, "Cannot send an empty message", 50006)
        edited = {**message, "content": content, "components": list(components),
                  "edited_timestamp": iso(time.time())}
        self.messages[message_id] = edited
        self.edits.append(MessageEdit(message_id, channel_id, content, tuple(components), time.monotonic()))
        if self._session is not None:
            self._dispatch("MESSAGE_UPDATE", edited)
        return _json(self._as_fetched(edited))

    async def _r_delete_message(self, request: web.Request) -> web.StreamResponse:
        """Delete Message: the bot's own (other authors' need Manage Messages, which the fake's bot lacks)."""
        channel_id = _int(request.match_info["channel_id"]) or 0
        if channel_id not in self.channels:
            return _error(404, "Unknown Channel", 10003)
        message_id = _int(request.match_info["message_id"]) or 0
        message = self.messages.get(message_id)
        if message is None or int(message["channel_id"]) != channel_id:
            return _error(404, "Unknown Message", 10008)
        if int(message["author"]["id"]) != self.bot_id:
            return _error(403, "Missing Permissions", 50013)
        del self.messages[message_id]
        self.deleted.append(message_id)
        if self._session is not None:
            deleted = {"id": str(message_id), "channel_id": str(channel_id)}
            if "guild_id" in message:
                deleted["guild_id"] = message["guild_id"]
            self._dispatch("MESSAGE_DELETE", deleted)
        return web.Response(status=204, headers=_ratelimit_headers())

    async def _r_interaction_callback(self, request: web.Request) -> web.StreamResponse:
        interaction_id = _int(request.match_info["interaction_id"]) or 0
        known = self.interactions.get(interaction_id)
        if known is None or known["token"] != request.match_info["interaction_token"]:
            return _error(404, "Unknown interaction", 10062)
        if known["answered"]:
            return _error(400, "Interaction has already been acknowledged.", 40060)
        body = await _json_body(request)
        if not isinstance(body, dict) or not isinstance(body.get("type"), int):
            return _error(400, "Invalid Form Body", 50035)
        known["answered"] = True
        self.interaction_callbacks.append(InteractionCallback(interaction_id, body["type"], body.get("data")))
        if request.query.get("with_response") not in ("1", "true", "True"):
            return web.Response(status=204)
        return _json({"interaction": {"id": str(interaction_id), "type": 3, "response_message_loading": False,
                                      "response_message_ephemeral": False},
                      "resource": {"type": body["type"]}})

    async def _cdn(self, request: web.Request) -> web.StreamResponse:
        """An attachment's CDN URL: the file's bytes, as ``application/octet-stream`` like any CDN body."""
        attachment_id = _int(request.match_info["attachment_id"]) or 0
        data = self._files.get(attachment_id)
        if self._download_failures:
            status = self._download_failures.pop(0)
            response: web.Response = web.Response(status=status, text=f"{status}")
        elif data is None or "hm" not in request.query or _hex(request.query.get("ex", "0")) <= self._signed_until:
            response = web.Response(status=404, text="This content is no longer available.")
        elif attachment_id in self._chunked:
            self.downloads.append(Download(attachment_id, 200, request.headers.get("Authorization")))
            return await _chunked_body(request, data)
        else:
            response = web.Response(body=data, content_type="application/octet-stream")
        self.downloads.append(Download(attachment_id, response.status, request.headers.get("Authorization")))
        self._notify()
        return response

    async def _not_found(self, request: web.Request) -> web.StreamResponse:
        self.calls.append(RestCall("unknown", request.method, request.path, 404))
        return _error(404)


# --- REST helpers ------------------------------------------------------------------------------------
def _hex(value: str) -> int:
    try:
        return int(value, 16)
    except ValueError:
        return 0



def _ratelimit_headers(*, remaining: int = 4, reset_after: float = 1.0) -> dict[str, str]:
    return {"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}", "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": "fakebucket"}


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # Exactly "application/json": discord.py compares the header verbatim before decoding.
    all_headers = {"Content-Type": "application/json", **_ratelimit_headers(), **(headers or {})}
    return web.Response(status=status, body=json.dumps(body).encode(), headers=all_headers)


def _error(status: int, message: str | None = None, code: int | None = None) -> web.Response:
    default_message, default_code = _ERRORS.get(status, (f"{status}", 0))
    return _json({"message": message or default_message, "code": default_code if code is None else code}, status)


def _form_error(key: str, code: str, message: str) -> web.Response:
    return _json({"message": "Invalid Form Body", "code": 50035,
                  "errors": {key: {"_errors": [{"code": code, "message": message}]}}}, 400)


def _scripted(failure: ScriptedFailure) -> web.Response:
    if failure.status == 429:
        headers = {**_ratelimit_headers(remaining=0, reset_after=failure.retry_after),
                   "Retry-After": str(max(1, round(failure.retry_after))), "X-RateLimit-Scope": "user"}
        if failure.is_global:
            headers["X-RateLimit-Global"] = "true"
        if failure.via:
            headers["Via"] = "1.1 google"
        body = {"message": "You are being rate limited.", "retry_after": failure.retry_after,
                "global": failure.is_global}
        return _json(body, 429, headers)
    return _error(failure.status, code=failure.code)


async def _chunked_body(request: web.Request, data: bytes, piece: int = 4096) -> web.StreamResponse:
    """``data`` in chunked transfer encoding, written piece by piece; a client that stops reading ends it early."""
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    with contextlib.suppress(ConnectionError):
        for start in range(0, len(data), piece):
            await response.write(data[start:start + piece])
        await response.write_eof()
    return response


async def _json_body(request: web.Request) -> Any:
    try:
        return await request.json()
    except ValueError:
        return None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _component_problem(rows: Any) -> str | None:
    """Why Discord would refuse these message components, or None."""
    if not isinstance(rows, list) or len(rows) > MAX_ACTION_ROWS:
        return "too many action rows"
    for row in rows:
        if not isinstance(row, dict) or row.get("type") != 1:
            return "top-level components must be action rows"
        items = row.get("components") or []
        if not 1 <= len(items) <= MAX_ROW_COMPONENTS:
            return "an action row holds 1 to 5 components"
        for item in items:
            if item.get("type") != 2:
                continue
            if len(item.get("label") or "") > BUTTON_LABEL_MAX_CHARS:
                return "button label too long"
            custom_id = item.get("custom_id")
            if item.get("style") != 5 and (not custom_id or len(custom_id) > CUSTOM_ID_MAX_CHARS):
                return "button custom_id missing or too long"
    return None


# --- pointing discord.py at the fake -----------------------------------------------------------------
@contextlib.contextmanager
def discord_py_pointed_at(fake: FakeDiscord) -> Iterator[None]:
    """Make discord.py's REST and gateway URLs the fake's for the duration; restored afterwards."""
    saved_base = discord.http.Route.BASE
    saved_gateway = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    discord.http.Route.BASE = fake.api_base
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
    try:
        yield
    finally:
        discord.http.Route.BASE = saved_base
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = saved_gateway


@pytest_asyncio.fixture
async def discord_api() -> AsyncIterator[FakeDiscord]:
    """A started :class:`FakeDiscord` with discord.py pointed at it; stopped and restored after the test."""
    fake = FakeDiscord()
    await fake.start()
    try:
        with discord_py_pointed_at(fake):
            yield fake
    finally:
        await fake.stop()
