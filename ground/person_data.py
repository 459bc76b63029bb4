"""What kith keeps about a person, declared by the feature that keeps it: how it follows the person when an
account is linked, what the person's export holds of it, and what a forget does to it.

Each feature that stores something about a person declares a :class:`PersonData` for it beside its tables.
The wiring gathers every declaration (:mod:`kith.app.person_data`), as :mod:`kith.app.schema` gathers the tables;
linking an account (``/link``, ``bot.py people link``) goes through that list with :func:`move_person`, and the
export (``/export``, ``bot.py memory export``) with :func:`export_parts`, so a new kind of thing kept about a
person is moved and exported the day it is declared, or its declaration says why not. A table with a person
column that no declaration names fails a test (tests/e2e/test_person_data.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, as_utc

MoveRows = Callable[[Connection, str, str], int]  # (conn, old, new): old's rows become new's; how many moved
Reassign = Callable[[str, str], Awaitable[int]]  # (old, new): the same, by the object that holds it
ExportRows = Callable[[Connection, str], Any]  # (conn, person): its part of the export, as JSON values


class ExportKept(Protocol):
    """Its part of the export, read from where it is kept outside the database, with texts worded for the
    reader: ``you`` (the person: "You live in Berlin"), else ``name``."""

    def __call__(self, person: str, *, you: bool, name: str) -> Awaitable[Any]: ...


@dataclass(frozen=True, slots=True)
class PersonData:
    """One kind of thing kith keeps about a person. Of each group of fields below, exactly one is given."""

    name: str  # what it is: its key in the export document
    tables: tuple[sa.Table, ...] = ()  # where the database keeps it (none: kept elsewhere, Chroma or files)
    topic: str = ""  # the Database.mark topic of its writes, marked when a link moved its rows

    # How it follows the person when one of their accounts is linked to another person:
    move_rows: MoveRows | None = None  # its rows, in one transaction with every other declaration's rows
    reassign: Reassign | None = None  # or by what holds it (kept outside the database, or copied in memory)
    stays: str = ""  # or why it stays under the old person id

    # What the person's export holds of it:
    export_rows: ExportRows | None = None  # read in one transaction with every other declaration's rows
    export_kept: ExportKept | None = None  # or read from where it is kept
    left_out: str = ""  # or why the export leaves it out

    # What a forget does to it:
    forgotten_by: str = ""  # the dotted name of the forget step that reaches it
    kept_by_forget: str = ""  # or why a forget leaves it as it is

    def __post_init__(self) -> None:
        for group in (("move_rows", "reassign", "stays"), ("export_rows", "export_kept", "left_out"),
                      ("forgotten_by", "kept_by_forget")):
            given = [field for field in group if getattr(self, field)]
            if len(given) != 1:
                raise ValueError(f"{self.name}: give exactly one of {', '.join(group)} (given: {given or 'none'})")

    @property
    def moves(self) -> bool:
        return self.move_rows is not None or self.reassign is not None

    @property
    def exported(self) -> bool:
        return self.export_rows is not None or self.export_kept is not None


def when(value: datetime | None) -> str | None:
    """A time as an export part writes it: ISO 8601 in UTC, or None."""
    return as_utc(value).isoformat() if value is not None else None


async def move_person(db: Database, declared: Sequence[PersonData], old: str, new: str) -> dict[str, int]:
    """Everything of person ``old`` becomes ``new``'s, each kind its declared way: what its holder moves, in the
    declared order, then every kind's rows in one transaction. Returns how many of each moved, by name."""
    moved = {entry.name: await entry.reassign(old, new) for entry in declared if entry.reassign is not None}
    in_rows = [entry for entry in declared if entry.move_rows is not None]

    def move_rows(conn: Connection) -> dict[str, int]:
        return {entry.name: entry.move_rows(conn, old, new) for entry in in_rows if entry.move_rows is not None}

    try:
        moved |= await db.run(move_rows)
    finally:
        for topic in dict.fromkeys(entry.topic for entry in in_rows if entry.topic):
            db.mark(topic)
    return {entry.name: moved[entry.name] for entry in declared if entry.name in moved}


async def export_parts(db: Database, declared: Sequence[PersonData], person: str, *, you: bool = False,
                       name: str = "") -> dict[str, Any]:
    """Each kind's part of ``person``'s export, by name, in the declared order: the parts kept outside the
    database (texts worded for ``you`` or ``name``), then every part in the database, read in one transaction
    so that they agree with each other."""
    parts = {entry.name: await entry.export_kept(person, you=you, name=name)
             for entry in declared if entry.export_kept is not None}
    in_rows = [entry for entry in declared if entry.export_rows is not None]

    def read_rows(conn: Connection) -> dict[str, Any]:
        return {entry.name: entry.export_rows(conn, person) for entry in in_rows if entry.export_rows is not None}

    parts |= await db.run(read_rows)
    return {entry.name: parts[entry.name] for entry in declared if entry.name in parts}


__all__ = ["ExportKept", "ExportRows", "MoveRows", "PersonData", "Reassign", "export_parts", "move_person", "when"]
