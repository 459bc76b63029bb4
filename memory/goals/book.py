"""Where goals are kept: the ``goals`` table, its row functions, and :class:`GoalBook`, which every reply reads.

A goal is not a fact, so it is not a memory: "learning Rust" is a direction, and finishing it
must stop it shaping replies. Each goal keeps the number it was given when added (``#3``), so
``/goals done 3`` means the same goal whatever happened to the others. Active goals enter the
prompt (:meth:`GoalBook.slot`); paused and done ones do not.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Sequence
from datetime import date, datetime, tzinfo

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.days import local_day
from ground.db import Database, UtcDateTime, metadata
from ground.person_data import PersonData
from ground.tunables import GOALS_MAX_OPEN, GOALS_REWARM_MIN_S, SHARED_CACHE_TRUST_S
from memory.forgetting import GOALS
from memory.goals.records import Goal, GoalStatus
from memory.goals.wording import render_slot

GOALS_TOPIC = GOALS  # Database.mark topic of goal writes (a forget deletes goals too, and marks it)

goals = sa.Table(
    "goals",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("person", sa.String(64), nullable=False),
    sa.Column("number", sa.Integer, nullable=False),  # the person's own numbering, also the order
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("status", sa.String(8), nullable=False, server_default="active"),
    sa.Column("due", sa.Date, nullable=True),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
    sa.UniqueConstraint("person", "number", name="uq_goals_person_number"),
    sa.Index("ix_goals_status_due", "status", "due"),
)


def _goal(r: sa.Row) -> Goal:
    return Goal(r.id, r.person, r.number, r.text, GoalStatus(r.status), r.due, r.updated_at)


# --- relational access ---------------------------------------------------------------------
def add(conn: Connection, person: str, text: str, due: date | None, now: datetime) -> Goal | None:
    """A new active goal numbered after the person's last; None when they keep too many open goals."""
    open_count = conn.execute(sa.select(sa.func.count()).select_from(goals).where(
        goals.c.person == person, goals.c.status != GoalStatus.DONE.value)).scalar_one()
    if open_count >= GOALS_MAX_OPEN:
        return None
    last = conn.execute(sa.select(sa.func.max(goals.c.number)).where(goals.c.person == person)).scalar()
    number = int(last or 0) + 1
    result = conn.execute(goals.insert().values(person=person, number=number, text=text, due=due,
                                                status=GoalStatus.ACTIVE.value, created_at=now, updated_at=now))
    return Goal(int(result.inserted_primary_key[0]), person, number, text, GoalStatus.ACTIVE, due, now)


# Built once: every DM reply reads the person's goals.
_OF_PERSON = sa.select(goals).where(goals.c.person == sa.bindparam("person")).order_by(goals.c.number)
_OF_PERSON_WITH = (sa.select(goals).where(goals.c.person == sa.bindparam("person"),
                                          goals.c.status.in_(sa.bindparam("statuses", expanding=True)))
                   .order_by(goals.c.number))


def of_person(conn: Connection, person: str, statuses: Sequence[GoalStatus] | None = None) -> list[Goal]:
    if statuses is None:
        rows = conn.execute(_OF_PERSON, {"person": person}).all()
    else:
        rows = conn.execute(_OF_PERSON_WITH, {"person": person, "statuses": [s.value for s in statuses]}).all()
    return [_goal(r) for r in rows]


def _all_active(conn: Connection) -> list[Goal]:
    rows = conn.execute(sa.select(goals).where(goals.c.status == GoalStatus.ACTIVE.value)
                        .order_by(goals.c.person, goals.c.number)).all()
    return [_goal(r) for r in rows]


def set_status(conn: Connection, person: str, number: int, status: GoalStatus, now: datetime) -> Goal | None:
    """Change one of the person's goals; None when they have no goal with that number."""
    row = conn.execute(sa.select(goals).where(goals.c.person == person, goals.c.number == number)).first()
    if row is None:
        return None
    conn.execute(goals.update().where(goals.c.id == row.id).values(status=status.value, updated_at=now))
    return Goal(row.id, person, number, row.text, status, row.due, now)


def export_of(conn: Connection, person: str) -> list[dict[str, object]]:
    """The person's goals as their export lists them: every status, in their own numbering."""
    rows = conn.execute(_OF_PERSON, {"person": person}).all()
    return [{"number": r.number, "text": r.text, "status": r.status,
             "due": r.due.isoformat() if r.due is not None else None,
             "created_at": r.created_at.isoformat(), "updated_at": r.updated_at.isoformat()} for r in rows]


