"""The memory store: every read and write of kith's memory, over Chroma (or the memory tables) and each person's
in-memory index.

:class:`MemoryStore` is both sides over the same parts (:mod:`memory.store.parts`): its reads and searches
(:mod:`memory.store.reads`) and its writes (:mod:`memory.store.writes`), opened and closed together. A caller that
only reads may take a :class:`~memory.store.reads.MemoryReads`.
"""

from __future__ import annotations

from pathlib import Path

from ground.config import MemorySettings
from ground.db import Database
from ground.tunables import FILTERED_QUERY_MAX
from memory.encoders.embedders import Embedder, EmbedderStatus
from memory.store.changes import ChangeLog
from memory.store.chroma import ChromaCollections, Collection
from memory.store.reads import MemoryReads
from memory.store.vectors import VectorSource
from memory.store.writes import MemoryWrites


class MemoryStore(MemoryReads, MemoryWrites):
    """kith's memory as stored: read it, search it, and write it (memories by compare-and-swap)."""

    # --- opening ------------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        settings: MemorySettings,
        data_dir: Path,
        embedder: Embedder | None,
        status: EmbedderStatus,
        *,
        namespace: str = "",
        filtered_query_max: int = FILTERED_QUERY_MAX,
        changes: ChangeLog | None = None,
        database: Database | None = None,
    ) -> MemoryStore:
        """Open the store; with ``changes`` (the log every kith process on this database shares) lookups
        are answered from memory after catching up with other processes' writes. With ``database`` (kith's own),
        the memories may live in its tables (``[memory] store``)."""
        chroma = await ChromaCollections.connect(settings, data_dir, namespace=namespace, database=database)
        store = cls(chroma, VectorSource(embedder, status), filtered_query_max=filtered_query_max, changes=changes)
        try:
            await store.catch_up.start()
            await chroma.prepare(store.vector_source)
            store._memory_total = await chroma.count(Collection.MEMORIES)
        except BaseException:
            chroma.abandon()
            raise
        return store

    async def close(self) -> None:
        await self.vector_source.close()
        await self.chroma.close()


__all__ = ["MemoryStore"]
