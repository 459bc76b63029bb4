"""A heartbeat rig over real storage and the loopback model, for the heartbeat, scheduler and consolidation tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from delivery import outbox
from delivery.outbox import OutboxStatus
from delivery.worker import DeliveryWorker
from ground.db import Database
from heartbeat.scheduler import HeartbeatScheduler
from heartbeat.service import Heartbeat, build_heartbeat
from heartbeat.settings import HeartbeatSettings
from llm.client import LLMClient
from memory.core.records import MemoryCandidate, MemoryKind
from memory.service import MemoryService
from people import history
from tests.fakes.openai_api import FakeOpenAI
from tests.support.clock import FakeClock
from tests.support.database import open_db
from tests.support.delivery import FakeChannel, send_anything
from tests.support.memory import candidate, memory_settings, say


class BotParts:
    """What a heartbeat command's body reads of the bot it runs in: its heartbeat, and that the bot is live."""

    live = True

    def __init__(self, heartbeat: Heartbeat) -> None:
        self._heartbeat = heartbeat

    async def heartbeat(self) -> Heartbeat:
        return self._heartbeat


def recent_morning(hour: int = 10) -> datetime:
    """Yesterday at ``hour`` UTC: a fixed time of day, close enough to wall time for APScheduler's grace."""
    return (datetime.now(UTC) - timedelta(days=1)).replace(hour=hour, minute=0, second=0, microsecond=0)


@dataclass
class Rig:
    """One heartbeat's world: its storage, memory, clock, model, channel and worker, and the schedulers started."""

    tmp_path: Path
    db: Database
    memory: MemoryService
    heartbeat: Heartbeat
    clock: FakeClock
    fake: FakeOpenAI
    channel: FakeChannel
    worker: DeliveryWorker
    busy: set[str] = field(default_factory=set)
    schedulers: list[HeartbeatScheduler] = field(default_factory=list)

    async def scheduler(self, *, paused: bool = False, recurring: bool = False) -> HeartbeatScheduler:
        s = HeartbeatScheduler(self.db.engine, self.heartbeat, hb=self.heartbeat.hb, consolidation_hour=3,
                               tz=self.heartbeat.tz, clock=self.clock)
        self.heartbeat.attach(s)
        await s.start(paused=paused, recurring=recurring)
        self.schedulers.append(s)
        return s

    async def ana_says(self, text: str, *, chat_id: str = "ana", group: bool = False) -> str:
        person, _id = await say(self.db, "console:ana", text, name="Ana", chat_id=chat_id, group=group,
                                conversation=f"console:{chat_id}", when=self.clock.now - timedelta(hours=2))
        return person

    async def outbox_entries(self) -> list[outbox.OutboxEntry]:
        entries = []
        for status in OutboxStatus:
            entries += await self.db.run(outbox.by_status, status)
        return entries

    async def transcript(self, conversation: str = "console:ana") -> list[history.StoredMessage]:
        return await self.db.run(history.recent, conversation, 100)


async def make_rig(tmp_path: Path, fake: FakeOpenAI, *, start: datetime | None = None,
                   hb: HeartbeatSettings | None = None, **memory: Any) -> Rig:
    """Everything a heartbeat needs, over a real SQLite file, embedded Chroma and the loopback model."""
    clock = FakeClock(start or recent_morning())
    db = open_db(tmp_path)
    settings = memory_settings(tmp_path, llm_base=fake.base_url, **memory)
    service = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=clock)
    channel = FakeChannel("console")
    worker = DeliveryWorker(db, {"console": channel}, send_anything, clock=clock)
    busy: set[str] = set()
    heartbeat = build_heartbeat(settings=settings, db=db, llm=LLMClient(settings.llm), memory=service,
                                clock=clock, busy=busy, outbound=worker,
                                hb=hb or HeartbeatSettings(timezone="UTC"))
    return Rig(tmp_path, db, service, heartbeat, clock, fake, channel, worker, busy)


async def close_rig(rig: Rig) -> None:
    """Shut down what ``make_rig`` and ``Rig.scheduler`` started, schedulers first, the database last."""
    for s in rig.schedulers:
        await s.shutdown()
    await rig.worker.stop()
    await rig.memory.close()
    rig.db.close()


def conflict_candidate(text: str, message: str) -> MemoryCandidate:
    """A preference Ana stated on 1 January, in a DM: two that disagree make a conflict for the gate to flag."""
    return candidate(text, kind=MemoryKind.PREFERENCE, message=message, when=datetime(2026, 1, 1, tzinfo=UTC))
