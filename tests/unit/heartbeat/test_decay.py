"""Decay: lapsed memories are retired with an end date, never deleted; protected ones stay; undo puts back."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from ground.db import Database
from heartbeat.decay import Decay, SensitiveTopics
from heartbeat.service import build_heartbeat
from heartbeat.settings import HeartbeatSettings
from kith.control.parts import Console
from kith.operator.heartbeat_cli import undo_decay_body
from llm.client import LLMClient
from memory.capture.merge_gate import Outcome
from memory.core.records import Horizon, MemoryCandidate, MemoryKind, MemoryRecord, Scope, Source, Status
from memory.service import MemoryService
from tests.support.clock import FakeClock
from tests.support.heartbeat import BotParts
from tests.support.memory import T0, memory_settings, record

BACKENDS = ("sqlite", "postgres")  # the relational store under test: both (tests/conftest.py)


@pytest.fixture
async def memory(tmp_path: Path, db: Database, clock: FakeClock) -> AsyncIterator[MemoryService]:
    settings = memory_settings(tmp_path)
    service = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=clock)
    yield service
    await service.close()


def decay_of(db: Database, memory: MemoryService, clock: FakeClock, **kw: object) -> Decay:
    return Decay(db, memory.store, clock, stale_days=180, **kw)  # type: ignore[arg-type]


async def said(memory: MemoryService, text: str, kind: MemoryKind, horizon: Horizon | None) -> str:
    """A memory as the pipeline makes it: a validated candidate through the gate (which sets the horizon)."""
    candidate = MemoryCandidate(kind=kind, text=text, evidence=(text,), horizon=horizon,
                                sources=(Source("console", "ana", f"m-{len(text)}", T0),), scope=Scope.DM)
    result = await memory.gate.admit("p_ana", candidate)
    assert result.outcome is Outcome.NEW and result.memory_id is not None
    return result.memory_id


async def stored(memory: MemoryService, memory_id: str) -> MemoryRecord:
    found = await memory.get(memory_id)
    assert found is not None
    return found


async def test_an_expired_one_off_is_retired_but_pins_instructions_and_pets_are_kept(
    db: Database, memory: MemoryService, clock: FakeClock
) -> None:
    onions = await said(memory, "Ana wants no onions in tonight's order", MemoryKind.PREFERENCE, Horizon.ONE_OFF)
    assert (await stored(memory, onions)).expires_at == T0 + timedelta(days=30)  # a dated fact lapses 30 days on
    annie = await said(memory, "Call me Annie for the rest of the month", MemoryKind.INSTRUCTION, Horizon.ONE_OFF)
    diet = await said(memory, "Ana's cat Mruczek is on a diet", MemoryKind.FACT, Horizon.ONE_OFF)
    standup = await said(memory, "Ana's standup moved to 9:30", MemoryKind.FACT, Horizon.ONE_OFF)
    current = await stored(memory, standup)
    await memory.store.replace_memory(dataclasses.replace(current, pinned=True))
    lasting = await said(memory, "Ana lives in Krakow", MemoryKind.FACT, None)

    clock.advance(days=31)
    report = await decay_of(db, memory, clock).run()

    assert dict(report.retired) == {"expired": 1}
    assert dict(report.kept) == {"pinned": 1, "instruction": 1, "sensitive_pets": 1}
    retired = await stored(memory, onions)  # still there: retired, never deleted
    assert retired.status is Status.RETIRED and retired.valid_to == clock.now
    assert {m.id for m in await memory.list_memories("p_ana")} == {annie, diet, standup, lasting}


async def test_undo_decay_puts_back_exactly_what_the_last_run_retired(
    db: Database, memory: MemoryService, clock: FakeClock
) -> None:
    onions = await said(memory, "Ana wants no onions in tonight's order", MemoryKind.PREFERENCE, Horizon.ONE_OFF)
    before = await stored(memory, onions)
    clock.advance(days=31)
    decay = decay_of(db, memory, clock)
    await decay.run()
    clock.advance(hours=1)

    undo = await decay.undo_last()

    assert (undo.restored, undo.changed_since) == (1, 0)
    after = await stored(memory, onions)
    assert after.status is Status.ACTIVE and after.valid_to is None and after.updated_at == before.updated_at
    assert dataclasses.replace(after, revision=before.revision) == before  # only the revision moved on
    assert (await decay.undo_last()).run_id is None  # nothing left to undo


async def test_undo_reaches_past_passes_that_retired_nothing(
    db: Database, memory: MemoryService, clock: FakeClock
) -> None:
    onions = await said(memory, "Ana wants no onions in tonight's order", MemoryKind.PREFERENCE, Horizon.ONE_OFF)
    clock.advance(days=31)
    decay = decay_of(db, memory, clock)
    retiring = await decay.run()
    clock.advance(minutes=5)
    assert (await decay.run()).retired_total == 0  # a second pass finds nothing left to retire

    undo = await decay.undo_last()

    assert (undo.run_id, undo.restored) == (retiring.run_id, 1)
    assert (await stored(memory, onions)).status is Status.ACTIVE


async def test_undo_leaves_alone_a_memory_written_to_since(
    db: Database, memory: MemoryService, clock: FakeClock
) -> None:
    onions = await said(memory, "Ana wants no onions in tonight's order", MemoryKind.PREFERENCE, Horizon.ONE_OFF)
    clock.advance(days=31)
    decay = decay_of(db, memory, clock)
    await decay.run()
    retired = await stored(memory, onions)
    edited = await memory.store.replace_memory(dataclasses.replace(retired, text="Ana avoids onions"))

    undo = await decay.undo_last()

    assert (undo.restored, undo.changed_since) == (0, 1)
    assert await stored(memory, onions) == edited


async def test_an_intention_lapses_after_72_hours(db: Database, memory: MemoryService, clock: FakeClock) -> None:
    call = await said(memory, "Ana will call the landlord tomorrow", MemoryKind.EPISODE, Horizon.INTENTION)
    decay = decay_of(db, memory, clock)
    clock.advance(hours=71)
    assert (await decay.run()).retired_total == 0
    clock.advance(hours=2)
    assert dict((await decay.run()).retired) == {"expired": 1}
    assert (await stored(memory, call)).status is Status.RETIRED


async def test_stale_unconfirmed_episodes_retire_but_timeless_facts_do_not(
    db: Database, memory: MemoryService, clock: FakeClock
) -> None:
    await memory.store.add_memories([
        record("p_ana", "Ana watched a film at the cinema", kind=MemoryKind.EPISODE, memory_id="m_film"),
        record("p_ana", "Ana went to a concert in Gdansk", kind=MemoryKind.EPISODE, memory_id="m_used"),
        record("p_ana", "Ana speaks Portuguese", kind=MemoryKind.FACT, memory_id="m_fact"),
    ])
    used = await stored(memory, "m_used")
    await memory.store.replace_memory(dataclasses.replace(used, use_count=2, updated_at=T0))
    clock.advance(days=181)

    report = await decay_of(db, memory, clock).run()

    assert dict(report.retired) == {"stale": 1}
    assert (await stored(memory, "m_film")).status is Status.RETIRED
    assert {m.id for m in await memory.list_memories("p_ana")} == {"m_used", "m_fact"}


async def test_sensitive_topics_in_polish_and_configured_names_are_kept(
    db: Database, memory: MemoryService, clock: FakeClock
) -> None:
    await said(memory, "Mój pies Burek jest na diecie", MemoryKind.FACT, Horizon.ONE_OFF)
    await said(memory, "Ana pays back the loan this month", MemoryKind.PROJECT, Horizon.ONE_OFF)
    await said(memory, "Ana visits Zofia on Friday", MemoryKind.EPISODE, Horizon.ONE_OFF)
    await said(memory, "Ana prefers the window seat this trip", MemoryKind.PREFERENCE, Horizon.ONE_OFF)
    clock.advance(days=31)

    report = await decay_of(db, memory, clock, sensitive_words=["Zofia"]).run()

    assert dict(report.kept) == {"sensitive_pets": 1, "sensitive_money": 1, "sensitive_named": 1}
    assert {m.text for m in await memory.list_memories("p_ana")} == {
        "Mój pies Burek jest na diecie", "Ana pays back the loan this month", "Ana visits Zofia on Friday"}


@pytest.mark.parametrize(
    ("text", "topic"),
    [
        ("My mum is in hospital", "health"),
        ("Moja siostra wychodzi za mąż", "family"),
        ("Luna the dog hates the vet", "pets"),
        ("Ana is paying off her mortgage", "money"),
        ("Her grandfather passed away", "family"),
        ("Ana likes the catalogue of the museum", None),
        ("Nie lubię cebuli", None),
    ],
)
def test_sensitive_topics_are_matched_on_whole_words_and_stems(text: str, topic: str | None) -> None:
    assert SensitiveTopics().topic(text) == topic


async def test_undo_decay_sent_during_the_bots_decay_pass_says_it_waits_then_undoes_that_pass(
    tmp_path: Path, db: Database, memory: MemoryService, clock: FakeClock
) -> None:
    onions = await said(memory, "Ana wants no onions in tonight's order", MemoryKind.PREFERENCE, Horizon.ONE_OFF)
    clock.advance(days=31)
    settings = memory_settings(tmp_path)
    heartbeat = build_heartbeat(settings=settings, db=db, llm=LLMClient(settings.llm), memory=memory, clock=clock,
                                hb=HeartbeatSettings(timezone="UTC"))
    out, err = io.StringIO(), io.StringIO()

    weekly = asyncio.create_task(heartbeat.decay())  # the bot's own pass...
    await asyncio.sleep(0)  # ...has begun when the operator's undo-decay comes in
    code = await undo_decay_body(BotParts(heartbeat), argparse.Namespace(), Console(out, err))  # type: ignore[arg-type]

    assert code == 0 and (await weekly).retired_total == 1
    assert err.getvalue() == "kith: the bot's own decay pass is under way; this one runs when it has finished\n"
    assert out.getvalue().startswith(f"undid decay run {(await weekly).run_id}: restored 1;")
    assert (await stored(memory, onions)).status is Status.ACTIVE


async def test_undo_reaches_past_a_pass_that_died_before_its_first_retirement_landed(
    db: Database, memory: MemoryService, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass killed between recording what it meant to retire and writing it retired nothing: undo reverses
    the pass before it, the one that did, and leaves the memory the dead pass never reached as it is."""
    onions = await said(memory, "Ana wants no onions in tonight's order", MemoryKind.PREFERENCE, Horizon.ONE_OFF)
    clock.advance(days=31)
    decay = decay_of(db, memory, clock)
    retiring = await decay.run()
    clock.advance(days=3)
    seat = await said(memory, "Ana prefers the window seat this trip", MemoryKind.PREFERENCE, Horizon.ONE_OFF)
    clock.advance(days=31)

    async def killed(_record: MemoryRecord) -> MemoryRecord:
        raise RuntimeError("the process died here")

    with monkeypatch.context() as patch:
        patch.setattr(memory.store, "replace_memory", killed)
        with pytest.raises(RuntimeError):
            await decay.run()

    undo = await decay.undo_last()

    assert (undo.run_id, undo.restored, undo.changed_since) == (retiring.run_id, 1, 0)
    assert (await stored(memory, onions)).status is Status.ACTIVE
    assert (await stored(memory, seat)).status is Status.ACTIVE  # never retired, nothing to put back
    assert dict((await decay.run()).retired) == {"expired": 2}  # the next pass retires both as usual
