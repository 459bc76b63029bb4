"""The Slack channel: slack-bolt's ``AsyncApp`` over Socket Mode (the default) or HTTP Events.

Socket Mode needs no public URL: ``apps.connections.open`` (with the app-level ``xapp-`` token) hands out a
WebSocket URL, and slack_sdk's aiohttp ``SocketModeClient`` (behind bolt's ``AsyncSocketModeHandler``)
keeps that socket alive: it pings, and on a close, a refresh request or a stale ping it asks for a new URL
and reconnects by itself. HTTP mode runs an aiohttp server on ``http_host:http_port`` that Slack POSTs to;
bolt verifies every request's ``X-Slack-Signature`` against the signing secret and refuses (401) a forged
or stale (over five minutes) one before anything else reads it, and answers ``url_verification``.

The order every event goes through, and why:

1. bolt's own middleware: signature check (HTTP), authorization (from our auth.test at start, no network
   call per event), the bot's own messages acknowledged and dropped.
2. ``journal.record("slack", event_id)`` in our global middleware. Slack retries an event it did not see
   acknowledged within 3 s (``X-Slack-Retry-Num`` over HTTP, ``retry_attempt`` in a socket envelope) with
   the same ``event_id``: the second record is False and the retry is acknowledged and dropped. A journal
   failure acknowledges nothing (500 / no socket ack), so Slack delivers the event again later. The same
   transaction keeps the message the event carries in the inbox (``delivery.inbox``) until the core has
   answered it.
3. The listener is acknowledged at once (bolt's auto-ack for events), translates the event and queues it in
   its chat's lane; the core runs in that task, never inside the 3 s acknowledgement budget.

A crash after 2 loses no message: the next start takes up what the inbox kept. Button presses are not
kept (a press lost that way is pressed again); ``stop()`` lets queued handlers finish (``stop_grace_s``).

Sending: ``chat.postMessage`` with mrkdwn from :mod:`channels.slack.formatting`. Buttons ride on the last chunk
as Block Kit (a section repeating the text, then ``actions``); such messages are chunked to the section's
3,000 characters. A plain resend (after ``invalid_blocks``) drops the blocks, so the words arrive without
the buttons. An attachment is one more chunk, the last, uploaded with ``files_upload_v2``; a file share
carries no Block Kit, so a message with text and a file keeps its buttons on its last text chunk (only a file
sent alone drops them, logged). slack_sdk's own retry
handlers are switched off: the delivery outbox retries, honouring ``Retry-After``, so a rate-limited send
is never retried in two places at once. Slack has no typing indicator for bots (outside assistant
threads): ``typing`` does nothing.

A reply's preview (:mod:`conversation.reply_preview`) is one message that the final send edits into the whole
reply. In a thread (a DM's thread reply) it is Slack's native stream (:mod:`channels.slack.stream`): chat.startStream
with the reply so far, chat.appendStream with what each update adds, and the final send stops the stream before
chat.update writes the formatted first chunk over it. A workspace that refuses chat.startStream (while it takes
chat.postMessage) gets the posted-and-edited preview for the rest of the process; a stream Slack ended, or one whose
reply no longer begins with what was streamed, is edited with chat.update from then on. Top-level replies, and all
of them with ``native_stream = false``, are posted and edited.

A send waits ``SLACK_SEND_TIMEOUT_S`` (30 s) for its answer. One that went out and heard nothing back (a
timeout, a dropped connection) may have been posted: chat.postMessage has no idempotency key, so every chunk
of an outbox entry carries message metadata with a marker of its own (a hash of the entry and the chunk), and
before such a chunk is sent again, the conversation (conversations.history, or .replies in a thread, with
``include_all_metadata``) is searched for our message with that marker; found, it counts as sent. That look
needs the conversation's history scope (``im:history`` for DMs, ``channels:history`` and the like elsewhere)
and knows of a lost send from this process or, through the delivery worker (``may_have_posted``), from an
earlier one: the doubt it noted, or, after it died mid-send (noting nothing), the first undelivered entry it left
in each conversation. Without the scope, and for file uploads (which carry no metadata), the chunk is sent
again, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from channels.http import answer_lost, serve_posts
from channels.lanes import HandlerLanes
from channels.markdown import render_chunks, with_attachment
from channels.markdown.partial import settled
from channels.slack.files import download, file_id, files_origin, refuse_oversized
from channels.slack.formatting import MESSAGE_FORMAT, MESSAGE_MAX_CHARS, text_chunks
from channels.slack.settings import SlackSettings
from channels.slack.stream import NOT_STREAMING, MessageRef, next_piece, parse_message_id, stream_markdown
from channels.slack.translate import (
    PLATFORM,
    Skipped,
    SlackIdentity,
    button_blocks,
    delivery_marker,
    delivery_metadata,
    escape_text,
    identity_from_auth_test,
    posted_with_marker,
    profile_name,
    target_channel,
    thread_ts_for,
    translate_block_action,
    translate_event,
    user_display_name,
)
from ground.tunables import (
    SLACK_CONNECT_WAIT_S,
    SLACK_DEFAULT_RETRY_AFTER_S,
    SLACK_HTTP_TIMEOUT_S,
    SLACK_LOOKUP_PAGE_SIZE,
    SLACK_LOOKUP_PAGES,
    SLACK_LOOKUP_SKEW_S,
    SLACK_LOST_SENDS_KEPT,
    SLACK_NAME_CACHE_SIZE,
    SLACK_NAME_CACHE_TTL_S,
    SLACK_NAME_LOOKUP_TIMEOUT_S,
    SLACK_SEND_TIMEOUT_S,
    SLACK_SOCKET_PING_INTERVAL_S,
    SLACK_STOP_GRACE_S,
)
from ground.types import (
    Attachment,
    AttachmentError,
    ButtonHandler,
    ButtonPress,
    ChannelStartError,
    ChatKind,
    EventJournal,
    InboundHandler,
    InboundMessage,
    OutboundMessage,
    RenderedChunk,
    SendError,
    SentMessage,
    utcnow,
)

log = logging.getLogger("kith.slack")
_TRANSLATED = "kith_translated"  # request.context key: the intake's translation of the event

# --- Protocol facts ------------------------------------------------------------------------------
DEFAULT_API_URL = "https://slack.com/api/"
_RATE_LIMIT_ERRORS = frozenset({"ratelimited", "rate_limited"})
_AUTH_ERRORS = frozenset({"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
                          "not_allowed_token_type", "no_permission", "org_login_required", "ekm_access_denied"})
# A resend would be refused the same way: the chat is gone or closed to us, or the token is.
_PERMANENT_ERRORS = _AUTH_ERRORS | frozenset({
    "channel_not_found", "not_in_channel", "is_archived", "missing_scope", "restricted_action",
    "restricted_action_read_only_channel", "restricted_action_thread_only_channel",
    "restricted_action_non_threadable_channel", "cannot_reply_to_message", "team_access_not_granted",
    "msg_too_long", "no_text", "too_many_attachments", "user_not_found", "user_not_in_channel",
})
# Slack refused the markup (or our delivery marker), not the message: the plain text, unmarked, goes through.
_FORMATTING_ERRORS = frozenset({"invalid_blocks", "invalid_blocks_format", "msg_blocks_too_long",
                                "invalid_attachments", "markdown_text_conflict", "invalid_metadata_format",
                                "invalid_metadata_schema", "metadata_too_large", "metadata_must_be_sent_from_app"})
_TRANSIENT_ERRORS = frozenset({"internal_error", "fatal_error", "service_unavailable", "request_timeout"})
_NETWORK_ERRORS = (aiohttp.ClientError, TimeoutError, SlackClientError)
_ANY_ID = re.compile(r".*")
# Streams whose state this process keeps (what was streamed); one forgotten is stopped and edited whole, which is safe.
_STREAMS_KEPT = 256


# --- Pure decisions --------------------------------------------------------------------------------
def api_url_of(settings: SlackSettings) -> str:
    return settings.api_url or DEFAULT_API_URL


def slack_error_code(exc: SlackApiError) -> str:
    """Slack's ``error`` field (``"channel_not_found"``), or ``""`` when the answer was not Slack's JSON."""
    data = getattr(exc.response, "data", None)
    if isinstance(data, Mapping):
        error = data.get("error")
        if isinstance(error, str):
            return error
    return ""


def retry_after_seconds(headers: Mapping[str, str] | None) -> float:
    raw = (headers or {}).get("Retry-After") or (headers or {}).get("retry-after")
    try:
        return max(float(raw), 0.0) if raw is not None else SLACK_DEFAULT_RETRY_AFTER_S
    except ValueError:
        return SLACK_DEFAULT_RETRY_AFTER_S


def send_error_for(exc: BaseException) -> SendError:
    """The core's SendError for a failed send: retry later, never retry, or resend without markup."""
    if isinstance(exc, SlackApiError):
        # Slack's JSON answers carry status_code; a body that was not JSON leaves aiohttp's response here.
        status = int(getattr(exc.response, "status_code", None) or getattr(exc.response, "status", 0) or 0)
        error = slack_error_code(exc)
        if status == 429 or error in _RATE_LIMIT_ERRORS:
            return SendError("slack: rate limited", retry_after=retry_after_seconds(exc.response.headers))
        if error in _FORMATTING_ERRORS:
            return SendError(f"slack: {error}", bad_formatting=True)
        if error in _PERMANENT_ERRORS:
            return SendError(f"slack: {error}", permanent=True)
        if status >= 500 or error in _TRANSIENT_ERRORS or (not error and status < 400):
            # A gateway's error page, or an answer garbled on the way: Slack itself may well accept a resend.
            return SendError(f"slack: {error or f'HTTP {status}'}")
        # Any other refusal names something wrong with the request itself: it would be refused again.
        return SendError(f"slack: {error or f'HTTP {status}'}", permanent=True)
    # Network failures, timeouts, a failed file upload: worth another try. One that went out may have been
    # posted: Slack has no idempotency key, so send_chunk looks for it before sending it again.
    return SendError(f"slack: {type(exc).__name__}", maybe_delivered=answer_lost(exc))


