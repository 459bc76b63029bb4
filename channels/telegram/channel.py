"""The Telegram channel: python-telegram-bot's ``Bot`` for the Bot API, with our own intake loop.

Intake runs in one of two modes. Polling (the default) is our own ``getUpdates`` loop rather than
PTB's Updater, because the update offset is persisted so a restart neither loses nor replays an
update. Webhook mode runs an aiohttp server that Telegram POSTs updates to.

The order each update goes through, and why (``_poll``; ``_take_in`` in webhook mode):

1. The update is translated, and the journal records its id. An id taken in before (a redelivery
   after a crash, or the server sending one id twice) is dropped. Polling records a whole
   ``getUpdates`` batch in one transaction that also moves the stored offset
   (``telegram:<bot id>:offset``) past it; webhook mode records each update as it comes. The same
   transaction keeps each message in the inbox (``delivery.inbox``) until the core has answered it.
2. Hand-off: the translated update is queued for the core in its chat's lane (a task chain that
   keeps one chat's messages in order while other chats flow). Polling never waits for the core.
3. With the next ``getUpdates``, Telegram's own confirmation. In webhook mode the 200 answer plays
   that role.

A crash before 1 loses nothing: the update was not confirmed, Telegram sends it again. A crash after
1 replays nothing and loses no message: the journal drops the redelivery, and the next start takes
up what the inbox kept. Button presses are not kept: a press lost that way is pressed again. A clean
``stop()`` never cuts a batch between journal and hand-off, and lets handed-off handlers finish
(``stop_grace_s``).

Ignored updates (edits, stickers, service messages, channel posts, other bots' commands, odd or
malformed JSON) are journaled and confirmed like any other, so they are never fetched again; the
log names the update id and a fixed reason, never content.

The files messages carry are fetched only when the core reads one (``fetch_attachment``): getFile, then
PTB's download from the file server that named them, capped at the size the core allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import re
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Protocol
from urllib.parse import urlencode

from aiohttp import web
from telegram import Bot, File, InlineKeyboardButton, InlineKeyboardMarkup, ReplyParameters, Update
from telegram.constants import ChatAction
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    RetryAfter,
    TelegramError,
)
from telegram.warnings import PTBDeprecationWarning

from channels.http import serve_posts
from channels.lanes import HandlerLanes
from channels.markdown import render_chunks, with_attachment
from channels.markdown.partial import settled
from channels.telegram.formatting import MESSAGE_FORMAT
from channels.telegram.settings import TelegramSettings
from channels.telegram.translate import (
    ALLOWED_UPDATES,
    PLATFORM,
    BotIdentity,
    Skipped,
    Translated,
    parse_update,
    telegram_chat_id,
    telegram_message_id,
    telegram_thread_id,
    translate_update,
    update_id_of,
)
from channels.telegram.transport import AiohttpRequest, AnswerLost, BodyTooLarge, read_cap
from ground.failures import describe
from ground.tunables import (
    TELEGRAM_HTTP_TIMEOUT_S,
    TELEGRAM_POLL_BACKOFF_BASE_S,
    TELEGRAM_POLL_BACKOFF_MAX_S,
    TELEGRAM_POLL_READ_MARGIN_S,
    TELEGRAM_SEND_TIMEOUT_S,
    TELEGRAM_STOP_GRACE_S,
    TELEGRAM_UPDATE_ID_JUMP_MAX,
)
from ground.types import (
    Attachment,
    AttachmentError,
    Button,
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

log = logging.getLogger("kith.telegram")


def _carried(translated: Mapping[str, Translated | None]) -> dict[str, InboundMessage]:
    """The messages among translated updates (event id -> message): kept with their journal entries."""
    return {event_id: t for event_id, t in translated.items() if isinstance(t, InboundMessage)}

# --- Protocol facts ------------------------------------------------------------------------------
DEFAULT_BASE_URL = "https://api.telegram.org/bot"
DEFAULT_BASE_FILE_URL = "https://api.telegram.org/file/bot"
WEBHOOK_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
_WEBHOOK_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")  # what setWebhook accepts as secret_token
_PARSE_ERRORS = ("can't parse entities", "can't find end tag", "unsupported start tag", "unmatched end tag")
_GONE_CHAT_ERRORS = ("chat not found", "message thread not found", "topic_closed", "topic_deleted")
_FILE_TOO_BIG = "file is too big"  # getFile's refusal of a file past GET_FILE_MAX_BYTES
# PTB's placeholders for the token in a base URL (``Bot(base_url=...)``).
_TOKEN_PLACEHOLDERS = frozenset({"{token}", "{TOKEN}", "{bot_token}", "{BOT_TOKEN}", "{bot-token}", "{BOT-TOKEN}"})
# A download's read budget: a file may be up to GET_FILE_MAX_BYTES, far more than any answer of the API.
DOWNLOAD_READ_TIMEOUT_S = 60.0

DEFAULT_COMMANDS: tuple[tuple[str, str], ...] = (("start", "Say hello"), ("help", "What I can do"))


class CursorStore(Protocol):
    async def get(self, name: str) -> int | None: ...


# --- Pure decisions --------------------------------------------------------------------------------
def poll_backoff_s(failures: int, *, base_s: float, max_s: float, retry_after: float | None = None) -> float:
    """Seconds to wait after the ``failures``-th failed poll in a row; Telegram's own figure wins."""
    if retry_after is not None:
        return max(retry_after, 0.0)
    return min(max_s, base_s * 2 ** max(failures - 1, 0))


