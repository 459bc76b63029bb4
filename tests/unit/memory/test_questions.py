"""Conflict questions: which pair is worth asking, the typed answers, and the caps that persist."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from ground.db import Database
from memory.controls.questions import (
    Answer,
    DmTarget,
    QuestionBook,
    QuestionLimits,
    QuestionStatus,
    askable_pairs,
    parse_answer,
    pick_pair,
)
from memory.core.records import MemoryRecord, Origin, Source, Status
from tests.support.clock import FakeClock
from tests.support.database import open_db
from tests.support.memory import T0, record

BACKENDS = ("sqlite", "postgres")  # the relational store under test: both (tests/conftest.py)

DM = DmTarget("telegram", "501", "501")


def linked_pair(person: str, a: str, b: str, *, origins: tuple[Origin, Origin] = (Origin.HEARD, Origin.HEARD),
                hours_apart: int = 1) -> tuple[MemoryRecord, MemoryRecord]:
    first = dataclasses.replace(record(person, a, when=T0), origin=origins[0])
    second = dataclasses.replace(record(person, b, when=T0 + timedelta(hours=hours_apart)), origin=origins[1])
    return (dataclasses.replace(first, conflicts_with=(second.id,)),
            dataclasses.replace(second, conflicts_with=(first.id,)))


@pytest.mark.parametrize("text, expected", [
    ("first", Answer.FIRST), ("1", Answer.FIRST), ("The first.", Answer.FIRST), ("  SECOND ", Answer.SECOND),
    ("2", Answer.SECOND), ("both", Answer.BOTH), ("Both are true!", Answer.BOTH), ("neither", Answer.NEITHER),
    ("pierwszy", Answer.FIRST), ("drugi", Answer.SECOND), ("oba", Answer.BOTH), ("żaden", Answer.NEITHER),
])
def test_a_whole_message_that_is_an_answer_is_read_as_one(text: str, expected: Answer) -> None:
    assert parse_answer(text) is expected


@pytest.mark.parametrize("text", ["first I need coffee", "12", "both of my cats are asleep", "the third", ""])
def test_ordinary_messages_are_not_answers(text: str) -> None:
    assert parse_answer(text) is None


def test_a_pair_is_asked_about_only_when_one_side_is_the_persons_own_word() -> None:
    vim, emacs = linked_pair("p_ana", "Ana's favourite editor is Vim", "Ana's favourite editor is Emacs",
                             origins=(Origin.HEARD, Origin.READ))
    read_a, read_b = linked_pair("p_ana", "The office wifi is slow", "The office wifi is fast",
                                 origins=(Origin.READ, Origin.THOUGHT))
    pairs = askable_pairs([emacs, read_a, vim, read_b], T0)
    assert [(p.first.id, p.second.id) for p in pairs] == [(vim.id, emacs.id)]  # earlier said comes first


def test_a_retired_partner_or_a_one_sided_link_is_handled() -> None:
    vim, emacs = linked_pair("p_ana", "Vim is my editor", "Emacs is my editor")
    one_sided = dataclasses.replace(emacs, conflicts_with=())
    assert len(askable_pairs([vim, one_sided], T0)) == 1  # either side's flag is enough
    retired = dataclasses.replace(emacs, status=Status.RETIRED)
    assert askable_pairs([vim, retired], T0) == []


def test_a_pair_is_asked_once_until_new_evidence_arrives() -> None:
    vim, emacs = linked_pair("p_ana", "Vim is my editor", "Emacs is my editor")
    pair = askable_pairs([vim, emacs], T0)[0]
    asked = {pair.key: {pair.evidence[0]}}
    assert pick_pair([pair], asked) is None
    repeated = dataclasses.replace(emacs, evidence=(*emacs.evidence, "emacs, always emacs"),
                                   sources=(*emacs.sources, Source("telegram", "501", "77", T0)))
    again = askable_pairs([vim, repeated], T0)[0]
    assert again.key == pair.key and again.evidence[1] > pair.evidence[1]
    assert pick_pair([again], asked) == again


async def test_one_open_question_per_person_and_five_an_hour_in_all_across_a_restart(tmp_path: Path,
                                                                                     db: Database) -> None:
    clock = FakeClock(T0)
    book = QuestionBook(db, clock)
    pairs = {f"p_{i}": askable_pairs(list(linked_pair(f"p_{i}", f"I live in town {i}", f"I live in city {i}")),
                                     T0)[0] for i in range(7)}
    first = await book.reserve("p_0", pairs["p_0"], DM)
    assert first is not None and first.status is QuestionStatus.OPEN
    other_pair = askable_pairs(list(linked_pair("p_0", "My car is red", "My car is blue")), T0)[0]
    assert await book.reserve("p_0", other_pair, DM) is None  # one open question at a time
    for i in range(1, 5):
        assert await book.reserve(f"p_{i}", pairs[f"p_{i}"], DM) is not None
    assert await book.reserve("p_5", pairs["p_5"], DM) is None  # the sixth in one hour waits

    db.close()
    reopened = open_db(tmp_path, url=db.url)  # a restart: the same database, new objects
    try:
        book = QuestionBook(reopened, clock)
        assert await book.reserve("p_5", pairs["p_5"], DM) is None
        assert [q.id for q in await book.open_of("p_0")] == [first.id]
        clock.advance(minutes=61)
        assert await book.reserve("p_0", other_pair, DM) is None  # still open: still one at a time
        assert await book.reserve("p_5", pairs["p_5"], DM) is not None
        assert await book.close(first.id, QuestionStatus.ANSWERED, Answer.FIRST, by="telegram:501")
        assert not await book.close(first.id, QuestionStatus.ANSWERED, Answer.SECOND)  # answered once
        assert await book.reserve("p_0", pairs["p_0"], DM) is None  # the same pair, the same evidence
        assert await book.reserve("p_0", other_pair, DM) is not None
        stored = await book.get(first.id)
        assert stored is not None and stored.answer is Answer.FIRST and stored.answered_by == "telegram:501"
    finally:
        reopened.close()


async def test_a_question_whose_delivery_cannot_be_written_is_not_left_open(db: Database) -> None:
    book = QuestionBook(db, FakeClock(T0), QuestionLimits(per_hour=5, open_per_person=1))
    pair = askable_pairs(list(linked_pair("p_ana", "I live in Oslo", "I live in Bergen")), T0)[0]

    def broken_outbox(_conn: object, _question: object) -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        await book.reserve("p_ana", pair, DM, also=broken_outbox)
    assert await book.open_of("p_ana") == []
    assert await book.reserve("p_ana", pair, DM) is not None
