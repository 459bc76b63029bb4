"""Cross-person reads of the memory store by metadata, for the heartbeat's sweeps.

A tick must learn "who has something due" with a fixed number of queries, not one per person:
that is a Chroma ``where`` filter over every person's memories, through the store's
:meth:`~memory.store.MemoryStore.memories_where` and :meth:`~memory.store.MemoryStore.memory_ids_where`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory.core import MemoryKind, MemoryRecord, Status, Tier
from memory.store import MemoryStore

NO_CONFLICTS = "[]"  # records.to_metadata stores conflicts_with as a JSON list


def _and(*parts: dict[str, Any]) -> dict[str, Any]:
    return parts[0] if len(parts) == 1 else {"$and": list(parts)}


def _person(person: str | None) -> tuple[dict[str, Any], ...]:
    return ({"person": person},) if person is not None else ()


# Chroma answers a numeric range from an index in a few milliseconds, but intersecting it with a
# condition most memories meet ("status is active") costs a pass over all of them: the filters
# below keep only the selective condition in the query and check the rest on the few rows found.


async def disputed(store: MemoryStore, person: str | None = None) -> list[MemoryRecord]:
    """Active memories flagged as conflicting with another: the open questions kith may ask about."""
    found = await store.memories_where(_and({"conflicts_with": {"$nin": [NO_CONFLICTS]}}, *_person(person)))
    return [r for r in found if r.status is Status.ACTIVE and r.conflicts_with]


async def lapsing(store: MemoryStore, after: datetime, until: datetime,
                  person: str | None = None) -> list[MemoryRecord]:
    """Active, unpinned memories whose horizon ends in (after, until]."""
    found = await store.memories_where(_and({"expires_at_ts": {"$gt": after.timestamp()}},
                                             {"expires_at_ts": {"$lte": until.timestamp()}}, *_person(person)))
    return [r for r in found if r.status is Status.ACTIVE and not r.pinned]


async def expired(store: MemoryStore, now: datetime) -> list[MemoryRecord]:
    """Active memories whose horizon has ended (0.0 in expires_at_ts means "no horizon")."""
    found = await store.memories_where(_and({"expires_at_ts": {"$gt": 0.0}},
                                             {"expires_at_ts": {"$lte": now.timestamp()}}))
    return [r for r in found if r.status is Status.ACTIVE]


async def stale(store: MemoryStore, untouched_since: datetime, kinds: tuple[MemoryKind, ...]) -> list[MemoryRecord]:
    """Active, never-used, unconfirmed memories of ``kinds`` nobody touched since ``untouched_since``."""
    found = await store.memories_where(_and({"updated_at_ts": {"$lt": untouched_since.timestamp()}},
                                             {"kind": {"$in": [k.value for k in kinds]}}))
    return [r for r in found if r.status is Status.ACTIVE and r.use_count == 0 and r.tier is Tier.OBSERVATION]


async def created_since(store: MemoryStore, since: datetime) -> list[str]:
    """Ids of the memories created after ``since`` (ids only: reading metadata is the costly part)."""
    return await store.memory_ids_where({"created_at_ts": {"$gt": since.timestamp()}})
