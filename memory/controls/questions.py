"""Conflict questions: which flagged pair to ask a person about, the caps, and the persisted state.

Two stored facts flagged as conflicting (``conflicts_with``) are never resolved by kith itself.
When at least one side is the person's own word (origin ``heard``), kith asks that
person, in their DM, which is right; between two facts neither of which the person said, both are
kept and nobody is asked.

The caps (``ground.tunables``): at most ``OPEN_QUESTIONS_PER_PERSON`` open question per person and at
most ``QUESTIONS_PER_HOUR`` new questions an hour in all; a pair is asked about once, and again only
when its evidence changed since (the evidence key recorded at asking time). Every question is a row
of ``memory_questions``, so all of this holds across restarts. The caps are checked and the row
written in one transaction on the database's single thread, so two senders cannot both pass them.

The selection and the caps are pure functions; :class:`QuestionBook` is the relational state.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, UtcDateTime, metadata
from ground.person_data import PersonData
from ground.tunables import OPEN_QUESTIONS_PER_PERSON, QUESTIONS_PER_HOUR
from memory.core.records import MemoryRecord, Origin, said_at

log = logging.getLogger("kith.memory.questions")

CAP_WINDOW = timedelta(hours=1)

questions = sa.Table(
    "memory_questions",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("person", sa.String(64), nullable=False),
    sa.Column("first_id", sa.String(64), nullable=False),
    sa.Column("second_id", sa.String(64), nullable=False),
    sa.Column("pair_key", sa.String(140), nullable=False),
    sa.Column("evidence_key", sa.String(64), nullable=False),
    sa.Column("evidence_count", sa.Integer, nullable=False),
    sa.Column("platform", sa.String(32), nullable=False),
    sa.Column("chat_id", sa.String(255), nullable=False),
    sa.Column("recipient_id", sa.String(255), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("answer", sa.String(16), nullable=True),
    sa.Column("answered_by", sa.String(255), nullable=True),
    sa.Column("asked_at", UtcDateTime(), nullable=False),
    sa.Column("answered_at", UtcDateTime(), nullable=True),
    sa.Index("ix_memory_questions_person_status", "person", "status"),
    sa.Index("ix_memory_questions_pair", "person", "pair_key"),
    sa.Index("ix_memory_questions_asked_at", "asked_at"),
)


class Answer(enum.StrEnum):
    FIRST = "first"
    SECOND = "second"
    BOTH = "both"  # both are true: not a conflict after all
    NEITHER = "neither"


class QuestionStatus(enum.StrEnum):
    OPEN = "open"
    ANSWERED = "answered"
    VOID = "void"  # its facts changed or vanished before the person answered


@dataclass(frozen=True, slots=True)
class QuestionLimits:
    per_hour: int = QUESTIONS_PER_HOUR
    open_per_person: int = OPEN_QUESTIONS_PER_PERSON


@dataclass(frozen=True, slots=True)
class DmTarget:
    """Where a person is asked: their DM on one platform."""

    platform: str
    chat_id: str
    recipient_id: str | None


@dataclass(frozen=True, slots=True)
class ConflictPair:
    """Two linked live facts of one person, ``first`` the one said earlier."""

    first: MemoryRecord
    second: MemoryRecord

    @property
    def key(self) -> str:
        return pair_key(self.first.id, self.second.id)

    @property
    def evidence(self) -> tuple[str, int]:
        return evidence_key(self.first, self.second)


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    person: str
    first_id: str
    second_id: str
    pair_key: str
    evidence_key: str
    evidence_count: int
    target: DmTarget
    status: QuestionStatus
    asked_at: datetime
    answer: Answer | None = None
    answered_by: str | None = None
    answered_at: datetime | None = None


# --- pure: answers ---------------------------------------------------------------------------------
_ANSWER_WORDS: Mapping[str, Answer] = {
    **dict.fromkeys(("first", "1", "the first", "the first one", "first one"), Answer.FIRST),
    **dict.fromkeys(("second", "2", "the second", "the second one", "second one"), Answer.SECOND),
    **dict.fromkeys(("both", "both are true", "both true"), Answer.BOTH),
    **dict.fromkeys(("neither", "neither is true", "none"), Answer.NEITHER),
    # Polish, because it costs four lines.
    **dict.fromkeys(("pierwszy", "pierwsze", "pierwsza"), Answer.FIRST),
    **dict.fromkeys(("drugi", "drugie", "druga"), Answer.SECOND),
    **dict.fromkeys(("oba", "obie", "obydwa", "obydwie"), Answer.BOTH),
    **dict.fromkeys(("żaden", "żadne", "żadna", "zaden", "zadne", "zadna"), Answer.NEITHER),
}


def _plain(text: str) -> str:
    return " ".join(text.casefold().split()).strip(" .!?,;:'\"")


def parse_answer(text: str) -> Answer | None:
    """A typed answer to a conflict question, only when the whole message is one ("first", "2", "oba")."""
    return _ANSWER_WORDS.get(_plain(text))


# --- pure: selection and caps ------------------------------------------------------------------------
def pair_key(a: str, b: str) -> str:
    return "|".join(sorted((a, b)))


def evidence_key(a: MemoryRecord, b: MemoryRecord) -> tuple[str, int]:
    """A hash of both sides' receipts (quotes and source messages) and how many there are."""
    parts: list[str] = []
    count = 0
    for record in sorted((a, b), key=lambda r: r.id):
        quotes = sorted(record.evidence)
        sources = sorted(f"{s.platform}\x1f{s.chat_id}\x1f{s.message_id}" for s in record.sources)
        count += len(quotes) + len(sources)
        parts.append("\x1e".join([record.id, *quotes, "\x1d", *sources]))
    digest = hashlib.sha256("\x1c".join(parts).encode("utf-8")).hexdigest()
    return digest, count


