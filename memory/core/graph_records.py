"""The shapes of a person's graph: who and what is in their life (entities) and how they connect (relations).

Every relation is a receipt, as a memory is: the words the person said that support it (``evidence``, the whole
``evidence_sentences``), where they said them (``sources``, ``scope``) and, once curated, the memory those words
became (``memory_id``). An entity is one name as the person said it ("Ola", "my sister", "Ola K."); names of one
being are joined by ``merged_into`` and never rewritten, so a merge is undone by clearing that one field.

The person themselves is the centre of their own graph: :data:`SELF` stands for them in a relation and is never
an entity row.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

from memory.core.records import Scope, Source

SELF = "self"  # the person whose graph it is, as a relation's subject or object
SELF_NAME = "PERSON"  # how the extractor names them (the transcript's label)


class EntityKind(enum.StrEnum):
    PERSON = "person"
    PET = "pet"
    PLACE = "place"
    ORGANISATION = "organisation"
    THING = "thing"
    EVENT = "event"


@dataclass(frozen=True, slots=True)
class Entity:
    """One name of someone or something in a person's life, as they said it."""

    id: str
    person: str
    name: str
    kind: EntityKind | None  # None until a proposal says what it is
    created_at: datetime
    merged_into: str | None = None  # the entity this name is another name of
    merged_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class RelationProposal:
    """A relation an extractor proposed with a memory, as it stands after validation: the names as the person
    said them (or :data:`SELF`), grounded in that memory's quotes; receipts are the memory's."""

    subject: str
    subject_kind: EntityKind | None
    relation: str
    object: str
    object_kind: EntityKind | None


@dataclass(frozen=True, slots=True)
class Relation:
    """``subject`` -- ``relation`` -> ``object``, each end an entity id or :data:`SELF`, with its receipts and
    when it held. ``valid_to`` is set only by the person: an answer to a question, never a model."""

    id: str
    person: str
    subject: str
    relation: str  # as worded: "sister of", "lives in"
    relation_key: str  # the same relation however it is inflected: what a contradiction compares
    object: str
    evidence: tuple[str, ...]
    evidence_sentences: tuple[str, ...]
    sources: tuple[Source, ...]
    scope: Scope
    valid_from: datetime
    created_at: datetime
    valid_to: datetime | None = None
    note_id: str | None = None  # the staged note it was proposed with
    memory_id: str | None = None  # the memory that note became

    def holds(self, at: datetime | None = None) -> bool:
        return self.valid_to is None or (at is not None and at < self.valid_to)

    @property
    def ends(self) -> tuple[str, str]:
        return self.subject, self.object
