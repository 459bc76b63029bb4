"""The read side of the memory store: memories and notes by id, by person and by metadata, and the searches.

With a change log, :meth:`MemoryReads.lookup` and :meth:`MemoryReads.candidates` first catch up with whatever
other processes logged (:mod:`memory.store.catch_up`), then answer from memory alone: vector top-k, BM25 and the
records, no Chroma call. So a memory forgotten elsewhere never reaches a prompt, and recall costs milliseconds at
10,000 memories. Without a change log a store cannot know what others did: those two ask Chroma for the nearest
neighbours and re-read every hit by id, as :meth:`MemoryReads.nearest` and :meth:`MemoryReads.lexical` always do.

:meth:`MemoryReads.memories_where` and :meth:`MemoryReads.memory_ids_where` are the cross-person reads by metadata
(the heartbeat's sweeps).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from memory.core.records import MemoryRecord, Scope, Status, from_metadata
from memory.encoders.embedders import Vector
from memory.store.chroma import Collection, space_of, where
from memory.store.notes import Note, note_from_metadata, read_notes
from memory.store.parts import StoreParts
from memory.store.person_index import IndexHit, PersonIndex
from memory.store.vectors import VectorHit, Vectors


def oldest_first(records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
    return sorted(records, key=lambda r: (r.created_at, r.id))


class MemoryReads(StoreParts):
    """kith's memory as stored, read and searched."""

    @property
    def answers_from_memory(self) -> bool:
        """Whether lookups and pinned facts come from memory kept current by a change log (no Chroma call)."""
        return self.changes is not None

    def vectors_held(self, person: str, space: str, *, scope: Scope | None = None) -> bool | None:
        """Whether a query vector of ``space`` could find anything of ``person``'s (only of ``scope`` when given):
        see :meth:`memory.store.person_index.PersonIndexes.vectors_held`. ``None`` when not known without a read,
        and always without a change log (the indexes may then trail other processes' writes). Reads nothing: what
        other processes wrote since the last catch-up is not seen."""
        if self.changes is None:
            return None
        return self.indexes.vectors_held(person, space, scope)

    async def held_soon(self, person: str, wait_s: float) -> PersonIndex | None:
        """The person's index as it is, built and known current (a change log, caught up with every process),
        waiting at most ``wait_s`` for a catch-up; ``None`` otherwise (a caller out of time then has nothing it may
        show: a memory forgotten elsewhere must never reach a prompt). Never builds an index."""
        if self.changes is None or self.indexes.built(person) is None:
            return None
        if not self.catch_up.current():
            catching_up = asyncio.ensure_future(self.catch_up.with_others())
            done, _ = await asyncio.wait({catching_up}, timeout=max(0.0, wait_s))
            if not done:
                # It finishes in the background; a failure then is the next lookup's to meet, not news here.
                catching_up.add_done_callback(_retrieved)
                return None
            if catching_up.cancelled() or catching_up.exception() is not None:
                return None
        return self.indexes.built(person)

    # --- reading by id and by person ----------------------------------------------------
    async def get_memories(self, ids: Sequence[str]) -> list[MemoryRecord]:
        return [from_metadata(md) for md in await self._get(Collection.MEMORIES, ids)]

    async def get_memory(self, memory_id: str) -> MemoryRecord | None:
        found = await self.get_memories([memory_id])
        return found[0] if found else None

    async def get_notes(self, ids: Sequence[str]) -> list[Note]:
        return [note_from_metadata(md) for md in await self._get(Collection.NOTES, ids)]

    async def note_vectors(self, ids: Sequence[str]) -> dict[str, tuple[Vector, str]]:
        """The vectors stored with the staged notes ``ids`` (capture embedded each when it staged it), with the
        space each came from; notes that are gone are left out."""
        rows = await self.chroma.run(self.chroma.records_sync, ids, Collection.NOTES)
        return {str(md["id"]): ([float(x) for x in vector], space_of(md)) for md, vector in rows}

    async def memories_of(
        self, person: str, *, statuses: Sequence[Status] | None = (Status.ACTIVE,)
    ) -> list[MemoryRecord]:
        """A person's memories (``statuses=None``: every status), oldest first."""
        status = {"$in": [s.value for s in statuses]} if statuses is not None else None
        rows = await self._scan(Collection.MEMORIES, where(person=person, status=status))
        return oldest_first(from_metadata(md) for md in rows)

    async def pinned_of(self, person: str) -> list[MemoryRecord]:
        """The person's active pinned memories, oldest first.

        With a change log, from memory (current: other processes' writes caught up with first);
        without, a filtered read of Chroma (no scan of all their memories).
        """
        if self.changes is not None:
            await self.catch_up.with_others()
            index = await self.indexes.of(person)
            return oldest_first(index.records[i] for i in index.pinned)
        rows = await self._scan(Collection.MEMORIES, where(person=person, status=Status.ACTIVE.value, pinned=True))
        return oldest_first(from_metadata(md) for md in rows)

    async def active_of(self, person: str) -> list[MemoryRecord]:
        """The person's active memories, oldest first: from memory with a change log (caught up first)."""
        if self.changes is None:
            return await self.memories_of(person)
        await self.catch_up.with_others()
        index = await self.indexes.of(person)
        return oldest_first(index.records.values())

    async def notes_of(self, person: str, *, unpromoted_only: bool = False) -> list[Note]:
        """The person's staged notes, oldest first; unpromoted ones come from memory with a change log."""
        if unpromoted_only and self.changes is not None:
            await self.catch_up.with_others()
            return await self.indexes.staged_notes(person)
        return await read_notes(self.chroma, person, unpromoted_only=unpromoted_only)

    async def notes_older_than(self, cutoff: datetime) -> list[str]:
        rows = await self._scan(Collection.NOTES, {"created_at_ts": {"$lt": cutoff.timestamp()}})
        return [str(md["id"]) for md in rows]

    # --- reading across people, by metadata ---------------------------------------------
    async def memories_where(self, condition: dict[str, Any]) -> list[MemoryRecord]:
        """Every memory (any person, any status) matching a Chroma ``where`` filter, read from Chroma."""
        return [from_metadata(md) for md in await self._scan(Collection.MEMORIES, condition)]

    async def memory_ids_where(self, condition: dict[str, Any]) -> list[str]:
        """Ids of the memories matching a Chroma ``where`` filter (ids only: reading metadata is the costly part)."""
        return await self.chroma.run(self.chroma.ids_sync, Collection.MEMORIES, condition)

    # --- searching a person's memories --------------------------------------------------
    async def nearest(self, person: str, vectors: Vectors, k: int) -> list[VectorHit]:
        """The ``k`` active memories of ``person`` nearest the (single) query vector, read fresh."""
        found = await self.candidates(person, vectors=vectors, k=k)
        records = {r.id: r for r in await self._fresh(person, [c.summary.id for c in found])}
        return [
            VectorHit(records[c.summary.id], c.cosine or 0.0, c.trusted)
            for c in found
            if c.summary.id in records
        ]

    async def lexical(self, person: str, query: str, k: int, *,
                      scope: Scope | None = None) -> list[tuple[MemoryRecord, float]]:
        """BM25 over the person's active memories (only of ``scope`` when given), best first, read fresh."""
        await self.catch_up.with_others()
        index = await self.indexes.of(person)
        ranked = index.lexical(query, k, scope)
        records = {r.id: r for r in await self._fresh(person, [i for i, _s in ranked])}
        return [(records[i], score) for i, score in ranked if i in records]

    async def lookup(
        self,
        person: str,
        *,
        vectors: Vectors | Awaitable[Vectors | None] | None = None,
        query: str | None = None,
        k: int,
        max_query_words: int | None = None,
        scope: Scope | None = None,
    ) -> tuple[list[VectorHit], list[tuple[MemoryRecord, float]]]:
        """Vector neighbours and BM25 hits together, each at most ``k``, only of ``scope`` when given.

        ``vectors`` may still be on its way (an awaitable, e.g. the query's embedding): catching up
        and BM25 run meanwhile. With a change log the records come from memory, after catching up
        with what other processes logged (so a memory they forgot is gone); without one they are
        re-read from Chroma in one round trip.
        """
        await self.catch_up.with_others()
        index = await self.indexes.of(person)
        ranked = index.lexical(query, k, scope, max_query_words) if query else []
        if vectors is not None and not isinstance(vectors, Vectors):
            vectors = await vectors
        near = await self.index_search.hits(person, vectors=vectors, k=k, scope=scope) if vectors is not None else []
        index = await self.indexes.of(person)
        records: Mapping[str, MemoryRecord]
        if self.changes is not None:
            records = index.records
        else:
            ids = list(dict.fromkeys([c.summary.id for c in near] + [i for i, _s in ranked]))
            records = {r.id: r for r in await self._fresh(person, ids) if scope is None or r.scope is scope}
        hits = [
            VectorHit(records[c.summary.id], c.cosine or 0.0, c.trusted)
            for c in near
            if c.summary.id in records
        ]
        return hits, [(records[i], score) for i, score in ranked if i in records]

    async def neighbours(self, person: str, ids: Iterable[str], *, width: int,
                         gap: timedelta) -> dict[str, list[tuple[MemoryRecord, int]]]:
        """For each of ``ids``, the person's active memories said within ``width`` places before or after it in
        the same chat, with how many places away (:mod:`memory.core.timeline`). Call it after :meth:`lookup`, which
        caught up with other processes.

        Without a change log the index may trail other processes' writes, so only neighbours among ``ids``
        themselves come back (the caller read those fresh).
        """
        index = await self.indexes.of(person)
        wanted = list(ids)
        allowed = None if self.changes is not None else set(wanted)
        out: dict[str, list[tuple[MemoryRecord, int]]] = {}
        for memory_id in wanted:
            found = [(index.records[i], steps) for i, steps in index.timelines.neighbours(memory_id, width, gap).items()
                     if i in index.records and (allowed is None or i in allowed)]
            if found:
                out[memory_id] = found
        return out

    async def records_of(self, person: str, ids: Sequence[str]) -> list[MemoryRecord]:
        """``person``'s active memories among ``ids``, in that order: from memory when the change log keeps the
        index current (call it after :meth:`lookup`, which caught up), else read fresh from Chroma."""
        if not ids:
            return []
        if self.changes is None:
            return await self._fresh(person, list(ids))
        index = await self.indexes.of(person)
        return [index.records[i] for i in ids if i in index.records]

    async def candidates(
        self,
        person: str,
        *,
        vectors: Vectors | None = None,
        query: str | None = None,
        k: int,
        max_query_words: int | None = None,
        scope: Scope | None = None,
    ) -> list[IndexHit]:
        """The person's active memories nearest ``vectors`` and best for ``query`` (BM25), from memory.

        With a change log the vector search runs in memory too, after catching up with other
        processes. Without one Chroma is asked for ids and distances only, and summaries may
        trail another process's writes; writers re-read.
        """
        await self.catch_up.with_others()
        return await self.index_search.hits(
            person, vectors=vectors, query=query, k=k, max_query_words=max_query_words, scope=scope
        )

    async def _fresh(self, person: str, ids: Sequence[str]) -> list[MemoryRecord]:
        """The records as stored now; ids gone or changed elsewhere (an operator's forget) leave the index."""
        if not ids:
            return []
        rows = {str(md["id"]): md for md in await self._get(Collection.MEMORIES, ids)}
        out = []
        for memory_id in ids:
            md = rows.get(memory_id)
            if md is None or md.get("person") != person or md.get("status") != Status.ACTIVE.value:
                self.indexes.forget(person, memory_id)
                continue
            out.append(from_metadata(md))
        return out


def _retrieved(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: asyncio logs no "exception was never retrieved"


__all__ = ["MemoryReads", "oldest_first"]

