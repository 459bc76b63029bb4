"""The memory store: every read and write of kith's memory, over Chroma and each person's in-memory index.

Staged notes (:mod:`memory.store.notes`) and curated memories (:class:`~memory.core.records.MemoryRecord`,
every field kept as metadata) live in two Chroma collections (:mod:`memory.store.chroma`). Vectors are
computed here and passed in (:mod:`memory.store.vectors`): when the embedder is off or failing a record
gets the hashed fallback and its metadata says so, so its cosine is never taken for an embedder's.

Curated memory is written with compare-and-swap on ``revision``: under a per-id lock the store
re-reads the record and refuses a writer whose revision is stale with :class:`RevisionConflict`,
so two writers never silently overwrite each other. Every write to an existing memory (update,
delete, reassign) takes that lock. :meth:`MemoryStore.edit` is the read-change-write every change to a
stored memory goes through: it reads again and changes again when it lost a race.

Every write reaches Chroma first, then the writer's person index (:mod:`memory.store.person_index`)
and the change log (:mod:`memory.store.catch_up`). With a change log, :meth:`MemoryStore.lookup` and
:meth:`MemoryStore.candidates` first catch up with whatever other processes logged, then answer
from memory alone: vector top-k, BM25 and the records, no Chroma call. So a memory forgotten
elsewhere never reaches a prompt, and recall costs milliseconds at 10,000 memories. Without a
change log a store cannot know what others did: those two ask Chroma for the nearest neighbours
and re-read every hit by id, as :meth:`MemoryStore.nearest` and :meth:`MemoryStore.lexical`
always do.

:meth:`MemoryStore.memories_where` and :meth:`MemoryStore.memory_ids_where` are the cross-person
reads by metadata (the heartbeat's sweeps).
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ground.config import MemorySettings
from ground.keyed_locks import KeyedLocks
from ground.tunables import FILTERED_QUERY_MAX, MEMORY_EDIT_ATTEMPTS, STORE_PAGE
from memory.core.records import MemoryRecord, MetadataValue, Scope, Status, from_metadata, to_metadata
from memory.encoders.embedders import Embedder, EmbedderStatus, Vector
from memory.store.catch_up import CatchUp
from memory.store.changes import ChangeLog
from memory.store.chroma import VECTOR_KEY, ChromaCollections, Collection, space_of, where
from memory.store.chroma_scrub import (
    delete_blanked_sync,
    index_save_batches,
    index_save_writes,
    index_saved,
    save_batch_sync,
    scrub_queue_sync,
)
from memory.store.index_search import IndexSearch
from memory.store.notes import Note, note_from_metadata, note_metadata, read_notes
from memory.store.person_index import IndexHit, PersonIndexes
from memory.store.reembed import record_ids_sync
from memory.store.vectors import VectorHit, Vectors, VectorSource

log = logging.getLogger("kith.memory.store")


class RevisionConflict(Exception):
    """A compare-and-swap write lost: the memory changed since the writer read it."""

    def __init__(self, memory_id: str, expected: int, actual: int) -> None:
        super().__init__(f"memory {memory_id} is at revision {actual}, writer expected {expected}")
        self.memory_id = memory_id
        self.expected = expected
        self.actual = actual


class MemoryNotFound(KeyError):
    pass


# What an edit does to a memory: the record to store, or None to leave the memory as it is. It may be a coroutine
# function (a writer that records its intent before the write).
Change = Callable[[MemoryRecord], MemoryRecord | Awaitable[MemoryRecord | None] | None]


def oldest_first(records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
    return sorted(records, key=lambda r: (r.created_at, r.id))


class MemoryStore:
    """kith's memory as stored: read it, search it, and write it (memories by compare-and-swap)."""

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
        self._cas = KeyedLocks()
        self._memory_total = 0  # records in the memories collection, kept in step by this store
        # Collections records were deleted from since the last forget's scrub: their vector indexes are saved.
        self._deleted_from: set[Collection] = set()

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
    ) -> MemoryStore:
        """Open the store; with ``changes`` (the log every kith process on this database shares) lookups
        are answered from memory after catching up with other processes' writes."""
        chroma = await ChromaCollections.connect(settings, data_dir, namespace=namespace)
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

    @property
    def answers_from_memory(self) -> bool:
        """Whether lookups and pinned facts come from memory kept current by a change log (no Chroma call)."""
        return self.changes is not None

    @property
    def embedder(self) -> Embedder | None:
        return self.vector_source.embedder

    @property
    def status(self) -> EmbedderStatus:
        """The embedder's state now (unavailable for this start if re-embedding failed at open)."""
        return self.vector_source.status

    @property
    def embedder_ready(self) -> bool:
        return self.vector_source.ready

    @property
    def embed_failures(self) -> int:
        return self.vector_source.failures

    @property
    def client(self) -> Any:
        """The Chroma client (its ``heartbeat`` says whether Chroma answers)."""
        return self.chroma.client

    async def vectors(self, texts: Sequence[str], kind: Collection = Collection.MEMORIES) -> Vectors:
        """Embedder vectors for ``texts``; on any embedder failure, hashed ones (never a failed write)."""
        return await self.vector_source.vectors(texts, self.chroma.hash_dim(kind))

    async def warm(self) -> int:
        """Build every person's in-memory index in one pass (run it in the background at start-up)."""
        return await self.indexes.warm()

    async def count(self, kind: Collection) -> int:
        return await self.chroma.count(kind)

    # --- reading by id and by person ----------------------------------------------------
    async def _get(self, kind: Collection, ids: Sequence[str]) -> list[dict[str, MetadataValue]]:
        return await self.chroma.run(self.chroma.get_sync, kind, ids)

    async def _scan(self, kind: Collection, condition: dict[str, Any]) -> list[dict[str, MetadataValue]]:
        return await self.chroma.run(self.chroma.scan_sync, kind, condition)

    async def get_memories(self, ids: Sequence[str]) -> list[MemoryRecord]:
        return [from_metadata(md) for md in await self._get(Collection.MEMORIES, ids)]

    async def get_memory(self, memory_id: str) -> MemoryRecord | None:
        found = await self.get_memories([memory_id])
        return found[0] if found else None

    async def get_notes(self, ids: Sequence[str]) -> list[Note]:
        return [note_from_metadata(md) for md in await self._get(Collection.NOTES, ids)]

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
                self.forget_cached(person, memory_id)
                continue
            out.append(from_metadata(md))
        return out

    def forget_cached(self, person: str, memory_id: str) -> None:
        """Drop a memory from the in-memory index (it was found gone or changed)."""
        self.indexes.forget(person, memory_id)

    # --- writing ------------------------------------------------------------------------
    def _memories(self) -> Any:
        return self.chroma.collection(Collection.MEMORIES)

    def _notes(self) -> Any:
        return self.chroma.collection(Collection.NOTES)

    async def add_memory(self, record: MemoryRecord, vectors: Vectors | None = None) -> MemoryRecord:
        """Store a new memory (a fresh id) with its vector."""
        vectors = vectors or await self.vectors([record.text])
        md = to_metadata(record) | {VECTOR_KEY: vectors.space}
        await self.chroma.run(self._memories().add, ids=[record.id], embeddings=vectors.values[:1], metadatas=[md])
        self._memory_total += 1
        self.indexes.touched(record, vectors.space, vector=vectors.values[0])
        await self.catch_up.log([(record.person, record.id)])
        return record

    async def add_memories(self, records: Sequence[MemoryRecord], vectors: Vectors | None = None) -> None:
        """Store many new memories in one round trip (imports, benchmarks)."""
        if not records:
            return
        vectors = vectors or await self.vectors([r.text for r in records])
        metadatas = [to_metadata(r) | {VECTOR_KEY: vectors.space} for r in records]
        await self.chroma.run(
            self._memories().add, ids=[r.id for r in records], embeddings=vectors.values, metadatas=metadatas
        )
        self._memory_total += len(records)
        for record, value in zip(records, vectors.values, strict=True):
            self.indexes.touched(record, vectors.space, vector=value)
        await self.catch_up.log((r.person, r.id) for r in records)

    async def add_notes(self, notes: Sequence[Note], vectors: Vectors | None = None) -> list[str]:
        """Stage notes whose id is not stored yet; returns the ids actually added."""
        if not notes:
            return []
        vectors = vectors or await self.vectors([n.record.text for n in notes], Collection.NOTES)
        metadatas = [note_metadata(n) | {VECTOR_KEY: vectors.space} for n in notes]
        added: list[str] = await self.chroma.run(
            self.chroma.add_absent_sync, Collection.NOTES, [n.record.id for n in notes], vectors.values, metadatas
        )
        fresh = set(added)
        await self.catch_up.log_notes((n.record.person, n.record.id) for n in notes if n.record.id in fresh)
        return added

    async def mark_promoted(self, note_id: str, memory_id: str | None, now: datetime) -> bool:
        """Record that promotion handled the note (``memory_id`` None: a tombstone blocked it)."""
        return await self.mark_promoted_many([(note_id, memory_id)], now) == 1

    async def mark_promoted_many(self, handled: Sequence[tuple[str, str | None]], now: datetime) -> int:
        if not handled:
            return 0
        target = dict(handled)
        notes = await self.get_notes(list(target))
        if notes:
            marked = [replace(n, promoted_to=target[n.record.id], promoted_at=now) for n in notes]
            await self.chroma.run(
                self._notes().update, ids=[n.record.id for n in marked], metadatas=[note_metadata(n) for n in marked]
            )
            await self.catch_up.log_notes((n.record.person, n.record.id) for n in marked)
        return len(notes)

    async def replace_memory(self, record: MemoryRecord) -> MemoryRecord:
        """Compare-and-swap: store ``record`` if the memory is still at ``record.revision``.

        Returns the stored record (revision bumped). Raises RevisionConflict for a stale writer
        and MemoryNotFound when the memory is gone.
        """
        async with self._cas.hold([record.id]):
            rows = await self._get(Collection.MEMORIES, [record.id])
            if not rows:
                raise MemoryNotFound(record.id)
            current = from_metadata(rows[0])
            if current.revision != record.revision:
                raise RevisionConflict(record.id, record.revision, current.revision)
            if current.person != record.person:
                raise RevisionConflict(record.id, record.revision, current.revision)
            stored = replace(record, revision=current.revision + 1)
            md = to_metadata(stored)
            kwargs: dict[str, Any] = {}
            vector: Vector | None = None
            if stored.text != current.text:
                vectors = await self.vectors([stored.text])
                kwargs["embeddings"] = vectors.values
                md[VECTOR_KEY] = vectors.space
                vector = vectors.values[0]
            else:
                md[VECTOR_KEY] = space_of(rows[0])
            await self.chroma.run(self._memories().update, ids=[record.id], metadatas=[md], **kwargs)
            self.indexes.touched(stored, str(md[VECTOR_KEY]), vector=vector)
        await self.catch_up.log([(stored.person, stored.id)])
        return stored

    async def edit(self, memory_id: str, change: Change, *,
                   attempts: int = MEMORY_EDIT_ATTEMPTS) -> MemoryRecord | None:
        """Read a memory, ``change`` it and write it back with compare-and-swap; when another writer wrote it in
        between, read it again and change that, ``attempts`` times at most.

        ``change`` runs on every attempt, on the record as stored then. Returns the record as stored (as read, when
        ``change`` returned it unchanged), or None when the memory is gone (before or during the write) or
        ``change`` returned None. Raises :class:`RevisionConflict` when every attempt lost its race.
        """
        lost: RevisionConflict | None = None
        for _attempt in range(attempts):
            current = await self.get_memory(memory_id)
            if current is None:
                return None
            updated = change(current)
            if inspect.isawaitable(updated):
                updated = await updated
            if updated is None:
                return None
            if updated == current:
                return current
            try:
                return await self.replace_memory(updated)
            except MemoryNotFound:
                return None
            except RevisionConflict as exc:
                lost = exc
        assert lost is not None, "attempts must be at least 1"
        raise lost

    async def _drop_from_rebuild(self, kind: Collection, ids: Sequence[str]) -> None:
        """Take ``ids`` out of a migration's unfinished copy of ``kind`` too: the copy is kept on disk until a
        start with the new embedder resumes it, which may never come. The migration copies again whatever
        it then lacks."""
        if not ids:
            return
        copy = await self.chroma.run(self.chroma.rebuild_copy_sync, kind)
        if copy is not None:
            await self.chroma.run(delete_blanked_sync, copy, list(ids))

    async def delete_memories(self, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        async with self._cas.hold(ids):
            rows = await self._get(Collection.MEMORIES, ids)
            # Their vectors, a trace of their text, must not outlive them in Chroma's index file.
            await self.chroma.run(delete_blanked_sync, self._memories(), list(ids))
            self._deleted_from.add(Collection.MEMORIES)
            await self._drop_from_rebuild(Collection.MEMORIES, ids)
        self._memory_total -= len(rows)
        for md in rows:
            self.indexes.touched(None, person=str(md["person"]), dropped=str(md["id"]))
        await self.catch_up.log((str(md["person"]), str(md["id"])) for md in rows)
        return len(rows)

    async def delete_notes(self, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        rows = await self._get(Collection.NOTES, ids)
        await self.chroma.run(delete_blanked_sync, self._notes(), list(ids))
        self._deleted_from.add(Collection.NOTES)
        await self._drop_from_rebuild(Collection.NOTES, ids)
        await self.catch_up.log_notes((str(md["person"]), str(md["id"])) for md in rows)
        return len(rows)

    async def replace_notes(self, notes: Sequence[Note]) -> int:
        """Store ``notes`` over the staged notes of their ids (a forget rewriting their receipts); their
        vectors stay. Returns how many were still there to rewrite."""
        if not notes:
            return 0
        present = {str(md["id"]) for md in await self._get(Collection.NOTES, [n.record.id for n in notes])}
        kept = [n for n in notes if n.record.id in present]
        if kept:
            await self.chroma.run(
                self._notes().update, ids=[n.record.id for n in kept], metadatas=[note_metadata(n) for n in kept]
            )
            await self.catch_up.log_notes((n.record.person, n.record.id) for n in kept)
        return len(kept)

    @property
    def sqlite_path(self) -> Path | None:
        """Embedded Chroma's own SQLite file (None for a server)."""
        return self.chroma.sqlite_path

    async def scrub_log(self, ids: Sequence[str], *, kept: Sequence[str] = ()) -> int:
        """After deleting ``ids`` (and rewriting ``kept``), take their old words out of embedded Chroma's file
        (:mod:`memory.store.chroma_scrub`). Returns the queue entries blanked; a server's storage is its own (0)."""
        gone = set(ids)
        kept = [i for i in dict.fromkeys(kept) if i not in gone]
        path = self.sqlite_path
        if path is None or not (ids or kept) or not path.exists():
            return 0
        for kind in Collection:
            await self._drop_from_rebuild(kind, kept)  # their copies there hold the old words
        if ids and index_saved(path.parent):
            # The deleted records' vectors were blanked, but the index file on disk is the last one Chroma
            # saved: have the index of each collection they left saved now, so theirs are gone from it too.
            for kind in [k for k in Collection if k in self._deleted_from]:
                await self._save_vector_index(kind)
        self._deleted_from.clear()
        return await self.chroma.run(scrub_queue_sync, path, list(dict.fromkeys(ids)), kept)

    async def _save_vector_index(self, kind: Collection) -> None:
        """Have Chroma save the vector index of ``kind``, and of a migration's unfinished copy of it."""
        copy = await self.chroma.run(self.chroma.rebuild_copy_sync, kind)
        for col in (self.chroma.collection(kind), *([copy] if copy is not None else [])):
            writes = index_save_writes(col)
            ids = (await self.chroma.run(record_ids_sync, col, None))[:writes]
            started = time.perf_counter()
            done = 0
            # Rewriting a memory's vector with what was just read must not undo a write made in between (the
            # copy is written only by a migration, which runs before the store serves).
            async with self._cas.hold(ids if col is self._memories() else []):
                for blank, batch in index_save_batches(ids, writes):
                    done += await self.chroma.run(save_batch_sync, col, blank, batch)
            log.info("vector index saved collection=%s writes=%d ms=%.0f", col.name, done,
                     (time.perf_counter() - started) * 1000)

    async def reassign(self, old: str, new: str, now: datetime | None = None) -> tuple[int, int]:
        """Move every note and memory of person ``old`` to ``new``; returns (notes, memories) moved."""
        now = now or datetime.now(UTC)
        moved_notes = 0
        while True:
            page = await self.chroma.run(
                self._notes().get, where={"person": old}, include=["metadatas"], limit=STORE_PAGE
            )
            if not page["ids"]:
                break
            metadatas = [dict(md) | {"person": new} for md in page["metadatas"]]
            await self.chroma.run(self._notes().update, ids=page["ids"], metadatas=metadatas)
            await self.catch_up.log_notes([(person, str(i)) for i in page["ids"] for person in (old, new)])
            moved_notes += len(page["ids"])
        moved_memories = 0
        while True:
            page = await self.chroma.run(self._memories().get, where={"person": old}, include=[], limit=STORE_PAGE)
            if not page["ids"]:
                break
            ids = list(page["ids"])
            async with self._cas.hold(ids):
                rows = await self.chroma.run(self.chroma.records_sync, ids)
                # The person change is a write like any other: stale writers must see a new revision.
                moved: list[tuple[MemoryRecord, str, npt.NDArray[np.float32]]] = []
                for md, vector in rows:
                    record = replace(
                        from_metadata(md), person=new, revision=int(md["revision"]) + 1, updated_at=now
                    )
                    moved.append((record, space_of(md), vector))
                if moved:
                    await self.chroma.run(
                        self._memories().update,
                        ids=[record.id for record, _space, _vector in moved],
                        metadatas=[to_metadata(record) | {VECTOR_KEY: space} for record, space, _vector in moved],
                    )
                # Records, BM25 and vectors go from one person's index to the other's.
                for record, space, vector in moved:
                    self.indexes.touched(None, person=old, dropped=record.id)
                    self.indexes.touched(record, space, vector=vector)
            await self.catch_up.log(pair for record, _s, _v in moved for pair in ((old, record.id), (new, record.id)))
            moved_memories += len(rows)
        log.info("memory reassigned notes=%d memories=%d", moved_notes, moved_memories)
        return moved_notes, moved_memories