def web_timeout(send_timeout_s: float) -> aiohttp.ClientTimeout:
    """The Web API session's budgets: short to connect, long to answer once the request went out.

    A send that hears nothing back counts as maybe delivered, so the answer gets ``send_timeout_s`` rather
    than the connect budget; the total caps a request whose body stalls on the way out as well.
    """
    return aiohttp.ClientTimeout(total=2 * SLACK_HTTP_TIMEOUT_S + send_timeout_s, connect=SLACK_HTTP_TIMEOUT_S,
                                 sock_read=send_timeout_s)


# --- The channel ---------------------------------------------------------------------------------
class SlackChannel:
    name = PLATFORM

    def __init__(
        self,
        settings: SlackSettings,
        bot_token: str,
        *,
        journal: EventJournal,
        app_token: str | None = None,
        signing_secret: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        ping_interval_s: float = SLACK_SOCKET_PING_INTERVAL_S,
        connect_wait_s: float = SLACK_CONNECT_WAIT_S,
        stop_grace_s: float = SLACK_STOP_GRACE_S,
        name_cache_ttl_s: float = SLACK_NAME_CACHE_TTL_S,
        send_timeout_s: float = SLACK_SEND_TIMEOUT_S,
    ) -> None:
        self.settings = settings
        self._bot_token = bot_token
        # Read from the settings' environment variables at start unless given; never logged.
        self._app_token = app_token
        self._signing_secret = signing_secret
        self._journal = journal
        self._clock = clock
        self._ping_interval_s = ping_interval_s
        self._connect_wait_s = connect_wait_s
        self._stop_grace_s = stop_grace_s
        self._send_timeout_s = send_timeout_s
        self._names = _NameCache(SLACK_NAME_CACHE_SIZE, name_cache_ttl_s)
        self._session: aiohttp.ClientSession | None = None
        self._web: AsyncWebClient | None = None
        self._app: AsyncApp | None = None
        self._me: SlackIdentity | None = None
        self._handler: AsyncSocketModeHandler | None = None
        self._connect_task: asyncio.Task[None] | None = None
        self._http_runner: web.AppRunner | None = None
        self._http_port: int | None = None
        self._on_message: InboundHandler | None = None
        self._on_button: ButtonHandler | None = None
        self._lanes = HandlerLanes("slack", log)
        # Chunks whose chat.postMessage went out unanswered, by marker: when that attempt began (Unix time).
        self._lost: dict[str, float] = {}
        # Preview streams by message id: what each has streamed, and whether it still takes appends.
        self._streams: dict[str, _Streamed] = {}
        self._native_stream = settings.native_stream  # off for the process once the workspace refuses streams
        self._stopping = False
        self._intake_lock = asyncio.Lock()
        self.ready = asyncio.Event()  # set once Slack can reach us: the socket's hello, or the HTTP server up

    # -- what others may read --------------------------------------------------------------------
    @property
    def identity(self) -> SlackIdentity | None:
        """The bot's team, user id and name, once auth.test answered."""
        return self._me

    @property
    def http_port(self) -> int | None:
        """The port the HTTP Events server listens on (useful with http_port = 0)."""
        return self._http_port

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self, on_message: InboundHandler, on_button: ButtonHandler | None = None) -> None:
        """auth.test, then Socket Mode or the HTTP server. Raises ChannelStartError with a one-line reason."""
        self._on_message = on_message
        self._on_button = on_button
        self._stopping = False
        self._check_settings()
        self._session = aiohttp.ClientSession(timeout=web_timeout(self._send_timeout_s))
        api_url = api_url_of(self.settings)
        self._web = AsyncWebClient(token=self._bot_token, base_url=api_url, session=self._session,
                                   retry_handlers=[])
        try:
            self._me = await self._auth_test(self._web)
            self._app = self._build_app(api_url)
            if self.settings.mode == "socket":
                await self._start_socket()
            else:
                await self._start_http()
        except BaseException:
            await self._close()
            raise

    async def stop(self) -> None:
        """Stop intake, let handed-off events finish (up to stop_grace_s), then close every connection."""
        self._stopping = True
        await self._close_intake()
        await self._lanes.stop(self._stop_grace_s)
        await self._close()

    def _check_settings(self) -> None:
        mode = self.settings.mode
        if mode not in ("socket", "http"):
            raise ChannelStartError(f"slack: slack.mode must be 'socket' or 'http', not {mode!r}")
        if not self._bot_token:
            raise ChannelStartError(f"slack: environment variable {self.settings.bot_token_env} is not set")
        if mode == "socket":
            self._app_token = self._app_token or self.settings.app_token()
            if not self._app_token:
                raise ChannelStartError(
                    f"slack: Socket Mode needs an app-level token (xapp-…) in {self.settings.app_token_env}")
        else:
            self._signing_secret = self._signing_secret or self.settings.signing_secret()
            if not self._signing_secret or not self._signing_secret.strip():
                raise ChannelStartError(
                    f"slack: HTTP mode needs the app's signing secret in {self.settings.signing_secret_env}")

    async def _auth_test(self, web_client: AsyncWebClient) -> SlackIdentity:
        try:
            response = await web_client.auth_test()
        except SlackApiError as exc:
            error = slack_error_code(exc)
            if error in _AUTH_ERRORS:
                log.error("slack token rejected by auth.test error=%s (token_env=%s)", error,
                          self.settings.bot_token_env)
                raise ChannelStartError(
                    f"slack: the token in {self.settings.bot_token_env} was rejected ({error})") from None
            raise ChannelStartError(f"slack: auth.test failed ({error or 'HTTP error'})") from None
        except _NETWORK_ERRORS as exc:
            raise ChannelStartError(
                f"slack: cannot reach the Web API at {api_url_of(self.settings)} ({type(exc).__name__})") from None
        try:
            identity = identity_from_auth_test(_data(response))
        except ValueError:
            raise ChannelStartError("slack: auth.test named no bot user; is the token a bot token (xoxb-)?") from None
        log.info("slack connected team=%s bot_user=%s", identity.team_id, identity.user_id)
        return identity

    def _build_app(self, api_url: str) -> AsyncApp:
        assert self._me is not None
        http = self.settings.mode == "http"
        # bolt's own client carries no token: authorize() below hands every request ours, without the extra
        # auth.test per first event that token= would cost (and whose failure bolt answers with a 200).
        app = AsyncApp(
            name="kith",
            # The "slack_bolt" logger as base: bolt then logs at its level (bot.py pins it to WARNING), as
            # bolt's INFO lines can carry a request's body.
            logger=logging.getLogger("slack_bolt"),
            client=AsyncWebClient(base_url=api_url, session=self._session, retry_handlers=[]),
            authorize=_authorizer(self._me, self._bot_token),
            signing_secret=self._signing_secret or "",
            request_verification_enabled=http,
            ssl_check_enabled=http,
            url_verification_enabled=http,
        )
        app.use(self._intake_middleware)
        app.event("message")(self._on_event)
        app.event("app_mention")(self._on_event)
        app.event(_ANY_ID)(self._on_other_event)
        app.block_action(_ANY_ID)(self._on_block_action)
        return app

    async def _close_intake(self) -> None:
        if self._connect_task is not None:
            self._connect_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connect_task
            self._connect_task = None
        if self._handler is not None:
            handler, self._handler = self._handler, None
            try:
                await handler.close_async()
            except Exception as exc:
                log.warning("slack socket close failed error=%s", type(exc).__name__)
        if self._http_runner is not None:
            runner, self._http_runner = self._http_runner, None
            await runner.cleanup()
        self.ready.clear()

    async def _close(self) -> None:
        await self._close_intake()
        self._app = None
        self._web = None
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    # -- Socket Mode ------------------------------------------------------------------------------
    async def _start_socket(self) -> None:
        assert self._app is not None and self._web is not None and self._app_token
        handler = AsyncSocketModeHandler(self._app, self._app_token, web_client=self._web,
                                         ping_interval=self._ping_interval_s)
        self._handler = handler
        handler.client.message_listeners.append(self._on_socket_message)
        # The first URL is asked for here, not inside slack_sdk's connect loop: a rejected app token is a
        # start error with a reason, where the loop would retry it forever.
        try:
            opened = await self._web.apps_connections_open(app_token=self._app_token)
        except SlackApiError as exc:
            error = slack_error_code(exc)
            if error in _AUTH_ERRORS:
                log.error("slack app token rejected by apps.connections.open error=%s (token_env=%s)", error,
                          self.settings.app_token_env)
                raise ChannelStartError(
                    f"slack: the app-level token in {self.settings.app_token_env} was rejected ({error})") from None
            raise ChannelStartError(f"slack: apps.connections.open failed ({error or 'HTTP error'})") from None
        except _NETWORK_ERRORS as exc:
            raise ChannelStartError(
                f"slack: cannot reach the Web API at {api_url_of(self.settings)} ({type(exc).__name__})") from None
        handler.client.wss_uri = str(_data(opened).get("url") or "") or None
        self._connect_task = asyncio.create_task(handler.connect_async(), name="slack-socket-connect")
        try:
            await asyncio.wait_for(self.ready.wait(), self._connect_wait_s)
        except TimeoutError:
            log.warning("slack socket not connected within %.0f s; retrying in the background", self._connect_wait_s)

    async def _on_socket_message(self, client: AsyncBaseSocketModeClient, message: dict[str, Any],
                                 raw_message: str | None) -> None:
        kind = message.get("type")
        if kind == "hello":
            log.info("slack socket connected connections=%s", message.get("num_connections"))
            self.ready.set()
        elif kind == "disconnect":
            # slack_sdk opens a fresh connection on its own; this only leaves a trace in the log.
            log.info("slack socket refresh reason=%s", message.get("reason"))

    # -- HTTP Events ------------------------------------------------------------------------------
    async def _start_http(self) -> None:
        runner = await serve_posts(self._on_http_request, self.settings.http_host, self.settings.http_port, "slack")
        self._http_runner = runner
        self._http_port = runner.addresses[0][1]
        self.ready.set()
        log.info("slack events server listening host=%s port=%d", self.settings.http_host, self._http_port)

    async def _on_http_request(self, request: web.Request) -> web.Response:
        app = self._app
        if app is None:
            return web.Response(status=503)
        stamp = request.headers.get("X-Slack-Request-Timestamp", "")
        if not stamp.isdigit():
            # bolt would fail on int() and answer 500; a request without a usable stamp is simply not Slack's.
            log.warning("slack request refused reason=bad_timestamp remote=%s", request.remote)
            return web.Response(status=401)
        response = await app.async_dispatch(await to_bolt_request(request))
        if response.status == 401:
            log.warning("slack request refused reason=bad_signature_or_stale remote=%s", request.remote)
        return await to_aiohttp_response(response)

    # -- intake -----------------------------------------------------------------------------------
    async def _intake_middleware(self, request: AsyncBoltRequest, body: dict[str, Any],
                                 next: Callable[[], Awaitable[None]]) -> BoltResponse | None:
        """Journal every event before it is acknowledged; acknowledge and drop a redelivery."""
        kind = body.get("type")
        if kind == "block_actions":
            return await next()
        if kind != "event_callback":
            log.info("slack request ignored kind=%s", kind)
            return BoltResponse(status=200, body="")
        event_id = body.get("event_id")
        if not isinstance(event_id, str) or not event_id:
            log.warning("slack event without event_id; taken in without dedupe")
            return await next()
        retry = _header(request, "x-slack-retry-num")
        try:
            # One record at a time, first come first served: events reach their chat's lane in the order
            # they arrived, not in the order their database writes happened to finish.
            translated = request.context[_TRANSLATED] = self._translate(body)  # the listener reuses it
            async with self._intake_lock:
                fresh = await self._journal.record(
                    PLATFORM, event_id, message=translated if isinstance(translated, InboundMessage) else None)
        except Exception as exc:
            log.error("slack intake failed event_id=%s error=%s", event_id, type(exc).__name__)
            return BoltResponse(status=500, body="")  # unacknowledged: Slack delivers it again
        if not fresh:
            log.info("slack redelivery dropped event_id=%s retry=%s", event_id, retry or "0")
            return BoltResponse(status=200, body="")
        return await next()

    def _translate(self, body: dict[str, Any]) -> InboundMessage | Skipped | Exception | None:
        """The event in the core's terms, or what stopped its translation; None before the bot knows itself."""
        me = self._me
        if me is None:
            return None
        try:
            return translate_event(body, me, received_at=self._clock())
        except Exception as exc:  # logged by _on_event, once
            return exc

    async def _on_event(self, body: dict[str, Any], context: dict[str, Any]) -> None:
        # Translated once, by the intake middleware, unless the event skipped it (no event_id).
        translated = context[_TRANSLATED] if _TRANSLATED in context else self._translate(body)
        if translated is None:
            return
        event_id = str(body.get("event_id") or "")
        if isinstance(translated, Exception):
            log.warning("slack event ignored event_id=%s reason=untranslatable error=%s", event_id,
                        type(translated).__name__)
            return
        if isinstance(translated, Skipped):
            log.info("slack event ignored event_id=%s reason=%s chat=%s", event_id, translated.reason,
                     translated.chat_id)
            return
        event = body.get("event") or {}
        needs_name = profile_name(event) is None
        self._enqueue(translated.chat_id, partial(self._deliver_inbound, translated, needs_name), event_id)

    async def _on_other_event(self, body: dict[str, Any]) -> None:
        event = body.get("event") or {}
        log.info("slack event ignored event_id=%s reason=unsupported_event type=%s", body.get("event_id"),
                 event.get("type"))

    async def _on_block_action(self, ack: Callable[[], Awaitable[Any]], body: dict[str, Any]) -> None:
        # Acknowledged before anything else, so the person's button stops spinning.
        await ack()
        translated = translate_block_action(body)
        if isinstance(translated, Skipped):
            log.info("slack button ignored reason=%s chat=%s", translated.reason, translated.chat_id)
            return
        if self._on_button is None:
            log.info("slack button ignored reason=no_button_handler chat=%s", translated.chat_id)
            return
        self._enqueue(translated.chat_id, partial(self._deliver_press, translated), translated.event_id)

    async def _deliver_inbound(self, message: InboundMessage, needs_name: bool) -> None:
        assert self._on_message is not None
        if needs_name:
            user = message.sender_id.rpartition(":")[2]
            name = await self._display_name(user)
            if name:
                message = replace(message, sender_name=name)
        await self._on_message(message)

    async def _deliver_press(self, press: ButtonPress) -> None:
        assert self._on_button is not None
        await self._on_button(press)

    async def _display_name(self, user: str) -> str | None:
        found, name = self._names.get(user)
        if found:
            return name
        web_client = self._web
        if web_client is None:
            return None
        name = None
        try:
            response = await asyncio.wait_for(web_client.users_info(user=user), SLACK_NAME_LOOKUP_TIMEOUT_S)
            user_obj = _data(response).get("user")
            name = user_display_name(user_obj) if isinstance(user_obj, Mapping) else None
        except (SlackApiError, *_NETWORK_ERRORS) as exc:
            # Without users:read, or with Slack slow, the user id stands in; remembered, so not asked each time.
            log.info("slack users.info failed user=%s error=%s", user, _error_label(exc))
        self._names.put(user, name)
        return name

    # -- sending ---------------------------------------------------------------------------------
    def _enqueue(self, lane: str, work: Callable[[], Awaitable[None]], event_id: str) -> None:
        if self._stopping:
            log.warning("slack event dropped at stop event_id=%s", event_id)
            return
        self._lanes.enqueue(lane, work, event_id)

    def render(self, message: OutboundMessage) -> list[RenderedChunk]:
        """mrkdwn chunks of the text; an attachment is one more chunk (its text is the file name)."""
        # A file share carries no Block Kit: the buttons stay on the last text chunk.
        return with_attachment(text_chunks(message), message, file_takes_buttons=False)

    async def send_chunk(self, message: OutboundMessage, chunk: RenderedChunk, index: int, *,
                         plain: bool = False) -> SentMessage:
        web_client = self._web
        if web_client is None:
            raise SendError("slack: channel not started")
        channel = target_channel(message)
        thread_ts = thread_ts_for(message)
        # A file, when there is one, is the last chunk (after the text).
        upload = message.attachment_bytes is not None and chunk.last
        # Uploads carry no metadata: a lost one is sent again unlooked-for.
        marker = None if upload else delivery_marker(message.delivery_key, index)
        if marker is not None and marker in self._lost:
            found = await self._find_posted(web_client, channel, thread_ts, marker, self._lost[marker])
            if found is not None:
                del self._lost[marker]
                log.info("slack resend skipped: found posted chat=%s chunk=%d", channel, index)
                return SentMessage(f"{channel}:{found}")
        started_at = self._clock().timestamp()
        try:
            if upload:
                if message.buttons and chunk.buttons:  # only a message that is a file alone
                    log.warning("slack buttons dropped with the file chat=%s count=%d", channel, len(message.buttons))
                name = message.attachment_name or "attachment"
                uploaded = await web_client.files_upload_v2(channel=channel, thread_ts=thread_ts, filename=name,
                                                            title=name, content=message.attachment_bytes or b"")
                file_obj = _data(uploaded).get("file") or {}
                return SentMessage(f"file:{file_obj.get('id', '')}")
            arguments: dict[str, Any] = {"channel": channel, "mrkdwn": not plain,
                                         "text": escape_text(chunk.plain) if plain else chunk.text}
            if thread_ts:
                arguments["thread_ts"] = thread_ts
            if marker is not None and not plain:
                arguments["metadata"] = delivery_metadata(marker)
            if message.buttons and chunk.buttons:
                if plain:
                    log.info("slack buttons dropped with the plain resend chat=%s count=%d", channel,
                             len(message.buttons))
                else:
                    arguments["blocks"] = button_blocks(chunk.text, message.buttons)
            sent = await web_client.chat_postMessage(**arguments)
        except (SlackApiError, *_NETWORK_ERRORS) as exc:
            error = send_error_for(exc)
            if error.maybe_delivered and marker is not None and not plain:
                self._remember_lost(marker, started_at)
            log.warning("slack send failed chat=%s chunk=%d error=%s permanent=%s retry_after=%s maybe_delivered=%s",
                        channel, index, _error_label(exc), error.permanent, error.retry_after, error.maybe_delivered)
            raise error from exc
        if marker is not None:
            self._lost.pop(marker, None)
        data = _data(sent)
        return SentMessage(f"{data.get('channel') or channel}:{data.get('ts', '')}")

    # -- previews: one message posted, then updated as the reply grows; the final reply updates it whole ----------
    def previews(self, chat_kind: ChatKind) -> bool:
        """A preview is a message of the chat, updated in place: only where one reply is wanted in any case."""
        return chat_kind is ChatKind.DM

    async def post_preview(self, chat_id: str, thread_id: str | None, text: str) -> str:
        """The reply so far as a new message (its first chunk's worth): a native stream in a thread (``channel:ts:
        stream``), else a posted message (``channel:ts``)."""
        if thread_id and self._streams_in(chat_id):
            try:
                return await self._start_stream(chat_id, thread_id, text)
            except _StreamRefused as refused:
                posted = await self._post_preview(chat_id, thread_id, text)  # a chat that takes no post says so here
                if refused.lasting:
                    self._native_stream = False
                    log.warning("slack native streams off for this process: chat.startStream refused chat=%s "
                                "error=%s", chat_id, refused.code)
                return posted
        return await self._post_preview(chat_id, thread_id, text)

    async def edit_preview(self, chat_id: str, message_id: str, text: str) -> None:
        """The preview message shows the reply so far: a stream appends what is new, a posted message is updated."""
        ref = self._ref(message_id)
        if ref.stream:
            await self._edit_stream(ref, text)
            return
        await self._update(ref, {"text": self._preview_text(text), "mrkdwn": True})

    async def replace_chunk(self, message: OutboundMessage, chunk: RenderedChunk, message_id: str, *,
                            plain: bool = False) -> SentMessage:
        """The reply's first chunk updates its preview message in place: one message, whole. A stream is stopped
        first (Slack edits no message still streaming); run again, after a restart, this changes nothing."""
        ref = self._ref(message_id)
        if ref.stream:
            await self._end_stream(ref)
        arguments: dict[str, Any] = {"mrkdwn": not plain, "text": escape_text(chunk.plain) if plain else chunk.text}
        if message.buttons and chunk.buttons and not plain:
            arguments["blocks"] = button_blocks(chunk.text, message.buttons)
        await self._update(ref, arguments)
        self._streams.pop(ref.id, None)
        return SentMessage(ref.plain_id)

    def _streams_in(self, chat_id: str) -> bool:
        # Outside a DM Slack wants the recipient's user and team for a stream, which a preview is not told.
        return self._native_stream and chat_id.startswith("D")

    async def _post_preview(self, chat_id: str, thread_id: str | None, text: str) -> str:
        arguments: dict[str, Any] = {"channel": chat_id, "mrkdwn": True, "text": self._preview_text(text)}
        if thread_id:
            arguments["thread_ts"] = thread_id
        try:
            sent = await self._require_web().chat_postMessage(**arguments)
        except (SlackApiError, *_NETWORK_ERRORS) as exc:
            raise send_error_for(exc) from exc
        data = _data(sent)
        return MessageRef(data.get("channel") or chat_id, data.get("ts", "")).id

    async def _start_stream(self, chat_id: str, thread_id: str, text: str) -> str:
        """A stream opened in the thread with the reply so far; _StreamRefused when Slack will not open one."""
        shown = stream_markdown(text, MESSAGE_MAX_CHARS)
        arguments: dict[str, Any] = {"channel": chat_id, "thread_ts": thread_id}
        if shown:
            arguments["markdown_text"] = shown
        try:
            started = await self._require_web().chat_startStream(**arguments)
        except SlackApiError as exc:
            error = send_error_for(exc)
            if error.retry_after is not None:
                raise error from exc  # the chat's rate gate waits it out; streams stay on
            # A refusal that would come again (not a Slack hiccup) means this workspace will not stream.
            raise _StreamRefused(_error_label(exc), lasting=error.permanent or error.bad_formatting) from exc
        except _NETWORK_ERRORS as exc:
            raise send_error_for(exc) from exc
        data = _data(started)
        ref = MessageRef(data.get("channel") or chat_id, data.get("ts", ""), stream=True)
        self._keep(ref.id, _Streamed(shown))
        return ref.id

    async def _edit_stream(self, ref: MessageRef, text: str) -> None:
        state = self._streams.get(ref.id)
        if state is not None and state.open:
            piece = next_piece(state.text, text, MESSAGE_MAX_CHARS)
            if piece == "":
                return
            if piece is not None and await self._append(ref, state, piece):
                return
            reason = "diverged" if piece is None else "closed"
        else:
            reason = "unknown" if state is None else "closed"
        # Slack ended the stream, the reply no longer begins with what was streamed, or this process does not know
        # what was (a restart): the message is stopped, if it still streams, and edited whole from now on.
        if state is None or state.open:
            log.info("slack stream edited whole from now chat=%s ts=%s reason=%s", ref.channel, ref.ts, reason)
            await self._end_stream(ref)
        await self._update(ref, {"text": self._preview_text(text), "mrkdwn": True})

    async def _append(self, ref: MessageRef, state: _Streamed, piece: str) -> bool:
        """``piece`` appended to the stream; False when Slack had ended it (the message is then edited instead)."""
        # Forgotten while the append is under way: one cut off (or answered by nobody) may have landed or not, and
        # what the stream shows is then unknown; the next edit stops it and writes the whole text.
        self._streams.pop(ref.id, None)
        try:
            await self._require_web().chat_appendStream(channel=ref.channel, ts=ref.ts, markdown_text=piece)
        except SlackApiError as exc:
            if slack_error_code(exc) == NOT_STREAMING:
                self._keep(ref.id, _Streamed(state.text, open=False))
                return False
            self._keep(ref.id, state)  # refused: nothing was appended
            raise send_error_for(exc) from exc
        except _NETWORK_ERRORS as exc:
            raise send_error_for(exc) from exc
        self._keep(ref.id, _Streamed(state.text + piece))
        return True

    async def _end_stream(self, ref: MessageRef) -> None:
        """The stream stopped, unless this process knows it already is. Slack's answer that it is not streaming
        (stopped before, or ended on its side) is as good as a stop."""
        state = self._streams.get(ref.id)
        if state is not None and not state.open:
            return
        try:
            await self._require_web().chat_stopStream(channel=ref.channel, ts=ref.ts)
        except SlackApiError as exc:
            if slack_error_code(exc) != NOT_STREAMING:
                error = send_error_for(exc)
                if not error.permanent:
                    raise error from exc
                # chat.update decides: it takes a message no longer streaming, and says so if it cannot.
                log.info("slack stream stop refused chat=%s ts=%s error=%s", ref.channel, ref.ts, _error_label(exc))
        except _NETWORK_ERRORS as exc:
            raise send_error_for(exc) from exc
        self._keep(ref.id, _Streamed(state.text if state else "", open=False))

    def _keep(self, message_id: str, state: _Streamed) -> None:
        self._streams.pop(message_id, None)
        self._streams[message_id] = state
        while len(self._streams) > _STREAMS_KEPT:
            del self._streams[next(iter(self._streams))]

    @staticmethod
    def _preview_text(text: str) -> str:
        chunks = render_chunks(settled(text), MESSAGE_FORMAT)
        return chunks[0].text if chunks else "…"

    @staticmethod
    def _ref(message_id: str) -> MessageRef:
        ref = parse_message_id(message_id)
        if ref is None:
            raise SendError(f"slack: not a message id: {message_id!r}", permanent=True)
        return ref

    def _require_web(self) -> AsyncWebClient:
        if self._web is None:
            raise SendError("slack: channel not started")
        return self._web

    async def _update(self, ref: MessageRef, arguments: dict[str, Any]) -> None:
        try:
            await self._require_web().chat_update(channel=ref.channel, ts=ref.ts, **arguments)
        except (SlackApiError, *_NETWORK_ERRORS) as exc:
            raise send_error_for(exc) from exc

    def may_have_posted(self, message: OutboundMessage, index: int, since: datetime) -> None:
        """An earlier process sent chunk ``index`` and lost its answer: look for it before sending it again."""
        marker = delivery_marker(message.delivery_key, index)
        if marker is not None:
            self._remember_lost(marker, since.timestamp())

    def _remember_lost(self, marker: str, started_at: float) -> None:
        # The first lost attempt bounds the look: a later one cannot have posted earlier.
        self._lost.setdefault(marker, started_at)
        while len(self._lost) > SLACK_LOST_SENDS_KEPT:
            del self._lost[next(iter(self._lost))]

    async def _find_posted(self, web_client: AsyncWebClient, channel: str, thread_ts: str | None, marker: str,
                           since: float) -> str | None:
        """The ts of our message carrying ``marker``, posted since ``since``; None when not found or not looked for.

        A thread is read with conversations.replies, a conversation's top level with conversations.history;
        both need the history scope of the conversation's kind (im:history for DMs). Where Slack refuses the
        look for good (no such scope), the chunk is simply sent again: the doubt was already counted. Where the
        look itself fails for now (Slack unreachable, busy, rate limited), a SendError says try later: a blind
        resend then would post it twice just as the outage that lost the answer goes on.
        """
        me = self._me
        if me is None:
            return None
        arguments: dict[str, Any] = {"channel": channel, "oldest": f"{max(since - SLACK_LOOKUP_SKEW_S, 0.0):.6f}",
                                     "inclusive": True, "include_all_metadata": True,
                                     "limit": SLACK_LOOKUP_PAGE_SIZE}
        try:
            for _ in range(SLACK_LOOKUP_PAGES):
                if thread_ts:
                    response = await web_client.conversations_replies(ts=thread_ts, **arguments)
                else:
                    response = await web_client.conversations_history(**arguments)
                data = _data(response)
                messages = data.get("messages")
                found = posted_with_marker(messages if isinstance(messages, list) else [], marker, me)
                if found is not None:
                    return found
                cursor = (data.get("response_metadata") or {}).get("next_cursor")
                if not data.get("has_more") or not cursor:
                    return None
                arguments["cursor"] = cursor
        except (SlackApiError, *_NETWORK_ERRORS) as exc:
            error = send_error_for(exc)
            log.info("slack lookup of a lost send failed chat=%s error=%s permanent=%s", channel, _error_label(exc),
                     error.permanent)
            if error.permanent:
                return None
            # Nothing was posted by a look: its failure is an ordinary transient one, never a doubt.
            raise SendError(f"slack: lookup failed ({_error_label(exc)})", retry_after=error.retry_after) from exc
        log.info("slack lookup of a lost send gave up chat=%s pages=%d", channel, SLACK_LOOKUP_PAGES)
        return None

    # -- files a message shares ---------------------------------------------------------------------
    async def fetch_attachment(self, attachment: Attachment, max_bytes: int) -> bytes:
        """A shared file's bytes, from its private URL with the bot token (:mod:`channels.slack.files`);
        ``too_large`` before any request when Slack said it is over ``max_bytes``, and while reading otherwise."""
        file = file_id(attachment.ref)
        started = time.monotonic()
        try:
            refuse_oversized(attachment, max_bytes)
            session = self._session
            if session is None or session.closed:
                raise AttachmentError("slack: channel not started")
            # Per request: a file may take longer than a Web API call's total budget, never a silent half-minute.
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=SLACK_HTTP_TIMEOUT_S,
                                            sock_read=self._send_timeout_s)
            data = await download(session, attachment, self._bot_token, files_origin(api_url_of(self.settings)),
                                  max_bytes, timeout)
        except AttachmentError as exc:
            log.info("slack attachment not fetched file=%s size=%s max=%d too_large=%s ms=%.0f reason=%s", file,
                     attachment.size, max_bytes, exc.too_large, (time.monotonic() - started) * 1000, exc)
            raise
        log.info("slack attachment fetched file=%s bytes=%d ms=%.0f", file, len(data),
                 (time.monotonic() - started) * 1000)
        return data

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """Slack offers bots no typing indicator outside assistant threads: nothing to show."""
        return None


