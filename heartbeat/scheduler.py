"""APScheduler 3 inside the bot process, its jobs kept in the relational store.

Jobs live in ``heartbeat_jobs`` (``SQLAlchemyJobStore`` on kith's own engine), so they and their
next run times survive restarts. Every job coalesces and has a grace of ``MISFIRE_GRACE_S``: a
bot that was off for three nights runs the missed consolidation once at the next start, not
three times and not never.

How a persisted job reaches the live bot: APScheduler stores a job's callable as a textual
reference (``heartbeat.scheduler:consolidation_job``) and its kwargs pickled, so the callables are
the module-level functions below and their persisted kwargs are plain values (a person id, an
attempt number). The live objects they act on (database, model, memory, delivery) cannot be
pickled and must not be global, so they travel the other way: the scheduler is built with a
:class:`RunnerExecutor` holding the running :class:`JobRunner`, and that executor passes it to
each job function as the ``runner`` keyword at call time. It is never part of the stored job. A
job function called any other way (the default executor) has no runner and says so.

Times: the first run of each recurring job is computed from kith's clock, the waiting between
runs is APScheduler's own (wall time); with the real clock the two agree.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Protocol

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MISSED,
    EVENT_SCHEDULER_SHUTDOWN,
    JobExecutionEvent,
)
from apscheduler.executors.base import BaseExecutor
from apscheduler.job import Job
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.engine import Engine

from ground.failures import describe, traceback_of
from ground.tunables import DECAY_MINUTE, MISFIRE_GRACE_S
from heartbeat.settings import HeartbeatSettings

log = logging.getLogger("kith.scheduler")

JOBS_TABLE = "heartbeat_jobs"

CONSOLIDATION_JOB = "consolidation"
HEARTBEAT_JOB = "heartbeat"
DECAY_JOB = "decay"
PERSON_JOB_PREFIX = "heartbeat-person:"


class JobRunner(Protocol):
    """What the scheduled jobs do; :class:`heartbeat.service.Heartbeat` implements it."""

    async def consolidate(self) -> object: ...

    async def tick(self) -> object: ...

    async def decay(self) -> object: ...

    async def person_turn(self, person: str, attempt: int) -> object: ...


class MissingRunner(RuntimeError):
    def __init__(self) -> None:
        super().__init__("heartbeat jobs run only under RunnerExecutor, which passes them the live runner")


def _need(runner: JobRunner | None) -> JobRunner:
    if runner is None:
        raise MissingRunner
    return runner


# --- the persisted job callables (module level: APScheduler stores them by reference) ----------
async def consolidation_job(*, runner: JobRunner | None = None) -> None:
    await _need(runner).consolidate()


async def heartbeat_job(*, runner: JobRunner | None = None) -> None:
    await _need(runner).tick()


async def decay_job(*, runner: JobRunner | None = None) -> None:
    await _need(runner).decay()


async def person_job(person: str, attempt: int = 0, *, runner: JobRunner | None = None) -> None:
    await _need(runner).person_turn(person, attempt)


class RunnerExecutor(BaseExecutor):
    """Runs coroutine jobs on the scheduler's loop, handing each the live runner (see the module doc)."""

    def __init__(self, runner: JobRunner) -> None:
        super().__init__()
        self.runner = runner
        self._tasks: set[asyncio.Task[list[JobExecutionEvent]]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, scheduler: Any, alias: str) -> None:
        super().start(scheduler, alias)
        self._loop = asyncio.get_running_loop()

    def shutdown(self, wait: bool = True) -> None:
        # A job cut short resumes from its own progress records at the next start.
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()

    def _do_submit_job(self, job: Job, run_times: list[datetime]) -> None:
        assert self._loop is not None, "executor not started"
        task = self._loop.create_task(self._run(job, run_times), name=f"job:{job.id}")
        self._tasks.add(task)

        def done(t: asyncio.Task[list[JobExecutionEvent]]) -> None:
            self._tasks.discard(t)
            if t.cancelled():
                self._run_job_success(job.id, [])
            elif t.exception() is not None:
                self._run_job_error(job.id, t.exception())
            else:
                self._run_job_success(job.id, t.result())

        task.add_done_callback(done)

    async def _run(self, job: Job, run_times: list[datetime]) -> list[JobExecutionEvent]:
        alias = getattr(job, "_jobstore_alias", None)
        events = []
        for run_time in run_times:
            late = datetime.now(UTC) - run_time
            if job.misfire_grace_time is not None and late > timedelta(seconds=job.misfire_grace_time):
                log.warning("job missed id=%s late_s=%.0f", job.id, late.total_seconds())
                events.append(JobExecutionEvent(EVENT_JOB_MISSED, job.id, alias, run_time))
                continue
            try:
                value = await job.func(*job.args, runner=self.runner, **job.kwargs)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("job failed id=%s error=%s", job.id, describe(exc), exc_info=traceback_of(exc))
                events.append(JobExecutionEvent(EVENT_JOB_ERROR, job.id, alias, run_time, exception=exc,
                                                traceback=traceback.format_exc()))
            else:
                events.append(JobExecutionEvent(EVENT_JOB_EXECUTED, job.id, alias, run_time, retval=value))
        return events


def _zone_name(tz: tzinfo) -> str:
    return str(getattr(tz, "key", None) or tz)


