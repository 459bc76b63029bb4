"""What a conversation turn is, for the parts that take part in one without owning it.

Memory, the recall tool and the heartbeat see a turn through these types; the conversation package runs it.
A turn may answer several messages (:func:`merge`): the debouncer makes one of a burst, and the inbox makes
the same one again when a turn that opened before a restart is taken up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ground.types import InboundMessage


def merge(messages: Sequence[InboundMessage]) -> InboundMessage:
    """One turn from a burst: the texts in order, the last message's ids, the first message's time.

    ``merged_ids`` names the earlier messages, so the turn can answer for each of them.
    """
    if len(messages) == 1:
        return messages[0]
    first, last = messages[0], messages[-1]
    answered = [i for m in messages for i in m.answers]  # the last is last.message_id
    return dataclasses.replace(last, text="\n".join(m.text for m in messages), timestamp=first.timestamp,
                               mentioned=any(m.mentioned for m in messages), merged_ids=tuple(answered[:-1]),
                               forwarded=any(m.forwarded for m in messages))


@dataclass(frozen=True, slots=True)
class MemorySlots:
    """What the memory system contributes to one prompt; each part is already rendered text."""

    pinned: str = ""
    recalled: str = ""
    goals: str = ""
    documents: str = ""  # passages of the person's documents (private chats only)
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
