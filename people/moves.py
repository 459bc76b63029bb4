"""A link's move, written down with the link: once an account's old person is joined to another, everything kept
about the old person moves, even if the process stops halfway.

Linking commits in one transaction (:func:`people.directory.link`), and what is kept about the person it left
moves after it (:func:`ground.person_data.move_person`): the memories in Chroma, the saved exports on disk and
every declared kind's rows. A stop in between (Ctrl-C during ``/link yes``, a kill during ``bot.py people
link``, a Chroma error) would leave all of it under a person id no account has any more: out of the person's
``/memory`` and ``/export``, and out of reach of their ``/forget``. So the link's transaction also records
the move here (:func:`record`), the move removes that record when it is done (:func:`finish`), and a bot that
starts finishes every move still recorded (:func:`finish_unfinished`) before it serves. A move is safe to
run again: what already moved is under the new person, and only what is left of the old one moves.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, UtcDateTime, metadata
from ground.person_data import PersonData

log = logging.getLogger("kith.people.moves")

T = TypeVar("T")
Move = Callable[[str, str], Awaitable[T]]  # (old, new): everything of old becomes new's

link_moves = sa.Table(
    "link_moves",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("old_person", sa.String(64), nullable=False),
    sa.Column("new_person", sa.String(64), nullable=False),
    sa.Column("linked_at", UtcDateTime(), nullable=False),
)

LINK_MOVES_DATA = PersonData(
    "link_moves", tables=(link_moves,),
    stays="a move not yet finished: two person ids, removed once the move is done",
    left_out="bookkeeping: what the move carries is in the export under the person it reached",
    kept_by_forget="two person ids and a time; no words")


def record(conn: Connection, old: str, new: str, now: datetime) -> None:
    """In the link's transaction: everything of ``old`` is to move to ``new``. A move still recorded towards
    ``old`` (an earlier link whose move has not finished) now goes to ``new``: ``old`` has no account left."""
    conn.execute(link_moves.update().where(link_moves.c.new_person == old).values(new_person=new))
    conn.execute(link_moves.insert().values(old_person=old, new_person=new, linked_at=now))


def _unfinished(conn: Connection) -> list[tuple[str, str]]:
    rows = conn.execute(sa.select(link_moves.c.old_person, link_moves.c.new_person).order_by(link_moves.c.id))
    return [(str(r.old_person), str(r.new_person)) for r in rows]


def _done(conn: Connection, old: str) -> None:
    conn.execute(link_moves.delete().where(link_moves.c.old_person == old))


async def finish(db: Database, move: Move[T], old: str, new: str) -> T:
    """Run the recorded move of ``old`` to ``new``, then remove its record; ``move``'s result."""
    moved = await move(old, new)
    await db.run(_done, old)
    return moved


async def finish_unfinished(db: Database, move: Move[object]) -> int:
    """Finish every move a stopped process left recorded, oldest first; how many. One that fails again stays
    recorded for the next start, and the others still run."""
    unfinished = await db.run(_unfinished)
    for old, new in unfinished:
        try:
            await finish(db, move, old, new)
            log.info("link move finished old=%s new=%s", old, new)
        except Exception as exc:
            log.error("link move failed again old=%s new=%s error=%s; tried at the next start", old, new,
                      type(exc).__name__)
    return len(unfinished)


__all__ = ["LINK_MOVES_DATA", "Move", "finish", "finish_unfinished", "link_moves", "record"]