class HeartbeatScheduler:
    """The bot's scheduler: recurring consolidation, heartbeat and decay, and persisted one-off person runs.

    It also implements :class:`heartbeat.check_ins.FollowUps` (deferrals and retries).
    """

    def __init__(self, engine: Engine, runner: JobRunner, *, hb: HeartbeatSettings, consolidation_hour: int,
                 tz: tzinfo, clock: Callable[[], datetime], tablename: str = JOBS_TABLE) -> None:
        self.engine = engine
        self.runner = runner
        self.hb = hb
        self.consolidation_hour = consolidation_hour
        self.tz = tz
        self.clock = clock
        self.tablename = tablename
        self._scheduler: AsyncIOScheduler | None = None

    @property
    def scheduler(self) -> AsyncIOScheduler:
        if self._scheduler is None:
            raise RuntimeError("the heartbeat scheduler is not started")
        return self._scheduler

    async def start(self, *, recurring: bool = True, paused: bool = False) -> None:
        """Open the job store and start; ``recurring`` installs (or keeps) the three recurring jobs.

        Jobs already in the store keep their next run time, so a run missed while kith was off still
        happens, once. ``paused`` starts without running anything (operator commands that only add jobs).
        """
        self._scheduler = AsyncIOScheduler(
            jobstores={"default": SQLAlchemyJobStore(engine=self.engine, tablename=self.tablename)},
            executors={"default": RunnerExecutor(self.runner)},
            job_defaults={"coalesce": True, "misfire_grace_time": MISFIRE_GRACE_S, "max_instances": 1},
            timezone=self.tz,
        )
        self._scheduler.start(paused=paused)
        if recurring:
            self.install()
        log.info("scheduler started tz=%s jobs=%d paused=%s", _zone_name(self.tz), len(self.jobs()), paused)

    def recurring_triggers(self) -> dict[str, tuple[Callable[..., Any], BaseTrigger, str]]:
        """job id -> (callable, trigger, signature); the signature changes only when the settings do."""
        zone = _zone_name(self.tz)
        hour = self.consolidation_hour
        every = timedelta(minutes=self.hb.every_minutes)
        jobs: dict[str, tuple[Callable[..., Any], BaseTrigger, str]] = {
            CONSOLIDATION_JOB: (consolidation_job, CronTrigger(hour=hour, minute=0, timezone=self.tz),
                                f"cron {hour:02d}:00 {zone}"),
            DECAY_JOB: (decay_job, CronTrigger(day_of_week=self.hb.decay_weekday, hour=hour, minute=DECAY_MINUTE,
                                               timezone=self.tz),
                        f"cron {self.hb.decay_weekday} {hour:02d}:{DECAY_MINUTE:02d} {zone}"),
        }
        if self.hb.enabled:
            jobs[HEARTBEAT_JOB] = (heartbeat_job, IntervalTrigger(minutes=self.hb.every_minutes,
                                                                  start_date=self.clock() + every,
                                                                  timezone=self.tz),
                                   f"every {self.hb.every_minutes} min")
        return jobs

    def install(self) -> None:
        wanted = self.recurring_triggers()
        now = self.clock().astimezone(self.tz)
        if HEARTBEAT_JOB not in wanted and self.scheduler.get_job(HEARTBEAT_JOB) is not None:
            self.scheduler.remove_job(HEARTBEAT_JOB)
        for job_id, (func, trigger, signature) in wanted.items():
            name = f"{job_id} ({signature})"
            due = trigger.get_next_fire_time(None, now)
            existing = self.scheduler.get_job(job_id)
            if existing is None:
                self.scheduler.add_job(func, trigger, id=job_id, name=name, next_run_time=due)
            elif existing.name != name:
                # The settings changed: new timing, but a run that is already owed still happens first.
                pending = existing.next_run_time
                keep = pending if pending is not None and due is not None and pending < due else due
                self.scheduler.modify_job(job_id, func=func, trigger=trigger, name=name, next_run_time=keep)

    # --- FollowUps -------------------------------------------------------------------------------
    def schedule_person(self, person: str, delay_s: float, attempt: int) -> None:
        run_at = self.clock() + timedelta(seconds=delay_s)
        self.scheduler.add_job(person_job, "date", run_date=run_at, id=PERSON_JOB_PREFIX + person,
                               name=f"heartbeat for one person (attempt {attempt})",
                               kwargs={"person": person, "attempt": attempt}, replace_existing=True)

    def has_pending(self, person: str) -> bool:
        return self.scheduler.get_job(PERSON_JOB_PREFIX + person) is not None

    # --- inspection and shutdown ----------------------------------------------------------------
    def jobs(self) -> list[Job]:
        return list(self.scheduler.get_jobs())

    def next_run(self, job_id: str) -> datetime | None:
        job = self.scheduler.get_job(job_id)
        return job.next_run_time if job is not None else None

    async def shutdown(self) -> None:
        """Stop; a job cut short resumes from its progress records at the next start."""
        scheduler = self._scheduler
        if scheduler is None or not scheduler.running:
            return
        # AsyncIOScheduler shuts down in a loop callback: wait for it before anything closes the engine.
        stopped = asyncio.Event()
        scheduler.add_listener(lambda _event: stopped.set(), EVENT_SCHEDULER_SHUTDOWN)
        scheduler.shutdown(wait=False)
        await stopped.wait()
        self._scheduler = None