def retry_after_seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():
        # PTB 22 warns that retry_after will become a timedelta; we accept both.
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return float(value.total_seconds()) if hasattr(value, "total_seconds") else float(value)


def send_error_for(exc: TelegramError) -> SendError:
    """The core's SendError for a failed Bot API send: retry later, never retry, or resend without markup."""
    if isinstance(exc, RetryAfter):
        return SendError("telegram: flood control", retry_after=retry_after_seconds(exc))
    if isinstance(exc, AnswerLost):
        return SendError("telegram: answer lost", maybe_delivered=True)
    if isinstance(exc, Forbidden):
        return SendError("telegram: forbidden (bot blocked, kicked or not allowed)", permanent=True)
    if isinstance(exc, ChatMigrated):
        return SendError(f"telegram: group moved to chat {exc.new_chat_id}", permanent=True)
    if isinstance(exc, InvalidToken):
        return SendError("telegram: token rejected", permanent=True)
    if isinstance(exc, BadRequest):  # before NetworkError: PTB makes BadRequest a NetworkError
        complaint = exc.message.lower()
        if any(marker in complaint for marker in _PARSE_ERRORS):
            return SendError("telegram: formatting refused", bad_formatting=True)
        if any(marker in complaint for marker in _GONE_CHAT_ERRORS):
            return SendError("telegram: chat not found", permanent=True)
        # The same request would be refused the same way again.
        return SendError("telegram: bad request", permanent=True)
    # NetworkError, TimedOut, gateway 5xx, Conflict: worth another try.
    return SendError(f"telegram: {type(exc).__name__}")


@dataclass(frozen=True, slots=True)
class OffsetStep:
    """Where polling goes after a batch (``offset_step``)."""

    next_offset: int  # the next getUpdates' offset
    stored: int  # the offset recorded with the batch: where a restart polls from
    jumped_to: int | None = None  # an update id far above the ones before it
    resume_at: int | None = None  # after one quick poll that confirms the jumped id, polling goes on from here


def offset_step(ids: Sequence[int], fetched_from: int | None, *, high: int | None = None,
                jump_max: int = TELEGRAM_UPDATE_ID_JUMP_MAX) -> OffsetStep:
    """The offsets after a batch of update ``ids`` (in the order they came) fetched with ``fetched_from``.

    The offset follows the batch, not the maximum: after a week of silence Telegram restarts update ids at
    a random, possibly lower number, and an offset above them would fetch the same update forever. An id
    ``jump_max`` or more above every other reference (the offset it was fetched with, the batch's other ids,
    ``high``: an earlier jump) is not trusted as a restart point: one poll moves past it, which is the only way
    to confirm it, and polling then goes back to where the ids before it left off, so one stray id cannot
    leave every later, ordinary id below the offset. Should the ids really have moved up there, the next
    batch comes from above ``high`` and is followed as usual.
    """
    after = ids[-1] + 1
    references = [r for r in (fetched_from, high, ids[-2] if len(ids) > 1 else None) if r is not None]
    if not references or ids[-1] < max(references) + jump_max:
        return OffsetStep(after, after)
    before = [i for i in ids if i < max(references) + jump_max]
    resume = before[-1] + 1 if before else fetched_from if fetched_from is not None else after
    return OffsetStep(after, resume, jumped_to=ids[-1], resume_at=resume)


