"""Each person's active memories held in memory, kept in step with every write.

A person's :class:`PersonIndex` holds their active records, a summary of each (what the gate
compares), a BM25 index (:mod:`memory.core.bm25`), the document frequency of every content word and,
from their first vector search on, their vectors as one float32 matrix (:mod:`memory.core.vector_table`).
:class:`PersonIndexes` builds a person's index from Chroma the first time it is needed (or all of
them at once with :meth:`PersonIndexes.warm`), and every write, merge, forget and move goes
through one code path, :meth:`PersonIndexes.touched`, so the index never trails what this process
wrote. Chroma stays the durable store: every write reaches it first. Writes of other processes
reach the indexes through the change log (:mod:`memory.store.catch_up`).

The person's unpromoted staged notes are kept the same way: read once, dropped on any write to
their notes.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import numpy.typing as npt

from ground.keyed_locks import KeyedLocks
from ground.tunables import LEXICAL_MAX_DF_FRACTION, LEXICAL_PRUNE_MIN_MEMORIES
from memory.core.bm25 import BM25Index
from memory.core.records import MemoryKind, MemoryRecord, Scope, Status, from_metadata
from memory.core.text import content_words
from memory.core.timeline import ChatTimelines
from memory.core.vector_table import VectorTable
from memory.store.chroma import ChromaCollections, Collection, space_of, where
from memory.store.notes import Note, note_from_metadata, oldest_first, read_notes
from memory.store.vectors import HASH_SPACE

log = logging.getLogger("kith.memory.person_index")


@dataclass(frozen=True, slots=True)
class MemorySummary:
    """What the gate compares: enough of an active memory to decide, kept in memory per person."""

    id: str
    person: str
    text: str
    kind: MemoryKind
    pinned: bool
    expires_at: datetime | None
    space: str  # the space its stored vector came from

    def is_live(self, now: datetime) -> bool:
        return self.pinned or self.expires_at is None or self.expires_at > now


@dataclass(frozen=True, slots=True)
class IndexHit:
    """An active memory a search of the person's index found, by its vector or by its words."""

    summary: MemorySummary
    cosine: float | None  # from the nearest-neighbour search, when it found this one
    trusted: bool  # that cosine compares two embedder vectors


@dataclass
class PersonIndex:
    """One person's active memories, in memory: records, summaries, BM25, document frequencies and,
    once a vector search needed them, their vectors."""

    bm25: BM25Index = field(default_factory=BM25Index)
    summaries: dict[str, MemorySummary] = field(default_factory=dict)
    df: Counter[str] = field(default_factory=Counter)  # content word -> memories holding it
    records: dict[str, MemoryRecord] = field(default_factory=dict)
    scoped: dict[Scope, set[str]] = field(default_factory=lambda: {scope: set() for scope in Scope})
    pinned: set[str] = field(default_factory=set)
    timelines: ChatTimelines = field(default_factory=ChatTimelines)  # by chat, in said-at order
    vectors: VectorTable | None = None  # None until loaded, or after a write it could not follow
    # (scope, space of the stored vector) -> how many memories: whether a vector search can find anything, in O(1)
    spaces: Counter[tuple[Scope, str]] = field(default_factory=Counter)

    def put(self, record: MemoryRecord, space: str, vector: npt.ArrayLike | None = None) -> None:
        """Index ``record`` (drop it unless active); ``vector`` None: its stored vector did not change."""
        if record.status is not Status.ACTIVE:
            self.drop(record.id)
            return
        self._drop_text(record.id)
        self.records[record.id] = record
        self.summaries[record.id] = MemorySummary(
            record.id, record.person, record.text, record.kind, record.pinned, record.expires_at, space
        )
        self.scoped[record.scope].add(record.id)
        self.spaces[(record.scope, space)] += 1
        if record.pinned:
            self.pinned.add(record.id)
        self.df.update(set(content_words(record.text)))
        self.bm25.add(record.id, record.text)
        self.timelines.put(record)
        if self.vectors is None:
            return
        if vector is not None:
            if not self.vectors.put(record.id, vector, record.scope):
                self.vectors = None  # another size than the table's: load them afresh when next needed
        elif record.id in self.vectors:
            self.vectors.set_scope(record.id, record.scope)
        else:
            self.vectors = None  # a vector this view never saw: load them afresh when next needed

    def drop(self, memory_id: str) -> None:
        self._drop_text(memory_id)
        if self.vectors is not None:
            self.vectors.drop(memory_id)

    def _drop_text(self, memory_id: str) -> None:
        summary = self.summaries.pop(memory_id, None)
        if summary is None:
            return
        record = self.records.pop(memory_id)
        self.scoped[record.scope].discard(memory_id)
        self.spaces[(record.scope, summary.space)] -= 1
        if not self.spaces[(record.scope, summary.space)]:
            del self.spaces[(record.scope, summary.space)]
        self.pinned.discard(memory_id)
        self.df.subtract(set(content_words(summary.text)))
        self.bm25.remove(memory_id)
        self.timelines.drop(memory_id)

    def embedded(self, space: str, scope: Scope | None = None) -> bool:
        """Whether any of these memories (only of ``scope`` when given) has a stored vector of ``space``."""
        if scope is not None:
            return self.spaces.get((scope, space), 0) > 0
        return any(self.spaces.get((s, space), 0) > 0 for s in Scope)

    def allowed(self, scope: Scope | None) -> set[str] | None:
        """The ids BM25 may rank for ``scope`` (None: all)."""
        return self.scoped[scope] if scope is not None else None

    def distinctive(self, query: str, max_words: int | None = None) -> str:
        """The query's words that can tell memories apart (at most ``max_words``, rarest first).

        A word most of the person's memories hold (often their own name) barely moves BM25 yet
        costs a pass over all of them; it is left out unless nothing rarer is left.
        """
        words = list(dict.fromkeys(content_words(query)))
        if not words or len(self.summaries) < LEXICAL_PRUNE_MIN_MEMORIES:
            return query  # few memories: every word is cheap, keep them all
        limit = max(1.0, LEXICAL_MAX_DF_FRACTION * len(self.summaries))
        kept = [w for w in words if self.df.get(w, 0) <= limit] or [
            min(words, key=lambda w: self.df.get(w, 0))
        ]
        if max_words is not None and len(kept) > max_words:
            # Rarest first, but a word no memory holds finds nothing: those go last.
            kept = sorted(kept, key=lambda w: (self.df.get(w, 0) == 0, self.df.get(w, 0)))[:max_words]
        return " ".join(kept)

    def lexical(self, query: str, k: int, scope: Scope | None = None,
                max_words: int | None = None) -> list[tuple[str, float]]:
        """BM25 over these memories (only of ``scope`` when given): (id, score), best first."""
        return self.bm25.search(self.distinctive(query, max_words), k, self.allowed(scope))


