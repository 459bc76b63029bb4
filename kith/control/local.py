"""The parts of an operator command run with no bot on the data directory: opened on demand, closed after.

The command holds the data directory's lock for as long as these are open (:mod:`kith.control.dispatch`),
so its embedded Chroma client is the only one on the directory. Only what a body asks for is opened:
``people list`` never loads Chroma, and only ``memory search`` loads the embedder.
"""

from __future__ import annotations

from datetime import datetime

from conversation.memory_commands import QuestionSender
from delivery.posting import PostedAtNextStart
from ground.checks import CheckResult
from ground.config import Settings
from ground.db import Database
from ground.person_data import PersonData
from ground.types import utcnow
from heartbeat.service import Heartbeat, build_heartbeat
from kith.app.person_data import gathered
from kith.app.wiring import open_database
from kith.operator import store_checks
from kith.operator.memory_cli import NOT_NEEDED
from llm.client import LLMClient
from memory.controls import PauseBook, QuestionBook
from memory.encoders import EmbedderStatus
from memory.service import MemoryService


class LocalParts:
    live = False

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.db: Database = open_database(settings)
        self._llm: LLMClient | None = None
        self._memory: MemoryService | None = None
        self._heartbeat: Heartbeat | None = None

    def clock(self) -> datetime:
        return utcnow()

    def llm(self) -> LLMClient:
        if self._llm is None:
            self._llm = LLMClient(self.settings.llm)
        return self._llm

    async def memory(self, *, embedder: bool = False) -> MemoryService:
        if self._memory is None:
            # Only search needs the embedder; the rest need not load (or fetch) a model.
            status = None if embedder else EmbedderStatus(self.settings.memory.embedder, ready=False,
                                                          reason=NOT_NEEDED)
            # Not announced: a command that needs the embedder prints its state itself (memory search's
            # "note:"), and a log line saying the same would show it twice.
            self._memory = await MemoryService.open(self.settings, self.db, self.llm(), status=status,
                                                    announce=False)
        return self._memory

    async def heartbeat(self) -> Heartbeat:
        if self._heartbeat is None:
            memory = await self.memory()
            questions = QuestionSender(db=self.db, memory=memory, book=QuestionBook(self.db, self.clock),
                                       outbound=PostedAtNextStart(self.clock), clock=self.clock)
            self._heartbeat = build_heartbeat(settings=self.settings, db=self.db, llm=self.llm(), memory=memory,
                                              clock=self.clock, questions=questions.sweep)
        return self._heartbeat

    async def person_data(self) -> tuple[PersonData, ...]:
        # No bot keeps a copy of who is paused: a pause book of this command's own will do.
        return gathered(await self.memory(), PauseBook(self.db))

    def changed(self, person: str, conversations: tuple[str, ...] = ()) -> None:
        pass  # nothing of anyone is cached here beyond this command

    async def store_checks(self) -> list[CheckResult]:
        return [await store_checks.check_database(self.settings), await store_checks.check_chroma(self.settings),
                await store_checks.check_embedder(self.settings)]

    async def close(self) -> None:
        try:
            if self._memory is not None:
                await self._memory.close()
        finally:
            self.db.close()
