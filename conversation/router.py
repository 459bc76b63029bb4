"""Intake and turns wired together: what a channel hands its messages and button presses to.

Intake (:mod:`conversation.intake`) admits a message and debounces it into a turn; a turn goes through
its own steps in order, commands → pending answers → conversation, the first with an answer posting it
through the durable outbox, which delivers in order with retries. A turn that fails is tried again here.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from conversation.core import ConversationCore
from conversation.debounce import Debouncer
from conversation.intake import (
    Admit,
    Debounce,
    Dedupe,
    Intake,
    KeepInInbox,
    Notice,
    Policy,
    RateLimit,
    Unreadable,
    unreadable_answer,
)
from conversation.keeping import Keeping
from conversation.reply_preview import DraftPreviews, MessagePreviews, PreviewNotes, ReplyPreview
from conversation.typing_indicator import TypingIndicator
from delivery.inbound import InboundJournal
from delivery.inbox import UNHANDLED_REPLY, Inbox, Leftover
from delivery.rate_gate import RateGate
from delivery.worker import DeliveryWorker
from ground.failures import describe, traceback_of
from ground.tunables import INBOX_RETRY_BACKOFF_MAX_S, INBOX_RETRY_BACKOFF_S
from ground.types import ButtonPress, Channel, InboundMessage, OutboundMessage, SeenImage, reply_to
from media.reader import MediaReader
from policy.gate import PolicyGate

log = logging.getLogger("kith.router")

CommandHandler = Callable[[InboundMessage], Awaitable[OutboundMessage | None]]
ButtonAnswer = Callable[[ButtonPress], Awaitable[OutboundMessage | None]]


@dataclass(frozen=True, slots=True)
class Previewing:
    """Which platforms show a reply as it grows ([delivery] stream), the chats' shared rate gate, and the pace."""

    platforms: frozenset[str]
    gate: RateGate
    min_gap_s: float
    give_up_s: float
    notes: PreviewNotes | None = None

    def preview(self, channel: object, message: InboundMessage) -> ReplyPreview | None:
        """A preview of the reply to ``message``, where its platform streams and can in such a chat."""
        if (message.platform not in self.platforms or not isinstance(channel, (DraftPreviews, MessagePreviews))
                or not channel.previews(message.chat_kind)):
            return None
        return ReplyPreview(channel, message, self.gate, min_gap_s=self.min_gap_s,
                            give_up_s=self.give_up_s, notes=self.notes)


