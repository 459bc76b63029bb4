"""Whose capture is paused: a person may stop kith noting anything new about them, and start it again."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, UtcDateTime, metadata
from ground.person_data import PersonData

pauses = sa.Table(
    "memory_pauses",
    metadata,
    sa.Column("person", sa.String(64), primary_key=True),
    sa.Column("paused_at", UtcDateTime(), nullable=False),
)


def _paused_people(conn: Connection) -> set[str]:
    return {str(p) for p in conn.execute(sa.select(pauses.c.person)).scalars()}


def _reassign_pause(conn: Connection, old: str, new: str) -> int:
    row = conn.execute(sa.select(pauses.c.paused_at).where(pauses.c.person == old)).first()
    if row is None:
        return 0
    conn.execute(pauses.delete().where(pauses.c.person.in_([old, new])))
    conn.execute(pauses.insert().values(person=new, paused_at=row.paused_at))
    return 1


def _set_paused(conn: Connection, person: str, paused: bool, now: datetime) -> None:
    conn.execute(pauses.delete().where(pauses.c.person == person))
    if paused:
        conn.execute(pauses.insert().values(person=person, paused_at=now))


def pause_of(conn: Connection, person: str) -> dict[str, Any]:
    """The person's pause as their export shows it: whether capture is paused, and since when."""
    since = conn.execute(sa.select(pauses.c.paused_at).where(pauses.c.person == person)).scalar()
    return {"paused": since is not None, "since": since.isoformat() if since is not None else None}


class PauseBook:
    """Whose capture is paused, persisted; ``is_paused`` is synchronous for the capture hook."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._paused: set[str] = set()

    async def load(self) -> None:
        self._paused = await self.db.run(_paused_people)

    def is_paused(self, person: str) -> bool:
        return person in self._paused

    async def set(self, person: str, paused: bool, now: datetime) -> None:
        await self.db.run(_set_paused, person, paused, now)
        if paused:
            self._paused.add(person)
        else:
            self._paused.discard(person)

    async def reassign(self, old: str, new: str) -> int:
        """A pause follows the person when accounts are linked (a paused account stays paused)."""
        moved = await self.db.run(_reassign_pause, old, new)
        await self.load()
        return moved

    def person_data(self) -> PersonData:
        """The pause as kept about a person (:mod:`ground.person_data`): this book moves it, so that its copy
        of who is paused follows too."""
        return PersonData("capture", tables=(pauses,), reassign=self.reassign, export_rows=pause_of,
                          kept_by_forget="whether capture is paused, and since when; no words")


__all__ = ["PauseBook", "pause_of", "pauses"]
