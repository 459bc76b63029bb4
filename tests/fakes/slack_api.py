"""A loopback fake of Slack, for tests that drive the real slack-bolt and slack_sdk.

One aiohttp server on 127.0.0.1 plays three parts of Slack:

* the Web API, ``POST /api/<method>``: auth.test, apps.connections.open, chat.postMessage (with message
  metadata), chat.update, chat.startStream / appendStream / stopStream, conversations.info,
  conversations.history and conversations.replies (scope-checked; metadata only with
  ``include_all_metadata``), users.info and the three steps of a file upload, with Slack's
  envelopes (``{"ok": false, "error": ...}`` with HTTP 200; 429 with ``Retry-After``; a gateway's HTML page
  on 5xx), token checks, and Block Kit limits;
* the Socket Mode WebSocket behind the URL apps.connections.open hands out: it sends ``hello``, pushes
  ``events_api`` and ``interactive`` envelopes and records the ``{"envelope_id": ...}`` acknowledgements;
* the Events API sender for HTTP mode: :meth:`FakeSlack.post_event` signs a request with the signing
  secret the way Slack does (``v0=`` HMAC-SHA256 of ``v0:<timestamp>:<body>``), or forges it.

Tests build payloads with the ``*_event`` helpers, push them with :meth:`push` (or the ``push_*``
shortcuts), script failures with :meth:`fail_next`, lasting refusals with :meth:`refuse` and late answers with
:meth:`answer_slowly`, and read what the bot did from ``posted``, ``updates`` (chat.update), ``streams``
(chat.startStream/appendStream/stopStream), ``uploads``, ``acks`` and ``calls``; :meth:`seen_in` is what a person
sees of the bot in a conversation, each message as last edited, and :meth:`versions` every text one message showed.
Slack's limits below are facts of the protocol the fake imitates, kept apart from ``ground.tunables`` so a
change to kith's own limits cannot make the fake agree with a bug.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import time
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest_asyncio
from aiohttp import WSCloseCode, web

from tests.fakes.loopback import ChangeSignal, serve

# --- Who the fake workspace and app are ----------------------------------------------------------
FAKE_BOT_TOKEN = "xoxb-fake_bot_token_for_kith_tests"
FAKE_APP_TOKEN = "xapp-1-A0KITH-3000-kithfakeapptoken"
FAKE_SIGNING_SECRET = "8f742231b10e8888abcd99kith85a5e1"
TEAM_ID = "T0KITH"
TEAM_NAME = "Kith Test"
APP_ID = "A0KITH"
BOT_USER_ID = "U0KITHBOT"
BOT_ID = "B0KITH"
BOT_NAME = "kith"

# --- Slack's own limits -------------------------------------------------------------------------
TEXT_MAX_CHARS = 40_000  # chat.postMessage refuses longer text with msg_too_long
BLOCKS_MAX = 50
SECTION_TEXT_MAX_CHARS = 3_000
BUTTON_TEXT_MAX_CHARS = 75
ACTION_ID_MAX_CHARS = 255
BUTTON_VALUE_MAX_CHARS = 2_000
ACTIONS_MAX_ELEMENTS = 25
HISTORY_LIMIT_DEFAULT = 100  # conversations.history and .replies: messages per page unless ``limit`` says
HISTORY_LIMIT_MAX = 999
STREAM_TEXT_MAX_CHARS = 12_000  # chat.*Stream's markdown_text: "Limit this field to 12,000 characters"
STREAM_LIFETIME_S = 300.0  # a stream ends about five minutes after it started, appends or not (measured by others)
METADATA_EVENT_TYPE_MAX_CHARS = 255
SIGNATURE_VERSION = "v0"
SHUTDOWN_GRACE_S = 0.1
DEFAULT_WAIT_S = 5.0
# What the README asks a Slack app to hold: no *:history scope but im:history, so kith reads DMs only.
README_SCOPES = frozenset({"app_mentions:read", "chat:write", "im:history", "users:read", "files:write",
                           "files:read"})
_HISTORY_SCOPES = {"im": "im:history", "mpim": "mpim:history", "private": "groups:history",
                   "public": "channels:history"}

JsonDict = dict[str, Any]

_BOT_METHODS = frozenset({"auth.test", "chat.postMessage", "conversations.info", "conversations.history",
                          "conversations.replies", "users.info", "files.getUploadURLExternal",
                          "files.completeUploadExternal"})
# Block types Slack accepts that kith never sends: the fake takes them unchecked.
_OTHER_BLOCK_TYPES = frozenset({"divider", "header", "context", "image", "rich_text", "markdown", "file", "video",
                                "input", "table"})
# What files.slack.com answers a request for a private file without a token it accepts: its sign-in page, 200.
_LOGIN_PAGE = ("<!DOCTYPE html><html><head><title>Slack</title></head><body><h1>Sign in to Kith Test</h1>"
               "<form action=\"/signin\" method=\"post\"></form></body></html>")
_GATEWAY_PAGE = ("<html><head><title>{status} {reason}</title></head><body><center><h1>{status} {reason}</h1>"
                 "</center></body></html>")


# --- What the fake records ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ApiCall:
    method: str
    params: JsonDict
    token: str | None
    failed: str | None = None  # the error a scripted failure answered with


@dataclass(frozen=True, slots=True)
class PostedMessage:
    """One accepted chat.postMessage."""

    channel: str
    ts: str
    text: str
    mrkdwn: bool
    thread_ts: str | None
    blocks: tuple[JsonDict, ...]
    metadata: JsonDict | None = None


@dataclass(frozen=True, slots=True)
class MessageUpdate:
    """One accepted chat.update: the message as it reads after it."""

    channel: str
    ts: str
    text: str
    blocks: tuple[JsonDict, ...]


@dataclass(slots=True)
class Stream:
    """One message opened by chat.startStream, with everything appended to it."""

    channel: str
    ts: str
    thread_ts: str
    recipient_user_id: str | None
    recipient_team_id: str | None
    started_at: float  # the fake's clock (:meth:`FakeSlack.now`)
    mode: str | None = None  # "text" (markdown_text) or "chunks": fixed by the first call that carried either
    pieces: list[str] = field(default_factory=list)  # each markdown text appended, the opening one included
    chunks: list[JsonDict] = field(default_factory=list)  # every chunk received, markdown or not
    streaming: bool = True
    ended_by: str | None = None  # "stop", "server" (close_stream / expiry), or None while streaming

    @property
    def text(self) -> str:
        return "".join(self.pieces)


@dataclass(frozen=True, slots=True)
class ChannelView:
    """What a person reading a conversation sees of the bot: its messages oldest first, each as last edited."""

    messages: tuple[str, ...]
    streaming: tuple[str, ...]  # the texts of those still being streamed (a half message, until stopped)


@dataclass(frozen=True, slots=True)
class FileDownload:
    """One GET of a shared file's private URL on the fake."""

    file_id: str
    path: str
    token: str | None  # the bearer token it carried, if any
    status: int
    served: bool  # the file's bytes went out (not a login page, a failure or a redirect)


