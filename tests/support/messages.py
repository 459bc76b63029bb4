"""Inbound messages as a channel would hand them to the core."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from ground.types import ChatKind, InboundMessage

_ids = itertools.count(1)


def inbound(text: str, *, platform: str = "console", chat_id: str = "ana", sender_id: str = "ana",
            sender_name: str = "Ana", chat_kind: ChatKind = ChatKind.DM, mentioned: bool = True,
            thread_id: str | None = None, message_id: str | None = None,
            timestamp: datetime | None = None) -> InboundMessage:
    return InboundMessage(platform=platform, bot_account="kith", chat_id=chat_id, chat_kind=chat_kind,
                          sender_id=sender_id, sender_name=sender_name, text=text,
                          message_id=message_id or f"m{next(_ids)}", thread_id=thread_id, mentioned=mentioned,
                          timestamp=timestamp or datetime.now(UTC))