def inline_keyboard(buttons: Sequence[Button]) -> InlineKeyboardMarkup:
    """One button per row: labels stay readable on a phone whatever their length."""
    return InlineKeyboardMarkup([[InlineKeyboardButton(b.label, callback_data=b.data)] for b in buttons])


def base_urls(settings: TelegramSettings) -> tuple[str, str]:
    """The Bot API and file URLs; a self-hosted server's ``.../bot`` gets its ``.../file/bot`` twin.

    PTB's ``{token}`` placeholder is followed too (``.../bot{token}`` -> ``.../file/bot{token}``): files are
    fetched from the server that named them, a self-hosted one (or a test fake) included.
    """
    base = settings.base_url or DEFAULT_BASE_URL
    if not settings.base_url:
        return base, DEFAULT_BASE_FILE_URL
    head, bot, tail = base.rpartition("/bot")
    if bot and (not tail or tail in _TOKEN_PLACEHOLDERS):
        return base, f"{head}/file/bot{tail}"
    return base, DEFAULT_BASE_FILE_URL


# --- Transport -----------------------------------------------------------------------------------
def _make_bot(settings: TelegramSettings, token: str, *,
              send_timeout_s: float = TELEGRAM_SEND_TIMEOUT_S) -> tuple[Bot, AiohttpRequest]:
    """The Bot, and the transport of its own that long polls (``TelegramChannel._get_updates``)."""
    base_url, base_file_url = base_urls(settings)
    request = AiohttpRequest(read_timeout=send_timeout_s, write_timeout=TELEGRAM_HTTP_TIMEOUT_S,
                             connect_timeout=TELEGRAM_HTTP_TIMEOUT_S, pool_timeout=TELEGRAM_HTTP_TIMEOUT_S)
    # Polling holds its connection for up to poll_timeout_s; it gets its own pool so a long poll never
    # waits behind a send, nor a send behind it.
    updates_request = AiohttpRequest(connection_pool_size=1, read_timeout=TELEGRAM_POLL_READ_MARGIN_S,
                                     write_timeout=TELEGRAM_HTTP_TIMEOUT_S, connect_timeout=TELEGRAM_HTTP_TIMEOUT_S,
                                     pool_timeout=TELEGRAM_HTTP_TIMEOUT_S)
    bot = Bot(token, base_url=base_url, base_file_url=base_file_url, request=request,
              get_updates_request=updates_request)
    return bot, updates_request


