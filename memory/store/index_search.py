"""A person's memories nearest a query vector and best for its words, found through their index.

With a change log every index is current, so the vector search runs in memory too, over the
person's vectors as one matrix. Without one this process cannot know what others wrote: Chroma
is asked for the nearest ids and distances only, and they are mapped through the index (an id it
does not know yet is read from Chroma and learnt). Summaries may then trail another process's
writes, so whoever writes on the strength of them re-reads first.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ground.tunables import NEAREST_OVERSAMPLE, NEAREST_POOL_MAX
from memory.core.records import Scope, from_metadata
from memory.encoders.embedders import Vector
from memory.store.chroma import ChromaCollections, Collection, space_of
from memory.store.person_index import IndexHit, PersonIndex, PersonIndexes
from memory.store.vectors import Vectors


class IndexSearch:
    """Searches of a person's index: in memory when the indexes are current, else through Chroma's nearest."""

    def __init__(
        self,
        indexes: PersonIndexes,
        chroma: ChromaCollections,
        *,
        vectors_in_memory: bool,
        filtered_query_max: int,
        memory_total: Callable[[], int],
    ) -> None:
        self.indexes = indexes
        self.chroma = chroma
        self.vectors_in_memory = vectors_in_memory  # the indexes are current: search their vectors, not Chroma
        self.filtered_query_max = filtered_query_max
        self.memory_total = memory_total  # records in the memories collection now

    async def hits(
        self,
        person: str,
        *,
        vectors: Vectors | None = None,
        query: str | None = None,
        k: int,
        max_query_words: int | None = None,
        scope: Scope | None = None,
    ) -> list[IndexHit]:
        """At most ``k`` nearest ``vectors``, then BM25's best for ``query`` not among them."""
        if k <= 0:
            return []
        index = await self.indexes.of(person)
        found: dict[str, IndexHit] = {}
        if vectors is not None:
            if self.vectors_in_memory:
                near = (await self.indexes.vectors_of(person, index)).nearest(vectors.values[0], k, scope)
            else:
                near = await self._nearest_in_chroma(person, index, vectors.values[0], k, scope)
            for memory_id, cosine in near:
                summary = index.summaries.get(memory_id)
                if summary is not None and len(found) < k:
                    trusted = vectors.from_embedder and summary.space == vectors.space
                    found[memory_id] = IndexHit(summary, cosine, trusted)
        if query:
            for memory_id, _score in index.lexical(query, k, scope, max_query_words):
                if memory_id not in found and memory_id in index.summaries:
                    found[memory_id] = IndexHit(index.summaries[memory_id], None, False)
        return list(found.values())

    async def _nearest_in_chroma(
        self, person: str, index: PersonIndex, vector: Vector, k: int, scope: Scope | None
    ) -> list[tuple[str, float]]:
        """Chroma's nearest neighbours of the person's: (id, cosine), best first.

        Chroma's metadata-filtered search costs time in proportion to the person's memories, so a
        person with many is searched unfiltered, with enough extra results to hold ``k`` of theirs (never in the
        memory tables, where unfiltered would read every person's vectors).
        """
        own = len(index.summaries) if scope is None else len(index.scoped[scope])
        pool = math.ceil(k * NEAREST_OVERSAMPLE * max(self.memory_total(), own, 1) / max(own, 1))
        # The memory tables read one person's rows by their index: filtered is always the cheap way there.
        filtered = self.chroma.in_database or own <= self.filtered_query_max or pool > NEAREST_POOL_MAX
        ids, distances = await self.chroma.run(
            self.chroma.nearest_sync,
            person if filtered else None,
            vector,
            k if filtered else pool,
            scope if filtered else None,
        )
        unknown = [i for i in ids if i not in index.summaries] if filtered else []
        if unknown:  # written by another process since the index was built: learn them
            for md in await self.chroma.run(self.chroma.get_sync, Collection.MEMORIES, unknown):
                index.put(from_metadata(md), space_of(md))
        out: list[tuple[str, float]] = []
        for memory_id, distance in zip(ids, distances, strict=True):
            record = index.records.get(memory_id)
            if record is not None and (scope is None or record.scope is scope):
                out.append((memory_id, 1.0 - float(distance)))
        return out
