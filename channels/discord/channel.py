"""The Discord channel: discord.py's Client for the gateway and REST, translated to the core's types.

The client runs as a task (``client.start(token)``); :meth:`DiscordChannel.start` returns once the
gateway said READY and every server arrived, or raises :class:`ChannelStartError` with a one-line
reason (token rejected, Message Content intent not enabled, Discord unreachable, not ready in time).
After that discord.py owns the connection: it heartbeats, RESUMEs after a drop (Discord then replays
what was missed), and re-IDENTIFYs when the session is gone.

The order each MESSAGE_CREATE goes through, and why:

1. discord.py parses it and calls ``on_message``, which at once queues it in its channel's lane (a
   task chain that keeps one channel's messages in order while other channels flow), so the gateway
   loop never waits for the core.
2. In the lane: where it was posted (a thread discord.py has not cached is fetched once), then
   :func:`translate_message`. Our own and other bots' messages, system messages and messages
   without text stop here, logged with the message id and a fixed reason.
3. ``journal.record("discord", message_id)``: False means this message was taken in before (a RESUME
   replaying what was handled, or Discord sending one event twice) and it is dropped. The same
   transaction keeps the message in the inbox (``delivery.inbox``) until the core has answered it.
4. Hand-off to the core's handler.

Discord's gateway has no acknowledgement: what arrives while kith is down, what a session had sent a
process that died before journaling it, and what was sent after a session could not be resumed is never
redelivered to the new session. So every new session (each READY: a start, or a re-IDENTIFY) catches up:
step 3 also moves a cursor per channel to the newest message taken in, in the same transaction, and
on READY each channel whose cursor moved in the last ``DISCORD_CATCH_UP_DAYS`` gets a job at the head
of its lane that reads the messages posted after it (``GET /channels/{id}/messages?after=…``, at most
24 hours back) and takes each in through the same steps, before any gateway event of that channel;
the journal drops what the gateway delivers as well. A channel kith never took a message in from is
not known to it and cannot be caught up. A clean :meth:`DiscordChannel.stop` stops intake first, then lets handed-off
handlers finish (``stop_grace_s``).

A malformed event would otherwise end the client: discord.py runs its event parsers inside the
gateway loop and does not catch their errors. Every parser is wrapped, so a bad event is logged
(event name and error type) and dropped, and the connection lives on.

Button clicks (component interactions) are acknowledged at once (a deferred update, so the person's
button stops spinning) and handed to ``on_button`` as :class:`ButtonPress`, through the same lanes
and journal (``interaction:<id>``).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Protocol

import aiohttp
import discord

from channels.discord.files import attachment_id, download, fresh_url, refuse_oversized
from channels.discord.formatting import MESSAGE_FORMAT
from channels.discord.settings import DiscordSettings
from channels.discord.translate import (
    PLATFORM,
    BotIdentity,
    Place,
    Skipped,
    allowed_mentions,
    button_view,
    catch_up_cursor,
    catch_up_prefix,
    followed_channel,
    gateway_intents,
    message_nonce,
    place_of,
    reply_reference,
    send_error_for,
    sender_skip,
    snowflake,
    start_failure,
    translate_interaction,
    translate_message,
)
from channels.lanes import HandlerLanes
from channels.markdown import render_chunks, with_attachment
from channels.markdown.partial import settled
from ground.failures import describe, traceback_of
from ground.tunables import (
    DISCORD_CATCH_UP_CHANNELS_MAX,
    DISCORD_CATCH_UP_CONCURRENCY,
    DISCORD_CATCH_UP_DAYS,
    DISCORD_CATCH_UP_MESSAGES_MAX,
    DISCORD_GUILD_READY_TIMEOUT_S,
    DISCORD_HTTP_TIMEOUT_S,
    DISCORD_MAX_RATELIMIT_WAIT_S,
    DISCORD_REIDENTIFY_DELAY_S,
    DISCORD_SEND_TIMEOUT_S,
    DISCORD_STOP_GRACE_S,
    FETCHED_PLACES_MAX,
    INBOX_REPLAY_MAX_AGE_H,
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

log = logging.getLogger("kith.discord")


class ChannelCursors(Protocol):
    """Where the newest message taken in per channel is read back at start (``delivery.inbound.Cursors``)."""

    async def named(self, prefix: str, *, since: datetime, limit: int) -> dict[str, int]: ...


@dataclass(slots=True)
class _Followed:
    """A channel messages were taken in from: caught up from ``newest`` on each new gateway session."""

    guild_id: int | None
    newest: int


# --- the discord.py client ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Handlers:
    logged_in: Callable[[], Awaitable[None]]  # after login, before the gateway connects
    session: Callable[[], None]  # a new gateway session: READY parsed, before any later event
    ready: Callable[[], None]
    connection: Callable[[bool], None]  # True once resumed, False when the gateway connection drops
    message: Callable[[discord.Message], None]
    interaction: Callable[[discord.Interaction], None]


class _GatewayClient(discord.Client):
    """discord.Client with its events forwarded to the channel and its event parsers guarded."""

    def __init__(self, handlers: _Handlers, *, reidentify_delay_s: float, **options: Any) -> None:
        super().__init__(**options)
        self._kith = handlers
        self._reidentify_delay_s = reidentify_delay_s
        parsers = self._connection.parsers
        for event, parser in list(parsers.items()):
            parsers[event] = partial(_guarded_parse, event, parser)
        parsers["READY"] = partial(_guarded_parse, "READY", partial(_then, parsers["READY"], handlers.session))

    async def setup_hook(self) -> None:
        await self._kith.logged_in()

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        # discord.py's own hook waits a fixed 5 s before every IDENTIFY after the first (Discord allows
        # one IDENTIFY per 5 s per bot); ours waits the same by default, configurably.
        if not initial:
            await asyncio.sleep(self._reidentify_delay_s)

    async def on_ready(self) -> None:
        self._kith.ready()

    async def on_resumed(self) -> None:
        self._kith.connection(True)

    async def on_disconnect(self) -> None:
        self._kith.connection(False)

    async def on_message(self, message: discord.Message) -> None:
        self._kith.message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        self._kith.interaction(interaction)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        # discord.py's default prints the traceback, locals and all; ours names the event, and a database
        # that refused work (a full disk) is one line with its reason rather than a traceback.
        exc = sys.exc_info()[1]
        if exc is None:
            log.error("discord event handler failed event=%s", event_method)
            return
        log.error("discord event handler failed event=%s error=%s", event_method, describe(exc),
                  exc_info=traceback_of(exc))


def _then(parser: Callable[[Any], None], after: Callable[[], None], data: Any) -> None:
    # Synchronous in the gateway's reading loop: whatever ``after`` queues comes before every later event.
    parser(data)
    after()


def _guarded_parse(event: str, parser: Callable[[Any], None], data: Any) -> None:
    try:
        parser(data)
    except Exception as exc:
        event_id = data.get("id") if isinstance(data, dict) else None
        log.warning("discord event malformed event=%s id=%s error=%s", event, event_id, type(exc).__name__)


# --- the channel ---------------------------------------------------------------------------------------
class DiscordChannel:
    name = PLATFORM

    def __init__(
        self,
        settings: DiscordSettings,
        token: str,
        *,
        journal: EventJournal,
        cursors: ChannelCursors | None = None,
        clock: Callable[[], datetime] = utcnow,
        stop_grace_s: float = DISCORD_STOP_GRACE_S,
        guild_ready_timeout_s: float = DISCORD_GUILD_READY_TIMEOUT_S,
        max_ratelimit_wait_s: float = DISCORD_MAX_RATELIMIT_WAIT_S,
        reidentify_delay_s: float = DISCORD_REIDENTIFY_DELAY_S,
        send_timeout_s: float = DISCORD_SEND_TIMEOUT_S,
        connect_timeout_s: float = DISCORD_HTTP_TIMEOUT_S,
        catch_up_days: float = DISCORD_CATCH_UP_DAYS,
        catch_up_channels_max: int = DISCORD_CATCH_UP_CHANNELS_MAX,
        catch_up_messages_max: int = DISCORD_CATCH_UP_MESSAGES_MAX,
    ) -> None:
        self.settings = settings
        self._token = token
        self._journal = journal
        self._cursors = cursors
        self._clock = clock
        # Per request, through discord.py's HTTP client (its session's default is 300 s in all): a send that
        # times out is not cancelled from outside, which could leave discord.py's global rate-limit lock shut.
        self._send_timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s,
                                                   sock_read=send_timeout_s)
        self._catch_up_days = catch_up_days
        self._catch_up_channels_max = catch_up_channels_max
        self._catch_up_messages_max = catch_up_messages_max
        self._followed: dict[int, _Followed] = {}  # channel id → where to catch up from
        self._catch_up_slots = asyncio.Semaphore(DISCORD_CATCH_UP_CONCURRENCY)
        self._stop_grace_s = stop_grace_s
        self._guild_ready_timeout_s = guild_ready_timeout_s
        self._max_ratelimit_wait_s = max_ratelimit_wait_s
        self._reidentify_delay_s = reidentify_delay_s
        self._client: _GatewayClient | None = None
        self._runner: asyncio.Task[None] | None = None
        self._me: BotIdentity | None = None
        self._on_message: InboundHandler | None = None
        self._on_button: ButtonHandler | None = None
        self._accepting = False
        self._lanes = HandlerLanes("discord", log)
        self._dm_channels: dict[int, int] = {}  # user id → DM channel id, for DMs addressed by user
        self._fetched_places: dict[int, Place] = {}  # channels discord.py did not cache, looked up once
        self.ready = asyncio.Event()  # set while the gateway is connected and READY (or RESUMED)

    @property
    def identity(self) -> BotIdentity | None:
        """The bot's id and name, once READY arrived."""
        return self._me

    # -- lifecycle ---------------------------------------------------------------------------------------
    async def start(self, on_message: InboundHandler, on_button: ButtonHandler | None = None) -> None:
        """Connect; returns once READY. Raises ChannelStartError when the bot cannot connect."""
        if self._runner is not None:
            raise RuntimeError("discord channel already started")
        self._on_message = on_message
        self._on_button = on_button
        self._accepting = True
        handlers = _Handlers(self._on_logged_in, self._on_new_session, self._on_ready, self._on_connection,
                             self._on_discord_message, self._on_discord_interaction)
        self._client = _GatewayClient(
            handlers, reidentify_delay_s=self._reidentify_delay_s, intents=gateway_intents(),
            allowed_mentions=allowed_mentions(),
            guild_ready_timeout=self._guild_ready_timeout_s, max_ratelimit_timeout=self._max_ratelimit_wait_s,
            chunk_guilds_at_startup=False,
        )
        runner = asyncio.create_task(self._client.start(self._token), name="discord-gateway")
        self._runner = runner
        started = time.monotonic()
        ready = asyncio.create_task(self.ready.wait())
        try:
            await asyncio.wait({runner, ready}, timeout=self.settings.ready_timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            self._accepting = False
            await self._close_client(runner_wait_s=0)
            raise
        finally:
            ready.cancel()
        if self.ready.is_set():
            runner.add_done_callback(self._runner_ended)
            log.info("discord ready bot_id=%s guilds=%d ms=%.0f", self._me.id if self._me else None,
                     len(self._client.guilds), (time.monotonic() - started) * 1000)
            return
        failure = runner.exception() if runner.done() and not runner.cancelled() else None
        if failure is not None:
            reason = start_failure(failure, self.settings.token_env)
        else:
            reason = f"discord: not ready within {self.settings.ready_timeout_s:g} s"
        log.error("discord channel not started: %s", reason)
        self._accepting = False
        await self._close_client(runner_wait_s=0)
        raise ChannelStartError(reason)

    async def stop(self) -> None:
        """Stop intake, let handed-off messages finish (up to stop_grace_s), then close the client."""
        self._accepting = False
        await self._lanes.stop(self._stop_grace_s)
        await self._close_client(runner_wait_s=self._stop_grace_s)

    async def _close_client(self, *, runner_wait_s: float) -> None:
        client, self._client = self._client, None
        runner, self._runner = self._runner, None
        self.ready.clear()
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        if runner is not None:
            if not runner.done() and runner_wait_s > 0:
                # A connected client's loop ends by itself once closed; one asleep in its reconnect
                # backoff only notices after the sleep, so it is cancelled after this wait.
                await asyncio.wait({runner}, timeout=runner_wait_s)
            if not runner.done():
                runner.cancel()
            with contextlib.suppress(BaseException):
                await runner

    def _runner_ended(self, runner: asyncio.Task[None]) -> None:
        if runner.cancelled() or self._client is None or self._client.is_closed():
            return
        exc = runner.exception()
        reason = start_failure(exc, self.settings.token_env) if exc is not None else "ended"
        self.ready.clear()
        log.error("discord gateway stopped for good: %s", reason)

    async def _on_logged_in(self) -> None:
        """Read which channels to catch up (the bot's id is known from here, the gateway not yet connected)."""
        client = self._client
        if self._cursors is None or client is None or client.user is None:
            return
        prefix = catch_up_prefix(client.user.id)
        since = self._clock() - timedelta(days=self._catch_up_days)
        try:
            named = await self._cursors.named(prefix, since=since, limit=self._catch_up_channels_max)
        except Exception as exc:
            # Intake works without it; only what the last process missed stays missed.
            log.error("discord catch-up channels not read error=%s", type(exc).__name__)
            return
        for name, newest in named.items():
            channel = followed_channel(name, prefix)
            if channel is not None:
                self._followed.setdefault(channel[0], _Followed(channel[1], newest))

    def _on_new_session(self) -> None:
        if not self._accepting or not self._followed:
            return
        log.info("discord catching up channels=%d", len(self._followed))
        for channel_id in list(self._followed):
            self._lanes.enqueue(str(channel_id), partial(self._catch_up, channel_id), f"catch_up:{channel_id}")

    async def _catch_up(self, channel_id: int) -> None:
        """Take in what was posted in a channel after the newest message taken in from it."""
        followed = self._followed.get(channel_id)
        client = self._client
        if followed is None or client is None:
            return
        if followed.guild_id is not None:
            # A server's members, roles and channels arrive after READY; translating before them would miss
            # a mention of the bot's role or a nickname.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ready.wait(), self.settings.ready_timeout_s)
        oldest = discord.utils.time_snowflake(self._clock() - timedelta(hours=INBOX_REPLAY_MAX_AGE_H), high=True)
        after = max(followed.newest, oldest)
        channel = client.get_channel(channel_id)
        if not isinstance(channel, discord.abc.Messageable):
            kind = discord.ChannelType.private if followed.guild_id is None else None
            channel = client.get_partial_messageable(channel_id, guild_id=followed.guild_id, type=kind)
        started, read, taken = time.monotonic(), 0, 0
        try:
            async with self._catch_up_slots:
                async for message in channel.history(after=discord.Object(after), oldest_first=True,
                                                     limit=self._catch_up_messages_max):
                    read += 1
                    taken += await self._take_in_message(message)
        except (discord.Forbidden, discord.NotFound) as exc:
            # No longer ours to read (the bot left, or lost the permission): not asked again.
            self._followed.pop(channel_id, None)
            log.warning("discord catch-up refused channel=%d status=%d", channel_id, exc.status)
            return
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning("discord catch-up failed channel=%d read=%d taken=%d error=%s", channel_id, read, taken,
                        type(exc).__name__)
            return
        log.log(logging.INFO if taken else logging.DEBUG, "discord caught up channel=%d read=%d taken=%d ms=%.0f",
                channel_id, read, taken, (time.monotonic() - started) * 1000)

    def _on_ready(self) -> None:
        client = self._client
        if client is None or client.user is None:
            return
        self._me = BotIdentity(client.user.id, client.user.name)
        self.ready.set()

    def _on_connection(self, up: bool) -> None:
        # REST sends work either way; this only tells whether events are flowing.
        if up and self._me is not None:
            log.info("discord gateway resumed")
            self.ready.set()
        elif not up and self.ready.is_set():
            log.info("discord gateway disconnected; discord.py reconnects")
            self.ready.clear()

    # -- intake ----------------------------------------------------------------------------------------
    def _on_discord_message(self, message: discord.Message) -> None:
        # Synchronous up to the lane, so messages of one channel keep the gateway's order.
        if not self._accepting:
            return
        channel_id = message.channel.id
        self._lanes.enqueue(str(channel_id), partial(self._take_in_message, message), f"message:{message.id}")

    async def _take_in_message(self, message: discord.Message) -> bool:
        """Translate, journal and hand over one message (from the gateway or a catch-up); True if handed over."""
        me = await self._identity(f"message:{message.id}")
        if me is None or self._on_message is None:
            return False
        not_a_person = sender_skip(message, me)
        if not_a_person is not None:
            log.debug("discord message ignored id=%d reason=%s", message.id, not_a_person)
            return False
        guild_id = message.guild.id if message.guild else None
        place = await self._place(message.channel, guild_id)
        translated = translate_message(message, me, place)
        if isinstance(translated, Skipped):
            log.info("discord message ignored id=%d reason=%s chat=%s", message.id, translated.reason,
                     translated.chat_id)
            return False
        event_id = str(message.id)
        # The channel's catch-up cursor moves in the journal's transaction, so it never passes a message
        # that was not taken in.
        fresh = await self._journal.record_batch(
            PLATFORM, [event_id], cursor=catch_up_cursor(me.id, place.channel_id, guild_id),
            cursor_to=message.id, messages={event_id: translated})
        followed = self._followed.get(place.channel_id)
        if followed is None:
            self._followed[place.channel_id] = _Followed(guild_id, message.id)
        else:
            followed.newest = max(followed.newest, message.id)
        if event_id not in fresh:
            log.info("discord redelivery dropped id=%d", message.id)
            return False
        await self._deliver(translated)
        return True

    async def _identity(self, event: str) -> BotIdentity | None:
        """Who the bot is, to translate an event; known from READY on.

        discord.py calls ``on_ready`` only once every server arrived or ``guild_ready_timeout`` passed (about
        2 s), and messages flow before that: they are taken in like any other, not dropped. Should an event
        come before READY itself (Discord sends none), it waits for it.
        """
        if self._me is None:
            client = self._client
            user = client.user if client is not None else None
            if user is not None:
                self._me = BotIdentity(user.id, user.name)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.ready.wait(), self.settings.ready_timeout_s)
                if self._me is None:
                    log.warning("discord event dropped event=%s reason=identity_unknown", event)
        return self._me

    async def _deliver(self, message: InboundMessage) -> None:
        assert self._on_message is not None
        await self._on_message(message)

    def _on_discord_interaction(self, interaction: discord.Interaction) -> None:
        if not self._accepting or interaction.type is not discord.InteractionType.component:
            return
        # Acknowledged before the core runs: Discord gives an interaction three seconds.
        self._lanes.spawn(self._acknowledge(interaction))
        lane = str(interaction.channel_id or interaction.id)
        self._lanes.enqueue(lane, partial(self._take_in_press, interaction), f"interaction:{interaction.id}")

    async def _acknowledge(self, interaction: discord.Interaction) -> None:
        try:
            await interaction.response.defer()
        except (discord.HTTPException, discord.InteractionResponded, aiohttp.ClientError, OSError) as exc:
            log.info("discord interaction ack failed id=%d error=%s", interaction.id, type(exc).__name__)

    async def _take_in_press(self, interaction: discord.Interaction) -> None:
        me = await self._identity(f"interaction:{interaction.id}")
        if me is None:
            return
        place = await self._place(interaction.channel, interaction.guild_id,
                                  channel_id=interaction.channel_id)
        translated = translate_interaction(interaction, me, place)
        if isinstance(translated, Skipped):
            log.info("discord interaction ignored id=%d reason=%s", interaction.id, translated.reason)
            return
        if not await self._journal.record(PLATFORM, f"interaction:{interaction.id}"):
            log.info("discord redelivered interaction dropped id=%d", interaction.id)
            return
        if self._on_button is None:
            log.info("discord button ignored id=%d reason=no_button_handler", interaction.id)
            return
        await self._press(translated)

    async def _press(self, press: ButtonPress) -> None:
        assert self._on_button is not None
        await self._on_button(press)

    async def _place(self, channel: object, guild_id: int | None, *, channel_id: int | None = None) -> Place:
        """Where a message or click happened; a thread discord.py has not cached is fetched for its parent."""
        place = place_of(channel, guild_id)
        if place is not None:
            return place
        channel_id = channel_id if channel_id is not None else getattr(channel, "id", None)
        if channel_id is None:
            raise ValueError("event without a channel")
        place = self._fetched_places.get(channel_id)
        if place is not None:
            return place
        client = self._client
        if client is not None:
            try:
                fetched = await client.fetch_channel(channel_id)
            except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                log.warning("discord channel lookup failed channel=%d error=%s", channel_id, type(exc).__name__)
            else:
                place = place_of(fetched, guild_id)
                if place is not None:
                    if len(self._fetched_places) >= FETCHED_PLACES_MAX:
                        self._fetched_places.pop(next(iter(self._fetched_places)))
                    self._fetched_places[channel_id] = place
                    return place
        # Unknown still: address the channel itself, which is where a reply must go anyway.
        kind = ChatKind.DM if guild_id is None else ChatKind.GROUP
        return Place(kind, channel_id)

    # -- files a message carries ------------------------------------------------------------------------
    async def fetch_attachment(self, attachment: Attachment, max_bytes: int) -> bytes:
        """The file behind an attachment's CDN URL (:mod:`channels.discord.files`); ``too_large`` before any
        request when Discord said it is over ``max_bytes``, and while reading when it did not."""
        file_id = attachment_id(attachment.ref)
        started = time.monotonic()
        try:
            refuse_oversized(attachment, max_bytes)
            client = self._client
            if client is None or client.is_closed():
                raise AttachmentError("discord: channel not started")
            try:
                data = await download(client.http, attachment.ref, max_bytes, self._send_timeout)
            except AttachmentError as exc:
                if not exc.gone or not attachment.origin:
                    raise
                # Expired (or deleted): the message it came in, read again, signs it anew if it is still there.
                url = await fresh_url(client.http, attachment.origin, attachment.ref)
                if url is None:
                    raise
                log.info("discord attachment url refreshed id=%s", file_id)
                data = await download(client.http, url, max_bytes, self._send_timeout)
        except AttachmentError as exc:
            # The reason is one of files.py's fixed lines: statuses and sizes, never the URL.
            log.info("discord attachment not fetched id=%s size=%s max=%d too_large=%s ms=%.0f reason=%s", file_id,
                     attachment.size, max_bytes, exc.too_large, (time.monotonic() - started) * 1000, exc)
            raise
        log.info("discord attachment fetched id=%s bytes=%d ms=%.0f", file_id, len(data),
                 (time.monotonic() - started) * 1000)
        return data

    # -- sending --------------------------------------------------------------------------------------
    def render(self, message: OutboundMessage) -> list[RenderedChunk]:
        """Discord-Markdown chunks of ≤ 2,000 characters; an attachment is one more chunk (text = file name)."""
        return with_attachment(render_chunks(message.text, MESSAGE_FORMAT), message)

    async def send_chunk(self, message: OutboundMessage, chunk: RenderedChunk, index: int, *,
                         plain: bool = False) -> SentMessage:
        """Post one chunk; the first replies to ``reply_to_message_id``, buttons ride on the last."""
        client = self._client
        if client is None or client.is_closed():
            raise SendError("discord: channel not started")
        # Buttons ride on the last chunk; a file, when there is one, is the last chunk (after the text).
        is_attachment = message.attachment_bytes is not None and chunk.last
        try:
            target = await self._target(client, message)
            options: dict[str, Any] = {"allowed_mentions": allowed_mentions(),
                                       "previous_allowed_mentions": client.allowed_mentions}
            # Sent with enforce_nonce: Discord answers a resend of a posted chunk with that message.
            options["nonce"] = message_nonce(message.delivery_key, index)
            reference = reply_reference(message.reply_to_message_id, target.id) if index == 0 else None
            if reference is not None:
                options["message_reference"] = reference.to_message_reference_dict()
            if message.buttons and chunk.buttons:
                options["view"] = button_view(message.buttons)
            if is_attachment:
                options["file"] = discord.File(io.BytesIO(message.attachment_bytes or b""),
                                               filename=message.attachment_name or "attachment")
            else:
                options["content"] = chunk.plain if plain else chunk.text
            sent_id = await self._post(client, target.id, options)
        except (discord.HTTPException, discord.RateLimited, aiohttp.ClientError, OSError, TimeoutError) as exc:
            error = send_error_for(exc)
            log.warning("discord send failed chat=%s chunk=%d error=%s status=%s permanent=%s retry_after=%s",
                        message.chat_id, index, type(exc).__name__, getattr(exc, "status", None), error.permanent,
                        error.retry_after)
            raise error from exc
        return SentMessage(f"{target.id}:{sent_id}")

    async def _post(self, client: discord.Client, channel_id: int, options: dict[str, Any]) -> int:
        """POST /channels/{id}/messages as ``Messageable.send`` does, with kith's answer timeout; the new id.

        discord.py's ``send`` takes no timeout and its session waits 300 s. Through ``http.request`` the
        timeout is aiohttp's own, per request: the rate-limit handling around it runs unchanged.
        """
        route = discord.http.Route("POST", "/channels/{channel_id}/messages", channel_id=channel_id)
        with discord.http.handle_message_parameters(**options) as params:
            if params.files:
                data = await client.http.request(route, files=params.files, form=params.multipart,
                                                 timeout=self._send_timeout)
            else:
                data = await client.http.request(route, json=params.payload, timeout=self._send_timeout)
        return int(data["id"])

    # -- previews: one message posted, then edited as the reply grows; the final reply edits it whole --------------
    def previews(self, chat_kind: ChatKind) -> bool:
        """Discord has no drafts: a preview is a message of the chat, edited, so only where one reply is wanted
        in any case (a DM; a group keeps whole replies)."""
        return chat_kind is ChatKind.DM

    async def post_preview(self, chat_id: str, thread_id: str | None, text: str) -> str:
        """The reply so far as a new message (its first chunk's worth); the message's id."""
        client = self._live_client()
        channel_id = snowflake(thread_id) or snowflake(chat_id)
        if channel_id is None:
            raise SendError(f"discord: not a channel id: {chat_id!r}", permanent=True)
        content = self._preview_content(text)
        try:
            sent_id = await self._post(client, channel_id, {"content": content,
                                                            "allowed_mentions": discord.AllowedMentions.none()})
        except (discord.HTTPException, discord.RateLimited, aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise send_error_for(exc) from exc
        return f"{channel_id}:{sent_id}"

    async def edit_preview(self, chat_id: str, message_id: str, text: str) -> None:
        """The preview message shows the reply so far."""
        await self._edit(message_id, self._preview_content(text), mentions=discord.AllowedMentions.none())

    async def replace_chunk(self, message: OutboundMessage, chunk: RenderedChunk, message_id: str, *,
                            plain: bool = False) -> SentMessage:
        """The reply's first chunk edits its preview message in place: one message, whole."""
        await self._edit(message_id, chunk.plain if plain else chunk.text, mentions=allowed_mentions(),
                         view=button_view(message.buttons) if message.buttons and chunk.buttons else None)
        return SentMessage(message_id)

    def _preview_content(self, text: str) -> str:
        chunks = render_chunks(settled(text), MESSAGE_FORMAT)
        return chunks[0].text if chunks else "…"

    def _live_client(self) -> discord.Client:
        client = self._client
        if client is None or client.is_closed():
            raise SendError("discord: channel not started")
        return client

    async def _edit(self, message_id: str, content: str, *, mentions: discord.AllowedMentions,
                    view: Any = None) -> None:
        client = self._live_client()
        channel_part, _, message_part = message_id.partition(":")
        channel_id, sent_id = snowflake(channel_part), snowflake(message_part)
        if channel_id is None or sent_id is None:
            raise SendError(f"discord: not a message id: {message_id!r}", permanent=True)
        route = discord.http.Route("PATCH", "/channels/{channel_id}/messages/{message_id}", channel_id=channel_id,
                                   message_id=sent_id)
        options: dict[str, Any] = {"content": content, "allowed_mentions": mentions,
                                   "previous_allowed_mentions": client.allowed_mentions}
        if view is not None:
            options["view"] = view
        try:
            with discord.http.handle_message_parameters(**options) as params:
                await client.http.request(route, json=params.payload, timeout=self._send_timeout)
        except (discord.HTTPException, discord.RateLimited, aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise send_error_for(exc) from exc

    async def _target(self, client: discord.Client, message: OutboundMessage) -> discord.abc.Messageable:
        """The channel to post to: the thread, the channel, or the DM (opened first when addressed by user)."""
        channel_id = snowflake(message.thread_id) or snowflake(message.chat_id)
        if channel_id is None:
            raise SendError(f"discord: not a channel id: {message.chat_id!r}", permanent=True)
        recipient = snowflake(message.recipient_id)
        if message.chat_kind is ChatKind.DM and recipient is not None and recipient == channel_id:
            # The core knows only the person: Discord needs the DM channel, which this opens (or finds).
            dm = self._dm_channels.get(recipient)
            if dm is None:
                opened = await client.create_dm(discord.Object(recipient))
                dm = self._dm_channels[recipient] = opened.id
            channel_id = dm
        return client.get_partial_messageable(channel_id)

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        client = self._client
        channel_id = snowflake(thread_id) or snowflake(chat_id)
        if client is None or client.is_closed() or channel_id is None:
            return
        try:
            await client.get_partial_messageable(channel_id).typing()
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.debug("discord typing failed chat=%s error=%s", chat_id, type(exc).__name__)


# --- doctor ----------------------------------------------------------------------------------------------
async def check_token(settings: DiscordSettings, token: str | None = None) -> tuple[bool, str]:
    """For ``bot.py doctor``: does Discord accept the token (GET /users/@me)? ``"@name (id N)"`` or why not."""
    token = token if token is not None else settings.token()
    if not token:
        return False, f"environment variable {settings.token_env} is not set"
    http = discord.http.HTTPClient(asyncio.get_running_loop())
    try:
        user = await http.static_login(token)
        return True, f"@{user['username']} (id {user['id']})"
    except discord.LoginFailure:
        return False, f"Discord rejected the token in {settings.token_env}"
    except discord.HTTPException as exc:
        return False, f"Discord answered HTTP {exc.status} to the token check"
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        return False, f"cannot reach Discord ({type(exc).__name__})"
    finally:
        await http.close()


__all__ = [
    "ChannelStartError",
    "DiscordChannel",
    "check_token",
]