@dataclass(frozen=True, slots=True)
class UploadedFile:
    file_id: str
    filename: str
    title: str | None
    content: bytes
    channel: str | None
    thread_ts: str | None


@dataclass(slots=True)
class Envelope:
    """One Socket Mode envelope the fake sends (or will send once a socket is open)."""

    envelope_id: str
    type: str  # "events_api" or "interactive"
    payload: JsonDict
    retry_attempt: int = 0
    retry_reason: str = ""
    sent_at: float | None = None
    acked_at: float | None = None

    def wire(self) -> JsonDict:
        message: JsonDict = {"envelope_id": self.envelope_id, "type": self.type, "payload": self.payload,
                             "accepts_response_payload": self.type == "interactive"}
        if self.type == "events_api":
            message.update(retry_attempt=self.retry_attempt, retry_reason=self.retry_reason)
        return message

    @property
    def event_id(self) -> str | None:
        return self.payload.get("event_id")


@dataclass(frozen=True, slots=True)
class ScriptedFailure:
    error: str
    status: int
    retry_after: int


@dataclass(slots=True)
class _Socket:
    ws: web.WebSocketResponse
    request: web.Request
    opened_at: float = field(default_factory=time.monotonic)


class _ApiError(Exception):
    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


# --- Signing (HTTP mode) -------------------------------------------------------------------------
def sign(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature: ``v0=`` + hex HMAC-SHA256 of ``v0:<timestamp>:<body>``."""
    base = f"{SIGNATURE_VERSION}:{timestamp}:".encode() + body
    return f"{SIGNATURE_VERSION}=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


# --- The server ----------------------------------------------------------------------------------
class FakeSlack:
    """The fake Slack plus the control surface tests use from the same event loop."""

    def __init__(self, *, bot_token: str = FAKE_BOT_TOKEN, app_token: str = FAKE_APP_TOKEN,
                 signing_secret: str = FAKE_SIGNING_SECRET, scopes: frozenset[str] = README_SCOPES) -> None:
        self.bot_token = bot_token
        self.scopes = set(scopes)  # the bot token's; a test may grant more (channels:history, ...)
        self.app_token = app_token
        self.signing_secret = signing_secret
        self.calls: list[ApiCall] = []
        self.posted: list[PostedMessage] = []
        self.uploads: list[UploadedFile] = []
        self.updates: list[MessageUpdate] = []
        self.streams: list[Stream] = []
        self.envelopes: list[Envelope] = []
        self.connections = 0  # sockets that got their hello
        self.tickets_issued = 0
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._sockets: list[_Socket] = []
        self._outgoing: deque[Envelope] = deque()
        self._flushing: asyncio.Task[None] | None = None
        self._failures: dict[str, deque[ScriptedFailure]] = {}
        self._slow_answers: dict[str, deque[float]] = {}
        self._refusals: dict[str, str] = {}
        self._clock_offset = 0.0
        self._tickets: set[str] = set()
        self._users: dict[str, JsonDict] = {}
        self._channels: dict[str, JsonDict] = {}
        self._messages: dict[tuple[str, str], JsonDict] = {}
        self._pending_uploads: dict[str, JsonDict] = {}
        self.file_downloads: list[FileDownload] = []  # GETs of shared files' private URLs
        self._shared_files: dict[str, bytes] = {}  # file id -> what its private URL serves
        self._download_failures: deque[int] = deque()
        self._download_redirects: deque[str] = deque()
        self._login_pages = 0  # next GETs of a shared file answered with the sign-in page, whatever the token
        self._chunked_files: set[str] = set()
        self._serial = itertools.count(1)
        self._ts_serial = itertools.count(1)
        self._signal = ChangeSignal()
        self._versions: dict[tuple[str, str], list[str]] = {}
        self.add_user(BOT_USER_ID, BOT_NAME, is_bot=True)

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen on 127.0.0.1: a fresh port the first time, the same port on every later start."""
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_get("/link/", self._handle_socket)
        app.router.add_post("/upload/v1/{file_id}", self._handle_upload)
        app.router.add_get("/files-pri/{owner}/{tail:.*}", self._handle_file)
        runner = await serve(app, self._port, shutdown_timeout=SHUTDOWN_GRACE_S)
        self._port = runner.addresses[0][1]
        self._runner = runner

    async def stop(self) -> None:
        if self._flushing is not None:
            self._flushing.cancel()
            await asyncio.gather(self._flushing, return_exceptions=True)
            self._flushing = None
        for socket in list(self._sockets):
            await socket.ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutting down")
        self._sockets.clear()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def go_away(self) -> None:
        """Slack becomes unreachable: sockets close (1001 going away) and nothing listens.

        Envelopes pushed meanwhile wait, as Slack holds events for an app it cannot reach;
        :meth:`come_back` listens again on the same port.
        """
        await self.stop()

    async def come_back(self) -> None:
        await self.start()

    async def drop_sockets(self) -> None:
        """Cut every socket without a close handshake, as a network failure would; the server stays up."""
        for socket in list(self._sockets):
            transport = socket.request.transport
            if transport is not None:
                transport.abort()
        self._sockets.clear()

    async def request_refresh(self) -> None:
        """Slack's ``disconnect`` message (``refresh_requested``): the client should open a new socket."""
        for socket in list(self._sockets):
            await socket.ws.send_json({"type": "disconnect", "reason": "refresh_requested",
                                       "debug_info": {"host": "fake-slack"}})

    async def __aenter__(self) -> FakeSlack:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def running(self) -> bool:
        return self._runner is not None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def api_url(self) -> str:
        """What to hand AsyncWebClient's ``base_url``."""
        return f"{self.url}/api/"

    @property
    def open_sockets(self) -> int:
        return sum(1 for s in self._sockets if not s.ws.closed)

    # -- scripting -------------------------------------------------------------------------------
    def fail_next(self, method: str, error: str = "ratelimited", *, status: int | None = None,
                  retry_after: int = 1) -> None:
        """Queue one failure for the next call of ``method``; several calls queue several failures.

        ``ratelimited`` answers 429 with ``Retry-After``; a ``status`` of 500 or more answers a gateway's
        HTML page; anything else is Slack's usual HTTP 200 with ``{"ok": false, "error": error}``.
        """
        if status is None:
            status = 429 if error == "ratelimited" else 200
        self._failures.setdefault(method, deque()).append(ScriptedFailure(error, status, retry_after))

    def refuse(self, method: str, error: str = "not_allowed") -> None:
        """Every call of ``method`` answers ``{"ok": false, "error": error}`` until :meth:`accept`.

        For a workspace that will not stream (``refuse("chat.startStream", ...)``): Slack documents no one
        code for it, so pass the one the test means (``not_allowed``, ``team_not_found``,
        ``invalid_stream_arguments`` ...). :meth:`fail_next` failures queued for the method come first.
        """
        self._refusals[method] = error

    def accept(self, method: str) -> None:
        """Undo :meth:`refuse`."""
        self._refusals.pop(method, None)

    def close_stream(self, channel: str, ts: str) -> None:
        """Slack ends a stream on its side (it aged out, or the reader pressed stop): the next append or stop
        of it answers ``message_not_in_streaming_state``; what was streamed stays in the message."""
        stream = self._stream(channel, ts)
        if stream is None:
            raise KeyError(f"no stream at {channel}/{ts}")
        stream.streaming = False
        stream.ended_by = "server"

    def now(self) -> float:
        """The fake's clock: ``time.monotonic()`` plus whatever :meth:`advance_clock` added."""
        return time.monotonic() + self._clock_offset

    def advance_clock(self, seconds: float) -> None:
        """Move the fake's clock on: a stream older than :data:`STREAM_LIFETIME_S` stops taking appends."""
        self._clock_offset += seconds
        self._notify()

    def stream_at(self, channel: str, ts: str) -> Stream | None:
        return self._stream(channel, ts)

    def versions(self, channel: str, ts: str) -> list[str]:
        """Every text the bot's message at ``ts`` showed, oldest first: as posted (or opened by a stream), after
        each append and stop, after each chat.update."""
        return list(self._versions.get((channel, ts), []))

    def seen_in(self, channel: str, thread_ts: str | None = None) -> ChannelView:
        """What a person reading ``channel`` (or only the thread at ``thread_ts``) sees of the bot now.

        ``seen_in(dm, parent).messages == (whole_reply,)`` and ``.streaming == ()`` together say: exactly one
        message holds the whole text and none is left half-streamed.
        """
        mine = sorted(((ts, m) for (c, ts), m in self._messages.items()
                       if c == channel and m.get("user") == BOT_USER_ID
                       and (thread_ts is None or m.get("thread_ts") == thread_ts or ts == thread_ts)),
                      key=lambda item: _ts_key(item[0]))
        streaming = []
        for ts, message in mine:
            stream = self._stream(channel, ts)
            if stream is not None and stream.streaming:
                streaming.append(message.get("text", ""))
        return ChannelView(tuple(m.get("text", "") for _, m in mine), tuple(streaming))

    def answer_slowly(self, method: str, delay_s: float) -> None:
        """The next call of ``method`` is carried out at once (a message is posted) but answered only after
        ``delay_s``, as Slack under load can; a client that hangs up first never hears the answer."""
        self._slow_answers.setdefault(method, deque()).append(delay_s)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = DEFAULT_WAIT_S) -> None:
        """Wait until ``predicate()`` holds; re-checked after every request, ack and connection."""
        await self._signal.wait_until(predicate, timeout)

    async def wait_for_posts(self, n: int, timeout: float = DEFAULT_WAIT_S) -> list[PostedMessage]:
        await self.wait_until(lambda: len(self.posted) >= n, timeout)
        return list(self.posted)

    async def wait_for_ack(self, envelope: Envelope, timeout: float = DEFAULT_WAIT_S) -> None:
        await self.wait_until(lambda: envelope.acked_at is not None, timeout)

    def _notify(self) -> None:
        self._signal.notify()

    # -- the workspace -----------------------------------------------------------------------------
    def add_user(self, user_id: str, name: str, *, real_name: str | None = None, display_name: str | None = None,
                 is_bot: bool = False) -> JsonDict:
        user = {"id": user_id, "team_id": TEAM_ID, "name": name, "real_name": real_name or name.title(),
                "is_bot": is_bot, "deleted": False,
                "profile": {"display_name": display_name if display_name is not None else name,
                            "real_name": real_name or name.title(), "team": TEAM_ID}}
        self._users[user_id] = user
        return user

    def add_channel(self, channel_id: str, name: str, *, is_private: bool = False, is_member: bool = True,
                    is_archived: bool = False) -> JsonDict:
        channel = {"id": channel_id, "name": name, "is_channel": not is_private, "is_group": is_private,
                   "is_im": False, "is_mpim": False, "is_private": is_private, "is_archived": is_archived,
                   "is_member": is_member, "context_team_id": TEAM_ID}
        self._channels[channel_id] = channel
        return channel

    def dm_channel(self, user_id: str) -> str:
        """The bot's DM with a person ("D…"), opened on first use as Slack does."""
        for channel in self._channels.values():
            if channel.get("is_im") and channel.get("user") == user_id:
                return channel["id"]
        channel_id = f"D{user_id.removeprefix('U')}"
        self._channels[channel_id] = {"id": channel_id, "is_im": True, "is_channel": False, "is_group": False,
                                      "is_mpim": False, "is_private": True, "is_archived": False,
                                      "user": user_id, "is_member": True, "context_team_id": TEAM_ID}
        return channel_id

    def next_ts(self) -> str:
        """Slack's message ts: the post's Unix time (history's ``oldest`` filters on it), unique per message."""
        serial = next(self._ts_serial)
        return f"{int(time.time())}.{serial:06d}"

    def message(self, channel: str, ts: str) -> JsonDict | None:
        return self._messages.get((channel, ts))

    # -- payloads --------------------------------------------------------------------------------
    def event_body(self, event: JsonDict) -> JsonDict:
        """An ``event_callback`` body around ``event``, with a fresh ``event_id``."""
        return {
            "token": "legacy-verification-token", "team_id": TEAM_ID, "context_team_id": TEAM_ID,
            "api_app_id": APP_ID, "event": event, "type": "event_callback",
            "event_id": f"Ev{next(self._serial):08X}", "event_time": int(time.time()),
            "authorizations": [{"enterprise_id": None, "team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True,
                                "is_enterprise_install": False}],
            "is_ext_shared_channel": False,
        }

    def _message_event(self, channel: str, user: str, text: str, channel_type: str, *, thread_ts: str | None,
                       kind: str = "message", with_profile: bool = False) -> JsonDict:
        ts = self.next_ts()
        event: JsonDict = {"type": kind, "user": user, "text": text, "ts": ts, "team": TEAM_ID,
                           "channel": channel, "event_ts": ts,
                           "client_msg_id": f"{next(self._serial):08x}-0000-4000-8000-000000000000",
                           "blocks": [{"type": "rich_text", "block_id": "b1", "elements": []}]}
        if kind == "message":
            event["channel_type"] = channel_type
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
            event["parent_user_id"] = user
        if with_profile and user in self._users:
            profile = self._users[user]["profile"]
            event["user_profile"] = {"display_name": profile["display_name"], "real_name": profile["real_name"],
                                     "name": self._users[user]["name"], "team": TEAM_ID}
        self._messages[(channel, ts)] = dict(event)
        return event

    def dm_event(self, user: str, text: str, *, thread_ts: str | None = None,
                 with_profile: bool = False, files: Sequence[JsonDict] = ()) -> JsonDict:
        """A person writes to the bot in their DM (``message.im``); with ``files`` (see :meth:`file_payload`) it
        is a ``file_share``, whose ``text`` may be empty."""
        event = self._message_event(self.dm_channel(user), user, text, "im", thread_ts=thread_ts,
                                    with_profile=with_profile)
        if files:
            event.update(subtype="file_share", files=list(files), upload=False, display_as_bot=False)
            self._messages[(event["channel"], event["ts"])] = dict(event)
        return self.event_body(event)

    def file_payload(self, user: str, name: str, mimetype: str, *, subtype: str | None = None,
                     content: bytes | None = None, size: int | None = None,
                     duration_ms: int | None = None, chunked: bool = False) -> JsonDict:
        """A file as a ``file_share`` event lists it; ``subtype`` "slack_audio" is a clip recorded in Slack.

        With ``content`` the fake serves it: ``url_private`` and ``url_private_download`` are on the fake's own
        address (its ``/files-pri/``), answering the bytes to the bot token and the sign-in page to anything else.
        ``size`` is what Slack states (``len(content)`` unless given); ``duration_ms`` a recorded clip's length;
        ``chunked`` serves it without a Content-Length.
        """
        file_id = f"F{next(self._serial):08X}"
        host = "https://files.slack.com" if content is None else self.url
        stated = size if size is not None else len(content) if content is not None else 48_213
        payload: JsonDict = {
            "id": file_id, "created": int(time.time()), "timestamp": int(time.time()), "name": name, "title": name,
            "mimetype": mimetype, "filetype": name.rpartition(".")[2], "user": user, "user_team": TEAM_ID,
            "size": stated, "mode": "hosted", "is_external": False, "is_public": False,
            "url_private": f"{host}/files-pri/{TEAM_ID}-{file_id}/{name}",
        }
        if content is not None:
            self._shared_files[file_id] = content
            if chunked:
                self._chunked_files.add(file_id)
            payload["url_private_download"] = f"{host}/files-pri/{TEAM_ID}-{file_id}/download/{name}"
        if subtype is not None:
            payload["subtype"] = subtype
        if duration_ms is not None:
            payload["duration_ms"] = duration_ms
        return payload

    def fail_downloads(self, status: int, *, times: int = 1) -> None:
        """The next ``times`` GETs of a shared file answer ``status`` (a gateway's HTML page for 5xx)."""
        self._download_failures.extend([status] * times)

    def redirect_next_download(self, location: str) -> None:
        """The next GET of a shared file answers 302 to ``location``, as Slack's file host may."""
        self._download_redirects.append(location)

    def answer_login_page(self, *, times: int = 1) -> None:
        """The next ``times`` GETs of a shared file answer files.slack.com's sign-in page (HTTP 200), as for a
        token refused there, while the Web API still takes the bot token."""
        self._login_pages += times

    def mention_event(self, channel: str, user: str, text: str, *, thread_ts: str | None = None) -> JsonDict:
        """An ``app_mention``: ``text`` should hold ``<@U0KITHBOT>`` (see :data:`MENTION`)."""
        return self.event_body(self._message_event(channel, user, text, "channel", thread_ts=thread_ts,
                                                   kind="app_mention"))

    def channel_message_event(self, channel: str, user: str, text: str, *, thread_ts: str | None = None) -> JsonDict:
        """A plain channel message (``message.channels``), as a workspace that subscribed to it sends."""
        return self.event_body(self._message_event(channel, user, text, "channel", thread_ts=thread_ts))

    def bot_message_event(self, channel: str, text: str, *, bot_id: str = "B0OTHER", channel_type: str = "channel",
                          own: bool = False) -> JsonDict:
        """A message from a bot; ``own`` makes it this app's bot (what chat.postMessage echoes back)."""
        ts = self.next_ts()
        event: JsonDict = {"type": "message", "text": text, "ts": ts, "channel": channel, "event_ts": ts,
                           "channel_type": channel_type, "team": TEAM_ID}
        if own:
            event.update(user=BOT_USER_ID, bot_id=BOT_ID, app_id=APP_ID,
                         bot_profile={"id": BOT_ID, "app_id": APP_ID, "name": BOT_NAME, "team_id": TEAM_ID})
        else:
            event.update(subtype="bot_message", bot_id=bot_id, username="otherbot")
        self._messages[(channel, ts)] = dict(event)
        return self.event_body(event)

    def edit_event(self, channel: str, ts: str, new_text: str) -> JsonDict:
        """The author edited a message: ``message_changed`` carrying the new and previous versions."""
        previous = self._messages[(channel, ts)]
        edited = {**previous, "text": new_text, "edited": {"user": previous.get("user"), "ts": self.next_ts()}}
        self._messages[(channel, ts)] = edited
        event_ts = self.next_ts()
        return self.event_body({
            "type": "message", "subtype": "message_changed", "hidden": True, "channel": channel,
            "channel_type": previous.get("channel_type", "channel"), "ts": event_ts, "event_ts": event_ts,
            "message": edited, "previous_message": previous,
        })

    def delete_event(self, channel: str, ts: str) -> JsonDict:
        previous = self._messages.pop((channel, ts))
        event_ts = self.next_ts()
        return self.event_body({
            "type": "message", "subtype": "message_deleted", "hidden": True, "channel": channel,
            "channel_type": previous.get("channel_type", "channel"), "ts": event_ts, "deleted_ts": ts,
            "event_ts": event_ts, "previous_message": previous,
        })

    def block_action_payload(self, user: str, message: PostedMessage, *, value: str | None = None,
                             action_id: str | None = None) -> JsonDict:
        """A click on one of the buttons of a message the bot posted (by ``value``, else ``action_id``)."""
        buttons = [e for b in message.blocks if b.get("type") == "actions" for e in b.get("elements", [])]
        button = next(e for e in buttons if (value is not None and e.get("value") == value)
                      or (action_id is not None and e.get("action_id") == action_id))
        channel = self._channels.get(message.channel, {"id": message.channel, "name": "directmessage"})
        action = {"action_id": button["action_id"], "block_id": "actions", "text": button["text"],
                  "value": button.get("value"), "type": "button", "action_ts": f"{time.time():.6f}"}
        return {
            "type": "block_actions",
            "user": {"id": user, "username": self._users.get(user, {}).get("name", user), "team_id": TEAM_ID},
            "api_app_id": APP_ID, "token": "legacy-verification-token",
            "container": {"type": "message", "message_ts": message.ts, "channel_id": message.channel,
                          "is_ephemeral": False},
            "trigger_id": f"{next(self._serial)}.1000.abcdef", "team": {"id": TEAM_ID, "domain": "kith-test"},
            "channel": {"id": message.channel, "name": channel.get("name", "directmessage")},
            "message": {"type": "message", "user": BOT_USER_ID, "ts": message.ts, "text": message.text,
                        "blocks": list(message.blocks)},
            "response_url": f"{self.url}/actions/{next(self._serial)}", "actions": [action],
        }

    @staticmethod
    def url_verification_body(challenge: str) -> JsonDict:
        return {"token": "legacy-verification-token", "challenge": challenge, "type": "url_verification"}

    # -- Socket Mode delivery ------------------------------------------------------------------------
    def push(self, body: JsonDict, *, retry_attempt: int = 0, retry_reason: str = "") -> Envelope:
        """Send an event_callback body (or an interactive payload) down the socket, or hold it until one opens."""
        kind = "events_api" if body.get("type") == "event_callback" else "interactive"
        envelope = Envelope(f"{next(self._serial):08x}-env-{int(time.time())}", kind, body,
                            retry_attempt=retry_attempt, retry_reason=retry_reason)
        self.envelopes.append(envelope)
        self._outgoing.append(envelope)
        self._kick()
        return envelope

    def redeliver(self, envelope: Envelope, *, reason: str = "timeout") -> Envelope:
        """Slack retrying an event: same payload and event_id, a new envelope, ``retry_attempt`` + 1."""
        return self.push(envelope.payload, retry_attempt=envelope.retry_attempt + 1, retry_reason=reason)

    def push_dm(self, user: str, text: str, **kwargs: Any) -> Envelope:
        return self.push(self.dm_event(user, text, **kwargs))

    def push_mention(self, channel: str, user: str, text: str, **kwargs: Any) -> Envelope:
        return self.push(self.mention_event(channel, user, text, **kwargs))

    def acked(self) -> list[Envelope]:
        return [e for e in self.envelopes if e.acked_at is not None]

    def _kick(self) -> None:
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    def _live_socket(self) -> _Socket | None:
        live = [s for s in self._sockets if not s.ws.closed]
        return live[-1] if live else None

    async def _flush(self) -> None:
        while self._outgoing:
            socket = self._live_socket()
            if socket is None:
                return  # held until a socket says hello
            envelope = self._outgoing[0]
            try:
                await socket.ws.send_json(envelope.wire())
            except (ConnectionError, RuntimeError):
                return
            envelope.sent_at = time.monotonic()
            self._outgoing.popleft()

    async def _handle_socket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid ticket")
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        socket = _Socket(ws, request)
        self._sockets.append(socket)
        await ws.send_json({"type": "hello", "num_connections": len(self._sockets),
                            "debug_info": {"host": "fake-slack", "build_number": 1,
                                           "approximate_connection_time": 18060},
                            "connection_info": {"app_id": APP_ID}})
        self.connections += 1
        self._notify()
        self._kick()
        try:
            async for frame in ws:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    answer = json.loads(frame.data)
                except ValueError:
                    continue
                envelope_id = answer.get("envelope_id") if isinstance(answer, dict) else None
                for envelope in self.envelopes:
                    if envelope.envelope_id == envelope_id and envelope.acked_at is None:
                        envelope.acked_at = time.monotonic()
                self._notify()
        finally:
            if socket in self._sockets:
                self._sockets.remove(socket)
            self._notify()
        return ws

    # -- HTTP mode delivery -----------------------------------------------------------------------------
    async def post_event(self, url: str, body: JsonDict, *, secret: str | None = None,
                         timestamp: int | None = None, signature: str | None = None,
                         retry_num: int | None = None) -> tuple[int, str]:
        """POST a payload to the app's Request URL as Slack does; returns (status, response text).

        Event bodies go as JSON, interactive payloads form-encoded as ``payload=<json>``. The request is
        signed with ``secret`` (default: the app's signing secret) at ``timestamp`` (default: now) unless an
        explicit ``signature`` forges it.
        """
        if body.get("type") in ("event_callback", "url_verification"):
            raw = json.dumps(body).encode()
            content_type = "application/json"
        else:
            raw = urllib.parse.urlencode({"payload": json.dumps(body)}).encode()
            content_type = "application/x-www-form-urlencoded"
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        headers = {"Content-Type": content_type, "X-Slack-Request-Timestamp": stamp,
                   "X-Slack-Signature": signature or sign(secret or self.signing_secret, stamp, raw),
                   "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)"}
        if retry_num is not None:
            headers.update({"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"})
        async with aiohttp.ClientSession() as session, session.post(url, data=raw, headers=headers) as response:
            return response.status, await response.text()

    # -- Web API ----------------------------------------------------------------------------------
    async def _read_params(self, request: web.Request) -> JsonDict:
        params: JsonDict = dict(request.query)
        if request.content_type == "application/json":
            body = await request.json() if request.can_read_body else {}
            if isinstance(body, dict):
                params.update(body)
        elif request.can_read_body:
            params.update(dict(await request.post()))
        return params

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._read_params(request)
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else params.pop("token", None)
        try:
            failures = self._failures.get(method)
            if failures:
                failure = failures.popleft()
                self.calls.append(ApiCall(method, params, token, failure.error))
                return self._scripted(failure)
            refusal = self._refusals.get(method)
            if refusal is not None:
                self.calls.append(ApiCall(method, params, token, refusal))
                raise _ApiError(refusal)
            self.calls.append(ApiCall(method, params, token))
            self._check_token(method, token)
            result = await self._dispatch(method, params)
        except _ApiError as error:
            return web.json_response({"ok": False, "error": error.error, **error.extra})
        finally:
            self._notify()
        slow = self._slow_answers.get(method)
        if slow:
            await asyncio.sleep(slow.popleft())
        return web.json_response({"ok": True, **result})

    def _check_token(self, method: str, token: str | None) -> None:
        if not token:
            raise _ApiError("not_authed")
        if method == "apps.connections.open":
            if token == self.bot_token:
                raise _ApiError("not_allowed_token_type")
            if token != self.app_token:
                raise _ApiError("invalid_auth")
            return
        if token == self.app_token:
            raise _ApiError("not_allowed_token_type")
        if token != self.bot_token:
            raise _ApiError("invalid_auth")

    @staticmethod
    def _scripted(failure: ScriptedFailure) -> web.Response:
        if failure.status == 429:
            return web.json_response({"ok": False, "error": failure.error}, status=429,
                                     headers={"Retry-After": str(failure.retry_after)})
        if failure.status >= 500:
            reason = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
                      504: "Gateway Timeout"}.get(failure.status, "Server Error")
            return web.Response(status=failure.status, text=_GATEWAY_PAGE.format(status=failure.status, reason=reason),
                                content_type="text/html")
        return web.json_response({"ok": False, "error": failure.error}, status=failure.status)

    async def _dispatch(self, method: str, params: JsonDict) -> JsonDict:
        if method == "auth.test":
            return {"url": "https://kith-test.slack.com/", "team": TEAM_NAME, "user": BOT_NAME, "team_id": TEAM_ID,
                    "user_id": BOT_USER_ID, "bot_id": BOT_ID, "is_enterprise_install": False}
        if method == "apps.connections.open":
            ticket = f"{next(self._serial):08x}-ticket"
            self._tickets.add(ticket)
            self.tickets_issued += 1
            return {"url": f"ws://127.0.0.1:{self._port}/link/?ticket={ticket}&app_id={APP_ID}"}
        if method == "chat.postMessage":
            return self._post_message(params)
        if method == "chat.update":
            return self._update(params)
        if method == "chat.startStream":
            return self._start_stream(params)
        if method == "chat.appendStream":
            return self._append_stream(params)
        if method == "chat.stopStream":
            return self._stop_stream(params)
        if method == "conversations.info":
            channel = self._channels.get(str(params.get("channel", "")))
            if channel is None:
                raise _ApiError("channel_not_found")
            return {"channel": dict(channel)}
        if method in ("conversations.history", "conversations.replies"):
            return self._history(method, params)
        if method == "users.info":
            user = self._users.get(str(params.get("user", "")))
            if user is None:
                raise _ApiError("user_not_found")
            return {"user": dict(user)}
        if method == "files.getUploadURLExternal":
            return self._upload_url(params)
        if method == "files.completeUploadExternal":
            return self._complete_upload(params)
        raise _ApiError("unknown_method")

    def _resolve_channel(self, channel_id: str) -> JsonDict:
        if channel_id.startswith(("U", "W")) and channel_id in self._users:
            channel_id = self.dm_channel(channel_id)  # a user id posts into the bot's DM with them
        channel = self._channels.get(channel_id)
        if channel is None:
            raise _ApiError("channel_not_found")
        if channel.get("is_archived"):
            raise _ApiError("is_archived")
        if not channel.get("is_member"):
            raise _ApiError("not_in_channel")
        return channel

    def _post_message(self, params: JsonDict) -> JsonDict:
        channel = self._resolve_channel(str(params.get("channel") or ""))
        text = params.get("text")
        blocks = _blocks_param(params, empty_checked=True)
        if not text and not blocks:
            raise _ApiError("no_text")
        text = str(text or "")
        if len(text) > TEXT_MAX_CHARS:
            raise _ApiError("msg_too_long")
        mrkdwn = params.get("mrkdwn", True) not in (False, "false", "0")
        thread_ts = params.get("thread_ts") or None
        metadata = _metadata(params.get("metadata"))
        ts = self.next_ts()
        message = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "app_id": APP_ID, "text": text,
                   "ts": ts, "team": TEAM_ID}
        if thread_ts:
            message["thread_ts"] = str(thread_ts)
        if blocks:
            message["blocks"] = blocks
        if metadata is not None:
            message["metadata"] = metadata
        self._messages[(channel["id"], ts)] = message
        self._versions[(channel["id"], ts)] = [text]
        self.posted.append(PostedMessage(channel["id"], ts, text, mrkdwn, str(thread_ts) if thread_ts else None,
                                         tuple(blocks or ()), metadata))
        # Slack's answer echoes the message without its metadata.
        return {"channel": channel["id"], "ts": ts, "message": {k: v for k, v in message.items() if k != "metadata"}}

    def _update(self, params: JsonDict) -> JsonDict:
        """chat.update: the bot's own message gets a new text (and blocks); Slack answers with the new version.

        A message still being streamed answers ``streaming_state_conflict`` (measured against Slack by others;
        undocumented): it takes appends, not edits, until it is stopped.
        """
        channel = self._resolve_channel(str(params.get("channel") or ""))
        ts = str(params.get("ts") or "")
        message = self._messages.get((channel["id"], ts))
        if message is None:
            raise _ApiError("message_not_found")
        if message.get("user") != BOT_USER_ID:
            raise _ApiError("cant_update_message")
        stream = self._stream(channel["id"], ts)
        if stream is not None and stream.streaming:
            raise _ApiError("streaming_state_conflict")
        blocks = _blocks_param(params)
        text = params.get("text")
        if text is None:
            text = params.get("markdown_text")
        if not text and not blocks:
            raise _ApiError("no_text")
        text = str(text or "")
        if len(text) > TEXT_MAX_CHARS:
            raise _ApiError("msg_too_long")
        edited = {k: v for k, v in message.items() if k != "blocks"}
        edited.update(text=text, edited={"user": BOT_USER_ID, "ts": self.next_ts()})
        if blocks:
            edited["blocks"] = blocks
        self._messages[(channel["id"], ts)] = edited
        self._versions.setdefault((channel["id"], ts), []).append(text)
        self.updates.append(MessageUpdate(channel["id"], ts, text, tuple(blocks or ())))
        shown = {k: v for k, v in edited.items() if k not in ("ts", "metadata")}
        return {"channel": channel["id"], "ts": ts, "text": text, "message": shown}

    def _stream(self, channel: str, ts: str) -> Stream | None:
        stream = next((s for s in reversed(self.streams) if s.channel == channel and s.ts == ts), None)
        if stream is not None and stream.streaming and self.now() - stream.started_at >= STREAM_LIFETIME_S:
            stream.streaming = False
            stream.ended_by = "server"
        return stream

    def _stream_text(self, stream: Stream | None, params: JsonDict) -> str | None:
        """The markdown a stream call carries (``markdown_text``, or the ``markdown_text`` chunks), checked
        against the stream's mode: one opened with text takes only text, one opened with chunks only chunks
        (``streaming_mode_mismatch``, measured against Slack by others; undocumented)."""
        markdown = params.get("markdown_text")
        chunks = params.get("chunks")
        if isinstance(chunks, str):
            try:
                chunks = json.loads(chunks)
            except ValueError:
                raise _ApiError("invalid_chunks") from None
        if chunks is not None and (not isinstance(chunks, list)
                                   or not all(isinstance(c, dict) and c.get("type") for c in chunks)):
            raise _ApiError("invalid_chunks")
        if markdown is not None and chunks:
            raise _ApiError("invalid_arguments")
        mode = "text" if markdown is not None else "chunks" if chunks else None
        if stream is not None and mode is not None:
            if stream.mode is not None and stream.mode != mode:
                raise _ApiError("streaming_mode_mismatch")
        if mode is None:
            return None
        if mode == "text":
            text = str(markdown)
        else:
            text = "".join(str(c.get("text") or "") for c in chunks if c.get("type") == "markdown_text")
        if len(text) > STREAM_TEXT_MAX_CHARS:
            raise _ApiError("msg_too_long")
        if stream is not None:
            stream.mode = mode
            stream.chunks.extend(chunks or [])
        return text

    def _grow(self, stream: Stream, text: str | None) -> None:
        if not text:
            return
        stream.pieces.append(text)
        message = self._messages.get((stream.channel, stream.ts))
        if message is not None:
            message["text"] = stream.text
        self._versions.setdefault((stream.channel, stream.ts), []).append(stream.text)

    def _start_stream(self, params: JsonDict) -> JsonDict:
        """chat.startStream: a reply in ``thread_ts`` that then grows by appends until stopped.

        Outside a DM Slack wants the recipient (``missing_recipient_user_id`` / ``missing_recipient_team_id``);
        the fake requires ``thread_ts`` (``invalid_arguments``) and a parent it knows (``invalid_thread_ts``).
        """
        channel = self._resolve_channel(str(params.get("channel") or ""))
        thread_ts = str(params.get("thread_ts") or "")
        if not thread_ts:
            raise _ApiError("invalid_arguments")
        if (channel["id"], thread_ts) not in self._messages:
            raise _ApiError("invalid_thread_ts")
        user_id, team_id = params.get("recipient_user_id"), params.get("recipient_team_id")
        if not channel.get("is_im"):
            if not user_id:
                raise _ApiError("missing_recipient_user_id")
            if not team_id:
                raise _ApiError("missing_recipient_team_id")
        ts = self.next_ts()
        stream = Stream(channel["id"], ts, thread_ts, user_id and str(user_id), team_id and str(team_id), self.now())
        text = self._stream_text(stream, params)
        self.streams.append(stream)
        self._messages[(channel["id"], ts)] = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID,
                                               "app_id": APP_ID, "text": "", "ts": ts, "team": TEAM_ID,
                                               "thread_ts": thread_ts}
        self._versions[(channel["id"], ts)] = [""]
        self._grow(stream, text)
        return {"channel": channel["id"], "ts": ts}

    def _open_stream(self, params: JsonDict) -> tuple[JsonDict, Stream]:
        channel = self._resolve_channel(str(params.get("channel") or ""))
        ts = str(params.get("ts") or "")
        stream = self._stream(channel["id"], ts)
        if stream is None or not stream.streaming:
            raise _ApiError("message_not_in_streaming_state")
        return channel, stream

    def _append_stream(self, params: JsonDict) -> JsonDict:
        """chat.appendStream: more markdown at the end of a streaming message (``markdown_text`` required)."""
        channel, stream = self._open_stream(params)
        text = self._stream_text(stream, params)
        if text is None:
            raise _ApiError("invalid_arguments")
        self._grow(stream, text)
        return {"channel": channel["id"], "ts": stream.ts}

    def _stop_stream(self, params: JsonDict) -> JsonDict:
        """chat.stopStream: an optional last piece of markdown (and blocks), then the message is final."""
        channel, stream = self._open_stream(params)
        text = self._stream_text(stream, params)
        blocks = _blocks_param(params)
        metadata = _metadata(params.get("metadata"))
        self._grow(stream, text)
        stream.streaming = False
        stream.ended_by = "stop"
        message = self._messages[(channel["id"], stream.ts)]
        if blocks:
            message["blocks"] = blocks
        if metadata is not None:
            message["metadata"] = metadata
        shown = {k: v for k, v in message.items() if k != "metadata"}
        return {"channel": channel["id"], "ts": stream.ts, "message": shown}

    def _history(self, method: str, params: JsonDict) -> JsonDict:
        """conversations.history (the channel's top level, newest first) or .replies (a thread, oldest first)."""
        channel = self._channels.get(str(params.get("channel") or ""))
        if channel is None:
            raise _ApiError("channel_not_found")
        kind = ("im" if channel.get("is_im") else "mpim" if channel.get("is_mpim")
                else "private" if channel.get("is_private") else "public")
        needed = _HISTORY_SCOPES[kind]
        if needed not in self.scopes:
            raise _ApiError("missing_scope", needed=needed, provided=",".join(sorted(self.scopes)))
        if kind != "im" and not channel.get("is_member"):
            raise _ApiError("not_in_channel")
        found = [(ts, m) for (c, ts), m in self._messages.items() if c == channel["id"]]
        if method == "conversations.replies":
            parent = str(params.get("ts") or "")
            if (channel["id"], parent) not in self._messages:
                raise _ApiError("thread_not_found")
            found = sorted(((ts, m) for ts, m in found if ts == parent or m.get("thread_ts") == parent),
                           key=lambda item: _ts_key(item[0]))
        else:
            found = sorted(((ts, m) for ts, m in found if m.get("thread_ts") in (None, ts)),
                           key=lambda item: _ts_key(item[0]), reverse=True)
        inclusive = _truthy(params.get("inclusive"))
        if params.get("oldest"):
            oldest = _ts_key(str(params["oldest"]))
            found = [(ts, m) for ts, m in found if _ts_key(ts) > oldest or (inclusive and _ts_key(ts) == oldest)]
        if params.get("latest"):
            latest = _ts_key(str(params["latest"]))
            found = [(ts, m) for ts, m in found if _ts_key(ts) < latest or (inclusive and _ts_key(ts) == latest)]
        try:
            limit = min(max(int(params.get("limit") or HISTORY_LIMIT_DEFAULT), 1), HISTORY_LIMIT_MAX)
            start = int(str(params.get("cursor") or "0").removeprefix("next_ts:") or 0)
        except ValueError:
            raise _ApiError("invalid_cursor") from None
        page = found[start:start + limit]
        with_metadata = _truthy(params.get("include_all_metadata"))
        messages = [{k: v for k, v in m.items() if with_metadata or k != "metadata"} for _, m in page]
        more = start + limit < len(found)
        return {"messages": messages, "has_more": more,
                "response_metadata": {"next_cursor": f"next_ts:{start + limit}" if more else ""}}

    def _upload_url(self, params: JsonDict) -> JsonDict:
        filename = str(params.get("filename") or "")
        try:
            length = int(params.get("length") or 0)
        except ValueError:
            raise _ApiError("invalid_arguments") from None
        if not filename or length <= 0:
            raise _ApiError("invalid_arguments")
        file_id = f"F{next(self._serial):08X}"
        self._pending_uploads[file_id] = {"filename": filename, "length": length, "content": None}
        return {"upload_url": f"{self.url}/upload/v1/{file_id}", "file_id": file_id}

    async def _handle_file(self, request: web.Request) -> web.StreamResponse:
        """A shared file's private URL: the bytes for the bot token; files.slack.com's sign-in page (HTTP 200)
        for a missing or wrong one."""
        file_id = request.match_info["owner"].rpartition("-")[2]
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else None
        content = self._shared_files.get(file_id)
        served = False
        if self._download_failures:
            status = self._download_failures.popleft()
            response = web.Response(status=status, text=_GATEWAY_PAGE.format(status=status, reason="Error"),
                                    content_type="text/html")
        elif self._download_redirects:
            response = web.Response(status=302, headers={"Location": self._download_redirects.popleft()})
        elif token != self.bot_token or self._login_pages:
            self._login_pages = max(0, self._login_pages - 1)
            response = web.Response(text=_LOGIN_PAGE, content_type="text/html")
        elif content is None:
            response = web.Response(status=404, text="Not found", content_type="text/plain")
        elif file_id in self._chunked_files:
            self.file_downloads.append(FileDownload(file_id, request.path, token, 200, True))
            self._notify()
            return await _chunked(request, content)
        else:
            response = web.Response(body=content, content_type="application/octet-stream")
            served = True
        self.file_downloads.append(FileDownload(file_id, request.path, token, response.status, served))
        self._notify()
        return response

    async def _handle_upload(self, request: web.Request) -> web.Response:
        pending = self._pending_uploads.get(request.match_info["file_id"])
        if pending is None:
            return web.Response(status=404, text="not found")
        content = await request.read()
        if len(content) != pending["length"]:
            return web.Response(status=400, text="length mismatch")
        pending["content"] = content
        return web.Response(text=f"OK - {len(content)}", content_type="text/plain")

    def _complete_upload(self, params: JsonDict) -> JsonDict:
        try:
            files = json.loads(str(params.get("files") or "[]"))
        except ValueError:
            raise _ApiError("invalid_arguments") from None
        channel_id = params.get("channel_id")
        channel = self._resolve_channel(str(channel_id)) if channel_id else None
        thread_ts = params.get("thread_ts") or None
        done = []
        for item in files:
            pending = self._pending_uploads.pop(str(item.get("id")), None)
            if pending is None or pending["content"] is None:
                raise _ApiError("file_not_found")
            self.uploads.append(UploadedFile(item["id"], pending["filename"], item.get("title"), pending["content"],
                                             channel["id"] if channel else None, thread_ts))
            done.append({"id": item["id"], "name": pending["filename"], "title": item.get("title"),
                         "size": len(pending["content"])})
        return {"files": done}


