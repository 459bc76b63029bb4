"""Forgetting: exactly the plan goes, links do not dangle, and a tombstone keeps it from coming back."""

# ruff: noqa: F811

from __future__ import annotations

import dataclasses
import json
import logging
from datetime import UTC

import pytest
import sqlalchemy as sa

from ground.db import Database
from memory.capture.merge_gate import Outcome
from memory.core.records import MemoryKind, MemoryRecord, Source
from memory.forgetting import describe_places
from memory.forgetting.scrub import FORGOTTEN_MARK
from memory.forgetting.tombstones import tombstones
from memory.goals import GoalBook
from memory.service import MemoryService
from memory.store.notes import Note
from people import history
from tests.fakes.openai_api import FakeOpenAI
from tests.support.clock import FakeClock
from tests.support.memory import T0, answer, candidate, fact, memory_settings, record, reply, say, service  # noqa: F401

BACKENDS = ("sqlite", "postgres")  # the memory tables on PostgreSQL, beside Chroma on SQLite

CONV = "console:ana"


async def test_the_plan_names_exactly_the_matching_records_and_the_links_on_them(
    service: MemoryService,
) -> None:
    vim = await service.gate.admit(
        "p_ana", candidate("Ana's favourite editor is Vim", kind=MemoryKind.PREFERENCE)
    )
    emacs = await service.gate.admit(
        "p_ana", candidate("Ana's favourite editor is Emacs", kind=MemoryKind.PREFERENCE)
    )
    await service.gate.admit("p_ana", candidate("Ana keeps bees"))
    await service.gate.admit(
        "p_bob", candidate("Bob's favourite editor is Emacs", kind=MemoryKind.PREFERENCE)
    )
    note = Note(record("p_ana", "Ana switched to Emacs"))
    await service.store.add_notes([note, Note(record("p_ana", "Ana sells honey"))])
    plan = await service.plan_forget("p_ana", "emacs")
    assert plan.memory_ids == (emacs.memory_id,)
    assert plan.note_ids == (note.record.id,)
    assert plan.unlink == {vim.memory_id: (emacs.memory_id,)}
    assert (await service.plan_forget("p_ana", "kayaking")).empty