def due_by(conn: Connection, day: date, person: str | None = None) -> list[Goal]:
    """Active goals whose due date is ``day`` or earlier (what a heartbeat may follow up on)."""
    q = sa.select(goals).where(goals.c.status == GoalStatus.ACTIVE.value, goals.c.due.is_not(None),
                               goals.c.due <= day)
    if person is not None:
        q = q.where(goals.c.person == person)
    return [_goal(r) for r in conn.execute(q.order_by(goals.c.person, goals.c.number)).all()]


def reassign(conn: Connection, old: str, new: str) -> int:
    """Goals follow the person when accounts are linked; renumbered after the new person's own."""
    last = int(conn.execute(sa.select(sa.func.max(goals.c.number)).where(goals.c.person == new)).scalar() or 0)
    moved = 0
    for row in conn.execute(sa.select(goals.c.id).where(goals.c.person == old).order_by(goals.c.number)).all():
        moved += 1
        conn.execute(goals.update().where(goals.c.id == row.id).values(person=new, number=last + moved))
    return moved


GOALS_DATA = PersonData("goals", tables=(goals,), topic=GOALS_TOPIC, move_rows=reassign, export_rows=export_of,
                        forgotten_by="memory.forgetting.scrub.scan")


# --- the book ---------------------------------------------------------------------------------
class GoalBook:
    """Goals of every person, in the relational store; ``tz`` decides what "today" is."""

    def __init__(self, db: Database, clock: Callable[[], datetime], tz: tzinfo) -> None:
        self.db = db
        self.clock = clock
        self.tz = tz
        # person -> (the goals' version when read, their active goals): every DM reply shows them.
        self._active: dict[str, tuple[Hashable, list[Goal]]] = {}
        self._complete: Hashable | None = None  # the version at which _active held everyone's (warm)
        self._warmed_at: float | None = None  # time.monotonic() of the latest warm-up again
        self._warming: asyncio.Future[int] | None = None  # the read of everyone's goals under way
        self._monotonic = time.monotonic

    def today(self) -> date:
        return local_day(self.clock(), self.tz)

    async def slot(self, person: str, limit_chars: int) -> str:
        """``MemorySlots.goals`` for ``person``: their active goals, or "" when they have none."""
        return render_slot(await self._active_of(person), self.today(), limit_chars)

    async def _active_of(self, person: str) -> list[Goal]:
        version = self.db.version(GOALS_TOPIC, max_age_s=SHARED_CACHE_TRUST_S)
        cached = self._active.get(person)
        if version is not None and cached is not None and cached[0] == version:
            return cached[1]
        if version is not None and cached is None and self._complete == version:
            return []  # no goals at the warm-up, and nobody wrote any since
        if version is not None and self._complete is not None and (self._warming is not None or self._may_rewarm()):
            # Someone wrote something since the warm-up (often not even a goal): one read of everyone's
            # goals beats a read per person from here on. Replies starting while it is under way wait
            # for it too: a burst of new people would otherwise each queue a read of their own.
            await self.warm()
            return await self._active_of(person) if self.db.version(
                GOALS_TOPIC, max_age_s=SHARED_CACHE_TRUST_S) == self._complete else await self._read(person)
        return await self._read(person)

    def _may_rewarm(self) -> bool:
        now = self._monotonic()
        if self._warmed_at is not None and now - self._warmed_at < GOALS_REWARM_MIN_S:
            return False
        self._warmed_at = now
        return True

    async def _read(self, person: str) -> list[Goal]:
        version, active = await self.db.run_versioned(GOALS_TOPIC, of_person, person, (GoalStatus.ACTIVE,))
        if version is not None:
            self._active[person] = (version, active)
        return active

    async def warm(self) -> int:
        """Read everyone's active goals at once (at start-up); returns how many people have some.

        Callers overlapping one read share it.
        """
        if self._warming is None:
            warming = self._warming = asyncio.ensure_future(self._warm())
            warming.add_done_callback(lambda _done: setattr(self, "_warming", None))
        return await asyncio.shield(self._warming)

    async def _warm(self) -> int:
        version, active = await self.db.run_versioned(GOALS_TOPIC, _all_active)
        if version is None:
            return 0
        by_person: dict[str, list[Goal]] = {}
        for goal in active:
            by_person.setdefault(goal.person, []).append(goal)
        for person, theirs in by_person.items():
            self._active[person] = (version, theirs)
        self._complete = version
        return len(by_person)

    async def add(self, person: str, text: str, due: date | None = None) -> Goal | None:
        try:
            return await self.db.run(add, person, text, due, self.clock())
        finally:
            self.db.mark(GOALS_TOPIC)

    async def list(self, person: str) -> list[Goal]:
        return await self.db.run(of_person, person, None)

    async def set_status(self, person: str, number: int, status: GoalStatus) -> Goal | None:
        try:
            return await self.db.run(set_status, person, number, status, self.clock())
        finally:
            self.db.mark(GOALS_TOPIC)

