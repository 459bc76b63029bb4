"""The write side of the memory store: memories and notes added, changed and deleted, and forgotten words taken
out of Chroma's own files.

Curated memory is written with compare-and-swap on ``revision``: under a per-id lock the store
re-reads the record and refuses a writer whose revision is stale with :class:`RevisionConflict`,
so two writers never silently overwrite each other. Every write to an existing memory (update,
delete, reassign) takes that lock. :meth:`MemoryWrites.edit` is the read-change-write every change to a
stored memory goes through: it reads again and changes again when it lost a race.

Every write reaches Chroma first, then the writer's person index (:mod:`memory.store.person_index`)
and the change log (:mod:`memory.store.catch_up`), which other processes' stores catch up with.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from ground.tunables import MEMORY_EDIT_ATTEMPTS, STORE_PAGE
from memory.core.records import MemoryRecord, from_metadata, to_metadata
from memory.encoders.embedders import Vector
from memory.store.chroma import VECTOR_KEY, Collection, space_of
from memory.store.chroma_scrub import (
    delete_blanked_sync,
    index_save_batches,
    index_save_writes,
    index_saved,
    save_batch_sync,
    scrub_queue_sync,
)
from memory.store.notes import Note, note_from_metadata, note_metadata
from memory.store.parts import StoreParts
from memory.store.reembed import record_ids_sync
from memory.store.vectors import Vectors

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



class MemoryWrites(StoreParts):
    """kith's memory written: notes staged, memories added, changed by compare-and-swap, and deleted."""

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
        notes = [note_from_metadata(md) for md in await self._get(Collection.NOTES, list(target))]
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
            rows = await self._get(Collection.MEMORIES, [memory_id])
            if not rows:
                return None
            current = from_metadata(rows[0])
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

    async def scrub_log(self, ids: Sequence[str], *, kept: Sequence[str] = ()) -> int:
        """After deleting ``ids`` (and rewriting ``kept``), take their old words out of embedded Chroma's file
        (:mod:`memory.store.chroma_scrub`). Returns the queue entries blanked; a server's storage is its own (0)."""
        gone = set(ids)
        kept = [i for i in dict.fromkeys(kept) if i not in gone]
        path = self.chroma.sqlite_path
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
        return await self.reassign_notes(old, new), await self.reassign_memories(old, new, now)

    async def reassign_notes(self, old: str, new: str) -> int:
        """Move every staged note of person ``old`` to ``new``; returns how many moved."""
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
        log.info("memory reassigned notes=%d", moved_notes)
        return moved_notes

    async def reassign_memories(self, old: str, new: str, now: datetime | None = None) -> int:
        """Move every memory of person ``old`` to ``new`` (a new revision each, ``now``); returns how many."""
        now = now or datetime.now(UTC)
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
        log.info("memory reassigned memories=%d", moved_memories)
        return moved_memories


__all__ = ["Change", "MemoryNotFound", "MemoryWrites", "RevisionConflict"]
