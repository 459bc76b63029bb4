"""Running a real platform channel for one test, what its handlers received, and sending through it, the same on
every platform."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from ground.types import ButtonPress, Channel, InboundMessage, OutboundMessage

ChannelT = TypeVar("ChannelT", bound=Channel)


class Inbox:
    """A channel's handlers in a test: what the core would have received, in arrival order.

    ``gate`` holds a message back until its event is set: a callable picks the event per message,
    a plain event holds every message.
    """

    def __init__(self, gate: Callable[[InboundMessage], asyncio.Event | None] | asyncio.Event | None = None) -> None:
        self.messages: list[InboundMessage] = []
        self.presses: list[ButtonPress] = []
        self.started = asyncio.Event()  # a message reached the handler (before any gate)
        self._gate = gate
        self._changed = asyncio.Event()

    async def on_message(self, message: InboundMessage) -> None:
        self.started.set()
        event = self._gate if isinstance(self._gate, asyncio.Event) else self._gate(message) if self._gate else None
        if event is not None:
            await event.wait()
        self.messages.append(message)
        self._notify()

    async def on_button(self, press: ButtonPress) -> None:
        self.presses.append(press)
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.messages]

    async def wait_for(self, n: int, timeout: float = 5.0) -> list[InboundMessage]:
        """Wait until ``n`` messages and button presses arrived in all; returns the messages."""
        async with asyncio.timeout(timeout):
            while len(self.messages) + len(self.presses) < n:
                await self._changed.wait()
        return list(self.messages)


@asynccontextmanager
async def running(channel: ChannelT, inbox: Inbox) -> AsyncIterator[ChannelT]:
    """Start ``channel`` into ``inbox`` and stop it on the way out, whatever the test body raised."""
    await channel.start(inbox.on_message, inbox.on_button)
    try:
        yield channel
    finally:
        await channel.stop()


async def send_rendered(channel: Channel, message: OutboundMessage) -> list[str]:
    """Send every chunk ``channel`` renders ``message`` into, in order, as the delivery worker would.

    Returns the platform's ids of the chunks sent.
    """
    return [(await channel.send_chunk(message, chunk, i)).platform_message_id
            for i, chunk in enumerate(channel.render(message))]
