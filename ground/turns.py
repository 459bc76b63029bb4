"""What a conversation turn is, for the parts that take part in one without owning it.

Memory, the recall tool and the heartbeat see a turn through these types; the conversation package runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ground.types import InboundMessage


@dataclass(frozen=True, slots=True)
class MemorySlots:
    """What the memory system contributes to one prompt; each part is already rendered text."""

    pinned: str = ""
    recalled: str = ""
    goals: str = ""
    shown_ids: tuple[str, ...] = ()  # memories placed in this prompt, for use credit


@dataclass(frozen=True, slots=True)
class Speaker:
    person: str
    account: str
    name: str


@dataclass(frozen=True, slots=True)
class CompletedTurn:
    """What after-reply observers (capture, use credit) get to see."""

    speaker: Speaker
    message: InboundMessage
    user_message_id: int
    reply_text: str
    reply_message_id: int
    shown_memory_ids: tuple[str, ...] = ()


class MemoryContext(Protocol):
    async def slots(self, speaker: Speaker, message: InboundMessage) -> MemorySlots: ...


class TurnObserver(Protocol):
    async def after_reply(self, turn: CompletedTurn) -> None: ...


class Tool(Protocol):
    name: str

    def spec(self) -> dict[str, Any]: ...

    async def call(self, arguments: dict[str, Any], speaker: Speaker, message: InboundMessage) -> str: ...