class PersonIndexes:
    """Every person's index and unpromoted notes, built lazily from Chroma and kept in step with writes."""

    def __init__(self, chroma: ChromaCollections) -> None:
        self.chroma = chroma
        self._locks = KeyedLocks()
        self._indexes: dict[str, PersonIndex] = {}
        self._writes: dict[str, int] = {}  # person -> write counter, so a lazy index build sees races
        self._epoch = 0  # bumped when every index is dropped at once: builds under way start over
        # person -> their unpromoted notes, read once and dropped on any write to their notes
        self._staged: dict[str, list[Note]] = {}
        self._note_writes: dict[str, int] = {}  # person -> note write counter, so a lazy read sees races
        # After a complete warm-up (``warm``) a person with no index has no active memories and one
        # with no staged list no unpromoted notes, unless written to since (these sets): no read needed.
        self._warm_epoch: int | None = None
        self._unknown: set[str] = set()
        self._notes_unknown: set[str] = set()

    def holds(self, person: str) -> bool:
        """Whether the person's index is built (a change to their memories must reach it)."""
        return person in self._indexes

    def built(self, person: str) -> PersonIndex | None:
        """The person's index if it is built (no read, no wait)."""
        return self._indexes.get(person)

    def vectors_held(self, person: str, space: str, scope: Scope | None = None) -> bool | None:
        """Whether ``person`` has something a query vector of ``space`` could find (only of ``scope`` when given):
        an active memory stored with a vector of that space, or any unpromoted staged note (recall reads or embeds
        a note's vector itself). ``None`` when that is not known without a read (their index or notes were not
        read yet, and no complete warm-up says they have none). O(1) for memories; notes are a day's few."""
        warm = self._warm_epoch == self._epoch
        index = self._indexes.get(person)
        if index is not None:
            if index.embedded(space, scope):
                return True
        elif not warm or person in self._unknown:
            return None
        staged = self._staged.get(person)
        if staged is None:
            return None if not warm or person in self._notes_unknown else False
        return any(scope is None or n.record.scope is scope for n in staged)

    async def of(self, person: str) -> PersonIndex:
        """The person's index, read from Chroma the first time."""
        index = self._indexes.get(person)
        if index is not None:
            return index
        async with self._locks.hold([person]):
            if person not in self._indexes and self._warm_epoch == self._epoch and person not in self._unknown:
                self._indexes[person] = PersonIndex()  # warmed up complete: no memory of theirs was written since
            while person not in self._indexes:
                seen = (self._epoch, self._writes.get(person, 0))
                rows = await self.chroma.run(
                    self.chroma.scan_sync, Collection.MEMORIES, where(person=person, status=Status.ACTIVE.value)
                )
                if (self._epoch, self._writes.get(person, 0)) != seen:
                    continue  # a write landed while reading: read again so the index misses nothing
                built = PersonIndex()
                for md in rows:
                    built.put(from_metadata(md), space_of(md))
                self._indexes[person] = built
        return self._indexes[person]

    async def vectors_of(self, person: str, index: PersonIndex) -> VectorTable:
        """The person's vectors as one float32 matrix, loaded from Chroma on first use."""
        if index.vectors is None:
            async with self._locks.hold([f"vectors\x00{person}"]):
                if index.vectors is None:
                    started = time.perf_counter()
                    ids, values = await self.chroma.run(self.chroma.person_vectors_sync, person)
                    # Installed before anything else runs: a write queued behind this read on the
                    # Chroma thread resumes after this, and ``touched`` then puts its vector here.
                    keep = [row for row, memory_id in enumerate(ids) if memory_id in index.records]
                    index.vectors = VectorTable.build(
                        values.shape[1],
                        [ids[row] for row in keep],
                        values[keep],
                        [index.records[ids[row]].scope for row in keep],
                    )
                    log.info(
                        "memory vectors loaded person=%s vectors=%d ms=%.0f",
                        person,
                        len(keep),
                        (time.perf_counter() - started) * 1000,
                    )
        assert index.vectors is not None
        return index.vectors

    async def staged_notes(self, person: str) -> list[Note]:
        """The person's unpromoted notes, oldest first, read from Chroma the first time."""
        staged = self._staged.get(person)
        if staged is None and self._warm_epoch == self._epoch and person not in self._notes_unknown:
            staged = self._staged[person] = []  # warmed up complete: nobody staged a note for them since
        if staged is None:
            before = (self._epoch, self._note_writes.get(person, 0))
            staged = await read_notes(self.chroma, person, unpromoted_only=True)
            if (self._epoch, self._note_writes.get(person, 0)) == before:  # no write raced the read
                self._staged[person] = staged
                self._notes_unknown.discard(person)
        return list(staged)

    async def warm(self) -> int:
        """Build every person's index in one pass (run it in the background at start-up).

        Returns how many people were indexed. A person written to meanwhile is left to the lazy build.
        Vectors are not loaded here: each person's are, on their first vector search.
        """
        epoch = self._epoch
        seen = dict(self._writes)
        seen_notes = dict(self._note_writes)
        rows = await self.chroma.run(self.chroma.scan_sync, Collection.MEMORIES, {"status": Status.ACTIVE.value})
        note_rows = await self.chroma.run(self.chroma.scan_sync, Collection.NOTES, {"note_promoted": False})
        if self._epoch != epoch:
            return 0
        built: dict[str, PersonIndex] = {}
        for md in rows:
            built.setdefault(str(md["person"]), PersonIndex()).put(from_metadata(md), space_of(md))
        installed = 0
        for person, index in built.items():
            if person not in self._indexes and self._writes.get(person, 0) == seen.get(person, 0):
                self._indexes[person] = index
                installed += 1
        staged: dict[str, list[Note]] = {}
        for md in note_rows:
            note = note_from_metadata(md)
            staged.setdefault(note.record.person, []).append(note)
        for person, notes in staged.items():
            if person not in self._staged and self._note_writes.get(person, 0) == seen_notes.get(person, 0):
                self._staged[person] = oldest_first(notes)
        # Whoever was written to while this read ran is in the unknown sets already (see touched).
        self._warm_epoch = epoch
        log.info("memory indexes warmed people=%d memories=%d", installed, len(rows))
        return installed

    def touched(
        self,
        record: MemoryRecord | None,
        space: str = HASH_SPACE,
        *,
        person: str | None = None,
        dropped: str | None = None,
        vector: npt.ArrayLike | None = None,
    ) -> None:
        """Keep the index in step with a write: ``record`` as now stored (its ``vector`` None: the stored
        one did not change), and/or the memory ``dropped`` from ``person``'s."""
        owner = record.person if record is not None else person
        if owner is None:
            return
        self._writes[owner] = self._writes.get(owner, 0) + 1
        index = self._indexes.get(owner)
        if index is None:
            self._unknown.add(owner)  # a later build reads Chroma for them, warmed up or not
            return
        if record is not None:
            index.put(record, space, vector)
        if dropped is not None:
            index.drop(dropped)

    def notes_touched(self, persons: Iterable[str]) -> None:
        """Notes of ``persons`` were written: their staged lists are read afresh when next needed."""
        for person in persons:
            self._note_writes[person] = self._note_writes.get(person, 0) + 1
            self._staged.pop(person, None)
            self._notes_unknown.add(person)

    def forget(self, person: str, memory_id: str) -> None:
        """Drop a memory from the person's index (it was found gone or changed)."""
        index = self._indexes.get(person)
        if index is not None:
            index.drop(memory_id)

    def drop_all(self) -> None:
        """Forget every index and staged list: they are built from Chroma afresh (builds under way restart)."""
        self._indexes.clear()
        self._staged.clear()
        self._epoch += 1