class Router:
    def __init__(self, core: ConversationCore, channels: Mapping[str, Channel], worker: DeliveryWorker,
                 gate: PolicyGate, journal: InboundJournal, *, debounce_s: float, typing_refresh_s: float,
                 typing_delay_s: float = 0.0,
                 commands: CommandHandler | None = None,
                 buttons: ButtonAnswer | None = None,
                 pending: CommandHandler | None = None,
                 immediate: frozenset[str] = frozenset({"console"}),
                 kept: Inbox | None = None, retry_backoff_s: float = INBOX_RETRY_BACKOFF_S,
                 retry_backoff_max_s: float = INBOX_RETRY_BACKOFF_MAX_S,
                 previewing: Previewing | None = None, media: MediaReader | None = None) -> None:
        self.core = core
        self.media = media  # reads what it can of a message's files into words (a voice note); None: none
        self.channels = channels  # the app's running channels: filled when they start
        self.worker = worker
        self.gate = gate
        self.journal = journal
        self.commands = commands
        self.buttons = buttons
        self.pending = pending  # answers to an open question (e.g. "the first") before the conversation
        self.typing_refresh_s = typing_refresh_s
        self.typing_delay_s = typing_delay_s
        self.previewing = previewing  # which platforms show a reply as it grows, and at what pace
        # The terminal answers line by line (scripts rely on one reply per line), so it skips debounce.
        self.immediate = immediate
        self.debouncer = Debouncer(self.take_turn, window_s=debounce_s)
        # With an inbox, new messages wait until the turns a previous process left are queued (``resume``):
        # a person's new message is answered after the one they sent before the restart.
        self.inbox = kept
        self._resumed = asyncio.Event()
        if kept is None:
            self._resumed.set()
        self.intake = Intake([
            Admit(gate.db, gate, [Dedupe(journal), Policy(gate), KeepInInbox()]),
            RateLimit(gate),
            Notice(worker.post),
            Unreadable(self.debouncer, self._resumed, self.immediate),
            Debounce(self.debouncer, self.take_turn, worker.wait_idle, self._resumed, self.immediate),
        ], keeping=self.keeping)
        # A kept message whose turn failed unexpectedly (a full disk at its commit) is tried again after these.
        self.retry_backoff_s = retry_backoff_s
        self.retry_backoff_max_s = retry_backoff_max_s
        self._attempts: dict[tuple[str, str], int] = {}  # attempts used by turns a previous process left
        self._closing = asyncio.Event()  # shutting down: a failed turn waits for the next start, not a retry

    async def resume(self, left: Sequence[Leftover], platforms: Sequence[str]) -> None:
        """Take up what a previous process took in and did not answer (``left``, read before the channels
        started) on the ``platforms`` whose channels run.

        Its turns are queued first; then the messages it never decided on go through the policy
        as if they had just come in. New messages wait until both are done.
        """
        try:
            platforms = [p for p in platforms if p not in self.immediate]
            if self.inbox is None or not platforms or not left:
                return
            resumed = await self.inbox.resume(left, platforms)
            for turn in resumed.exhausted:
                try:
                    await self._give_up(turn)
                except Exception as exc:  # stays kept: the next start tries the honest reply again
                    log.error("unhandled reply failed platform=%s chat=%s message=%s error=%s", turn.platform,
                              turn.chat_id, turn.message_id, describe(exc))
            for turn in resumed.turns:
                self._attempts[(turn.platform, turn.message_id)] = resumed.attempts.get(turn.message_id, 0)
                self.debouncer.submit_alone(turn)
            for message in resumed.undecided:
                try:
                    await self.on_message(message, resuming=True)
                except Exception as exc:  # stays kept for the next start; the others go on
                    log.error("resumed message failed platform=%s chat=%s message=%s error=%s", message.platform,
                              message.chat_id, message.message_id, describe(exc))
        finally:
            self._resumed.set()

    async def on_message(self, message: InboundMessage, *, resuming: bool = False) -> None:
        """The channel's handler: returns once the message is recorded and queued (or dropped)."""
        await self.intake(message, resuming=resuming)

    def keeping(self, message: InboundMessage) -> Keeping:
        """The message's place in the inbox; the terminal's, whose person is watching, is never kept."""
        return Keeping(None if message.platform in self.immediate else self.inbox, message)

    async def take_turn(self, message: InboundMessage) -> None:
        """Answer one turn. A kept message whose turn fails unexpectedly is tried again here, after a
        backoff, until it has used its attempts; then it gets UNHANDLED_REPLY (never silence)."""
        inbox = self.inbox
        if inbox is None or not self.keeping(message).kept:
            await self._take_turn_once(message)
            return
        key = (message.platform, message.message_id)
        attempts = self._attempts.pop(key, 0)
        delay = self.retry_backoff_s
        while True:
            if attempts >= inbox.max_replays:
                try:
                    await self._give_up(message)
                    return
                except Exception as exc:  # the database still failing: tried again after the backoff
                    log.error("unhandled reply failed platform=%s chat=%s message=%s error=%s", message.platform,
                              message.chat_id, message.message_id, describe(exc))
            else:
                try:
                    await self._take_turn_once(message)
                    return
                except Exception as exc:
                    attempts += 1
                    log.error("turn failed platform=%s chat=%s message=%s attempts=%d error=%s", message.platform,
                              message.chat_id, message.message_id, attempts, describe(exc),
                              exc_info=traceback_of(exc))
            if self._closing.is_set():
                return  # still kept: the next start takes it up
            try:
                async with asyncio.timeout(delay):
                    await self._closing.wait()
                return
            except TimeoutError:
                pass
            delay = min(delay * 2, self.retry_backoff_max_s)
            try:
                state = await inbox.state(message)
            except Exception as exc:  # the database still failing: the next round tries again
                log.warning("turn retry deferred platform=%s message=%s error=%s", message.platform,
                            message.message_id, describe(exc))
                continue
            if state is None:
                return  # answered after all (its reply committed before the failure)
            turn_row, used = state
            attempts = max(attempts, used)
            if turn_row is not None:  # it opened: go on from its history row, never record it twice
                message = dataclasses.replace(message, opened_row=turn_row)

    async def _give_up(self, message: InboundMessage) -> None:
        """The honest reply to a message tried too often, posted where it leaves the inbox."""
        await self.worker.post(reply_to(message, UNHANDLED_REPLY), source=message.message_id,
                               also=self.keeping(message).answered_within)
        log.warning("turn given up platform=%s chat=%s message=%s", message.platform, message.chat_id,
                    message.message_id)

    async def _take_turn_once(self, message: InboundMessage) -> None:
        """The turn's steps in order; the first with an answer ends it. The message stays kept until its
        answer is posted, and leaves the inbox in that same transaction."""
        keeping = self.keeping(message)
        if message.attachments and self.media is not None:
            # A voice note becomes its words here, inside the turn: a failed fetch or transcription fails the turn,
            # which is tried again (and after a crash, taken up again) like any other.
            reading = await self.media.read(message, self.channels.get(message.platform))
            if reading.answer is not None:
                await self.worker.post(reply_to(message, reading.answer), source=message.message_id,
                                       also=keeping.answered_within)
                return
            message, images = reading.message, reading.images
        else:
            images = ()
        if message.unreadable:  # nothing to read: the honest line is the whole answer
            await self.worker.post(unreadable_answer(message), source=message.message_id,
                                   also=keeping.answered_within)
            return
        reply: OutboundMessage | None = None
        # Only typed words are commands: a transcript that happens to begin with "/" is talk.
        command = self.commands if message.text.startswith("/") and not message.medium else None
        if command is not None:
            await keeping.command_started()  # charged when it starts: a command that brings the process down
            reply = await command(message)
        if reply is None and self.pending is not None:
            reply = await self.pending(message)  # an answer to an open question, e.g. "the first"
        if reply is None:
            reply = await self._converse(message, keeping, charged=command is not None and keeping.kept,
                                         images=images)
        if reply is not None:
            await self.worker.post(reply, source=message.message_id, also=keeping.answered_within)

    async def _converse(self, message: InboundMessage, keeping: Keeping, *,
                        charged: bool, images: tuple[SeenImage, ...] = ()) -> OutboundMessage | None:
        """The conversation core's reply, posted in the transaction that records it. Returns a reply the core
        did not record (its honest failure reply), still to be posted; None when posted, or when this process
        has no channel for the message's platform (it stays kept: a later process that has one answers it)."""
        channel = self.channels.get(message.platform)
        if channel is None:
            return None
        posting = self.worker.posting(source=message.message_id, also=keeping.answered_within)
        handled = False
        preview = self.previewing.preview(channel, message) if self.previewing is not None else None
        try:
            async with TypingIndicator(channel, message.chat_id, message.thread_id,
                                       refresh_s=self.typing_refresh_s, delay_s=self.typing_delay_s), \
                    preview or contextlib.nullcontext():
                reply = await self.core.handle(message, also=posting,
                                               opened=functools.partial(keeping.opened_within, charge=not charged),
                                               on_text=preview.grew if preview is not None else None,
                                               images=images)
            handled = True
        finally:
            # A reply that committed goes out even if something after the commit failed; one whose
            # commit failed was rolled back and must not (the message, still kept, is answered later).
            posted = posting.schedule(committed=handled)
        return None if posted else reply

    async def on_button(self, press: ButtonPress) -> None:
        """A person pressed one of kith's buttons; only the registered action may answer."""
        if self.buttons is None:
            return
        if not await self.journal.record(press.platform, f"press:{press.chat_id}:{press.sender_id}:{press.data}:"
                                         f"{press.event_id}"):
            return
        if not await self.gate.may_press(press):
            return
        reply = await self.buttons(press)
        if reply is not None:
            await self.worker.post(reply, source=f"press:{press.event_id}")

    async def close(self) -> None:
        self._closing.set()
        await self.debouncer.flush()
        await self.worker.drain()
