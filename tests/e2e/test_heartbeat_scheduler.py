"""The scheduler: jobs in the relational store survive restarts; a missed night runs once, not never or thrice."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from heartbeat import runs
from heartbeat.scheduler import (
    CONSOLIDATION_JOB,
    DECAY_JOB,
    HEARTBEAT_JOB,
    JOBS_TABLE,
    PERSON_JOB_PREFIX,
    HeartbeatScheduler,
    MissingRunner,
    consolidation_job,
)
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.support.heartbeat import Rig, close_rig, make_rig
from tests.support.memory import reply, say


def days_ago(days: int, hour: int) -> datetime:
    return (datetime.now(UTC) - timedelta(days=days)).replace(hour=hour, minute=0, second=0, microsecond=0)


def scheduler_for(rig: Rig, hour: int = 3) -> HeartbeatScheduler:
    s = HeartbeatScheduler(rig.db.engine, rig.heartbeat, hb=rig.heartbeat.hb, consolidation_hour=hour,
                           tz=rig.heartbeat.tz, clock=rig.clock)
    rig.heartbeat.attach(s)
    rig.schedulers.append(s)
    return s


def answer_consolidation(fake: FakeOpenAI) -> None:
    def route(body: dict[str, Any]) -> Scripted | None:
        if "You consolidate" in body["messages"][0]["content"]:
            memory = {"kind": "fact", "text": "Ana has a cat called Mruczek", "evidence": "a cat called Mruczek"}
            return Scripted(text=json.dumps({"summary": "Cats.", "memories": [memory]}))
        return None

    fake.route = route


async def finished_runs(rig: Rig, job: str) -> list[runs.JobRun]:
    return [r for r in await rig.db.run(runs.recent, job) if r.finished_at is not None]


async def test_a_missed_3am_run_executes_once_after_a_restart(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    first = await make_rig(tmp_path, fake_llm, start=days_ago(4, 12))
    await say(first.db, "console:ana", "I have a cat called Mruczek.", name="Ana", when=days_ago(5, 14))
    await reply(first.db, "Lovely name.", when=days_ago(5, 14) + timedelta(minutes=1))
    await scheduler_for(first).start(paused=True)  # kith ran at noon, then stopped before 3 AM
    owed = first.schedulers[0].next_run(CONSOLIDATION_JOB)
    assert owed == days_ago(3, 3)
    await close_rig(first)

    # Three nights later the bot starts again over the same database (and job store).
    answer_consolidation(fake_llm)
    second = await make_rig(tmp_path, fake_llm, start=days_ago(1, 12))
    try:
        scheduler = scheduler_for(second)
        await scheduler.start()
        for _ in range(250):
            if await finished_runs(second, CONSOLIDATION_JOB):
                break
            await asyncio.sleep(0.02)
        else:
            pytest.fail("the missed consolidation never ran after the restart")
        await asyncio.sleep(0.3)  # room for a second run, had the missed nights not been coalesced

        (run,) = await finished_runs(second, CONSOLIDATION_JOB)
        assert run.ok and run.counts["days_completed"] >= 1
        consolidations = [r for r in fake_llm.requests if "You consolidate" in r["messages"][0]["content"]]
        assert len(consolidations) == 1
        assert [m.text for m in await second.memory.list_memories(await person_of(second))] == [
            "Ana has a cat called Mruczek"]
        next_run = scheduler.next_run(CONSOLIDATION_JOB)
        assert next_run is not None and next_run > datetime.now(UTC)  # back on the nightly rhythm
        assert len(await finished_runs(second, DECAY_JOB)) <= 1
        assert all("You consolidate" in r["messages"][0]["content"] for r in fake_llm.requests)  # idle tick: no call
    finally:
        await close_rig(second)


async def person_of(rig: Rig) -> str:
    from people import directory

    person = await rig.db.run(directory.person_of, "console:ana")
    assert person is not None
    return person


async def test_jobs_are_stored_by_reference_and_keep_their_times_across_restarts(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    first = await make_rig(tmp_path, fake_llm, start=days_ago(1, 12))
    s1 = scheduler_for(first)
    await s1.start(paused=True)
    s1.schedule_person("p_ana", 3600, 2)  # a retry owed an hour from now
    times = {job.id: job.next_run_time for job in s1.jobs()}
    assert set(times) == {CONSOLIDATION_JOB, DECAY_JOB, HEARTBEAT_JOB, PERSON_JOB_PREFIX + "p_ana"}
    await close_rig(first)

    second = await make_rig(tmp_path, fake_llm, start=days_ago(1, 12) + timedelta(minutes=20))
    try:
        s2 = scheduler_for(second)
        await s2.start(paused=True)
        assert {job.id: job.next_run_time for job in s2.jobs()} == times
        retry = s2.scheduler.get_job(PERSON_JOB_PREFIX + "p_ana")
        assert retry is not None and retry.kwargs == {"person": "p_ana", "attempt": 2} and s2.has_pending("p_ana")
        refs = {job.id: job.func_ref for job in s2.jobs()}
        assert refs[CONSOLIDATION_JOB] == "heartbeat.scheduler:consolidation_job"
        assert refs[PERSON_JOB_PREFIX + "p_ana"] == "heartbeat.scheduler:person_job"
        stored = await second.db.run(lambda c: c.execute(sa.text(f"SELECT count(*) FROM {JOBS_TABLE}")).scalar())
        assert stored == 4
    finally:
        await close_rig(second)


async def test_changed_settings_reschedule_without_losing_an_owed_run(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    first = await make_rig(tmp_path, fake_llm, start=days_ago(1, 12))
    s1 = scheduler_for(first, hour=3)
    await s1.start(paused=True)
    owed = s1.next_run(CONSOLIDATION_JOB)
    await close_rig(first)

    second = await make_rig(tmp_path, fake_llm, start=days_ago(1, 12))
    try:
        s2 = scheduler_for(second, hour=5)
        await s2.start(paused=True)
        job = s2.scheduler.get_job(CONSOLIDATION_JOB)
        assert job is not None and "05:00" in job.name and job.next_run_time == owed
        following = job.trigger.get_next_fire_time(owed, owed)
        assert following is not None and following.hour == 5
    finally:
        await close_rig(second)


async def test_a_disabled_heartbeat_keeps_memory_upkeep(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    from heartbeat.settings import HeartbeatSettings

    rig = await make_rig(tmp_path, fake_llm, hb=HeartbeatSettings(timezone="UTC", enabled=False))
    try:
        s = scheduler_for(rig)
        await s.start(paused=True)
        assert {job.id for job in s.jobs()} == {CONSOLIDATION_JOB, DECAY_JOB}
    finally:
        await close_rig(rig)


async def test_a_job_function_called_without_the_runner_says_so() -> None:
    with pytest.raises(MissingRunner):
        await consolidation_job()


async def test_start_heartbeat_wires_into_a_built_app(fake_llm: FakeOpenAI, make_settings: Any) -> None:
    from kith.app.lifecycle import start_heartbeat
    from kith.app.wiring import build_app

    app = await build_app(make_settings(fake_llm), warm_llm=False)
    try:
        heartbeat, scheduler = await start_heartbeat(app)
        assert {job.id for job in scheduler.jobs()} == {CONSOLIDATION_JOB, DECAY_JOB, HEARTBEAT_JOB}
        assert heartbeat.turns.busy is app.core.busy_people and heartbeat.turns.follow_ups is scheduler
        await scheduler.shutdown()
    finally:
        await app.close()