# --- The channel ---------------------------------------------------------------------------------
class TelegramChannel:
    name = PLATFORM

    def __init__(
        self,
        settings: TelegramSettings,
        token: str,
        *,
        journal: EventJournal,
        cursors: CursorStore,
        clock: Callable[[], datetime] = utcnow,
        commands: Sequence[tuple[str, str]] = DEFAULT_COMMANDS,
        webhook_secret: str | None = None,
        poll_backoff_base_s: float = TELEGRAM_POLL_BACKOFF_BASE_S,
        poll_backoff_max_s: float = TELEGRAM_POLL_BACKOFF_MAX_S,
        stop_grace_s: float = TELEGRAM_STOP_GRACE_S,
        send_timeout_s: float = TELEGRAM_SEND_TIMEOUT_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if settings.mode not in ("polling", "webhook"):
            raise ValueError(f"telegram.mode must be 'polling' or 'webhook', not {settings.mode!r}")
        self.settings = settings
        self._token = token
        self._journal = journal
        self._cursors = cursors
        self._clock = clock
        self._commands = [(name, description) for name, description in commands]
        # Read from settings.webhook_secret_env at start unless given; never logged.
        self._webhook_secret = webhook_secret
        self._backoff_base_s = poll_backoff_base_s
        self._backoff_max_s = poll_backoff_max_s
        self._stop_grace_s = stop_grace_s
        self._send_timeout_s = send_timeout_s
        self._sleep = sleep
        self._bot: Bot | None = None
        self._updates_request: AiohttpRequest | None = None
        self._me: BotIdentity | None = None
        self._on_message: InboundHandler | None = None
        self._on_button: ButtonHandler | None = None
        self._runner_task: asyncio.Task[None] | None = None
        self._webhook_runner: web.AppRunner | None = None
        self._webhook_port: int | None = None
        self._lanes = HandlerLanes("telegram", log)
        self._offset: int | None = None
        self._jumped_to: int | None = None  # an update id far above the rest, until the next batch tells more
        self._resume_at: int | None = None  # the offset to go back to once a quick poll confirmed that id
        # Held while a fetched batch is taken in, so stop() never cuts a batch between journal and cursor.
        self._batch_lock = asyncio.Lock()
        self.ready = asyncio.Event()  # set once getMe and the mode's registration succeeded

    # -- what others may read --------------------------------------------------------------------
    @property
    def identity(self) -> BotIdentity | None:
        """The bot's id and username, once getMe answered."""
        return self._me

    @property
    def webhook_port(self) -> int | None:
        """The port the webhook server listens on (useful with webhook_port = 0)."""
        return self._webhook_port

    @property
    def offset_cursor(self) -> str | None:
        return None if self._me is None else f"telegram:{self._me.id}:offset"

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self, on_message: InboundHandler, on_button: ButtonHandler | None = None) -> None:
        """Connect and begin intake. Raises ChannelStartError when the token or the setup is unusable.

        Telegram being unreachable is not fatal: the channel keeps trying in the background.
        """
        self._on_message = on_message
        self._on_button = on_button
        if self.settings.mode == "webhook":
            self._check_webhook_settings()
        self._bot, self._updates_request = _make_bot(self.settings, self._token, send_timeout_s=self._send_timeout_s)
        try:
            if self.settings.mode == "webhook":
                # Listen before setWebhook, so Telegram's first POST finds us.
                await self._start_webhook_server()
            await self._prepare()
        except InvalidToken:
            await self._close_after_failed_start()
            log.error("telegram token rejected by the Bot API; channel not started (token_env=%s)",
                      self.settings.token_env)
            raise ChannelStartError(f"telegram: the token in {self.settings.token_env} was rejected") from None
        except TelegramError as exc:
            log.warning("telegram not reachable at start error=%s; retrying in the background",
                        type(exc).__name__)
        except BaseException:
            await self._close_after_failed_start()
            raise
        self._runner_task = asyncio.create_task(self._run(), name="telegram-intake")

    async def _close_after_failed_start(self) -> None:
        if self._webhook_runner is not None:
            runner, self._webhook_runner = self._webhook_runner, None
            await runner.cleanup()
        if self._bot is not None:
            bot, self._bot = self._bot, None
            with contextlib.suppress(TelegramError):
                await bot.shutdown()

    async def stop(self) -> None:
        """Stop intake, let handed-off updates finish (up to stop_grace_s), then close the Bot."""
        if self._runner_task is not None:
            async with self._batch_lock:  # a batch being taken in finishes first
                self._runner_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner_task
            self._runner_task = None
        if self._webhook_runner is not None:
            runner, self._webhook_runner = self._webhook_runner, None
            await runner.cleanup()
        await self._lanes.stop(self._stop_grace_s)
        if self._bot is not None:
            bot, self._bot = self._bot, None
            with contextlib.suppress(TelegramError):
                await bot.shutdown()
        self.ready.clear()

    async def _prepare(self) -> None:
        """getMe, then deleteWebhook (polling) or setWebhook (webhook mode), then setMyCommands."""
        bot = self._require_bot()
        if self._me is None:
            await bot.initialize()  # calls getMe; raises InvalidToken for a rejected token
            user = bot.bot
            self._me = BotIdentity(id=user.id, username=user.username or "")
            log.info("telegram connected bot_id=%d", user.id)
        if self.settings.mode == "webhook":
            await bot.set_webhook(self.settings.webhook_url, secret_token=self._webhook_secret,
                                  allowed_updates=list(ALLOWED_UPDATES), drop_pending_updates=False)
        else:
            # A webhook left from an earlier run would make every getUpdates a Conflict.
            await bot.delete_webhook(drop_pending_updates=False)
        try:
            await bot.set_my_commands(self._commands)
        except TelegramError as exc:
            # The command menu is a convenience; a bot without it still works.
            log.warning("telegram setMyCommands failed count=%d error=%s", len(self._commands), type(exc).__name__)
        self.ready.set()

    async def _run(self) -> None:
        failures = 0
        while not self.ready.is_set():
            try:
                await self._prepare()
            except InvalidToken:
                log.error("telegram token rejected by the Bot API; intake stopped (token_env=%s)",
                          self.settings.token_env)
                return
            except TelegramError as exc:
                failures += 1
                delay = self._backoff(failures, exc)
                log.warning("telegram setup failed attempt=%d error=%s retry_in_s=%.1f", failures,
                            type(exc).__name__, delay)
                await self._sleep(delay)
        if self.settings.mode == "polling":
            await self._poll()

    def _backoff(self, failures: int, exc: BaseException) -> float:
        retry_after = retry_after_seconds(exc) if isinstance(exc, RetryAfter) else None
        return poll_backoff_s(failures, base_s=self._backoff_base_s, max_s=self._backoff_max_s,
                              retry_after=retry_after)

    # -- polling ---------------------------------------------------------------------------------
    async def _poll(self) -> None:
        bot = self._require_bot()
        key = self.offset_cursor
        assert key is not None
        failures = 0
        loaded = False
        while True:
            try:
                if not loaded:
                    self._offset = await self._cursors.get(key)
                    loaded = True
                    log.info("telegram polling from offset=%s", self._offset)
                started = time.monotonic()
                fetched_from = self._offset
                updates = await self._get_updates(bot, quick=self._resume_at is not None)
                failures = 0
                if not updates and self._resume_at is not None:
                    # The quick poll confirmed the jumped id and nothing came after it: back to the ordinary ids.
                    log.info("telegram polling resumes below the jumped id offset=%d", self._resume_at)
                    self._offset, self._resume_at = self._resume_at, None
                async with self._batch_lock:
                    if updates:
                        # The whole batch recorded, its messages kept until the core has decided on them,
                        # and the offset moved past it, in one transaction (``offset_step``).
                        step = offset_step([u.update_id for u in updates], fetched_from, high=self._jumped_to)
                        translated = {str(u.update_id): self._translate(u) for u in updates}
                        fresh = await self._journal.record_batch(
                            PLATFORM, list(translated), cursor=key, cursor_to=step.stored,
                            messages=_carried(translated))
                        self._offset = step.next_offset
                        self._jumped_to, self._resume_at = step.jumped_to, step.resume_at
                        if step.jumped_to is not None:
                            log.warning("telegram update_id jumped update_id=%d fetched_from=%s resume_at=%s",
                                        step.jumped_to, fetched_from, step.resume_at)
                        for update in updates:
                            if str(update.update_id) in fresh:
                                fresh.discard(str(update.update_id))  # once, should the batch repeat an id
                                try:
                                    self._hand_off(update, translated[str(update.update_id)])
                                except Exception as exc:  # recorded already: one failure must not cost the rest
                                    log.error("telegram hand-off failed update_id=%d error=%s", update.update_id,
                                              type(exc).__name__)
                            else:
                                log.info("telegram redelivery dropped update_id=%d", update.update_id)
                if updates:
                    log.debug("telegram batch count=%d first=%d ms=%.0f", len(updates), updates[0].update_id,
                              (time.monotonic() - started) * 1000)
                continue
            except asyncio.CancelledError:
                raise
            except InvalidToken:
                log.error("telegram token rejected by the Bot API; polling stopped (token_env=%s)",
                          self.settings.token_env)
                return
            except Conflict as exc:
                failures += 1
                log.warning("telegram poll conflict (another instance polling, or a webhook is set) attempt=%d",
                            failures)
                error: BaseException = exc
            except TelegramError as exc:
                failures += 1
                log.warning("telegram poll failed error=%s attempt=%d", type(exc).__name__, failures)
                error = exc
            except Exception as exc:
                # Recording the batch failed: nothing of it was kept and the offset did not move, so the
                # same batch comes again once the database answers.
                failures += 1
                log.error("telegram intake failed error=%s attempt=%d", describe(exc), failures)
                error = exc
            await self._sleep(self._backoff(failures, error))

    async def _get_updates(self, bot: Bot, *, quick: bool = False) -> list[Update]:
        """One long poll (``quick``: one that answers at once), each update parsed once, here rather than by
        ``Bot.get_updates``.

        PTB parses a batch all at once: one malformed update would fail the batch on every fetch,
        and PTB then logs the whole batch, message texts included. Here a malformed update becomes a
        bare one with its id (``parse_update``) and the rest of its batch goes on.
        """
        assert self._updates_request is not None
        params: dict[str, object] = {"timeout": 0 if quick else self.settings.poll_timeout_s,
                                     "allowed_updates": json.dumps(list(ALLOWED_UPDATES))}
        if self._offset is not None:
            params["offset"] = self._offset
        # The parameters travel in the query string, which the Bot API takes as it takes a form.
        result = await self._updates_request.post(
            f"{bot.base_url}/getUpdates?{urlencode(params)}",
            read_timeout=TELEGRAM_POLL_READ_MARGIN_S + self.settings.poll_timeout_s)
        if not isinstance(result, list):
            raise TelegramError("getUpdates answered without a list of updates")
        return [update for update in map(self._parse, result) if update is not None]

    def _parse(self, raw: object) -> Update | None:
        """``parse_update``, logging a malformed update by id and reason (never its content)."""
        update, error = parse_update(raw, self._bot)
        if error is not None:
            log.warning("telegram update malformed update_id=%s error=%s", update_id_of(raw), error)
        return update

    # -- webhook ---------------------------------------------------------------------------------
    def _check_webhook_settings(self) -> None:
        if self._webhook_secret is None:
            self._webhook_secret = _env(self.settings.webhook_secret_env)
        if not self.settings.webhook_url:
            raise ChannelStartError("telegram: mode is webhook but telegram.webhook_url is empty")
        if not self._webhook_secret or not _WEBHOOK_SECRET.fullmatch(self._webhook_secret):
            raise ChannelStartError(
                f"telegram: webhook mode needs {self.settings.webhook_secret_env} set to 1-256 characters "
                "of A-Z, a-z, 0-9, _ and -"
            )

    async def _start_webhook_server(self) -> None:
        runner = await serve_posts(self._on_webhook, self.settings.webhook_host, self.settings.webhook_port,
                                   "telegram")
        self._webhook_runner = runner
        self._webhook_port = runner.addresses[0][1]
        log.info("telegram webhook listening host=%s port=%d", self.settings.webhook_host, self._webhook_port)

    async def _on_webhook(self, request: web.Request) -> web.Response:
        offered = request.headers.get(WEBHOOK_SECRET_HEADER, "").encode()
        expected = (self._webhook_secret or "").encode()
        if not expected or not hmac.compare_digest(offered, expected):
            log.warning("telegram webhook refused: bad secret remote=%s", request.remote)
            return web.Response(status=401)
        if self._me is None or self._bot is None:
            return web.Response(status=503)  # getMe has not answered yet; Telegram will retry
        try:
            raw = await request.json()
        except ValueError:
            log.warning("telegram webhook body is not JSON")
            return web.Response(status=400)
        update = self._parse(raw)
        if update is None:  # without an id it can be neither deduped nor confirmed
            return web.Response(status=400)
        try:
            await self._take_in(update)
        except Exception as exc:
            # Not recorded: a non-2xx answer makes Telegram deliver it again later.
            log.error("telegram webhook intake failed update_id=%d error=%s", update.update_id, describe(exc))
            return web.Response(status=500)
        return web.Response(status=200)

    # -- intake: journal, translate, hand off -------------------------------------------------------
    async def _take_in(self, update: Update) -> None:
        translated = self._translate(update)
        carried = translated if isinstance(translated, InboundMessage) else None
        if not await self._journal.record(PLATFORM, str(update.update_id), message=carried):
            log.info("telegram redelivery dropped update_id=%d", update.update_id)
            return
        self._hand_off(update, translated)

    def _translate(self, update: Update) -> Translated | None:
        """The update in the core's terms; None (logged by id) when it cannot be translated."""
        me = self._me
        assert me is not None
        try:
            return translate_update(update, me, received_at=self._clock())
        except Exception as exc:
            log.warning("telegram update ignored update_id=%d reason=untranslatable error=%s", update.update_id,
                        type(exc).__name__)
            return None

    def _hand_off(self, update: Update, translated: Translated | None) -> None:
        """Queue a recorded update, translated, on its chat's lane."""
        if translated is None:
            return
        if isinstance(translated, Skipped):
            log.info("telegram update ignored update_id=%d reason=%s chat=%s", update.update_id,
                     translated.reason, translated.chat_id)
            return
        if isinstance(translated, ButtonPress):
            query = update.callback_query
            assert query is not None
            self._lanes.spawn(self._answer_button(query.id, update.update_id))
            if self._on_button is None:
                log.info("telegram button ignored update_id=%d reason=no_button_handler", update.update_id)
                return
            self._lanes.enqueue(translated.chat_id, partial(self._on_button, translated), update.update_id)
            return
        self._lanes.enqueue(translated.chat_id, partial(self._deliver_inbound, translated), update.update_id)

    async def _deliver_inbound(self, message: InboundMessage) -> None:
        assert self._on_message is not None
        await self._on_message(message)

    async def _answer_button(self, query_id: str, update_id: int) -> None:
        # Answered at once, before the core runs, so the person's button stops spinning.
        try:
            await self._require_bot().answer_callback_query(query_id)
        except TelegramError as exc:
            log.info("telegram answerCallbackQuery failed update_id=%d error=%s", update_id, type(exc).__name__)

    # -- sending ---------------------------------------------------------------------------------
    def render(self, message: OutboundMessage) -> list[RenderedChunk]:
        """Telegram HTML chunks of the text; an attachment is one more chunk (its text is the file name)."""
        return with_attachment(render_chunks(message.text, MESSAGE_FORMAT), message)

    async def send_chunk(self, message: OutboundMessage, chunk: RenderedChunk, index: int, *,
                         plain: bool = False) -> SentMessage:
        if self._bot is None:
            raise SendError("telegram: channel not started")
        bot = self._bot
        # Buttons ride on the last chunk; a file, when there is one, is the last chunk (after the text).
        is_attachment = message.attachment_bytes is not None and chunk.last
        markup = inline_keyboard(message.buttons) if message.buttons and chunk.buttons else None
        reply_id = telegram_message_id(message.reply_to_message_id) if index == 0 else None
        reply = None if reply_id is None else ReplyParameters(reply_id, allow_sending_without_reply=True)
        chat_id = telegram_chat_id(message.chat_id)
        thread_id = telegram_thread_id(message.thread_id)
        try:
            if is_attachment:
                sent = await bot.send_document(chat_id, message.attachment_bytes or b"",
                                               filename=message.attachment_name or "attachment",
                                               message_thread_id=thread_id, reply_parameters=reply,
                                               reply_markup=markup)
            else:
                sent = await bot.send_message(chat_id, chunk.plain if plain else chunk.text,
                                              parse_mode=None if plain else chunk.parse_mode,
                                              message_thread_id=thread_id, reply_parameters=reply,
                                              reply_markup=markup)
        except TelegramError as exc:
            error = send_error_for(exc)
            log.warning("telegram send failed chat=%s chunk=%d error=%s permanent=%s maybe_delivered=%s",
                        message.chat_id, index, type(exc).__name__, error.permanent, error.maybe_delivered)
            raise error from exc
        return SentMessage(str(sent.message_id))

    def previews(self, chat_kind: ChatKind) -> bool:
        """Telegram shows a reply as it grows only in a private chat (a message draft)."""
        return chat_kind is ChatKind.DM

    async def preview(self, chat_id: str, thread_id: str | None, preview_id: int, text: str) -> None:
        """The reply so far as a message draft: a 30-second preview the final message replaces, so nothing of it
        stays in the chat. Its first message's worth only (the final reply may run to several)."""
        if self._bot is None:
            raise SendError("telegram: channel not started")
        chunks = render_chunks(settled(text), MESSAGE_FORMAT)
        if not chunks:
            return
        try:
            await self._bot.send_message_draft(telegram_chat_id(chat_id), preview_id, chunks[0].text,
                                               message_thread_id=telegram_thread_id(thread_id),
                                               parse_mode=chunks[0].parse_mode)
        except TelegramError as exc:
            raise send_error_for(exc) from exc

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        if self._bot is None:
            return
        try:
            await self._bot.send_chat_action(telegram_chat_id(chat_id), ChatAction.TYPING,
                                             message_thread_id=telegram_thread_id(thread_id))
        except TelegramError as exc:
            log.debug("telegram typing failed chat=%s error=%s", chat_id, type(exc).__name__)

    # -- files messages carry ----------------------------------------------------------------------
    async def fetch_attachment(self, attachment: Attachment, max_bytes: int) -> bytes:
        """The bytes of a file a message carries: getFile, then PTB's own download from the Bot API's file URL.

        Refused as too large before anything is fetched when Telegram's size says so (the message's, then
        getFile's), and cut off once the download grows past ``max_bytes``. The file URL holds the bot token:
        it is never logged, and no error raised here carries it (nor any exception chained to it).
        """
        if self._bot is None:
            raise AttachmentError("telegram: channel not started")
        started = time.monotonic()
        try:
            _refuse_past(attachment.size, max_bytes)
            file = await self._get_file(self._bot, attachment)
            _refuse_past(file.file_size, max_bytes)
            data = await _download(file, max_bytes)
        except AttachmentError as exc:
            log.info("telegram attachment not fetched kind=%s size=%s max_bytes=%d too_large=%s ms=%.0f error=%s",
                     attachment.kind, attachment.size, max_bytes, exc.too_large, _ms_since(started), exc)
            raise
        log.info("telegram attachment fetched kind=%s file=%s bytes=%d ms=%.0f", attachment.kind,
                 file.file_unique_id, len(data), _ms_since(started))
        return data

    async def _get_file(self, bot: Bot, attachment: Attachment) -> File:
        """getFile through the Bot's transport, and the File PTB downloads from, with its file URL.

        Not ``Bot.get_file``: it logs its answer (at debug) and then writes the file URL, token included, into
        the very dict it logged, so a handler formatting the record later would write the token down.
        """
        # The parameter travels in the query string, which the Bot API takes as it takes a form (as getUpdates').
        url = f"{bot.base_url}/getFile?{urlencode({'file_id': attachment.ref})}"
        try:
            result = await bot.request.post(url)
        except BadRequest as exc:  # before TelegramError: PTB makes BadRequest a NetworkError
            if _FILE_TOO_BIG in exc.message.lower():
                raise AttachmentError("telegram: file past the Bot API's download limit", too_large=True) from None
            raise AttachmentError(f"telegram: getFile refused ({type(exc).__name__})") from None
        except TelegramError as exc:
            raise AttachmentError(f"telegram: getFile failed ({type(exc).__name__})") from None
        return _file_of(result, bot)

    def _require_bot(self) -> Bot:
        if self._bot is None:
            raise RuntimeError("telegram channel is not started")
        return self._bot