def linked(a: MemoryRecord, b: MemoryRecord) -> bool:
    return b.id in a.conflicts_with or a.id in b.conflicts_with


def needs_the_person(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Only a pair with the person's own word on one side is theirs to settle; otherwise both stay."""
    return Origin.HEARD in (a.origin, b.origin)


def ordered(a: MemoryRecord, b: MemoryRecord) -> ConflictPair:
    first, second = sorted((a, b), key=lambda r: (said_at(r), r.created_at, r.id))
    return ConflictPair(first, second)


def askable_pairs(records: Sequence[MemoryRecord], now: datetime) -> list[ConflictPair]:
    """The person's flagged pairs worth a question, the most recently disputed first."""
    live = {r.id: r for r in records if r.is_live(now)}
    seen: set[str] = set()
    pairs: list[ConflictPair] = []
    for record in live.values():
        for other_id in record.conflicts_with:
            other = live.get(other_id)
            if other is None or other.person != record.person or not needs_the_person(record, other):
                continue
            key = pair_key(record.id, other_id)
            if key not in seen:
                seen.add(key)
                pairs.append(ordered(record, other))
    pairs.sort(key=lambda p: (said_at(p.second), p.key), reverse=True)
    return pairs


def pick_pair(pairs: Iterable[ConflictPair], asked: Mapping[str, set[str]]) -> ConflictPair | None:
    """The first pair never asked about with its current evidence (``asked``: pair key -> evidence keys)."""
    for pair in pairs:
        if pair.evidence[0] not in asked.get(pair.key, set()):
            return pair
    return None


def caps_allow(open_for_person: int, asked_in_window: int, limits: QuestionLimits) -> bool:
    return open_for_person < limits.open_per_person and asked_in_window < limits.per_hour


def still_current(question: Question, first: MemoryRecord | None, second: MemoryRecord | None,
                  now: datetime) -> bool:
    """Whether an open question still asks about two live, linked facts of its person."""
    return (first is not None and second is not None and first.person == question.person
            and second.person == question.person and first.is_live(now) and second.is_live(now)
            and linked(first, second))


def new_question_id() -> str:
    return "q_" + secrets.token_hex(8)


# --- relational state ------------------------------------------------------------------------------
def _question(r: sa.Row) -> Question:
    return Question(
        id=r.id, person=r.person, first_id=r.first_id, second_id=r.second_id, pair_key=r.pair_key,
        evidence_key=r.evidence_key, evidence_count=r.evidence_count,
        target=DmTarget(r.platform, r.chat_id, r.recipient_id), status=QuestionStatus(r.status),
        asked_at=r.asked_at, answer=Answer(r.answer) if r.answer else None, answered_by=r.answered_by,
        answered_at=r.answered_at)


def _open_count(conn: Connection, person: str) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(questions).where(
        questions.c.person == person, questions.c.status == QuestionStatus.OPEN.value)).scalar_one())


