"""What is due for whom: the only reason a heartbeat ever calls the model.

Three kinds of item:

* a goal with a due date that has come (followed up again every ``GOAL_FOLLOW_UP_EVERY_DAYS``);
* a memory whose horizon ends within ``HORIZON_SOON_HOURS`` ("I'll call mum tomorrow");
* a conflict question not asked yet: two of the person's active memories flagged as
  conflicting, asked once; at most one per person per turn and ``QUESTIONS_PER_HOUR`` in all.

A memory is shown as the person's own words (:func:`memory.core.words.shown_words`), never as the label
the extractor gave it; one with no words kept is not an item.

Finding them costs one SQL query and two indexed Chroma metadata queries whatever the number of
people (see :class:`DisputeWatch`), so an idle tick is cheap. What was handled (asked, or judged
not worth a message) is recorded in ``heartbeat_items`` by the turn that handled it, in the same
transaction as the transcript.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, tzinfo

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.days import local_day
from ground.db import Database, UtcDateTime, metadata
from ground.person_data import PersonData, when
from ground.tunables import (
    DISPUTES_FULL_SCAN_HOURS,
    DISPUTES_INCREMENTAL_MAX,
    DISPUTES_OVERLAP_S,
    DUE_ITEM_CHARS,
    GOAL_FOLLOW_UP_EVERY_DAYS,
    HEARTBEAT_MAX_ITEMS_PER_TURN,
    HORIZON_SOON_HOURS,
    OPEN_QUESTIONS_PER_PERSON,
    QUESTIONS_PER_HOUR,
)
from heartbeat import memory_scan
from memory import goals as goal_table
from memory.core import MemoryRecord, Status, shown_words
from memory.store import MemoryStore
from persona.labels import disputed_pair_line, due_goal_line, lapsing_line

THEY = "they"  # the check-in's heading names the person; each item says what they said

heartbeat_items = sa.Table(
    "heartbeat_items",
    metadata,
    sa.Column("person", sa.String(64), primary_key=True),
    sa.Column("item_key", sa.String(255), primary_key=True),
    sa.Column("handled_at", UtcDateTime(), nullable=False),
    sa.Index("ix_heartbeat_items_handled", "handled_at"),
)


class ItemKind(enum.StrEnum):
    GOAL = "goal"
    HORIZON = "horizon"
    CONFLICT = "conflict"


@dataclass(frozen=True, slots=True)
class DueItem:
    person: str
    kind: ItemKind
    key: str  # stable identity, recorded once handled
    text: str  # as the heartbeat prompt shows it (stored data)
    # When it was last handled as the finder read it (None: never). The turn writes only while it is still so.
    handled_at: datetime | None = None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= DUE_ITEM_CHARS else text[: DUE_ITEM_CHARS - 1] + "…"


def _said(memory: MemoryRecord) -> str | None:
    return shown_words(memory, THEY, DUE_ITEM_CHARS)


# --- pure rules -------------------------------------------------------------------------------
def candidate_items(due_goals: Iterable[goal_table.Goal], lapsing: Iterable[MemoryRecord],
                    disputed: Iterable[MemoryRecord], today: date) -> list[DueItem]:
    items: list[DueItem] = []
    for g in due_goals:
        due = None if g.due == today else (g.due.isoformat() if g.due else "")
        items.append(DueItem(g.person, ItemKind.GOAL, f"goal:{g.id}", due_goal_line(g.number, _short(g.text), due)))
    for m in lapsing:
        ends = m.expires_at.isoformat(timespec="minutes") if m.expires_at else ""
        said = _said(m)
        if said is not None:
            items.append(DueItem(m.person, ItemKind.HORIZON, f"horizon:{m.id}:{ends}", lapsing_line(ends, said)))
    by_id = {m.id: m for m in disputed}
    pairs: set[tuple[str, str]] = set()
    for m in by_id.values():
        for other_id in m.conflicts_with:
            other = by_id.get(other_id)
            if other is not None and other.person == m.person:  # both sides still active and theirs
                pairs.add((min(m.id, other.id), max(m.id, other.id)))
    for a_id, b_id in sorted(pairs, key=lambda p: (by_id[p[0]].created_at, p)):
        a, b = by_id[a_id], by_id[b_id]
        first, second = _said(a), _said(b)
        if first is not None and second is not None:
            items.append(DueItem(a.person, ItemKind.CONFLICT, f"conflict:{a_id}:{b_id}",
                                 disputed_pair_line(first, second)))
    return items


def select_due(candidates: Sequence[DueItem], handled: Mapping[tuple[str, str], datetime], now: datetime, *,
               questions_left: int, goal_every: timedelta = timedelta(days=GOAL_FOLLOW_UP_EVERY_DAYS),
               per_person_questions: int = OPEN_QUESTIONS_PER_PERSON,
               per_turn: int = HEARTBEAT_MAX_ITEMS_PER_TURN) -> dict[str, list[DueItem]]:
    """The items each person should hear about now, by person; people with none are absent."""
    out: dict[str, list[DueItem]] = defaultdict(list)
    questions: dict[str, int] = defaultdict(int)
    for item in candidates:
        last = handled.get((item.person, item.key))
        if last is not None and (item.kind is not ItemKind.GOAL or now - last < goal_every):
            continue
        if len(out[item.person]) >= per_turn:
            continue
        if item.kind is ItemKind.CONFLICT:
            if questions_left <= 0 or questions[item.person] >= per_person_questions:
                continue
            questions[item.person] += 1
            questions_left -= 1
        out[item.person].append(replace(item, handled_at=last))
    return {person: items for person, items in out.items() if items}


# --- relational access ----------------------------------------------------------------------------
def handled_of(conn: Connection, persons: Sequence[str]) -> dict[tuple[str, str], datetime]:
    if not persons:
        return {}
    rows = conn.execute(sa.select(heartbeat_items).where(heartbeat_items.c.person.in_(list(persons)))).all()
    return {(r.person, r.item_key): r.handled_at for r in rows}


def questions_since(conn: Connection, since: datetime) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(heartbeat_items).where(
        heartbeat_items.c.item_key.like("conflict:%"), heartbeat_items.c.handled_at > since)).scalar_one())


def claim(conn: Connection, person: str, items: Iterable[DueItem], now: datetime) -> bool:
    """Mark ``person``'s ``items`` handled at ``now``, each only if its mark is still the one the finder read.

    False when one was handled since (the caller's transaction must then write nothing). The comparison is
    made by the writing statements themselves, so a turn in another process committing in between is seen
    (a read first would run outside SQLite's write transaction), and on stored values, never on clocks:
    another machine on a shared database may run behind this one, and a mark is stamped before it commits.
    """
    for item in items:
        if item.handled_at is None:
            try:
                conn.execute(heartbeat_items.insert().values(person=person, item_key=item.key, handled_at=now))
            except sa.exc.IntegrityError:
                return False
            continue
        updated = conn.execute(heartbeat_items.update().where(
            heartbeat_items.c.person == person, heartbeat_items.c.item_key == item.key,
            heartbeat_items.c.handled_at == item.handled_at).values(handled_at=now))
        if updated.rowcount == 0:
            return False
    return True


def mark_handled(conn: Connection, person: str, keys: Iterable[str], now: datetime) -> None:
    for key in keys:
        updated = conn.execute(heartbeat_items.update().where(
            heartbeat_items.c.person == person, heartbeat_items.c.item_key == key).values(handled_at=now))
        if updated.rowcount == 0:
            conn.execute(heartbeat_items.insert().values(person=person, item_key=key, handled_at=now))


def check_ins_of(conn: Connection, person: str) -> list[dict[str, str | None]]:
    """What the heartbeat checked in about with the person, and when, as their export lists it."""
    rows = conn.execute(sa.select(heartbeat_items).where(heartbeat_items.c.person == person)
                        .order_by(heartbeat_items.c.handled_at)).all()
    return [{"item": r.item_key, "handled_at": when(r.handled_at)} for r in rows]


def move_check_ins(conn: Connection, old: str, new: str) -> int:
    """A link's move of check-in marks: person ``old``'s become ``new``'s. A mark's key names its goal, memory or
    disputed pair by id, and those move with the link too, so without their marks they would be asked about
    again. An item both had marked keeps one mark, the later. Returns how many of ``old``'s marks moved."""
    h, theirs = heartbeat_items, heartbeat_items.alias("theirs")
    olds = sa.and_(theirs.c.person == old, theirs.c.item_key == h.c.item_key)
    conn.execute(h.update().where(h.c.person == new, sa.exists().where(olds, theirs.c.handled_at > h.c.handled_at))
                 .values(handled_at=sa.select(theirs.c.handled_at).where(olds).scalar_subquery()))
    both = conn.execute(h.delete().where(h.c.person == old, h.c.item_key.in_(
        sa.select(theirs.c.item_key).where(theirs.c.person == new)))).rowcount
    return both + conn.execute(h.update().where(h.c.person == old).values(person=new)).rowcount


CHECK_INS_DATA = PersonData(
    "check_ins", tables=(heartbeat_items,), move_rows=move_check_ins, export_rows=check_ins_of,
    kept_by_forget="keys naming a goal, memory or pair by id, and times; no words")


class DisputeWatch:
    """Everyone's disputed memories, kept current without a pass over every memory on every tick.

    "conflicts_with is not empty" has no index in Chroma: asking it is a pass over all memories.
    But a dispute is born with a new memory (the gate writes the newcomer with its conflicts and
    links the older side back), and "created since T" is an indexed range. So a full scan runs at
    the first look, every ``DISPUTES_FULL_SCAN_HOURS`` (for links made any other way) and after a
    burst of new memories; in between only the memories created since the last look are read.
    Every known dispute is re-read fresh before use, so one resolved, retired or forgotten
    elsewhere drops out.
    """

    def __init__(self, store: MemoryStore, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.clock = clock
        self._known: set[str] = set()
        self._looked_at: datetime | None = None
        self._full_at: datetime | None = None
        self.full_scans = 0

    async def current(self) -> list[MemoryRecord]:
        now = self.clock()
        new_ids: list[str] = []
        full = (self._full_at is None or self._looked_at is None
                or now - self._full_at >= timedelta(hours=DISPUTES_FULL_SCAN_HOURS))
        if not full and self._looked_at is not None:
            since = self._looked_at - timedelta(seconds=DISPUTES_OVERLAP_S)
            new_ids = await memory_scan.created_since(self.store, since)
            full = len(new_ids) > DISPUTES_INCREMENTAL_MAX
        if full:
            records = await memory_scan.disputed(self.store)
            self._full_at = now
            self.full_scans += 1
        else:
            records = await self.store.get_memories(sorted(self._known | set(new_ids)))
        self._looked_at = now
        live = [r for r in records if r.status is Status.ACTIVE and r.conflicts_with]
        partners = {p for r in live for p in r.conflicts_with} - {r.id for r in live}
        if partners:
            live += [r for r in await self.store.get_memories(sorted(partners))
                     if r.status is Status.ACTIVE and r.conflicts_with]
        self._known = {r.id for r in live}
        return live


class DueFinder:
    def __init__(self, db: Database, store: MemoryStore, clock: Callable[[], datetime], tz: tzinfo) -> None:
        self.db = db
        self.store = store
        self.clock = clock
        self.tz = tz
        self.disputes = DisputeWatch(store, clock)

    async def find(self, person: str | None = None) -> dict[str, list[DueItem]]:
        """Everyone's due items (or one person's), by person."""
        now = self.clock()
        today = local_day(now, self.tz)
        due_goals = await self.db.run(goal_table.due_by, today, person)
        lapsing = await memory_scan.lapsing(self.store, now, now + timedelta(hours=HORIZON_SOON_HOURS), person)
        disputed = (await self.disputes.current() if person is None
                    else await memory_scan.disputed(self.store, person))
        candidates = candidate_items(due_goals, lapsing, disputed, today)
        if not candidates:
            return {}
        persons = sorted({c.person for c in candidates})
        handled = await self.db.run(handled_of, persons)
        asked = await self.db.run(questions_since, now - timedelta(hours=1))
        return select_due(candidates, handled, now, questions_left=QUESTIONS_PER_HOUR - asked)
