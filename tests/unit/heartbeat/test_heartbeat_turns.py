"""Proactive turns: a message only when something is due, inside active hours, never the [SILENT] token."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from heartbeat.check_ins import SILENT_TOKEN, TurnOutcome, strip_silent
from heartbeat.due import DueItem, ItemKind, select_due
from heartbeat.scheduler import PERSON_JOB_PREFIX
from heartbeat.service import build_heartbeat
from heartbeat.settings import HeartbeatSettings
from kith.control.parts import Console
from kith.operator.heartbeat_cli import heartbeat_body
from llm.client import LLMClient
from memory.core.records import Horizon, MemoryCandidate, MemoryKind, Source
from memory.goals import GoalStatus
from people import history
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.support.clock import FakeClock
from tests.support.heartbeat import BotParts, Rig, close_rig, conflict_candidate, make_rig, recent_morning
from tests.support.waiting import until


@pytest.fixture
async def rig_for(tmp_path: Path, fake_llm: FakeOpenAI) -> AsyncIterator[Callable[..., Any]]:
    rigs: list[Rig] = []

    async def make(**kw: Any) -> Rig:
        rig = await make_rig(tmp_path, fake_llm, **kw)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        await close_rig(rig)


@pytest.fixture
async def rig(rig_for: Callable[..., Any]) -> Rig:
    return await rig_for()


async def test_a_tick_with_nothing_due_makes_no_model_call_at_all(rig: Rig) -> None:
    ana = await rig.ana_says("I'm training for a half marathon, my secret plan.")
    today = rig.clock.now.date()
    await rig.heartbeat.goals.add(ana, "Run a half marathon")  # no due date
    await rig.heartbeat.goals.add(ana, "Book the physio", today + timedelta(days=7))  # not due yet
    done = await rig.heartbeat.goals.add(ana, "Buy running shoes", today - timedelta(days=1))
    assert done is not None
    await rig.heartbeat.goals.set_status(ana, done.number, GoalStatus.DONE)
    await rig.memory.gate.admit(ana, conflict_candidate("Ana likes long runs on Sundays", "m1"))

    report = await rig.heartbeat.tick()

    assert report.due_people == 0 and report.llm_calls == 0
    assert rig.fake.requests == []
    assert await rig.outbox_entries() == [] and len(await rig.transcript()) == 1


async def test_a_due_goal_gets_a_short_message_in_her_dm_built_from_an_isolated_prompt(rig: Rig) -> None:
    ana = await rig.ana_says("My secret plan: a surprise party for Bob.")
    await rig.heartbeat.goals.add(ana, "Finish the thesis draft", rig.clock.now.date())
    rig.fake.reply("How is the thesis draft going? Today was the day!")

    report = await rig.heartbeat.tick()
    await rig.worker.wait_idle()

    assert report.outcomes == {"posted": 1}
    (request,) = rig.fake.requests
    system, user = request["messages"]
    assert system["role"] == "system" and "You are Kith" in system["content"]
    assert "Finish the thesis draft" in user["content"] and "due today" in user["content"]
    assert "surprise party" not in str(request["messages"])  # no history in a heartbeat prompt
    assert request["max_tokens"] <= rig.heartbeat.hb.token_budget // 3
    assert rig.channel.texts("ana") == ["<b>How is the thesis draft going? Today was the day!</b>"]
    (entry,) = await rig.outbox_entries()
    assert entry.message.chat_kind.value == "dm" and entry.message.recipient_id == "ana"
    last = (await rig.transcript())[-1]
    assert last.role == "assistant" and last.text.startswith("How is the thesis") and not last.silent
    # Handled: the next tick does not ask again.
    await rig.heartbeat.tick()
    assert len(rig.fake.requests) == 1


@pytest.mark.parametrize(
    ("answer", "posted"),
    [
        ("[SILENT]", None),
        ("  [silent]\n", None),
        ("Good luck today! [SILENT]", "Good luck today!"),
        ("[SILENT] Hey, quick question: which editor do you use now?",
         "Hey, quick question: which editor do you use now?"),
    ],
)
async def test_the_silent_token_never_reaches_the_person(rig: Rig, answer: str, posted: str | None) -> None:
    ana = await rig.ana_says("I have an exam soon.")
    await rig.heartbeat.goals.add(ana, "Pass the exam", rig.clock.now.date())
    rig.fake.reply(answer)

    report = await rig.heartbeat.tick()
    await rig.worker.wait_idle()

    last = (await rig.transcript())[-1]
    if posted is None:
        assert report.outcomes == {"silent": 1}
        assert last.role == "heartbeat" and last.silent and last.text == SILENT_TOKEN
        assert rig.channel.delivered == [] and await rig.outbox_entries() == []
    else:
        assert report.outcomes == {"posted": 1}
        assert rig.channel.texts("ana") == [f"<b>{posted}</b>"] and last.text == posted
    assert all("SILENT" not in text.upper() for _chat, text in rig.channel.delivered)
    await rig.heartbeat.tick()  # either way the item was handled
    assert len(rig.fake.requests) == 1


async def test_active_hours_are_respected_in_local_time(rig_for: Callable[..., Any]) -> None:
    # 21:30 UTC in November is 22:30 in Warsaw: after 08:00-22:00 there.
    rig = await rig_for(start=recent_morning(21).replace(minute=30),
                        hb=HeartbeatSettings(timezone="Europe/Warsaw", active_hours="08:00-22:00"))
    ana = await rig.ana_says("Remind me about the dentist.")
    await rig.heartbeat.goals.add(ana, "Book the dentist", rig.clock.now.date() - timedelta(days=1))

    late = await rig.heartbeat.tick()
    assert late.quiet and rig.fake.requests == []
    rig.clock.now = rig.clock.now.replace(hour=6, minute=30)  # 07:30 in Warsaw: still quiet
    assert (await rig.heartbeat.tick()).quiet and rig.fake.requests == []
    rig.clock.advance(hours=1)  # 08:30 in Warsaw
    rig.fake.reply("Did you manage to book the dentist?")
    assert (await rig.heartbeat.tick()).outcomes == {"posted": 1}
    assert len(rig.fake.requests) == 1


async def test_a_person_mid_reply_is_deferred_not_interrupted(rig: Rig) -> None:
    ana = await rig.ana_says("Busy day.")
    await rig.heartbeat.goals.add(ana, "Send the invoice", rig.clock.now.date())
    scheduler = await rig.scheduler(paused=True)
    rig.busy.add(ana)

    report = await rig.heartbeat.tick()

    assert report.outcomes == {"deferred": 1} and rig.fake.requests == []
    job = scheduler.scheduler.get_job(PERSON_JOB_PREFIX + ana)
    assert job is not None and job.kwargs == {"person": ana, "attempt": 0}
    assert job.next_run_time == rig.clock.now + timedelta(seconds=rig.heartbeat.hb.busy_defer_s)


async def test_a_failed_heartbeat_is_retried_with_backoff_and_then_delivered(rig: Rig) -> None:
    ana = await rig.ana_says("Race day is coming.")
    await rig.heartbeat.goals.add(ana, "Run the city 10k", rig.clock.now.date())
    scheduler = await rig.scheduler()
    rig.fake.fail(500)
    rig.fake.reply("Good luck at the 10k today!")

    report = await rig.heartbeat.tick()

    assert report.outcomes == {"retry_scheduled": 1}
    # The persisted one-off job (due a minute after the failure on kith's clock) runs and delivers.
    await until(lambda: bool(rig.channel.delivered), 10, what="the retried heartbeat to deliver", every=0.02)
    await rig.worker.wait_idle()
    assert rig.channel.texts("ana") == ["<b>Good luck at the 10k today!</b>"]
    assert len(rig.fake.requests) == 2
    assert not scheduler.has_pending(ana)


async def test_retries_stop_after_max_retries(rig_for: Callable[..., Any]) -> None:
    rig = await rig_for(hb=HeartbeatSettings(timezone="UTC", max_retries=1))
    ana = await rig.ana_says("Hello")
    await rig.heartbeat.goals.add(ana, "Water the plants", rig.clock.now.date())
    scheduler = await rig.scheduler(paused=True)
    rig.fake.fail(500, times=2)

    assert (await rig.heartbeat.tick()).outcomes == {"retry_scheduled": 1}
    job = scheduler.scheduler.get_job(PERSON_JOB_PREFIX + ana)
    assert job is not None and job.kwargs["attempt"] == 1
    assert job.next_run_time == rig.clock.now + timedelta(seconds=rig.heartbeat.hb.retry_base_s)
    # A pending retry owns the person: the regular tick leaves them to it.
    assert (await rig.heartbeat.tick()).outcomes == {"retry_pending": 1}
    assert await rig.heartbeat.person_turn(ana, 1) is TurnOutcome.FAILED
    assert len(rig.fake.requests) == 2


async def test_no_dm_means_no_model_call(rig: Rig) -> None:
    ana = await rig.ana_says("hi all", chat_id="club", group=True)
    await rig.heartbeat.goals.add(ana, "Plan the club trip", rig.clock.now.date())
    report = await rig.heartbeat.tick()
    assert report.outcomes == {"no_destination": 1} and rig.fake.requests == []


async def test_a_conflict_question_is_asked_once(rig: Rig) -> None:
    ana = await rig.ana_says("I keep switching editors.")
    await rig.memory.gate.admit(ana, conflict_candidate("Ana's favourite editor is Vim", "m1"))
    flagged = await rig.memory.gate.admit(ana, conflict_candidate("Ana's favourite editor is Emacs", "m2"))
    assert flagged.linked
    rig.fake.reply("Quick one: Vim or Emacs these days?")

    assert (await rig.heartbeat.tick()).outcomes == {"posted": 1}
    content = rig.fake.requests[0]["messages"][1]["content"]
    assert "DISPUTED" in content and "Vim" in content and "Emacs" in content
    rig.clock.advance(hours=3)
    await rig.heartbeat.tick()
    assert len(rig.fake.requests) == 1


async def test_a_horizon_ending_soon_is_followed_up(rig: Rig) -> None:
    ana = await rig.ana_says("I'll call the landlord tomorrow about the heating.")
    candidate = MemoryCandidate(kind=MemoryKind.EPISODE, text="Ana will call the landlord about the heating",
                                evidence=("call the landlord",), horizon=Horizon.INTENTION,
                                sources=(Source("console", "ana", "m1", rig.clock.now),))
    await rig.memory.gate.admit(ana, candidate)
    assert (await rig.heartbeat.tick()).llm_calls == 0  # 72 hours left: not yet
    rig.clock.advance(hours=52)  # 20 hours left, at 14:00
    rig.fake.reply("Did the landlord sort out the heating?")
    assert (await rig.heartbeat.tick()).outcomes == {"posted": 1}
    assert "landlord" in rig.fake.requests[0]["messages"][1]["content"]


def _item(person: str, kind: ItemKind, key: str) -> DueItem:
    return DueItem(person, kind, key, key)


def test_select_due_limits_questions_and_repeats() -> None:
    now = datetime(2026, 11, 20, 12, tzinfo=UTC)
    items = [_item("ana", ItemKind.CONFLICT, "conflict:a:b"), _item("ana", ItemKind.CONFLICT, "conflict:c:d"),
             _item("bob", ItemKind.CONFLICT, "conflict:e:f"), _item("ana", ItemKind.GOAL, "goal:1"),
             _item("cy", ItemKind.HORIZON, "horizon:m1"), _item("cy", ItemKind.GOAL, "goal:2")]
    handled = {("cy", "horizon:m1"): now - timedelta(days=30), ("cy", "goal:2"): now - timedelta(days=1)}
    due = select_due(items, handled, now, questions_left=1)
    assert {p: [i.key for i in v] for p, v in due.items()} == {"ana": ["conflict:a:b", "goal:1"]}
    due = select_due(items, handled | {("cy", "goal:2"): now - timedelta(days=4)}, now, questions_left=5)
    assert {p: [i.key for i in v] for p, v in due.items()} == {
        "ana": ["conflict:a:b", "goal:1"], "bob": ["conflict:e:f"], "cy": ["goal:2"]}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("[SILENT]", None), ("[ Silent ].", None), ("ok [SILENT]", "ok"), ("Line one\n[SILENT]\nLine two",
                                                                       "Line one\n\nLine two")],
)
def test_strip_silent(answer: str, expected: str | None) -> None:
    assert strip_silent(answer) == expected


async def test_the_goal_follow_up_comes_back_after_a_few_days(rig: Rig) -> None:
    ana = await rig.ana_says("Thesis stress.")
    await rig.heartbeat.goals.add(ana, "Finish the thesis", rig.clock.now.date() - timedelta(days=2))
    rig.fake.default = lambda _body: "How's the thesis?"
    await rig.heartbeat.tick()
    rig.clock.advance(days=1)
    await rig.heartbeat.tick()
    rig.clock.advance(days=3)
    await rig.heartbeat.tick()
    assert len(rig.fake.requests) == 2
    rows = await rig.db.run(lambda c: c.execute(sa.select(sa.func.count()).select_from(history.messages)
                                                .where(history.messages.c.role == "assistant")).scalar_one())
    assert rows == 2


async def test_a_conflict_flagged_between_ticks_is_found_without_another_full_scan(rig: Rig) -> None:
    ana = await rig.ana_says("Editors again.")
    assert (await rig.heartbeat.tick()).due_people == 0
    await rig.memory.gate.admit(ana, conflict_candidate("Ana's favourite editor is Vim", "m1"))
    rig.clock.advance(minutes=30)
    assert (await rig.heartbeat.tick()).due_people == 0
    rig.clock.advance(minutes=30)
    flagged = await rig.memory.gate.admit(ana, conflict_candidate("Ana's favourite editor is Emacs", "m2"))
    assert flagged.linked
    rig.clock.advance(minutes=30)
    rig.fake.reply("Vim or Emacs these days?")

    assert (await rig.heartbeat.tick()).outcomes == {"posted": 1}
    assert rig.heartbeat.turns.finder.disputes.full_scans == 1
    # Resolved elsewhere (the person answered; the flag was cleared): it is not looked at again.
    await rig.memory.clear_conflict(flagged.memory_id or "", flagged.linked[0])
    rig.clock.advance(minutes=30)
    assert await rig.heartbeat.turns.finder.disputes.current() == []


async def test_two_kiths_on_one_database_whose_clocks_disagree_send_one_check_in(rig: Rig) -> None:
    """Two machines on one shared database, one clock half a minute behind the other: the one behind writes its
    check-in while the other, which found the same goal before that, still waits for its model. A second message
    about the goal would say it twice, whatever the clocks say."""
    ana = await rig.ana_says("Exam next week.")
    await rig.heartbeat.goals.add(ana, "Pass the exam", rig.clock.now.date())
    asked = 0

    def route(_body: dict[str, Any]) -> Scripted:
        nonlocal asked
        asked += 1  # the first to ask (the machine behind) is answered first
        return Scripted(text="How did the exam go?", delay_s=0.6 if asked == 1 else 1.0)

    rig.fake.route = route
    behind = FakeClock(rig.clock.now - timedelta(seconds=30))
    other = build_heartbeat(settings=rig.heartbeat.settings, db=rig.db, llm=rig.heartbeat.turns.llm,
                            memory=rig.memory, clock=behind, outbound=rig.worker, hb=rig.heartbeat.hb)
    first = asyncio.create_task(other.tick())
    await until(lambda: bool(rig.fake.requests), 10, what="the first tick to ask the model", every=0.01)
    second = await rig.heartbeat.tick()  # found the goal before the first one wrote
    await rig.worker.wait_idle()

    assert sorted([*(await first).outcomes, *second.outcomes]) == ["handled_elsewhere", "posted"]
    assert rig.channel.texts("ana") == ["<b>How did the exam go?</b>"]


async def test_a_heartbeat_command_queued_behind_a_retry_says_it_waits(rig: Rig) -> None:
    """The bot's tick has just finished and a person's retry, queued behind it, has not started yet: a
    'heartbeat --now' arriving at that moment waits for the retry, and says so."""
    ana = await rig.ana_says("Exam next week.")
    await rig.heartbeat.goals.add(ana, "Pass the exam", rig.clock.now.date())
    rig.fake.route = lambda _body: Scripted(text="How did the exam go?", delay_s=0.3)
    err = io.StringIO()

    async def tick_then_command() -> int:
        await rig.heartbeat.tick()
        # Right as the tick lets go, before the queued retry has run:
        return await heartbeat_body(BotParts(rig.heartbeat), argparse.Namespace(any_hour=False),  # type: ignore[arg-type]
                                    Console(io.StringIO(), err))

    ticked = asyncio.create_task(tick_then_command())
    await until(lambda: bool(rig.fake.requests), 10, what="the tick to ask the model", every=0.01)
    retry = asyncio.create_task(rig.heartbeat.person_turn(ana, 1))
    await asyncio.sleep(0.05)  # queued behind the tick

    assert await ticked == 0
    assert await retry is TurnOutcome.NOTHING_DUE
    assert "is under way; this one runs when it has finished" in err.getvalue()


async def test_a_model_that_never_answers_holds_the_tick_no_longer_than_its_timeout(rig: Rig) -> None:
    """The tick's lock is not held forever by a hung model: the call gives up after [llm] timeout_s, the person's
    retry is scheduled, and a 'heartbeat --now' that waited behind the tick then runs."""
    ana = await rig.ana_says("Exam next week.")
    await rig.heartbeat.goals.add(ana, "Pass the exam", rig.clock.now.date())
    settings = rig.heartbeat.settings
    llm = LLMClient(dataclasses.replace(settings.llm, timeout_s=0.3))
    heartbeat = build_heartbeat(settings=settings, db=rig.db, llm=llm, memory=rig.memory, clock=rig.clock,
                                outbound=rig.worker, hb=rig.heartbeat.hb)
    scheduler = await rig.scheduler(paused=True)
    heartbeat.attach(scheduler)
    rig.fake.route = lambda _body: Scripted(text="too late", delay_s=1.5)
    err = io.StringIO()

    hung = asyncio.create_task(heartbeat.tick())
    await until(lambda: bool(rig.fake.requests), 10, what="the tick to ask the model", every=0.01)
    command = asyncio.create_task(heartbeat_body(
        BotParts(heartbeat), argparse.Namespace(any_hour=False), Console(io.StringIO(), err)))  # type: ignore[arg-type]
    async with asyncio.timeout(3.5):
        assert (await hung).outcomes == {"retry_scheduled": 1}
        assert await command == 0
    assert "is under way" in err.getvalue() and scheduler.has_pending(ana)


async def test_a_check_in_written_from_words_forgotten_while_the_model_thought_is_not_sent_or_kept(
        rig: Rig) -> None:
    ana = await rig.ana_says("I am writing my thesis about moss.")
    await rig.heartbeat.goals.add(ana, "Finish the thesis draft", rig.clock.now.date())
    rig.fake.route = lambda _r: Scripted(text="How is the thesis draft going? Today was the day!", delay_s=0.6)

    tick = asyncio.create_task(rig.heartbeat.tick())
    # The check-in's prompt holds the goal; the model is thinking.
    await until(lambda: bool(rig.fake.requests), 10, what="the check-in to ask the model", every=0.01)
    await rig.memory.apply_forget(await rig.memory.plan_forget(ana, "thesis"))
    report = await tick
    await rig.worker.wait_idle()

    assert report.outcomes == {"forgotten_meanwhile": 1}
    assert rig.channel.delivered == []  # nothing about it reached her
    assert not [m for m in await rig.transcript() if "thesis" in m.text]
    assert not [e for e in await rig.outbox_entries() if "thesis" in e.text]
    rig.fake.route = None
    assert (await rig.heartbeat.tick()).due_people == 0  # the goal went with the forget: nothing is due now
