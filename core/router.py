"""The path every inbound message takes, whatever the platform.

dedupe (redeliveries dropped) → policy (pairing, groups, rate limit) → debounce (a burst
becomes one turn) → chat commands or the conversation core, with a typing indicator →
the durable outbox, which delivers in order with retries.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping

from core.conversation import ConversationCore
from core.linking import Linker
from core.types import ButtonPress, Channel, InboundMessage, OutboundMessage
from delivery.debounce import Debouncer
from delivery.inbound import InboundJournal, Redelivered
from delivery.typing import TypingIndicator
from delivery.worker import DeliveryWorker
from policy.gate import PolicyGate
from policy.rules import Verdict

log = logging.getLogger("kith.router")

CommandHandler = Callable[[InboundMessage], Awaitable[OutboundMessage | None]]
ButtonAnswer = Callable[[ButtonPress], Awaitable[OutboundMessage | None]]


class Router:
    def __init__(self, core: ConversationCore, channels: Mapping[str, Channel], worker: DeliveryWorker,
                 gate: PolicyGate, journal: InboundJournal, *, debounce_s: float, typing_refresh_s: float,
                 typing_delay_s: float = 0.0,
                 commands: CommandHandler | None = None,
                 buttons: ButtonAnswer | None = None, linker: Linker | None = None,
                 pending: CommandHandler | None = None,
                 immediate: frozenset[str] = frozenset({"console"})) -> None:
        self.core = core
        self.channels = dict(channels)
        self.worker = worker
        self.gate = gate
        self.journal = journal
        self.commands = commands
        self.buttons = buttons
        self.linker = linker
        self.pending = pending  # answers to an open question (e.g. "the first") before the conversation
        self.typing_refresh_s = typing_refresh_s
        self.typing_delay_s = typing_delay_s
        # The terminal answers line by line (scripts rely on one reply per line), so it skips debounce.
        self.immediate = immediate
        self.debouncer = Debouncer(self.take_turn, window_s=debounce_s)

    async def on_message(self, message: InboundMessage) -> None:
        """The channel's handler: returns once the message is recorded and queued (or dropped)."""
        event_id = f"msg:{message.message_id}"
        try:
            if self.linker is not None and self.linker.wants(message):
                # Before policy: the code itself is the proof that lets a new account in.
                if not await self.journal.record(message.platform, event_id):
                    raise Redelivered(event_id)
                linked = await self.linker.redeem_message(message)
                if linked is not None:
                    await self.worker.submit(linked, source=message.message_id)
                    return
                decision = await self.gate.check_inbound(message)
            else:
                decision = await self.gate.check_inbound(message, first=functools.partial(
                    self.journal.record_within, platform=message.platform, event_id=event_id))
        except Redelivered:
            log.info("redelivery dropped platform=%s chat=%s message=%s", message.platform, message.chat_id,
                     message.message_id)
            return
        if decision.verdict in (Verdict.PAIRING_CODE, Verdict.NOTICE) and decision.notice:
            await self.worker.submit(self._notice(message, decision.notice), source=message.message_id)
            return
        if not decision.allowed:
            return
        if message.platform in self.immediate:
            await self.take_turn(message)
            await self.worker.wait_idle()
        else:
            await self.debouncer.submit(message)

    async def take_turn(self, message: InboundMessage) -> None:
        reply: OutboundMessage | None = None
        if self.commands is not None and message.text.startswith("/"):
            reply = await self.commands(message)
        if reply is None and self.pending is not None:
            reply = await self.pending(message)
        if reply is None:
            channel = self.channels.get(message.platform)
            if channel is None:
                return
            queued = self.worker.in_transaction(source=message.message_id)
            try:
                async with TypingIndicator(channel, message.chat_id, message.thread_id,
                                           refresh_s=self.typing_refresh_s, delay_s=self.typing_delay_s):
                    reply = await self.core.handle(message, also=queued)
            finally:
                # Committed with the reply: it goes out even if something after the commit failed.
                scheduled = queued.schedule()
            if scheduled:
                return
        await self.worker.submit(reply, source=message.message_id)

    async def on_button(self, press: ButtonPress) -> None:
        """A person pressed one of kith's buttons; only the registered action may answer."""
        if self.buttons is None:
            return
        if not await self.journal.record(press.platform, f"press:{press.chat_id}:{press.sender_id}:{press.data}:"
                                         f"{press.event_id}"):
            return
        reply = await self.buttons(press)
        if reply is not None:
            await self.worker.submit(reply, source=f"press:{press.event_id}")

    def _notice(self, message: InboundMessage, text: str) -> OutboundMessage:
        return OutboundMessage(platform=message.platform, chat_id=message.chat_id, text=text,
                               thread_id=message.thread_id, chat_kind=message.chat_kind,
                               recipient_id=message.sender_id, notice=True)

    async def close(self) -> None:
        await self.debouncer.flush()
        await self.worker.drain()