@dataclass(frozen=True, slots=True)
class _Streamed:
    """What a preview stream has shown (its Markdown, all appends together), and whether it still takes appends."""

    text: str
    open: bool = True


class _StreamRefused(Exception):
    """chat.startStream refused; ``lasting`` when it would refuse again (the workspace does not stream)."""

    def __init__(self, code: str, *, lasting: bool) -> None:
        super().__init__(code)
        self.code = code
        self.lasting = lasting


class _NameCache:
    """A small, bounded memory of display names (``None``: the lookup failed; the user id stands in)."""

    def __init__(self, size: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._size = size
        self._ttl_s = ttl_s
        self._clock = clock
        self._entries: dict[str, tuple[float, str | None]] = {}

    def get(self, user: str) -> tuple[bool, str | None]:
        entry = self._entries.get(user)
        if entry is None or entry[0] < self._clock():
            return False, None
        return True, entry[1]

    def put(self, user: str, name: str | None) -> None:
        self._entries.pop(user, None)
        while len(self._entries) >= self._size:
            self._entries.pop(next(iter(self._entries)))  # the oldest entry
        self._entries[user] = (self._clock() + self._ttl_s, name)


def _authorizer(me: SlackIdentity, token: str) -> Callable[[], Awaitable[AuthorizeResult]]:
    """bolt's ``authorize``: every request is ours, as auth.test said at start.

    A closure, not a method: bolt passes an authorize function its arguments by parameter name, ``self`` too.
    """
    result = AuthorizeResult(enterprise_id=me.enterprise_id, team_id=me.team_id, bot_user_id=me.user_id,
                             bot_id=me.bot_id, bot_token=token)

    async def authorize() -> AuthorizeResult:
        return result

    return authorize


def _data(response: AsyncSlackResponse) -> Mapping[str, Any]:
    data = response.data
    return data if isinstance(data, Mapping) else {}


def _header(request: AsyncBoltRequest, name: str) -> str | None:
    values = request.headers.get(name) or []
    return values[0] if values else None


def _error_label(exc: BaseException) -> str:
    """What a log line may say about an error: Slack's code or the exception's class, never its text."""
    if isinstance(exc, SlackApiError):
        return slack_error_code(exc) or f"HTTP {getattr(exc.response, 'status_code', '?')}"
    return type(exc).__name__


# --- doctor --------------------------------------------------------------------------------------
async def check_token(settings: SlackSettings, token: str | None = None, *, app_token: str | None = None,
                      signing_secret: str | None = None) -> tuple[bool, str]:
    """For ``bot.py doctor``: do the tokens work for the configured mode? A one-line answer either way."""
    token = token if token is not None else settings.bot_token()
    if not token:
        return False, f"environment variable {settings.bot_token_env} is not set"
    if settings.mode not in ("socket", "http"):
        return False, f"slack.mode must be 'socket' or 'http', not {settings.mode!r}"
    if not token.startswith("xoxb-"):
        # A user token (xoxp-) passes auth.test too, but kith would then speak as that person.
        return False, f"the token in {settings.bot_token_env} is not a bot token (xoxb-)"
    where = api_url_of(settings)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=SLACK_HTTP_TIMEOUT_S)) as session:
        web_client = AsyncWebClient(token=token, base_url=where, session=session, retry_handlers=[])
        try:
            me = identity_from_auth_test(_data(await web_client.auth_test()))
        except SlackApiError as exc:
            error = slack_error_code(exc)
            if error in _AUTH_ERRORS:
                return False, f"Slack rejected the token in {settings.bot_token_env} ({error})"
            return False, f"auth.test failed ({_error_label(exc)})"
        except _NETWORK_ERRORS as exc:
            return False, f"cannot reach the Web API at {where} ({type(exc).__name__})"
        except ValueError:
            return False, f"the token in {settings.bot_token_env} is not a bot token (xoxb-)"
        who = f"@{me.name} in team {me.team_id} (user {me.user_id})"
        if settings.mode == "http":
            if not (signing_secret or settings.signing_secret()):
                return False, f"{who}, but HTTP mode needs {settings.signing_secret_env} set"
            return True, f"{who}, HTTP events on {settings.http_host}:{settings.http_port}"
        app_token = app_token or settings.app_token()
        if not app_token:
            return False, f"{who}, but Socket Mode needs {settings.app_token_env} set"
        try:
            # Issues a socket URL nobody uses; Slack lets it expire. It is the only way to test the app token.
            await web_client.apps_connections_open(app_token=app_token)
        except SlackApiError as exc:
            return False, f"{who}, but Slack rejected the app-level token in {settings.app_token_env} " \
                          f"({_error_label(exc)})"
        except _NETWORK_ERRORS as exc:
            return False, f"{who}, but apps.connections.open failed ({type(exc).__name__})"
        return True, f"{who}, Socket Mode"


__all__ = [
    "ChannelStartError",
    "SlackChannel",
    "check_token",
    "send_error_for",
]
