"""Pruning on a schedule: what delivery keeps only for a while goes when that while is over.

The inbound journal needs an event only as long as a platform might redeliver it, the outbox
a delivered reply only for review, and a reply's preview row only until no send can use it
(:data:`delivery.previews.KEPT`). Neither is pruned on a message's path: a running bot prunes at
its start and every ``RETENTION_INTERVAL_S`` after, in short transactions. Attachments need no
schedule: the outbox drops a file as soon as its reply is delivered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from delivery import outbox, previews
from delivery.inbound import InboundJournal
from ground.db import Database
from ground.failures import describe
from ground.tunables import RETENTION_BATCH_ROWS, RETENTION_INTERVAL_S
from ground.types import utcnow

log = logging.getLogger("kith.delivery")


@dataclass(frozen=True, slots=True)
class Pruned:
    events: int  # inbound journal entries past the dedupe window
    sent: int  # delivered outbox entries past ``sent_retention_days``
    previews: int = 0  # reply preview rows past ``delivery.previews.KEPT`` (their reply failed or expired)


class Retention:
    def __init__(self, db: Database, journal: InboundJournal, *, sent_retention_days: float,
                 clock: Callable[[], datetime] = utcnow, interval_s: float = RETENTION_INTERVAL_S,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 batch: int = RETENTION_BATCH_ROWS) -> None:
        self.db = db
        self.journal = journal
        self.sent_retention = timedelta(days=sent_retention_days)
        self._clock = clock
        self.interval_s = interval_s
        self._sleep = sleep
        self.batch = batch
        self._task: asyncio.Task[None] | None = None

    async def prune(self) -> Pruned:
        started = time.perf_counter()
        events = await self.journal.prune(batch=self.batch)
        before = self._clock() - self.sent_retention
        sent = 0
        while True:
            removed = await self.db.run(outbox.prune_sent, before=before, limit=self.batch)
            sent += removed
            if removed < self.batch:
                break
        stale = await self.db.run(previews.prune, before=self._clock() - previews.KEPT)
        log.info("retention pruned events=%d sent=%d previews=%d elapsed_ms=%.0f", events, sent, stale,
                 (time.perf_counter() - started) * 1000)
        return Pruned(events=events, sent=sent, previews=stale)

    def start(self) -> None:
        """Prune now, then every ``interval_s``, in a task of its own until ``stop``."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._every(), name="delivery:retention")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _every(self) -> None:
        while True:
            try:
                await self.prune()
            except Exception as exc:  # a locked or full database: the next round tries again, nothing is lost
                log.warning("retention failed error=%s", describe(exc))
            await self._sleep(self.interval_s)