def _asked_since(conn: Connection, since: datetime) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(questions)
                            .where(questions.c.asked_at > since)).scalar_one())


def _asked_keys(conn: Connection, person: str) -> dict[str, set[str]]:
    rows = conn.execute(sa.select(questions.c.pair_key, questions.c.evidence_key)
                        .where(questions.c.person == person)).all()
    asked: dict[str, set[str]] = {}
    for row in rows:
        asked.setdefault(row.pair_key, set()).add(row.evidence_key)
    return asked


@dataclass(frozen=True, slots=True)
class AskState:
    """What deciding on a new question to one person needs, read in one transaction."""

    open: list[Question]  # their open questions, oldest first
    asked_in_window: int  # questions asked to anyone within the hourly cap's window
    asked_keys: dict[str, set[str]]  # pair key -> evidence keys already asked about


def _ask_state(conn: Connection, person: str, since: datetime) -> AskState:
    return AskState(_open_of(conn, person), _asked_since(conn, since), _asked_keys(conn, person))


def _open_of(conn: Connection, person: str) -> list[Question]:
    rows = conn.execute(sa.select(questions).where(
        questions.c.person == person, questions.c.status == QuestionStatus.OPEN.value)
        .order_by(questions.c.asked_at, questions.c.id)).all()
    return [_question(r) for r in rows]


def _get(conn: Connection, question_id: str) -> Question | None:
    row = conn.execute(sa.select(questions).where(questions.c.id == question_id)).first()
    return _question(row) if row is not None else None


def _of_person(conn: Connection, person: str) -> list[Question]:
    rows = conn.execute(sa.select(questions).where(questions.c.person == person)
                        .order_by(questions.c.asked_at, questions.c.id)).all()
    return [_question(r) for r in rows]


def export_of(conn: Connection, person: str) -> list[dict[str, Any]]:
    """The person's questions as their export lists them, oldest first: which two memories (their ids in
    the export), where they were asked, and the answer. The pair and evidence keys, derived from those
    memories to ask each pair once, are left out."""
    def when(value: datetime | None) -> str | None:
        return value.isoformat() if value is not None else None

    return [{"id": q.id, "first": q.first_id, "second": q.second_id, "status": q.status.value,
             "answer": q.answer.value if q.answer else None, "answered_by": q.answered_by,
             "platform": q.target.platform, "chat_id": q.target.chat_id,
             "asked_at": when(q.asked_at), "answered_at": when(q.answered_at)} for q in _of_person(conn, person)]


def _close(conn: Connection, question_id: str, status: QuestionStatus, answer: Answer | None,
           by: str | None, now: datetime) -> bool:
    """Compare-and-swap from open: of two answers racing (a button and a typed word), one wins."""
    result = conn.execute(questions.update().where(
        questions.c.id == question_id, questions.c.status == QuestionStatus.OPEN.value)
        .values(status=status.value, answer=answer.value if answer else None, answered_by=by, answered_at=now))
    return result.rowcount == 1


def _reassign(conn: Connection, old: str, new: str) -> int:
    return conn.execute(questions.update().where(questions.c.person == old).values(person=new)).rowcount


