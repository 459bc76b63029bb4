"""Debounce: a burst of quick messages from one person in one chat becomes one turn.

People often type a thought across several short messages. Answering each one separately gives
three half-replies; waiting until the sender pauses for ``window_s`` gives one whole reply. The
window slides with each new message, bounded by DEBOUNCE_MAX_MESSAGES. Bot commands are never
merged: they are orders, not prose, and each must be seen on its own. A burst becomes one message by
:func:`ground.turns.merge`, which the inbox uses too when it takes up a turn after a restart.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ground.failures import describe, traceback_of
from ground.ordering import OrderedLanes
from ground.tunables import DEBOUNCE_MAX_MESSAGES
from ground.turns import merge
from ground.types import InboundMessage

log = logging.getLogger("kith.debounce")


SenderKey = tuple[str, str, str | None, str]  # (platform, chat_id, thread_id, sender_id)


def sender_key(message: InboundMessage) -> SenderKey:
    return (message.platform, message.chat_id, message.thread_id, message.sender_id)


def is_command(message: InboundMessage) -> bool:
    return message.text.startswith("/")


@dataclass
class _Burst:
    messages: list[InboundMessage] = field(default_factory=list)
    timer: asyncio.Task[None] | None = None


class Debouncer:
    """Sits between intake and the turns: ``submit`` returns at once; a burst becomes one turn."""

    def __init__(self, emit: Callable[[InboundMessage], Awaitable[None]], *, window_s: float,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 max_messages: int = DEBOUNCE_MAX_MESSAGES) -> None:
        self._emit = emit
        self.window_s = window_s
        self._sleep = sleep
        self.max_messages = max_messages
        self._bursts: dict[SenderKey, _Burst] = {}
        # Each sender's emits run one after another, so turns are answered in the order sent.
        self._lanes: OrderedLanes[SenderKey] = OrderedLanes()

    async def submit(self, message: InboundMessage) -> None:
        key = sender_key(message)
        if is_command(message) or self.window_s <= 0:
            self.submit_alone(message)
            return
        burst = self._bursts.setdefault(key, _Burst())
        burst.messages.append(message)
        if burst.timer is not None:
            burst.timer.cancel()
            burst.timer = None
        if len(burst.messages) >= self.max_messages:
            self._chain(key, [merge(self._take(key))])
            return
        burst.timer = self._lanes.spawn(self._after_pause(key))

    def submit_alone(self, message: InboundMessage) -> None:
        """Queue ``message`` as a turn of its own, never merged (a command, or a turn resumed after a restart)."""
        key = sender_key(message)
        # Whatever the sender typed before it is answered first, so order is kept.
        earlier = self._take(key)
        turns = [merge(earlier)] if earlier else []
        self._chain(key, [*turns, message])

    async def flush(self) -> None:
        """Emit every waiting burst now and wait for all emits to finish (shutdown)."""
        for key in list(self._bursts):
            messages = self._take(key)
            if messages:
                self._chain(key, [merge(messages)])
        await self.drain()

    async def drain(self) -> None:
        await self._lanes.drain()

    def pending(self) -> int:
        """Messages held back right now, waiting for their sender to pause."""
        return sum(len(b.messages) for b in self._bursts.values())

    def _take(self, key: SenderKey) -> list[InboundMessage]:
        burst = self._bursts.pop(key, None)
        if burst is None:
            return []
        if burst.timer is not None and burst.timer is not asyncio.current_task():
            burst.timer.cancel()
        return burst.messages

    async def _after_pause(self, key: SenderKey) -> None:
        await self._sleep(self.window_s)
        messages = self._take(key)
        if messages:
            await self._chain(key, [merge(messages)])

    async def _emit_all(self, turns: list[InboundMessage]) -> None:
        for turn in turns:
            try:
                await self._emit(turn)
            except Exception as exc:
                log.error("debounced turn failed platform=%s chat=%s message=%s error=%s", turn.platform,
                          turn.chat_id, turn.message_id, describe(exc), exc_info=traceback_of(exc))

    def _chain(self, key: SenderKey, turns: list[InboundMessage]) -> asyncio.Task[None]:
        return self._lanes.after(key, functools.partial(self._emit_all, turns))
