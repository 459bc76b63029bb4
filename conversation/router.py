"""The path every inbound message takes, whatever the platform.

dedupe (redeliveries dropped) → policy (pairing, groups, rate limit) → debounce (a burst
becomes one turn) → chat commands or the conversation core, with a typing indicator →
the durable outbox, which delivers in order with retries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

from conversation.turns import ConversationCore
from delivery import inbox
from delivery.debounce import Debouncer
from delivery.inbound import InboundJournal, Redelivered
from delivery.inbox import UNHANDLED_REPLY, Inbox, Leftover
from delivery.typing import TypingIndicator
from delivery.worker import DeliveryWorker
from ground.db import Connection
from ground.failures import describe, traceback_of
from ground.tunables import INBOX_RETRY_BACKOFF_MAX_S, INBOX_RETRY_BACKOFF_S
from ground.types import ButtonPress, Channel, InboundMessage, OutboundMessage, reply_to
from policy.gate import PolicyGate
from policy.rules import Reason, Verdict

log = logging.getLogger("kith.router")

_RATE_LIMITED = frozenset({Reason.RATE_LIMITED, Reason.RATE_LIMITED_NOTIFIED})

CommandHandler = Callable[[InboundMessage], Awaitable[OutboundMessage | None]]
ButtonAnswer = Callable[[ButtonPress], Awaitable[OutboundMessage | None]]


class Router:
    def __init__(self, core: ConversationCore, channels: Mapping[str, Channel], worker: DeliveryWorker,
                 gate: PolicyGate, journal: InboundJournal, *, debounce_s: float, typing_refresh_s: float,
                 typing_delay_s: float = 0.0,
                 commands: CommandHandler | None = None,
                 buttons: ButtonAnswer | None = None,
                 pending: CommandHandler | None = None,
                 immediate: frozenset[str] = frozenset({"console"}),
                 kept: Inbox | None = None, retry_backoff_s: float = INBOX_RETRY_BACKOFF_S,
                 retry_backoff_max_s: float = INBOX_RETRY_BACKOFF_MAX_S) -> None:
        self.core = core
        self.channels = channels  # the app's running channels: filled when they start
        self.worker = worker
        self.gate = gate
        self.journal = journal
        self.commands = commands
        self.buttons = buttons
        self.pending = pending  # answers to an open question (e.g. "the first") before the conversation
        self.typing_refresh_s = typing_refresh_s
        self.typing_delay_s = typing_delay_s
        # The terminal answers line by line (scripts rely on one reply per line), so it skips debounce.
        self.immediate = immediate
        self.debouncer = Debouncer(self.take_turn, window_s=debounce_s)
        # With an inbox, new messages wait until the turns a previous process left are queued (``resume``):
        # a person's new message is answered after the one they sent before the restart.
        self.inbox = kept
        self._resumed = asyncio.Event()
        if kept is None:
            self._resumed.set()
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
        event_id = f"msg:{message.message_id}"
        keep = self._keeper(message)
        try:
            # A /link CODE too: a code is no pass past the policy (see conversation.linking).
            decision = await self.gate.check_inbound(message, first=functools.partial(
                self.journal.record_within, platform=message.platform, event_id=event_id), then=keep)
        except Redelivered:
            log.info("redelivery dropped platform=%s chat=%s message=%s", message.platform, message.chat_id,
                     message.message_id)
            if self.inbox is not None and self._keeps(message):
                await self.inbox.forget_undecided(message)  # kept by its channel; answered the first time
            return
        if self.inbox is not None and keep is not None and decision.reason in _RATE_LIMITED:
            await self.inbox.forget(message)  # kept as the access rules let it through; the rate limit did not
        if decision.verdict in (Verdict.PAIRING_CODE, Verdict.NOTICE) and decision.notice:
            await self.worker.post(self._notice(message, decision.notice), source=message.message_id)
            return
        if not decision.allowed:
            return
        if message.platform in self.immediate:
            await self.take_turn(message)
            await self.worker.wait_idle()
        else:
            if not resuming and not self._resumed.is_set():
                await self._resumed.wait()
            await self.debouncer.submit(message)

    def _keeps(self, message: InboundMessage) -> bool:
        """Whether ``message`` goes through the inbox: not the terminal's, whose person is watching."""
        return self.inbox is not None and message.platform not in self.immediate

    def _answered(self, message: InboundMessage) -> Callable[[Connection], None] | None:
        """The inbox step of the transaction that queues the answer: the message needs keeping no more."""
        return functools.partial(inbox.done, message=message) if self._keeps(message) else None

    def _keeper(self, message: InboundMessage) -> Callable[[Connection, bool], None] | None:
        """The inbox step of the policy transaction."""
        inbox = self.inbox
        if inbox is None or not self._keeps(message):
            return None
        return lambda conn, allowed: inbox.decided_within(conn, message, allowed)

    async def take_turn(self, message: InboundMessage) -> None:
        """Answer one turn. A kept message whose turn fails unexpectedly is tried again here, after a
        backoff, until it has used its attempts; then it gets UNHANDLED_REPLY (never silence)."""
        if not self._keeps(message):
            await self._take_turn_once(message)
            return
        inbox = self.inbox
        assert inbox is not None
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
        """The honest reply to a message tried too often, queued where it leaves the inbox."""
        await self.worker.post(reply_to(message, UNHANDLED_REPLY), source=message.message_id,
                                 also=self._answered(message))
        log.warning("turn given up platform=%s chat=%s message=%s", message.platform, message.chat_id,
                    message.message_id)

    async def _take_turn_once(self, message: InboundMessage) -> None:
        # Kept in the inbox until the reply is queued; then removed in the same transaction.
        kept = self._keeps(message)
        answered = self._answered(message)
        reply: OutboundMessage | None = None
        charged = False
        if self.commands is not None and message.text.startswith("/"):
            if kept and self.inbox is not None:
                await self.inbox.charge(message)  # a command that brings the process down is a try too
                charged = True
            reply = await self.commands(message)
        if reply is None and self.pending is not None:
            reply = await self.pending(message)
        if reply is None:
            channel = self.channels.get(message.platform)
            if channel is None:
                return  # kept: a later process that has this channel answers it
            queued = self.worker.posting(source=message.message_id, also=answered)
            handled = False
            try:
                async with TypingIndicator(channel, message.chat_id, message.thread_id,
                                           refresh_s=self.typing_refresh_s, delay_s=self.typing_delay_s):
                    reply = await self.core.handle(message, also=queued, opened=functools.partial(
                        inbox.opened, message=message, charge=not charged) if kept else None)
                handled = True
            finally:
                # A reply that committed goes out even if something after the commit failed; one whose
                # commit failed was rolled back and must not (the message, still kept, is answered later).
                scheduled = queued.schedule(committed=handled)
            if scheduled:
                return
        await self.worker.post(reply, source=message.message_id, also=answered)

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

    @staticmethod
    def _notice(message: InboundMessage, text: str) -> OutboundMessage:
        # In a group everyone reads it: like any reply there, it quotes the message it answers.
        return reply_to(message, text, notice=True)

    async def close(self) -> None:
        self._closing.set()
        await self.debouncer.flush()
        await self.worker.drain()
