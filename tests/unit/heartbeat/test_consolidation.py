"""Nightly consolidation: past days become curated memory from receipts only, once, even across a crash."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from heartbeat.consolidation import consolidation_chunks, day_summaries
from heartbeat.due import ItemKind
from memory.capture.merge_gate import PromoteReport
from memory.core.records import MemoryKind, MemoryRecord, Scope, Source
from memory.store import Note
from people import history
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.support.heartbeat import Rig, close_rig, conflict_candidate, make_rig
from tests.support.memory import reply, say

NIGHT = datetime(2026, 11, 20, 3, 0, tzinfo=UTC)  # the 3 AM run; "yesterday" is 19 November
YESTERDAY = datetime(2026, 11, 19, 14, 0, tzinfo=UTC)


@pytest.fixture
async def rig(tmp_path: Path, fake_llm: FakeOpenAI) -> AsyncIterator[Rig]:
    made = await make_rig(tmp_path, fake_llm, start=NIGHT)
    yield made
    await close_rig(made)


def memory_item(kind: str, text: str, evidence: str) -> dict[str, Any]:
    return {"kind": kind, "text": text, "evidence": evidence}


Answer = Callable[[str], list[dict[str, Any]]]


def consolidation_model(fake: FakeOpenAI, answer: Answer, summary: str = "Ana talked about her week.") -> None:
    """Consolidation requests get ``answer(transcript)``; summaries get a fixed line; the rest echoes."""

    def route(body: dict[str, Any]) -> Scripted | None:
        system = body["messages"][0]["content"]
        if "running summary" in system:
            return Scripted(text="The thread covered running and editors.")
        if "You consolidate" in system:
            memories = answer(body["messages"][1]["content"])
            return Scripted(text=json.dumps({"summary": summary, "memories": memories}))
        return None

    fake.route = route


def consolidation_requests(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [r for r in fake.requests if "You consolidate" in r["messages"][0]["content"]]


async def ana_day(rig: Rig, *lines: str, when: datetime = YESTERDAY) -> str:
    """Ana's lines with a short answer from kith after each, a minute apart."""
    person = ""
    for i, line in enumerate(lines):
        person, _id = await say(rig.db, "console:ana", line, name="Ana", when=when + timedelta(minutes=2 * i))
        await reply(rig.db, "I see.", when=when + timedelta(minutes=2 * i + 1))
    return person


async def test_a_day_with_an_invented_quote_a_duplicate_and_a_contradiction(rig: Rig) -> None:
    ana = await ana_day(rig, "At work our database is Postgres, as always.",
                        "These days my favourite editor is Emacs.", "I have a cat called Mruczek.")
    await say(rig.db, "console:ana", "I secretly love opera.", when=NIGHT - timedelta(hours=1))  # today: not yet
    postgres = await rig.memory.gate.admit(ana, conflict_candidate("I use Postgres", "old1"))
    vim = await rig.memory.gate.admit(ana, conflict_candidate("Ana's favourite editor is Vim", "old2"))
    consolidation_model(rig.fake, lambda _t: [
        memory_item("preference", "Database is Postgres", "our database is Postgres"),
        memory_item("preference", "Ana's favourite editor is Emacs", "my favourite editor is Emacs"),
        memory_item("fact", "Ana has a cat called Mruczek", "I have a cat called Mruczek"),
        memory_item("fact", "Ana owns a yacht", "I own a yacht"),  # never said
    ])

    report = await rig.heartbeat.consolidate()

    assert report.days_completed == 1 and report.calls == 1 and not report.interrupted
    assert dict(report.outcomes) == {"merged": 1, "conflict": 1, "new": 1}
    assert report.validation["rejected_evidence_not_found"] == 1
    (request,) = consolidation_requests(rig.fake)
    assert "opera" not in request["messages"][1]["content"] and "tools" not in request
    memories = {m.text: m for m in await rig.memory.list_memories(ana)}
    assert set(memories) == {"I use Postgres", "Ana's favourite editor is Vim", "Ana's favourite editor is Emacs",
                             "Ana has a cat called Mruczek"}
    merged = memories["I use Postgres"]
    assert merged.id == postgres.memory_id and merged.evidence == ("I use Postgres", "our database is Postgres")
    emacs = memories["Ana's favourite editor is Emacs"]
    assert emacs.conflicts_with == (vim.memory_id,) and memories["Ana's favourite editor is Vim"].conflicts_with == (
        emacs.id,)
    # The conflict is queued for a heartbeat to ask; the day's summary is kept with the chunk.
    due = await rig.heartbeat.turns.finder.find()
    assert [item.kind for item in due[ana]] == [ItemKind.CONFLICT]
    assert await rig.db.run(day_summaries, YESTERDAY.date(), ana) == ["Ana talked about her week."]
    # The day is done: the next run asks nothing.
    again = await rig.heartbeat.consolidate()
    assert again.days == 0 and len(consolidation_requests(rig.fake)) == 1


def by_topic(transcript: str) -> list[dict[str, Any]]:
    found = []
    if "Mruczek" in transcript:
        found.append(memory_item("fact", "Ana has a cat called Mruczek", "I have a cat called Mruczek"))
    if "nurse" in transcript:
        found.append(memory_item("fact", "Ana works as a nurse", "I work as a nurse"))
    return found


