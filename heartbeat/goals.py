"""Goals: a tracked desired outcome with a status, an order and an optional due date.

A goal is not a fact, so it is not a memory: "learning Rust" is a direction, and finishing it
must stop it shaping replies. Each goal keeps the number it was given when added (``#3``), so
``/goals done 3`` means the same goal whatever happened to the others. Active goals enter the
prompt (:meth:`GoalBook.slot`); paused and done ones do not. Goals are private: in a group
chat ``/goals`` answers with a pointer to the private chat instead of the list.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import re
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, tzinfo

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, UtcDateTime, metadata
from ground.tunables import (
    GOAL_MAX_CHARS,
    GOALS_DONE_LISTED,
    GOALS_IN_PROMPT,
    GOALS_MAX_OPEN,
    GOALS_REWARM_MIN_S,
    SHARED_CACHE_TRUST_S,
)
from ground.turns import MemoryContext, MemorySlots, Speaker
from ground.types import ChatKind, InboundMessage, OutboundMessage, reply_to
from heartbeat.settings import local_day
from memory.forgetting import GOALS
from people import directory
from persona.labels import GOALS_NOTICE

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


class GoalStatus(enum.StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class Goal:
    id: int
    person: str
    number: int
    text: str
    status: GoalStatus
    due: date | None
    updated_at: datetime


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


# --- pure parts ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GoalRequest:
    action: str  # "list", "add", "done", "pause", "resume"
    text: str = ""
    due: date | None = None
    number: int | None = None
    error: str = ""  # set when the request cannot be understood; the reply says why


USAGE = ("Usage: /goals (list) · /goals add <text> [due YYYY-MM-DD] · /goals done N · /goals pause N · "
         "/goals resume N")
_DUE = re.compile(r"^(?P<text>.*?)\s+due\s+(?P<due>\d{4}-\d{2}-\d{2})\s*$", re.I | re.S)
_STATUS_ACTIONS = {"done": GoalStatus.DONE, "pause": GoalStatus.PAUSED, "resume": GoalStatus.ACTIVE}


def parse_goal_args(args: str) -> GoalRequest:
    head, _, rest = args.strip().partition(" ")
    action = head.lower()
    rest = rest.strip()
    if action in ("", "list"):
        return GoalRequest("list")
    if action == "add":
        text, due = rest, None
        m = _DUE.match(rest)
        if m is not None:
            text = m.group("text").strip()
            try:
                due = date.fromisoformat(m.group("due"))
            except ValueError:
                return GoalRequest("add", error=f"{m.group('due')} is not a date (YYYY-MM-DD).")
        text = " ".join(text.split())
        if not text:
            return GoalRequest("add", error="What is the goal? " + USAGE)
        if len(text) > GOAL_MAX_CHARS:
            return GoalRequest("add", error=f"Please keep a goal under {GOAL_MAX_CHARS} characters.")
        return GoalRequest("add", text=text, due=due)
    if action in _STATUS_ACTIONS:
        number = rest.lstrip("#")
        if not number.isdigit():
            return GoalRequest(action, error=f"Which goal? Give its number, e.g. /goals {action} 2.")
        return GoalRequest(action, number=int(number))
    return GoalRequest(action, error=USAGE)


def _due_label(goal: Goal, today: date) -> str:
    if goal.due is None:
        return ""
    return f" (due {goal.due.isoformat()}{', overdue' if goal.due < today else ''})"


def render_list(items: Sequence[Goal], today: date) -> str:
    """The /goals answer: active, then paused, then the last few done, each with its number."""
    if not items:
        return "No goals yet. Add one with /goals add <text> [due YYYY-MM-DD]."
    lines: list[str] = []
    sections = ((GoalStatus.ACTIVE, "Active"), (GoalStatus.PAUSED, "Paused"), (GoalStatus.DONE, "Done"))
    for status, title in sections:
        group = [g for g in items if g.status is status]
        if status is GoalStatus.DONE:
            group = sorted(group, key=lambda g: g.updated_at, reverse=True)[:GOALS_DONE_LISTED]
        if group:
            lines.append(f"{title}:")
            lines.extend(f"#{g.number} {g.text}{_due_label(g, today) if status is GoalStatus.ACTIVE else ''}"
                         for g in group)
    return "\n".join(lines)


def render_slot(active: Sequence[Goal], today: date, limit_chars: int) -> str:
    """The prompt's goals part: active goals only, in their order, within ``limit_chars``."""
    shown = [g for g in active if g.status is GoalStatus.ACTIVE][:GOALS_IN_PROMPT]
    if not shown:
        return ""
    lines = [GOALS_NOTICE]
    used = len(GOALS_NOTICE)
    for g in shown:
        line = f"- {g.text}{_due_label(g, today)}"
        if used + 1 + len(line) > limit_chars:
            break
        lines.append(line)
        used += 1 + len(line)
    return "\n".join(lines) if len(lines) > 1 else ""


# --- the service and the chat command --------------------------------------------------------
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

    async def reassign(self, old: str, new: str) -> int:
        """Goals follow the person when accounts are linked."""
        try:
            return await self.db.run(reassign, old, new)
        finally:
            self.db.mark(GOALS_TOPIC)


class GoalsCommand:
    """``/goals``: a handler with the ChatCommands signature ``(message, args) -> OutboundMessage | None``."""

    description = "your goals: list, add, done, pause, resume"

    def __init__(self, book: GoalBook) -> None:
        self.book = book

    async def __call__(self, message: InboundMessage, args: str) -> OutboundMessage | None:
        if message.chat_kind is ChatKind.GROUP:
            return reply_to(message, "Goals are private: send me /goals in a direct message.")
        request = parse_goal_args(args)
        if request.error:
            return reply_to(message, request.error)
        person = await self.book.db.run(_person, message.account, message.sender_name, self.book.clock())
        if request.action == "add":
            goal = await self.book.add(person, request.text, request.due)
            if goal is None:
                return reply_to(message, f"You have {GOALS_MAX_OPEN} open goals already; finish or pause one first.")
            return reply_to(message, f"Added goal #{goal.number}: {goal.text}{_due_label(goal, self.book.today())}")
        if request.action in _STATUS_ACTIONS and request.number is not None:
            status = _STATUS_ACTIONS[request.action]
            changed = await self.book.set_status(person, request.number, status)
            if changed is None:
                return reply_to(message, f"You have no goal #{request.number}. /goals lists them.")
            verb = {GoalStatus.DONE: "Done", GoalStatus.PAUSED: "Paused", GoalStatus.ACTIVE: "Resumed"}[status]
            return reply_to(message, f"{verb}: #{changed.number} {changed.text}")
        return reply_to(message, render_list(await self.book.list(person), self.book.today()))


def _person(conn: Connection, account: str, name: str, now: datetime) -> str:
    # A first-time sender may open with /goals, before the conversation ever resolved them.
    return directory.person_of(conn, account) or directory.resolve(conn, account, name, now)


class GoalsInContext:
    """A MemoryContext that adds the person's active goals to another context's slots, in a private chat only."""

    def __init__(self, inner: MemoryContext, book: GoalBook, limit_chars: int) -> None:
        self.inner = inner
        self.book = book
        self.limit_chars = limit_chars

    async def slots(self, speaker: Speaker, message: InboundMessage) -> MemorySlots:
        if message.chat_kind is not ChatKind.DM:  # goals are said in private: they never shape a group reply
            return await self.inner.slots(speaker, message)
        slots, goals = await asyncio.gather(self.inner.slots(speaker, message),
                                            self.book.slot(speaker.person, self.limit_chars))
        return dataclasses.replace(slots, goals=goals) if goals else slots