QUESTIONS_DATA = PersonData(
    "questions", tables=(questions,), move_rows=_reassign, export_rows=export_of,
    kept_by_forget="memory ids and where each was asked, no words; one whose memory a forget removed is void "
                   "when next read (QuestionBook.still_open)")


AlsoInTransaction = Callable[[Connection, Question], None]


def _reserve(conn: Connection, person: str, pair: ConflictPair, target: DmTarget, now: datetime,
             limits: QuestionLimits, question_id: str, also: AlsoInTransaction | None) -> Question | None:
    if not caps_allow(_open_count(conn, person), _asked_since(conn, now - CAP_WINDOW), limits):
        return None
    digest, count = pair.evidence
    if digest in _asked_keys(conn, person).get(pair.key, set()):
        return None
    question = Question(id=question_id, person=person, first_id=pair.first.id, second_id=pair.second.id,
                        pair_key=pair.key, evidence_key=digest, evidence_count=count, target=target,
                        status=QuestionStatus.OPEN, asked_at=now)
    conn.execute(questions.insert().values(
        id=question.id, person=person, first_id=question.first_id, second_id=question.second_id,
        pair_key=question.pair_key, evidence_key=digest, evidence_count=count, platform=target.platform,
        chat_id=target.chat_id, recipient_id=target.recipient_id, status=QuestionStatus.OPEN.value,
        asked_at=now))
    if also is not None:
        also(conn, question)  # e.g. the outbox entry: the question and its delivery stand or fall together
    return question


class QuestionBook:
    """Every conflict question ever asked, in the relational store."""

    def __init__(self, db: Database, clock: Callable[[], datetime], limits: QuestionLimits | None = None,
                 new_id: Callable[[], str] = new_question_id) -> None:
        self.db = db
        self.clock = clock
        self.limits = limits or QuestionLimits()
        self.new_id = new_id

    async def reserve(self, person: str, pair: ConflictPair, target: DmTarget, *,
                      also: AlsoInTransaction | None = None) -> Question | None:
        """Record a new open question if the caps and the once-per-evidence rule allow; else ``None``."""
        return await self.db.run(_reserve, person, pair, target, self.clock(), self.limits, self.new_id(), also)

    async def open_of(self, person: str) -> list[Question]:
        return await self.db.run(_open_of, person)

    async def get(self, question_id: str) -> Question | None:
        return await self.db.run(_get, question_id)

    async def of_person(self, person: str) -> list[Question]:
        return await self.db.run(_of_person, person)

    async def still_open(self, question: Question, get: Callable[[str], Awaitable[MemoryRecord | None]]) -> bool:
        """Whether an open question still asks about current facts (``get`` reads a memory by id).

        One whose facts changed since (a /forget, a correction) no longer asks anything: it is voided.
        """
        first, second = await get(question.first_id), await get(question.second_id)
        if still_current(question, first, second, self.clock()):
            return True
        await self.close(question.id, QuestionStatus.VOID)
        log.info("question void id=%s person=%s", question.id, question.person)
        return False

    async def state_of(self, person: str) -> AskState:
        return await self.db.run(_ask_state, person, self.clock() - CAP_WINDOW)

    async def asked_keys(self, person: str) -> dict[str, set[str]]:
        return await self.db.run(_asked_keys, person)

    async def asked_in_window(self) -> int:
        return await self.db.run(_asked_since, self.clock() - CAP_WINDOW)

    async def close(self, question_id: str, status: QuestionStatus, answer: Answer | None = None,
                    by: str | None = None) -> bool:
        return await self.db.run(_close, question_id, status, answer, by, self.clock())


__all__ = [
    "QUESTIONS_DATA",
    "Answer",
    "AskState",
    "ConflictPair",
    "DmTarget",
    "Question",
    "QuestionBook",
    "QuestionLimits",
    "QuestionStatus",
    "askable_pairs",
    "caps_allow",
    "evidence_key",
    "needs_the_person",
    "pair_key",
    "parse_answer",
    "pick_pair",
    "questions",
    "still_current",
]