async def test_nothing_a_paused_person_sent_reaches_the_night_run_forwards_included(rig: Rig) -> None:
    in_group = {"chat_id": "g1", "conversation": "console:g1", "group": True}
    ana, _ = await say(rig.db, "console:ana", "morning all", name="Ana", when=YESTERDAY, **in_group)
    await say(rig.db, "console:ana", "Bob says the gate code is 4512", name="Ana", forwarded=True,
              when=YESTERDAY + timedelta(minutes=1), **in_group)
    await say(rig.db, "console:ben", "I work as a nurse", name="Ben", when=YESTERDAY + timedelta(minutes=2),
              **in_group)
    rig.memory.capture.is_paused = lambda person: person == ana  # Ana said /pause
    consolidation_model(rig.fake, by_topic)

    await rig.heartbeat.consolidate()

    transcripts = [r["messages"][1]["content"] for r in consolidation_requests(rig.fake)]
    assert transcripts and all("I work as a nurse" in t for t in transcripts)  # Ben's words were read
    assert not any("morning all" in t or "4512" in t for t in transcripts)


async def chunk_states(rig: Rig) -> list[str]:
    rows = await rig.db.run(lambda c: c.execute(sa.select(consolidation_chunks.c.state)
                                                .order_by(consolidation_chunks.c.last_id)).all())
    return [r.state for r in rows]


async def test_a_crash_after_a_chunk_is_recorded_resumes_without_double_writes(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    rig = await make_rig(tmp_path, fake_llm, start=NIGHT, consolidation_chunk_chars=45)
    try:
        ana = await ana_day(rig, "I have a cat called Mruczek.", "I work as a nurse in Krakow.")
        consolidation_model(rig.fake, by_topic)
        real_promote = rig.memory.promote

        async def crash(_person: str) -> PromoteReport:
            raise RuntimeError("power cut")

        rig.memory.promote = crash  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            await rig.heartbeat.consolidate()
        assert await chunk_states(rig) == ["staged"]  # recorded before applying, then the crash
        assert await rig.memory.list_memories(ana) == [] and len(consolidation_requests(rig.fake)) == 1

        rig.memory.promote = real_promote  # type: ignore[method-assign]
        report = await rig.heartbeat.consolidate()

        assert (report.chunks, report.chunks_resumed, report.chunks_done) == (2, 1, 2)
        assert len(consolidation_requests(rig.fake)) == 2  # chunk 1 was not sent to the model again
        assert await chunk_states(rig) == ["applied", "applied"]
        memories = await rig.memory.list_memories(ana)
        assert sorted(m.text for m in memories) == ["Ana has a cat called Mruczek", "Ana works as a nurse"]
        assert all(m.revision == 1 and len(m.evidence) == 1 and len(m.sources) == 1 for m in memories)
        assert (await rig.heartbeat.consolidate()).days == 0
        assert len(await rig.memory.list_memories(ana)) == 2
    finally:
        await close_rig(rig)


async def test_a_model_outage_stops_the_run_and_the_next_run_resumes_at_that_chunk(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    rig = await make_rig(tmp_path, fake_llm, start=NIGHT, consolidation_chunk_chars=45)
    try:
        ana = await ana_day(rig, "I have a cat called Mruczek.", "I work as a nurse in Krakow.")
        consolidation_model(rig.fake, by_topic)
        calls = 0
        routed = rig.fake.route
        assert routed is not None

        def second_call_fails(body: dict[str, Any]) -> Scripted | None:
            nonlocal calls
            calls += 1
            return Scripted(status=500) if calls == 2 else routed(body)

        rig.fake.route = second_call_fails
        first = await rig.heartbeat.consolidate()
        assert first.interrupted and first.model_failures == 1 and first.days_completed == 0
        assert [m.text for m in await rig.memory.list_memories(ana)] == ["Ana has a cat called Mruczek"]

        second = await rig.heartbeat.consolidate()
        assert (second.chunks_skipped, second.chunks_done, second.days_completed) == (1, 1, 1)
        assert sorted(m.text for m in await rig.memory.list_memories(ana)) == [
            "Ana has a cat called Mruczek", "Ana works as a nurse"]
    finally:
        await close_rig(rig)


async def test_a_missed_night_is_caught_up_day_by_day_in_one_run(rig: Rig) -> None:
    ana = await ana_day(rig, "I have a cat called Mruczek.", when=YESTERDAY - timedelta(days=2))
    await ana_day(rig, "I work as a nurse in Krakow.", when=YESTERDAY)
    consolidation_model(rig.fake, by_topic)

    report = await rig.heartbeat.consolidate()

    assert report.days_completed == 3 and report.calls == 2  # the empty day in between costs nothing
    assert len(await rig.memory.list_memories(ana)) == 2


async def test_notes_never_promoted_expire_and_summaries_advance(rig: Rig) -> None:
    old = MemoryRecord(id="n_old", person="p_x", kind=MemoryKind.FACT, text="Old staged fact",
                       evidence=("Old staged fact",), sources=(Source("console", "x", "1", NIGHT),),
                       scope=Scope.DM, created_at=NIGHT - timedelta(days=30), updated_at=NIGHT - timedelta(days=30))
    await rig.memory.store.add_notes([Note(old)])
    await ana_day(rig, *[f"Run number {i} went fine." for i in range(35)])  # 70 messages: beyond the window
    consolidation_model(rig.fake, lambda _t: [])

    report = await rig.heartbeat.consolidate()

    assert report.notes_pruned == 1 and await rig.memory.store.get_notes(["n_old"]) == []
    assert report.summaries_advanced == 1
    summary = await rig.db.run(history.get_summary, "console:ana")
    assert summary.text == "The thread covered running and editors." and summary.through > 0


async def test_the_progress_bar_counts_chunks(rig: Rig) -> None:
    await ana_day(rig, "I have a cat called Mruczek.")
    consolidation_model(rig.fake, by_topic)
    seen: list[tuple[int, int]] = []
    progress: Callable[[int, int], None] = lambda done, total: seen.append((done, total))  # noqa: E731
    report = await rig.heartbeat.consolidate(progress)
    assert seen == [(0, 1), (1, 1)] and report.chunks == 1


