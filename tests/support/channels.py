"""Running a real platform channel for one test and sending through it, the same on every platform."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

from ground.types import Channel, OutboundMessage
from tests.helpers import Inbox

ChannelT = TypeVar("ChannelT", bound=Channel)


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
