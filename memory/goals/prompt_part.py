"""The prompt's goals part: a person's active goals beside what memory recalls, in a private chat only."""

from __future__ import annotations

import asyncio
import dataclasses

from ground.turns import MemoryContext, MemorySlots, Speaker
from ground.types import ChatKind, InboundMessage
from memory.goals.book import GoalBook


class GoalsInContext:
    """A MemoryContext that adds the person's active goals to another context's slots, in a private chat only."""

    def __init__(self, inner: MemoryContext, book: GoalBook, limit_chars: int) -> None:
        self.inner = inner
        self.book = book
        self.limit_chars = limit_chars

    async def slots(self, speaker: Speaker, message: InboundMessage) -> MemorySlots:
        if message.chat_kind is not ChatKind.DM:  # goals are said in private: they never shape a group reply
            return await self.inner.slots(speaker, message)
        slots, goals = await asyncio.gather(self.inner.slots(speaker, message),
                                            self.book.slot(speaker.person, self.limit_chars))
        return dataclasses.replace(slots, goals=goals) if goals else slots
