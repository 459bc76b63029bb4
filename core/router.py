"""Routes inbound messages from every channel through the core and the replies back out."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from core.conversation import ConversationCore
from core.types import Channel, InboundMessage, OutboundMessage

log = logging.getLogger("kith.router")


class Router:
    def __init__(self, core: ConversationCore, channels: Mapping[str, Channel]) -> None:
        self.core = core
        self.channels = dict(channels)

    async def on_message(self, message: InboundMessage) -> None:
        reply = await self.core.handle(message)
        await self.deliver(reply)

    async def deliver(self, reply: OutboundMessage) -> None:
        channel = self.channels.get(reply.platform)
        if channel is None:
            log.error("no channel for platform=%s chat=%s", reply.platform, reply.chat_id)
            return
        await channel.send(reply)