async def _chunked(request: web.Request, data: bytes, piece: int = 4096) -> web.StreamResponse:
    """``data`` in chunked transfer encoding, piece by piece; a client that stops reading ends it early."""
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    with contextlib.suppress(ConnectionError):
        for start in range(0, len(data), piece):
            await response.write(data[start:start + piece])
        await response.write_eof()
    return response


def _metadata(raw: Any) -> JsonDict | None:
    """chat.postMessage's ``metadata``: an object (or its JSON) with an ``event_type`` and an ``event_payload``."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise _ApiError("invalid_metadata_format") from None
    if not isinstance(raw, dict):
        raise _ApiError("invalid_metadata_format")
    event_type, payload = raw.get("event_type"), raw.get("event_payload")
    if (not isinstance(event_type, str) or not event_type or len(event_type) > METADATA_EVENT_TYPE_MAX_CHARS
            or not isinstance(payload, dict)):
        raise _ApiError("invalid_metadata_schema")
    return {"event_type": event_type, "event_payload": payload}


def _ts_key(ts: str) -> tuple[int, int]:
    seconds, _, fraction = ts.partition(".")
    return int(seconds or 0), int((fraction or "0").ljust(6, "0")[:6])


def _truthy(value: Any) -> bool:
    return value in (True, 1, "1", "true", "True")


def _blocks_param(params: JsonDict, *, empty_checked: bool = False) -> Any:
    """A call's ``blocks`` (a JSON string in a form post), checked by :func:`_check_blocks` when given: an empty
    list too where ``empty_checked`` (chat.postMessage refuses it; an update or a stream's stop leaves blocks
    alone)."""
    blocks = params.get("blocks")
    if isinstance(blocks, str):
        try:
            blocks = json.loads(blocks)
        except ValueError:
            raise _ApiError("invalid_blocks_format") from None
    if blocks or (empty_checked and blocks is not None):
        _check_blocks(blocks)
    return blocks


def _check_blocks(blocks: Any) -> None:
    """Block Kit rules chat.postMessage enforces on the blocks kith sends (sections and button actions)."""
    if not isinstance(blocks, list) or not blocks or len(blocks) > BLOCKS_MAX:
        raise _ApiError("invalid_blocks", errors=["must provide 1-50 blocks"])
    action_ids: set[str] = set()
    for index, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "section":
            text = block.get("text") or {}
            if text.get("type") not in ("mrkdwn", "plain_text") or not text.get("text"):
                raise _ApiError("invalid_blocks", errors=[f"invalid section text [json-pointer:/blocks/{index}]"])
            if len(text["text"]) > SECTION_TEXT_MAX_CHARS:
                raise _ApiError("invalid_blocks", errors=[f"must be less than {SECTION_TEXT_MAX_CHARS + 1} "
                                                          f"characters [json-pointer:/blocks/{index}/text/text]"])
        elif kind == "actions":
            elements = block.get("elements") or []
            if not elements or len(elements) > ACTIONS_MAX_ELEMENTS:
                raise _ApiError("invalid_blocks", errors=[f"1-25 elements [json-pointer:/blocks/{index}]"])
            for element in elements:
                label = (element.get("text") or {}).get("text") or ""
                action_id = element.get("action_id") or ""
                value = element.get("value") or ""
                if element.get("type") != "button" or not label or len(label) > BUTTON_TEXT_MAX_CHARS:
                    raise _ApiError("invalid_blocks", errors=[f"invalid button [json-pointer:/blocks/{index}]"])
                if len(action_id) > ACTION_ID_MAX_CHARS or action_id in action_ids:
                    raise _ApiError("invalid_blocks", errors=[f"duplicate or long action_id [json-pointer:/blocks/"
                                                              f"{index}]"])
                if len(value) > BUTTON_VALUE_MAX_CHARS:
                    raise _ApiError("invalid_blocks", errors=[f"value too long [json-pointer:/blocks/{index}]"])
                action_ids.add(action_id)
        elif kind not in _OTHER_BLOCK_TYPES:
            raise _ApiError("invalid_blocks", errors=[f"unsupported block type [json-pointer:/blocks/{index}]"])


MENTION = f"<@{BOT_USER_ID}>"


@pytest_asyncio.fixture
async def slack_api() -> AsyncIterator[FakeSlack]:
    """A started :class:`FakeSlack` on a fresh loopback port, stopped after the test."""
    api = FakeSlack()
    await api.start()
    try:
        yield api
    finally:
        await api.stop()
