"""One person's export: everything kith stores about them, as one JSON document (its fields: docs/export.md).

Each feature declares what it keeps about a person and its part of the export (:mod:`ground.person_data`);
the document holds every declared part, in the order :func:`kith.app.person_data.gathered` lists them, under the
document's own head (schema, time, person).

The chat's ``/export`` and ``bot.py memory export`` both come from here, so they hold the same document; only
memory texts are worded for their reader ("You live in Berlin", or with the person's display name).
The relational parts are read in one transaction, so they agree with each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ground.db import Database
from ground.person_data import PersonData, export_parts, when
from kith.app.person_data import gathered
from memory.controls import PauseBook
from memory.service import MemoryService

SCHEMA_VERSION = 1  # raised whenever a field changes meaning or goes; new fields are added under the same version


class PersonExport:
    """Builds the export document; who may have it is the caller's to check (memory.controls, the CLI)."""

    def __init__(self, db: Database, memory: MemoryService, clock: Callable[[], datetime],
                 person_data: Sequence[PersonData] | None = None) -> None:
        """``person_data``: what the document holds, in its order; by default every kind, gathered over
        ``memory`` (an export only reads: a pause book of its own will do)."""
        self.db = db
        self.memory = memory
        self.clock = clock
        self.person_data = person_data if person_data is not None else gathered(memory, PauseBook(db))

    async def document(self, person: str, *, you: bool = False, name: str = "") -> dict[str, Any]:
        """The whole document; memory texts worded for ``you`` (the person reads it) or with ``name``."""
        exported_at = self.clock()
        parts = await export_parts(self.db, self.person_data, person, you=you, name=name)
        return {"schema": SCHEMA_VERSION, "exported_at": when(exported_at), "person": person, **parts}

    async def yours(self, person: str) -> dict[str, Any]:
        """The document as the person reads it, for ``/export`` (a :data:`memory.controls.person_controls.Exporter`)."""
        return await self.document(person, you=True)


__all__ = ["SCHEMA_VERSION", "PersonExport"]
