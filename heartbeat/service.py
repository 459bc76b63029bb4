"""The heartbeat's parts wired together: the :class:`~heartbeat.scheduler.JobRunner` the scheduled jobs call.

:func:`build_heartbeat` builds it from the parts of a running kith (or of an operator command);
the wiring starts it with its scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

from delivery.posting import Outbound
from ground.config import Settings
from ground.db import Database
from ground.keyed_locks import KeyedLocks
from heartbeat import runs
from heartbeat.check_ins import FollowUps, HeartbeatTurns, TickReport, TurnOutcome
from heartbeat.consolidation import ConsolidationReport, Consolidator, Progress
from heartbeat.decay import Decay, DecayReport, UndoReport
from heartbeat.due import DueFinder, DueItem, ItemKind
from heartbeat.scheduler import CONSOLIDATION_JOB, DECAY_JOB, HEARTBEAT_JOB
from heartbeat.settings import HeartbeatSettings, resolve_timezone
from llm.client import LLMClient
from memory.goals import GoalBook
from memory.service import MemoryService

log = logging.getLogger("kith.heartbeat")

QUESTIONS_ASKED = "questions asked"  # a tick's conflict questions, counted beside its turns' outcomes
Sweep = Callable[[], Awaitable[int]]
Waiting = Callable[[], None]  # told, before it waits, that a caller waits for another run of its job


class QuestionsAskedApart(DueFinder):
    """Due items without the disputed pairs: those are asked as real questions, with buttons, by the sweep.

    A pair phrased by the model in a free-text check-in could never be settled by the answer; the
    question the sweep sends can, and the caps of the question book bound it.
    """

    async def find(self, person: str | None = None) -> dict[str, list[DueItem]]:
        found = await super().find(person)
        kept = {p: [i for i in items if i.kind is not ItemKind.CONFLICT] for p, items in found.items()}
        return {p: items for p, items in kept.items() if items}


@dataclass
class Heartbeat:
    settings: Settings
    hb: HeartbeatSettings
    tz: tzinfo
    db: Database
    clock: Callable[[], datetime]
    consolidator: Consolidator
    turns: HeartbeatTurns
    decayer: Decay
    goals: GoalBook
    questions: Sweep | None = None  # QuestionSender.sweep: asks flagged conflicts within its caps
    # One run of each job at a time. The bot's scheduler and an operator command sent to the bot call the same
    # Heartbeat at any moment: two ticks at once would both find a person's due items and both write to them,
    # two consolidations would send every day to the model twice, and two decay passes would record the same
    # retirements, so that undo-decay could not tell whose they were. The second caller waits, then finds the
    # first one's work done. Turns of one person (a deferred or retried one) share the tick's lock.
    _locks: KeyedLocks = field(default_factory=KeyedLocks, init=False, repr=False)

    def running(self, job: str) -> bool:
        """Whether a run of ``job`` (``consolidation``, ``heartbeat``, ``decay``) is under way or waiting its
        turn in this process: one more would wait."""
        return self._locks.busy(job)

    @asynccontextmanager
    async def _one_at_a_time(self, job: str, waiting: Waiting | None = None) -> AsyncIterator[None]:
        if waiting is not None and self._locks.busy(job):
            waiting()
        async with self._locks.hold([job]):
            yield

    def attach(self, follow_ups: FollowUps) -> None:
        """Deferrals and retries go to ``follow_ups`` (the scheduler, once it exists)."""
        self.turns.follow_ups = follow_ups

    async def consolidate(self, progress: Progress | None = None, *,
                          waiting: Waiting | None = None) -> ConsolidationReport:
        async with self._one_at_a_time(CONSOLIDATION_JOB, waiting):
            return await self._consolidate(progress)

    async def _consolidate(self, progress: Progress | None) -> ConsolidationReport:
        run_id = await self.db.run(runs.start, CONSOLIDATION_JOB, self.clock())
        try:
            report = await self.consolidator.run(progress)
        except BaseException:
            await self.db.run(runs.finish, run_id, False, {}, self.clock())
            raise
        await self.db.run(runs.finish, run_id, not report.interrupted, report.as_counts(), self.clock())
        return report

    async def tick(self, *, any_hour: bool = False, waiting: Waiting | None = None) -> TickReport:
        if not self.hb.enabled:
            return TickReport(quiet=True)
        async with self._one_at_a_time(HEARTBEAT_JOB, waiting):
            return await self._tick(any_hour)

    async def _tick(self, any_hour: bool) -> TickReport:
        report = await self.turns.tick(any_hour=any_hour)
        if report.quiet or self.questions is None:
            return report
        # Inside active hours: a conflict the nightly consolidation found is asked now, with buttons, not
        # only after the person writes again. A failure here never costs the tick its turns.
        try:
            asked = await self.questions()
        except Exception as exc:
            log.warning("question sweep failed error=%s", type(exc).__name__)
            asked = 0
        if asked:
            report.outcomes[QUESTIONS_ASKED] += asked
            log.info("heartbeat questions asked=%d", asked)
        return report

    async def decay(self, *, waiting: Waiting | None = None) -> DecayReport:
        async with self._one_at_a_time(DECAY_JOB, waiting):
            return await self._decay()

    async def _decay(self) -> DecayReport:
        run_id = await self.db.run(runs.start, DECAY_JOB, self.clock())
        try:
            report = await self.decayer.run()
        except BaseException:
            await self.db.run(runs.finish, run_id, False, {}, self.clock())
            raise
        counts = {"examined": report.examined, "retired": report.retired_total, "lost_races": report.lost_races}
        await self.db.run(runs.finish, run_id, True, counts | {f"kept_{k}": v for k, v in report.kept.items()},
                          self.clock())
        return report

    async def undo_decay(self, *, waiting: Waiting | None = None) -> UndoReport:
        async with self._one_at_a_time(DECAY_JOB, waiting):
            return await self.decayer.undo_last()

    async def person_turn(self, person: str, attempt: int) -> TurnOutcome:
        if not self.hb.enabled:
            return TurnOutcome.QUIET_HOURS
        async with self._one_at_a_time(HEARTBEAT_JOB):
            return await self.turns.person_turn(person, attempt)


def build_heartbeat(*, settings: Settings, db: Database, llm: LLMClient, memory: MemoryService,
                    clock: Callable[[], datetime], busy: Collection[str] = frozenset(),
                    outbound: Outbound | None = None,
                    hb: HeartbeatSettings | None = None, questions: Sweep | None = None) -> Heartbeat:
    """``hb`` overrides ``settings.heartbeat`` (tests).

    ``questions`` (``QuestionSender.sweep``) asks flagged conflicts at each tick inside active hours; with
    it the turns leave disputed pairs to it."""
    hb = hb or settings.heartbeat
    tz = resolve_timezone(hb.timezone)
    finder = (QuestionsAskedApart if questions is not None else DueFinder)(db, memory.store, clock, tz)
    return Heartbeat(
        settings=settings, hb=hb, tz=tz, db=db, clock=clock,
        consolidator=Consolidator(settings=settings, db=db, llm=llm, memory=memory, clock=clock, tz=tz),
        turns=HeartbeatTurns(settings=settings, hb=hb, db=db, llm=llm, finder=finder, clock=clock, tz=tz, busy=busy,
                             outbound=outbound, forgets=memory.forgetter.recent),
        decayer=Decay(db, memory.store, clock, stale_days=hb.decay_stale_days, sensitive_words=hb.sensitive_words),
        goals=GoalBook(db, clock, tz),
        questions=questions,
    )