def _refuse_past(size: int | None, max_bytes: int) -> None:
    if size is not None and size > max_bytes:
        raise AttachmentError(f"telegram: file of {size} bytes, past {max_bytes}", too_large=True)


def _file_of(result: object, bot: Bot) -> File:
    """getFile's answer as PTB's File, its relative ``file_path`` made the URL on the Bot's file server."""
    if not isinstance(result, dict):
        raise AttachmentError("telegram: getFile answered without a file")
    path = result.get("file_path")
    answer = {**result, "file_path": f"{bot.base_file_url}/{path}"} if path else result
    try:
        return File.de_json(answer, bot)
    except (TypeError, ValueError, KeyError) as exc:  # an answer of an odd shape: a broken proxy or server
        raise AttachmentError(f"telegram: getFile answered an odd file ({type(exc).__name__})") from None


async def _download(file: File, max_bytes: int) -> bytes:
    """``file``'s bytes through PTB's download (the Bot's own transport), at most ``max_bytes`` of them.

    Errors are raised ``from None``: PTB's and aiohttp's exceptions may quote the file URL, and with it the token.
    """
    if not file.file_path:
        raise AttachmentError("telegram: getFile gave no file path")
    try:
        with read_cap(max_bytes):
            return bytes(await file.download_as_bytearray(read_timeout=DOWNLOAD_READ_TIMEOUT_S))
    except BodyTooLarge:
        raise AttachmentError(f"telegram: download past {max_bytes} bytes", too_large=True) from None
    except TelegramError as exc:
        raise AttachmentError(f"telegram: download failed ({type(exc).__name__})") from None
    except OSError as exc:  # a local-mode path PTB reads from disk
        raise AttachmentError(f"telegram: download failed ({type(exc).__name__})") from None


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000


# --- doctor --------------------------------------------------------------------------------------
async def check_token(settings: TelegramSettings, token: str | None = None) -> tuple[bool, str]:
    """For ``bot.py doctor``: does the Bot API accept the token? ``"@username (id N)"`` or the reason."""
    token = token if token is not None else settings.token()
    if not token:
        return False, f"environment variable {settings.token_env} is not set"
    try:
        bot, _ = _make_bot(settings, token)
    except InvalidToken:
        return False, f"the token in {settings.token_env} is empty or malformed"
    try:
        await bot.initialize()
        user = bot.bot
        return True, f"@{user.username} (id {user.id})"
    except InvalidToken:
        return False, f"Telegram rejected the token in {settings.token_env}"
    except TelegramError as exc:
        where = settings.base_url or DEFAULT_BASE_URL
        return False, f"cannot reach the Bot API at {where} ({type(exc).__name__})"
    finally:
        with contextlib.suppress(TelegramError):
            await bot.shutdown()


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


__all__ = [
    "DEFAULT_COMMANDS",
    "ChannelStartError",
    "TelegramChannel",
    "check_token",
    "inline_keyboard",
    "poll_backoff_s",
    "send_error_for",
]