async def test_applying_removes_records_and_embeddings_and_unlinks_conflicts(
    service: MemoryService, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    vim = await service.gate.admit(
        "p_ana", candidate("Ana's favourite editor is Vim", kind=MemoryKind.PREFERENCE)
    )
    emacs = await service.gate.admit(
        "p_ana",
        candidate(
            "Ana's favourite editor is Emacs", kind=MemoryKind.PREFERENCE, evidence=["I use Emacs daily"]
        ),
    )
    plan = await service.plan_forget("p_ana", "Emacs")
    with caplog.at_level(logging.INFO, logger="kith.memory"):
        result = await service.apply_forget(plan)
    assert (result.memories_deleted, result.links_removed, result.leftover) == (1, 1, 0)
    assert await service.get(emacs.memory_id or "") is None
    vectors = await service.store.vectors(["Ana's favourite editor is Emacs"])
    assert [h.record.id for h in await service.store.nearest("p_ana", vectors, 10)] == [vim.memory_id]
    kept = await service.get(vim.memory_id or "")
    assert kept is not None and kept.conflicts_with == ()  # no pointer to a forgotten fact
    # Tombstones keep hashes and a time, never the words; logs keep counts.
    rows = await db.run(lambda conn: conn.execute(sa.select(tombstones)).all())
    assert len(rows) == result.tombstones == 3  # the text, its one quote and the message it was quoted from
    for row in rows:
        assert len(row.digest) == 64 and all(c in "0123456789abcdef" for c in row.digest)
        assert "Emacs" not in json.dumps([str(v) for v in row])
    assert "Emacs" not in caplog.text and "memories=1" in caplog.text


async def test_a_tombstone_survives_capture_rerun_over_the_same_transcript(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana, ana_row = await say(db, "console:ana", "I'm vegetarian since 2019.", when=clock())
    last = await reply(db, "Good to know.", when=clock())
    fake_llm.reply(answer(fact("Ana is vegetarian", "I'm vegetarian")))
    await service.capture.run(CONV, last)
    await service.promote(ana)
    assert [m.text for m in await service.list_memories(ana)] == ["Ana is vegetarian"]
    clock.advance(days=1)
    result = await service.apply_forget(await service.plan_forget(ana, "vegetarian"))
    assert (result.notes_deleted, result.memories_deleted) == (1, 1)
    # An operator re-runs capture over the old transcript; the model proposes the fact again.
    await service.capture.reset(CONV)
    fake_llm.reply(answer(fact("The person is vegetarian", "I'm vegetarian")))
    report = await service.capture.run(CONV, last)
    # The transcript itself no longer holds the words; a quote of them is nobody's, and a tombstone stands behind.
    assert report.written == 0
    assert await db.run(history.get, ana_row) is not None
    assert (await db.run(history.get, ana_row)).text == FORGOTTEN_MARK
    assert await service.list_notes(ana) == [] and (await service.promote(ana)).notes == 0
    assert await service.list_memories(ana) == []


async def test_the_same_message_reread_in_other_words_does_not_bring_it_back(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana, _ = await say(db, "console:ana", "I was diagnosed with type 2 diabetes, I have type 2 diabetes now",
                       when=clock())
    last = await reply(db, "Thank you for telling me.", when=clock())
    fake_llm.reply(answer(fact("Ana has type 2 diabetes", "I have type 2 diabetes")))
    await service.capture.run(CONV, last)
    await service.promote(ana)
    clock.advance(days=1)
    await service.apply_forget(await service.plan_forget(ana, "diabetes"))
    # The nightly consolidation reads the same message again and words it another way.
    await service.capture.reset(CONV)
    fake_llm.reply(answer(fact("Ana is diabetic", "diagnosed with type 2 diabetes")))
    report = await service.capture.run(CONV, last)
    assert report.written == 0
    assert await service.list_memories(ana) == [] and await service.list_notes(ana) == []

    clock.advance(days=1)  # said again in a new message: heard again
    await say(db, "console:ana", "Update: I was diagnosed with type 2 diabetes last year", when=clock())
    last = await reply(db, "Noted.", when=clock())
    fake_llm.reply(answer(fact("Ana is diabetic", "diagnosed with type 2 diabetes")))
    assert (await service.capture.run(CONV, last)).written == 1


async def test_promotion_cannot_resurrect_a_forgotten_fact_from_an_old_note(
    service: MemoryService, clock: FakeClock
) -> None:
    await service.gate.admit("p_ana", candidate("Ana smokes", evidence=["I smoke"]))
    clock.advance(days=1)
    await service.apply_forget(await service.plan_forget("p_ana", "smokes"))
    # A note staged from the old transcript (before the forgetting) turns up, e.g. from a backup.
    await service.store.add_notes([Note(record("p_ana", "Ana is a smoker", evidence=["I smoke"], when=T0))])
    report = await service.promote("p_ana")
    assert report.outcomes == {Outcome.BLOCKED.value: 1}
    assert await service.list_memories("p_ana") == []


async def test_said_again_after_forgetting_is_heard_again(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana, _ = await say(db, "console:ana", "I'm vegetarian", when=clock())
    last = await reply(db, "Noted.", when=clock())
    fake_llm.reply(answer(fact("Ana is vegetarian", "I'm vegetarian")))
    await service.capture.run(CONV, last)
    clock.advance(days=1)
    await service.apply_forget(await service.plan_forget(ana, "vegetarian"))
    clock.advance(days=30)
    await say(db, "console:ana", "I'm vegetarian again, for good this time", when=clock())
    last = await reply(db, "Noted again.", when=clock())
    fake_llm.reply(answer(fact("Ana is vegetarian", "I'm vegetarian")))
    report = await service.capture.run(CONV, last)
    assert report.written == 1 and report.tombstoned == 0


async def test_forgetting_leaves_other_people_alone(service: MemoryService) -> None:
    await service.gate.admit("p_ana", candidate("Ana keeps bees"))
    await service.gate.admit("p_bob", candidate("Bob keeps bees"))
    await service.apply_forget(await service.plan_forget("p_ana", "bees"))
    assert await service.list_memories("p_ana") == []
    assert [m.text for m in await service.list_memories("p_bob")] == ["Bob keeps bees"]
    # Bob's identical words are not blocked by Ana's tombstone.
    again = await service.gate.admit("p_bob", candidate("Bob keeps bees", message="m9"))
    assert again.outcome is Outcome.MERGED


async def test_reassign_carries_tombstones_with_the_person(service: MemoryService, clock: FakeClock) -> None:
    await service.gate.admit("p_old", candidate("Ana smokes", evidence=["I smoke"]))
    clock.advance(days=1)
    await service.apply_forget(await service.plan_forget("p_old", "smokes"))
    moved = await service.reassign("p_old", "p_new")
    assert moved["tombstones"] == 3
    blocked = await service.gate.admit("p_new", candidate("Ana smokes", evidence=["I smoke"]))
    assert blocked.outcome is Outcome.BLOCKED


async def _ana_has_a_cat(service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock,
                         answered: str) -> tuple[str, int, MemoryRecord]:
    """Ana names her cat in a sentence that says more; kith answers ``answered``; capture keeps "Ana has a cat"
    (its quote without the name) and it is promoted. Ana, her message's history row, and the memory."""
    ana, row = await say(db, "console:ana", "I have a cat named Mruczek who hates the vet. I work at the library.",
                         when=clock())
    last = await reply(db, answered, when=clock())
    fake_llm.reply(answer(fact("Ana has a cat", "I have a cat")))
    await service.capture.run(CONV, last)
    await service.promote(ana)
    (cat,) = await service.list_memories(ana)
    return ana, row, cat


async def test_a_word_only_in_a_receipt_sentence_goes_and_the_fact_stays(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana, row, cat = await _ana_has_a_cat(service, db, fake_llm, clock, "A cat who hates the vet, a classic.")
    (note,) = await service.list_notes(ana)
    assert any("Mruczek" in s for s in cat.evidence_sentences)

    # The memory's text and quote do not hold the name: it is kept, and the plan says its receipt changes.
    plan = await service.plan_forget(ana, "Mruczek")
    assert (plan.memory_ids, plan.note_ids) == ((), ())
    assert set(plan.receipt_ids) == {cat.id, note.record.id} and not plan.empty
    assert plan.describe() == "0 memories, 0 notes, 2 receipts, 1 history row"
    clock.advance(days=1)
    result = await service.apply_forget(plan)
    assert (result.receipts, result.leftover) == (2, 0)
    kept = await service.get(cat.id)
    assert kept is not None and (kept.text, kept.evidence) == ("Ana has a cat", ("I have a cat",))
    (kept_note,) = await service.list_notes(ana)
    assert "Mruczek" not in json.dumps([kept.evidence_sentences, kept_note.record.evidence_sentences])
    assert (await db.run(history.get, row)).text == f"{FORGOTTEN_MARK} I work at the library."
    assert (await service.plan_forget(ana, "Mruczek")).empty

    # The sentence is tombstoned: a fact drawn from it before the forgetting (a backup, an old note) is
    # blocked; the same words said afterwards are heard.
    sentence = "I have a cat named Mruczek who hates the vet."
    old = dataclasses.replace(candidate("Ana's cat is named Mruczek", evidence=["a cat named Mruczek"]),
                              evidence_sentences=(sentence,))
    assert (await service.gate.admit(ana, old)).outcome is Outcome.BLOCKED
    clock.advance(days=1)
    new = dataclasses.replace(old, sources=(Source("console", "ana", "m2", clock()),))
    assert (await service.gate.admit(ana, new)).outcome is not Outcome.BLOCKED


async def test_forgetting_a_memory_takes_the_whole_sentence_it_stood_in_from_history(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana, row, cat = await _ana_has_a_cat(service, db, fake_llm, clock, "Noted.")
    result = await service.apply_forget(await service.plan_forget(ana, cat.id))
    assert (result.memories_deleted, result.leftover) == (1, 0)
    # Not just the quote ("[forgotten] named Mruczek who hates the vet."): what was said with it goes too.
    assert (await db.run(history.get, row)).text == f"{FORGOTTEN_MARK} I work at the library."


async def test_a_goal_holding_the_words_is_counted_in_the_plan_and_goes_from_every_prompt(
    service: MemoryService, db: Database, clock: FakeClock
) -> None:
    book = GoalBook(db, clock, UTC)
    marathon = await book.add("p_ana", "Run the Lisbon marathon in May")
    await book.add("p_ana", "Learn the cello")
    await book.add("p_bob", "Run the Lisbon marathon in May")
    await book.warm()
    assert marathon is not None and "marathon" in await book.slot("p_ana", 2000)  # in her prompts now

    plan = await service.plan_forget("p_ana", "marathon")
    assert plan.places.goals == 1 and "1 goal" in describe_places(plan.places)
    result = await service.apply_forget(plan)

    assert result.leftover == 0
    assert [g.text for g in await book.list("p_ana")] == ["Learn the cello"]
    slot = await book.slot("p_ana", 2000)
    assert "marathon" not in slot and "cello" in slot  # gone from the very next prompt of this process
    assert [g.text for g in await book.list("p_bob")] == ["Run the Lisbon marathon in May"]  # Bob's stays
