"""Use credit: a memory a reply drew on earns it (being shown earns nothing); ranking weighs it
(:func:`memory.recall.ranking.use_factor`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from ground.tunables import MEMORY_EDIT_ATTEMPTS
from ground.turns import CompletedTurn
from memory.core.records import MemoryRecord, Status
from memory.core.words import words_of
from memory.recall.ranking import cited
from memory.store.memory_store import MemoryStore
from memory.store.writes import RevisionConflict

log = logging.getLogger("kith.memory.recall")


class UseRecorder:
    """After a reply: credit the shown memories the reply cited (a TurnObserver): being shown earns nothing."""

    def __init__(self, store: MemoryStore, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.clock = clock
        self.recorded = 0

    async def after_reply(self, turn: CompletedTurn) -> None:
        try:
            await self.record(turn)
        except Exception as exc:  # use credit must never disturb the conversation
            log.warning("use credit failed person=%s error=%s", turn.speaker.person, type(exc).__name__)

    async def record(self, turn: CompletedTurn) -> list[str]:
        """Ids of the shown memories the reply drew on, each credited once."""
        if not turn.shown_memory_ids:
            return []
        person = turn.speaker.person
        # Staged notes are not in the memories collection: only curated memories earn credit.
        shown = [m for m in await self.store.get_memories(turn.shown_memory_ids) if m.person == person]
        # The prompt showed each memory's words, not its label: a reply draws on what it was shown.
        used = [m.id for m in shown
                if cited(" ".join(words_of(m).sentences), turn.reply_text, turn.message.text, turn.speaker.name)]
        for memory_id in used:
            await self._credit(memory_id, person)
        self.recorded += len(used)
        if used:
            log.info("use credit person=%s shown=%d used=%d", person, len(shown), len(used))
        return used

    async def _credit(self, memory_id: str, person: str) -> None:
        def credited(current: MemoryRecord) -> MemoryRecord | None:
            if current.person != person or current.status is not Status.ACTIVE:
                return None
            # Not updated_at: use is not a change to what the memory says.
            return replace(current, use_count=current.use_count + 1, last_used_at=self.clock())

        try:
            await self.store.edit(memory_id, credited)
        except RevisionConflict:
            log.warning("use credit lost a race %d times memory=%s", MEMORY_EDIT_ATTEMPTS, memory_id)


__all__ = ["UseRecorder"]
