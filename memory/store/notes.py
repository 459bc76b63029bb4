"""Staged notes: what capture wrote down and the gate has not curated yet, and their Chroma metadata form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from memory.core.records import (
    Horizon,
    MemoryCandidate,
    MemoryRecord,
    MetadataValue,
    from_metadata,
    to_metadata,
)
from memory.store.chroma import ChromaCollections, Collection, where


@dataclass(frozen=True, slots=True)
class Note:
    """A staged capture: a record plus what only staging needs."""

    record: MemoryRecord
    horizon: Horizon | None = None
    corrects: str | None = None
    conversation: str = ""
    promoted_to: str | None = None  # the memory it became or merged into
    promoted_at: datetime | None = None  # set once promotion handled it, whatever the outcome

    def candidate(self) -> MemoryCandidate:
        r = self.record
        return MemoryCandidate(
            kind=r.kind,
            text=r.text,
            evidence=r.evidence,
            importance=r.importance,
            corrects=self.corrects,
            horizon=self.horizon,
            sources=r.sources,
            scope=r.scope,
            evidence_sentences=r.evidence_sentences,
        )


def note_metadata(note: Note) -> dict[str, MetadataValue]:
    md = to_metadata(note.record)
    md.update(
        {
            "note_horizon": note.horizon.value if note.horizon else "",
            "note_corrects": note.corrects or "",
            "note_conversation": note.conversation,
            "note_promoted": note.promoted_at is not None,
            "note_promoted_to": note.promoted_to or "",
            "note_promoted_at": note.promoted_at.isoformat() if note.promoted_at else "",
        }
    )
    return md


def note_from_metadata(md: Mapping[str, MetadataValue]) -> Note:
    promoted_at = str(md.get("note_promoted_at") or "")
    return Note(
        record=from_metadata(md),
        horizon=Horizon(str(md["note_horizon"])) if md.get("note_horizon") else None,
        corrects=str(md["note_corrects"]) if md.get("note_corrects") else None,
        conversation=str(md.get("note_conversation") or ""),
        promoted_to=str(md["note_promoted_to"]) if md.get("note_promoted_to") else None,
        promoted_at=datetime.fromisoformat(promoted_at) if promoted_at else None,
    )


def oldest_first(notes: list[Note]) -> list[Note]:
    return sorted(notes, key=lambda n: (n.record.created_at, n.record.id))


async def read_notes(chroma: ChromaCollections, person: str, *, unpromoted_only: bool) -> list[Note]:
    """The person's staged notes as Chroma holds them now, oldest first."""
    rows = await chroma.run(
        chroma.scan_sync,
        Collection.NOTES,
        where(person=person, note_promoted=False if unpromoted_only else None),
    )
    return oldest_first([note_from_metadata(md) for md in rows])
