"""The parts both sides of the memory store work over: Chroma, the vector source, each person's in-memory index,
the change log's reader, and the per-memory locks of compare-and-swap.

Staged notes (:mod:`memory.store.notes`) and curated memories (:class:`~memory.core.records.MemoryRecord`,
every field kept as metadata) live in two Chroma collections (:mod:`memory.store.chroma`). Vectors are
computed here and passed in (:mod:`memory.store.vectors`): when the embedder is off or failing a record
gets the hashed fallback and its metadata says so, so its cosine is never taken for an embedder's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ground.keyed_locks import KeyedLocks
from ground.tunables import FILTERED_QUERY_MAX
from memory.core.records import MetadataValue
from memory.store.catch_up import CatchUp
from memory.store.changes import ChangeLog
from memory.store.chroma import ChromaCollections, Collection
from memory.store.index_search import IndexSearch
from memory.store.person_index import PersonIndexes
from memory.store.vectors import Vectors, VectorSource


class StoreParts:
    """Chroma, the vectors, the in-memory indexes and the change log's reader, as both sides of the store use
    them (:class:`~memory.store.reads.MemoryReads`, :class:`~memory.store.writes.MemoryWrites`)."""

    def __init__(
        self,
        chroma: ChromaCollections,
        vector_source: VectorSource,
        *,
        filtered_query_max: int = FILTERED_QUERY_MAX,
        changes: ChangeLog | None = None,
    ) -> None:
        self.chroma = chroma
        self.vector_source = vector_source
        self.changes = changes
        self.indexes = PersonIndexes(chroma)
        self.catch_up = CatchUp(changes, self.indexes, chroma)
        self.index_search = IndexSearch(
            self.indexes,
            chroma,
            vectors_in_memory=changes is not None,
            filtered_query_max=filtered_query_max,
            memory_total=lambda: self._memory_total,
        )
        self._cas = KeyedLocks()  # one per memory id: every write to an existing memory holds it
        self._memory_total = 0  # records in the memories collection, kept in step by this store
        # Collections records were deleted from since the last forget's scrub: their vector indexes are saved.
        self._deleted_from: set[Collection] = set()

    async def vectors(self, texts: Sequence[str], kind: Collection = Collection.MEMORIES) -> Vectors:
        """Embedder vectors for ``texts``; on any embedder failure, hashed ones (never a failed write)."""
        return await self.vector_source.vectors(texts, self.chroma.hash_dim(kind))

    async def _get(self, kind: Collection, ids: Sequence[str]) -> list[dict[str, MetadataValue]]:
        return await self.chroma.run(self.chroma.get_sync, kind, ids)

    async def _scan(self, kind: Collection, condition: dict[str, Any]) -> list[dict[str, MetadataValue]]:
        return await self.chroma.run(self.chroma.scan_sync, kind, condition)


__all__ = ["StoreParts"]
