"""Memories moved whole from Chroma into the memory tables of another database (``bot.py migrate``).

Each collection is created there with its metadata (its vector space and size, so nothing is embedded again), then
its records are copied a page at a time with their vectors as stored. The tables keep a record they already hold
and skip the copy (:class:`~memory.store.table_client.TableCollection.add`), so a copy killed at any moment is
resumed by running it again: it never doubles one. At the end each collection's records are counted on both sides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ground.config import MemorySettings
from ground.db import Database
from ground.tunables import STORE_PAGE
from memory.store.chroma import Collection, make_client, place_of
from memory.store.memory_tables import memory_collections, memory_records
from memory.store.placement import memory_place
from memory.store.table_client import TableClient

# The tables a move from Chroma writes into: it counts their records itself.
MOVED_INTO = (memory_collections.name, memory_records.name)


@dataclass(frozen=True, slots=True)
class CollectionCount:
    name: str
    source: int
    target: int


def copy_collections(source: Any, target: TableClient, names: Sequence[str], *,
                     on_records: Callable[[str, int, int], None] | None = None) -> list[CollectionCount]:
    """Copy the collections ``names`` of the Chroma client ``source`` (those it has) into ``target``; the records
    of each on both sides after the copy."""
    there = {c.name if hasattr(c, "name") else str(c) for c in source.list_collections()}
    counts = []
    for name in names:
        if name not in there:
            continue
        theirs = source.get_collection(name, embedding_function=None)
        ours = target.get_or_create_collection(name, metadata=dict(theirs.metadata or {}))
        ids = list(theirs.get(include=[])["ids"])
        for start in range(0, len(ids), STORE_PAGE):
            page = theirs.get(ids=ids[start : start + STORE_PAGE], include=["metadatas", "embeddings"])
            if len(page["ids"]):
                ours.add(ids=list(page["ids"]), embeddings=page["embeddings"],
                         metadatas=[dict(md) for md in page["metadatas"]])
            if on_records is not None:
                on_records(name, min(start + STORE_PAGE, len(ids)), len(ids))
        counts.append(CollectionCount(name, theirs.count(), ours.count()))
    return counts


def moves_from_chroma(settings: MemorySettings, source: Database, target: Database) -> bool:
    """Whether copying the store from ``source`` to ``target`` moves memories out of Chroma: they are in Chroma now,
    and on ``target`` ``[memory] store`` keeps them in the database."""
    return place_of(settings, source) == "chroma" and memory_place(
        settings.store, chroma_url=settings.chroma_url, server_database=not target.serializes_writers,
        database_holds_memories=lambda: False) == "database"


def move_from_chroma(settings: MemorySettings, data_dir: Path, target: Database, *,
                     on_records: Callable[[str, int, int], None] | None = None) -> list[CollectionCount]:
    """Both collections of this data directory's Chroma copied into ``target``'s memory tables."""
    return copy_collections(make_client(settings, data_dir), TableClient(target), [k.value for k in Collection],
                            on_records=on_records)


__all__ = ["MOVED_INTO", "CollectionCount", "copy_collections", "move_from_chroma", "moves_from_chroma"]
