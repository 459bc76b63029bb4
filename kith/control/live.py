"""The parts of a running bot, as the operator commands it runs see them.

Its own database, memory service (whose in-memory copy every change updates at once), heartbeat
(whose messages its delivery worker sends at once) and everything it keeps about a person, over those.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ground.checks import CheckResult
from ground.config import Settings
from ground.db import Database
from ground.person_data import PersonData
from ground.tunables import CHROMA_CHECK_TIMEOUT_S
from heartbeat.service import Heartbeat, build_heartbeat
from memory.encoders import embedder_result
from memory.service import MemoryService

if TYPE_CHECKING:
    from kith.app.lifecycle import App


class LiveParts:
    live = True

    def __init__(self, app: App) -> None:
        if app.memory is None or app.linker is None:
            raise RuntimeError("operator commands need the bot's memory service and linker")
        self.app = app
        self.settings: Settings = app.settings
        self.db: Database = app.db
        self._memory: MemoryService = app.memory
        self._heartbeat: Heartbeat | None = None

    def clock(self) -> datetime:
        return self.app.clock()

    async def memory(self, *, embedder: bool = False) -> MemoryService:
        return self._memory

    async def heartbeat(self) -> Heartbeat:
        if self.app.heartbeat is not None:
            return self.app.heartbeat
        if self._heartbeat is None:  # a bot whose scheduler is off still runs the jobs on demand
            sender = self.app.question_sender
            self._heartbeat = build_heartbeat(settings=self.settings, db=self.db, llm=self.app.llm,
                                              memory=self._memory, clock=self.app.clock,
                                              busy=self.app.core.busy_people, outbound=self.app.worker,
                                              questions=sender.sweep)
        return self._heartbeat

    async def person_data(self) -> tuple[PersonData, ...]:
        return self.app.person_data

    def changed(self, person: str, conversations: tuple[str, ...] = ()) -> None:
        if self.app.recall is not None:
            self.app.recall.forget_pinned(person)
        for conversation in conversations:
            self.app.core.windows.drop(conversation)

    async def store_checks(self) -> list[CheckResult]:
        results = []
        try:
            await self.db.run(lambda conn: conn.execute(sa.text("SELECT 1")).scalar_one())
            scheme = self.settings.storage.resolved_database_url().split("://")[0]
            results.append(CheckResult("database", True, f"{scheme} open in the running bot"))
        except Exception as exc:
            results.append(CheckResult("database", False, f"the running bot cannot read it ({type(exc).__name__})"))
        client = self._memory.store.chroma.client
        where = self.settings.memory.chroma_url or str(self.settings.storage.data_path() / "chroma")
        kind = "server" if self.settings.memory.chroma_url else "embedded"
        if self._memory.store.chroma.in_database:
            where, kind = "the database's memory tables", "kept"
        try:
            await asyncio.wait_for(asyncio.to_thread(client.heartbeat), CHROMA_CHECK_TIMEOUT_S)
            results.append(CheckResult("chroma", True, f"{kind} at {where} answers the running bot"))
        except Exception as exc:
            results.append(CheckResult("chroma", False, f"{kind} at {where} does not answer the running bot "
                                                        f"({type(exc).__name__})"))
        results.append(embedder_result(self._memory.status))
        return results
