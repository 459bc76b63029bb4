"""The reply as it grows, shown in the chat while the model writes it.

A preview is never the reply. The reply goes through the outbox exactly as an unstreamed one does, and each
platform's preview is one the final send supersedes without a second message: a Telegram draft is replaced by the
message that follows it; on Discord and Slack the preview is a message, noted durably as soon as the platform took
it (:mod:`delivery.previews`), and the outbox's send of the reply edits that message into the whole reply. A turn
taken up again after a crash goes on editing the same message. So a preview that fails, stalls or is cut short by
a crash costs nothing but itself: the person still gets the whole reply, once.

It writes at its own pace (the first words ``first_delay_s`` after they come, then at most one update per
``min_gap_s``; a reply done within that first moment is never previewed at all, so a quick reply costs the
platform no extra request) and asks the chat's
rate gate (:mod:`delivery.rate_gate`) before each write: a platform's 429 closes the chat for every writer, and one
longer than ``give_up_s`` ends the preview, so the final reply is sent once, when allowed, instead of previews
earning a longer ban. A platform that refuses previews outright (an error that names no wait) ends it too. Each
update shows the text settled (:func:`channels.markdown.partial.settled` is applied by the channel): no half-opened
bold or link flashes up.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Protocol, runtime_checkable

from delivery.previews import PreviewKey
from delivery.rate_gate import RateGate
from ground.tunables import PREVIEW_WRITE_GRACE_S, STREAM_FIRST_DELAY_S
from ground.types import ChatKind, InboundMessage, SendError

log = logging.getLogger("kith.preview")


class PreviewChannel(Protocol):
    name: str

    def previews(self, chat_kind: ChatKind) -> bool:
        """Whether this platform can preview a reply in such a chat."""
        ...


@runtime_checkable
class DraftPreviews(PreviewChannel, Protocol):
    """A platform with drafts the final message replaces (Telegram)."""

    async def preview(self, chat_id: str, thread_id: str | None, preview_id: int, text: str) -> None:
        """Show ``text`` (the reply so far, Markdown) as preview ``preview_id``; raise SendError on failure."""
        ...


@runtime_checkable
class MessagePreviews(PreviewChannel, Protocol):
    """A platform whose preview is a message, edited (Discord, Slack)."""

    async def post_preview(self, chat_id: str, thread_id: str | None, text: str) -> str:
        """Post the reply so far; the new message's id. SendError on failure."""
        ...

    async def edit_preview(self, chat_id: str, message_id: str, text: str) -> None:
        """Show the reply so far in message ``message_id``. SendError on failure."""
        ...


class PreviewNotes(Protocol):
    """Where a preview message is noted (:mod:`delivery.previews`), so the final reply edits it."""

    async def noted(self, key: PreviewKey) -> str | None: ...

    async def note(self, key: PreviewKey, message_id: str) -> None: ...


def preview_id(message: InboundMessage) -> int:
    """A non-zero number naming the preview of the reply to ``message`` (the same after a restart)."""
    key = f"{message.platform}:{message.chat_id}:{message.message_id}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big") % (2**31 - 1) + 1


class ReplyPreview:
    """``async with ReplyPreview(...) as preview:`` around the model call; ``preview.grew`` is its text sink."""

    def __init__(self, channel: DraftPreviews | MessagePreviews, message: InboundMessage, gate: RateGate, *,
                 min_gap_s: float, give_up_s: float, notes: PreviewNotes | None = None,
                 first_delay_s: float = STREAM_FIRST_DELAY_S, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.channel = channel
        self.notes = notes  # needed by a platform whose preview is a message
        self.key = PreviewKey(message.platform, message.chat_id, message.message_id)
        self._message_id: str | None = None  # the preview message, once posted (or found from before a restart)
        self._looked = False
        self.message = message
        self.gate = gate
        self.min_gap_s = min_gap_s
        self.give_up_s = give_up_s
        self.first_delay_s = first_delay_s
        self._clock = clock
        self._sleep = sleep
        self._id = preview_id(message)
        self._latest = ""
        self._shown = ""
        self._changed = asyncio.Event()
        self._idle = asyncio.Event()  # no write to the platform under way
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self.sent = 0  # updates the platform took
        self.first_at: float | None = None  # when the first one was taken (clock)
        self.ended: str = ""  # why it stopped early: "rate_limited", "refused", or "" (ran to the reply)

    def grew(self, text: str) -> None:
        """The reply's text so far (a TextSink): the next update shows it."""
        self._latest = text
        self._changed.set()

    async def __aenter__(self) -> ReplyPreview:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"preview:{self.channel.name}")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._task is not None:
            # A write under way finishes first: cut off, a preview message the platform took would go unnoted, and
            # the reply, queued next, would be posted beside it instead of editing it.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PREVIEW_WRITE_GRACE_S):
                    await self._idle.wait()
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.sent or self.ended:
            log.info("preview platform=%s chat=%s updates=%d ended=%s", self.message.platform,
                     self.message.chat_id, self.sent, self.ended or "-")

    async def _run(self) -> None:
        platform, chat = self.message.platform, self.message.chat_id
        await self._changed.wait()
        await self._sleep(self.first_delay_s)
        while True:
            await self._changed.wait()
            self._changed.clear()
            wait = self.gate.wait_s(platform, chat)
            if wait > self.give_up_s:
                self.ended = "rate_limited"
                return
            if wait > 0:
                await self._sleep(wait)
            text = self._latest
            if not text.strip() or text == self._shown:
                continue
            self._idle.clear()
            try:
                await self._write(text)
            except SendError as error:
                if error.retry_after is not None:
                    self.gate.refused(platform, chat, error.retry_after)
                    if error.retry_after > self.give_up_s:
                        self.ended = "rate_limited"
                        return
                    self._changed.set()  # try the newest text once the chat opens again
                    continue
                self.ended = "refused"  # the platform will not preview here: the reply comes whole
                return
            except Exception as exc:  # a preview is cosmetic: it never breaks the reply
                log.warning("preview failed platform=%s chat=%s error=%s", platform, chat, type(exc).__name__)
                self.ended = "refused"
                return
            self._shown = text
            self.sent += 1
            if self.first_at is None:
                self.first_at = self._clock()
            await self._sleep(self.min_gap_s)

    async def _write(self, text: str) -> None:
        try:
            await self._show(text)
        finally:
            self._idle.set()

    async def _show(self, text: str) -> None:
        chat, channel = self.message.chat_id, self.channel
        if isinstance(channel, DraftPreviews):
            await channel.preview(chat, self.message.thread_id, self._id, text)
            return
        if self.notes is None:
            raise SendError("preview: no place to note a preview message", permanent=True)
        if not self._looked:  # a turn taken up again after a restart goes on with the message it had posted
            self._looked = True
            self._message_id = await self.notes.noted(self.key)
        if self._message_id is not None:
            await channel.edit_preview(chat, self._message_id, text)
            return
        self._message_id = await channel.post_preview(chat, self.message.thread_id, text)
        await self.notes.note(self.key, self._message_id)
