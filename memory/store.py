"""The memory store: two Chroma collections, ``notes`` (staged captures, seed 002's daily notes)
and ``memories`` (curated), one record per id, every field of :class:`~memory.records.MemoryRecord`
kept as metadata.

Chroma runs embedded (``PersistentClient`` under ``<data_dir>/chroma``) unless
``memory.chroma_url`` names a server (``HttpClient``); both go through the same code, telemetry
off. Chroma is synchronous, so every call runs on this store's own single thread and the
event loop never waits on it.

Vectors are always computed here and passed in (Chroma's own embedding function is never
invoked: it would fetch a model). When the embedder is off or failing, a record gets the
hashed bag-of-words vector instead and its ``vector`` metadata says ``hash``, so its cosine is
never mistaken for an embedder's (seed 001); the next start with a working embedder
re-embeds those records, and rebuilds a collection whose vector size changed.

Curated memory is written with compare-and-swap on ``revision``: under a per-id lock the
store re-reads the record and refuses a writer whose revision is stale with
:class:`RevisionConflict`, so two writers never silently overwrite each other (seed 002).
Every write to an existing memory (update, delete, reassign) takes that lock.

Each person also gets an in-memory view of their active memories, built lazily from the store
and kept in step with every write, merge, forget and move through one code path
(``_touched``): the records themselves, a BM25 index (:mod:`memory.bm25`) and, from the first
vector search on, their vectors as a float32 matrix (:mod:`memory.vector_table`). Chroma
stays the durable store: every write reaches it first.

Other processes (``bot.py memory forget``, ``bot.py people link``, the heartbeat) write to the
same Chroma. With a :class:`~memory.changes.ChangeLog` every store logs what it changed there,
and :meth:`MemoryStore.lookup` and :meth:`MemoryStore.candidates` first re-read whatever other
writers logged since, then answer from memory alone: vector top-k, BM25 and the records, no
Chroma call. So a memory forgotten elsewhere never reaches a prompt, and recall costs
milliseconds at 10,000 memories. Without a change log a store cannot know what others did:
those two ask Chroma for the nearest neighbours and re-read every hit by id, as
:meth:`MemoryStore.nearest` and :meth:`MemoryStore.lexical` always do.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import functools
import logging
import math
import secrets
import sqlite3
import struct
import time
import urllib.parse
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from ground.checks import CheckResult
from ground.config import MemorySettings, Settings
from ground.tunables import (
    CHANGE_CATCHUP_MAX,
    CHROMA_CHECK_TIMEOUT_S,
    FILTERED_QUERY_MAX,
    LEXICAL_MAX_DF_FRACTION,
    LEXICAL_PRUNE_MIN_MEMORIES,
    NEAREST_OVERSAMPLE,
    NEAREST_POOL_MAX,
    SQLITE_BUSY_TIMEOUT_MS,
    STORE_PAGE,
)
from memory.bm25 import BM25Index
from memory.changes import Change, ChangeLog
from memory.embedders import EMBED_TIMEOUT_S, HASH_DIM, Embedder, EmbedderStatus, Vector, hashed_vector
from memory.records import (
    Horizon,
    MemoryCandidate,
    MemoryKind,
    MemoryRecord,
    MetadataValue,
    Scope,
    Status,
    from_metadata,
    to_metadata,
)
from memory.text import content_words
from memory.vector_table import VectorTable

log = logging.getLogger("kith.memory.store")

T = TypeVar("T")

VECTOR_KEY = "vector"  # record metadata: the vector space its stored vector came from
HASH_SPACE = "hash"  # ... when it is the hashed fallback, not an embedder's
SPACE_KEY = "kith_vector_space"  # collection metadata: the space the collection was built for
DIM_KEY = "kith_dim"
NOTE_CHANGE_PREFIX = "note:"  # change-log entries about a staged note rather than a memory
REBUILD_SUFFIX = "-rebuild"
CHROMA_SQLITE = "chroma.sqlite3"  # embedded Chroma's own database, in its directory


class Collection(enum.StrEnum):
    NOTES = "notes"
    MEMORIES = "memories"


class RevisionConflict(Exception):
    """A compare-and-swap write lost: the memory changed since the writer read it."""

    def __init__(self, memory_id: str, expected: int, actual: int) -> None:
        super().__init__(f"memory {memory_id} is at revision {actual}, writer expected {expected}")
        self.memory_id = memory_id
        self.expected = expected
        self.actual = actual


class MemoryNotFound(KeyError):
    pass


@dataclass(frozen=True, slots=True)
class Note:
    """A staged capture: a record plus what only staging needs."""

    record: MemoryRecord
    horizon: Horizon | None = None
    corrects: str | None = None
    conversation: str = ""
    promoted_to: str | None = None  # the memory it became or merged into
    promoted_at: datetime | None = None  # set once promotion handled it, whatever the outcome

    def candidate(self) -> MemoryCandidate:
        r = self.record
        return MemoryCandidate(
            kind=r.kind,
            text=r.text,
            evidence=r.evidence,
            importance=r.importance,
            corrects=self.corrects,
            horizon=self.horizon,
            sources=r.sources,
            scope=r.scope,
            evidence_sentences=r.evidence_sentences,
        )


def note_metadata(note: Note) -> dict[str, MetadataValue]:
    md = to_metadata(note.record)
    md.update(
        {
            "note_horizon": note.horizon.value if note.horizon else "",
            "note_corrects": note.corrects or "",
            "note_conversation": note.conversation,
            "note_promoted": note.promoted_at is not None,
            "note_promoted_to": note.promoted_to or "",
            "note_promoted_at": note.promoted_at.isoformat() if note.promoted_at else "",
        }
    )
    return md


def note_from_metadata(md: Mapping[str, MetadataValue]) -> Note:
    promoted_at = str(md.get("note_promoted_at") or "")
    return Note(
        record=from_metadata(md),
        horizon=Horizon(str(md["note_horizon"])) if md.get("note_horizon") else None,
        corrects=str(md["note_corrects"]) if md.get("note_corrects") else None,
        conversation=str(md.get("note_conversation") or ""),
        promoted_to=str(md["note_promoted_to"]) if md.get("note_promoted_to") else None,
        promoted_at=datetime.fromisoformat(promoted_at) if promoted_at else None,
    )


@dataclass(frozen=True, slots=True)
class Vectors:
    values: list[Vector]
    space: str  # the embedder's name, or HASH_SPACE

    @property
    def from_embedder(self) -> bool:
        return self.space != HASH_SPACE


@dataclass(frozen=True, slots=True)
class VectorHit:
    record: MemoryRecord
    cosine: float
    trusted: bool  # both vectors came from the embedder: the cosine means something


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
class Candidate:
    summary: MemorySummary
    cosine: float | None  # from Chroma's nearest search, when it found this one
    trusted: bool  # that cosine compares two embedder vectors


@dataclass
class _PersonIndex:
    """One person's active memories, in memory: records, summaries, BM25, document frequencies and,
    once a vector search needed them, their vectors."""

    bm25: BM25Index = field(default_factory=BM25Index)
    summaries: dict[str, MemorySummary] = field(default_factory=dict)
    df: Counter[str] = field(default_factory=Counter)  # content word -> memories holding it
    records: dict[str, MemoryRecord] = field(default_factory=dict)
    scoped: dict[Scope, set[str]] = field(default_factory=lambda: {scope: set() for scope in Scope})
    pinned: set[str] = field(default_factory=set)
    vectors: VectorTable | None = None  # None until loaded, or after a write it could not follow

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
        if record.pinned:
            self.pinned.add(record.id)
        self.df.update(set(content_words(record.text)))
        self.bm25.add(record.id, record.text)
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
        self.pinned.discard(memory_id)
        self.df.subtract(set(content_words(summary.text)))
        self.bm25.remove(memory_id)

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


def _where(**conditions: Any) -> dict[str, Any]:
    """Chroma's where: one condition as is, several under $and (which needs two or more)."""
    parts = [{k: v} for k, v in conditions.items() if v is not None]
    return parts[0] if len(parts) == 1 else {"$and": parts}


def make_client(settings: MemorySettings, data_dir: Path) -> Any:
    """A Chroma client: a server when ``chroma_url`` is set, else embedded under ``data_dir/chroma``."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_url:
        url = urllib.parse.urlsplit(settings.chroma_url)
        ssl = url.scheme == "https"
        return chromadb.HttpClient(
            host=url.hostname or "localhost",
            port=url.port or (443 if ssl else 8000),
            ssl=ssl,
            settings=chroma_settings,
        )
    path = data_dir / "chroma"
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=chroma_settings)


class _KeyedLocks:
    """One asyncio lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, keys: Iterable[str]) -> AsyncIterator[None]:
        ordered = sorted(set(keys))  # one global order: no deadlock between multi-key holders
        registered: list[str] = []
        acquired: list[asyncio.Lock] = []
        try:
            for key in ordered:
                lock, users = self._locks.get(key, (asyncio.Lock(), 0))
                self._locks[key] = (lock, users + 1)
                registered.append(key)
                await lock.acquire()
                acquired.append(lock)
            yield
        finally:
            for lock in reversed(acquired):
                lock.release()
            for key in registered:
                lock, users = self._locks[key]
                if users <= 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)


class MemoryStore:
    def __init__(
        self,
        client: Any,
        embedder: Embedder | None,
        status: EmbedderStatus,
        *,
        namespace: str = "",
        executor: concurrent.futures.ThreadPoolExecutor | None = None,
        filtered_query_max: int = FILTERED_QUERY_MAX,
        changes: ChangeLog | None = None,
    ) -> None:
        self.client = client
        self.filtered_query_max = filtered_query_max
        self.embedder = embedder
        self.status = status
        self.namespace = namespace
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="kith-chroma"
        )
        self._cols: dict[Collection, Any] = {}
        self._hash_dims: dict[Collection, int] = {}
        self._cas = _KeyedLocks()
        self._index_locks = _KeyedLocks()
        self._indexes: dict[str, _PersonIndex] = {}
        self._writes: dict[str, int] = {}  # person -> write counter, so a lazy index build sees races
        self._epoch = 0  # bumped when every index is dropped at once: builds under way start over
        self._memory_total = 0  # records in the memories collection, kept in step by this store
        self.embed_failures = 0
        self.changes = changes
        self._writer = secrets.token_hex(8)  # this store's entries in the change log
        self._cursor = 0  # the change log read so far (set to its head by ``open``)
        self._applied: set[int] = set()  # other writers' entries applied within the log's overlap
        self._catchup_lock = asyncio.Lock()
        self._caught_up_at: Hashable | None = None  # the change log's version at the last catch-up
        # person -> their unpromoted notes, read once and dropped on any write to their notes
        self._staged: dict[str, list[Note]] = {}
        self._note_writes: dict[str, int] = {}  # person -> note write counter, so a lazy read sees races
        # After a complete warm-up (``warm``) a person with no index has no active memories and one
        # with no staged list no unpromoted notes, unless written to since (these sets): no read needed.
        self._warm_epoch: int | None = None
        self._unknown: set[str] = set()
        self._notes_unknown: set[str] = set()
        # Embedded Chroma's own SQLite file (None for a server): a forget scrubs its queue there.
        self.sqlite_path: Path | None = None

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
        executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kith-chroma")
        loop = asyncio.get_running_loop()
        try:
            client = await loop.run_in_executor(executor, make_client, settings, data_dir)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        store = cls(
            client,
            embedder,
            status,
            namespace=namespace,
            executor=executor,
            filtered_query_max=filtered_query_max,
            changes=changes,
        )
        if not settings.chroma_url:
            store.sqlite_path = data_dir / "chroma" / CHROMA_SQLITE
        try:
            if changes is not None:
                # Before any index is built: whatever was logged until now is in what builds will read.
                store._cursor = await changes.prepare()
            await store._prepare()
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return store

    @property
    def answers_from_memory(self) -> bool:
        """Whether lookups and pinned facts come from memory kept current by a change log (no Chroma call)."""
        return self.changes is not None

    @property
    def embedder_ready(self) -> bool:
        return self.embedder is not None and self.status.ready

    def _name(self, kind: Collection) -> str:
        return f"{self.namespace}{kind.value}"

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def _open_collection(self, name: str, space: str, dim: int) -> Any:
        names = {c.name if hasattr(c, "name") else str(c) for c in self.client.list_collections()}
        rebuild = name + REBUILD_SUFFIX
        if rebuild in names:
            if name in names:  # a rebuild that never finished: the original is intact, start over
                self.client.delete_collection(rebuild)
            else:  # the original was dropped, the rebuild is complete: finish the swap
                self.client.get_collection(rebuild, embedding_function=None).modify(name=name)
        return self.client.get_or_create_collection(
            name, embedding_function=None, metadata={"hnsw:space": "cosine", SPACE_KEY: space, DIM_KEY: dim}
        )

    async def _prepare(self) -> None:
        for kind in Collection:
            space = self.embedder.name if self.embedder_ready and self.embedder else HASH_SPACE
            dim = self.status.dim if self.embedder_ready and self.status.dim else HASH_DIM
            col = await self._run(self._open_collection, self._name(kind), space, dim)
            meta = dict(col.metadata or {})
            stored_dim = int(meta.get(DIM_KEY) or dim)
            if self.embedder_ready:
                try:
                    if stored_dim != dim:
                        col = await self._rebuild(kind, col, space, dim)
                    elif meta.get(SPACE_KEY) != space:
                        await self._reembed(col, None)
                        await self._run(col.modify, metadata={SPACE_KEY: space, DIM_KEY: dim})
                    else:
                        await self._reembed(col, HASH_SPACE)
                except Exception as exc:
                    # The stored records are intact; this start stays lexical and the next one retries.
                    log.warning(
                        "re-embedding failed collection=%s error=%s; lexical until next start",
                        kind.value,
                        type(exc).__name__,
                    )
                    self._degrade(f"re-embedding stored memories failed ({type(exc).__name__})")
                    col = await self._run(self._open_collection, self._name(kind), HASH_SPACE, HASH_DIM)
                    stored_dim = int(dict(col.metadata or {}).get(DIM_KEY) or HASH_DIM)
            self._cols[kind] = col
            self._hash_dims[kind] = dim if self.embedder_ready else stored_dim
        self._memory_total = await self._run(self._cols[Collection.MEMORIES].count)

    def _degrade(self, reason: str) -> None:
        self.status = EmbedderStatus(self.status.configured, ready=False, reason=reason)
        self.embedder = None

    def _ids_sync(self, col: Any, where: dict[str, Any] | None) -> list[str]:
        return list(col.get(where=where, include=[])["ids"])

    def _metadata_sync(self, col: Any, ids: list[str]) -> list[dict[str, MetadataValue]]:
        page = col.get(ids=ids, include=["metadatas"])
        return [dict(md) for md in page["metadatas"]]

    async def _reembed(self, col: Any, only_space: str | None) -> int:
        """Give records (all, or those whose vector is from ``only_space``) fresh embedder vectors."""
        assert self.embedder is not None
        ids = await self._run(self._ids_sync, col, {VECTOR_KEY: only_space} if only_space else None)
        for start in range(0, len(ids), STORE_PAGE):
            chunk = ids[start : start + STORE_PAGE]
            metadatas = await self._run(self._metadata_sync, col, chunk)
            values = await self.embedder.embed([str(md["text"]) for md in metadatas])
            for md in metadatas:
                md[VECTOR_KEY] = self.embedder.name
            await self._run(
                col.update, ids=[str(md["id"]) for md in metadatas], embeddings=values, metadatas=metadatas
            )
        if ids:
            log.info("re-embedded collection=%s records=%d", col.name, len(ids))
        return len(ids)

    async def _rebuild(self, kind: Collection, col: Any, space: str, dim: int) -> Any:
        """The vector size changed: copy every record into a new collection with new vectors, then swap."""
        assert self.embedder is not None
        name = self._name(kind)
        tmp = await self._run(
            self.client.create_collection,
            name + REBUILD_SUFFIX,
            embedding_function=None,
            metadata={"hnsw:space": "cosine", SPACE_KEY: space, DIM_KEY: dim},
        )
        ids = await self._run(self._ids_sync, col, None)
        try:
            for start in range(0, len(ids), STORE_PAGE):
                metadatas = await self._run(self._metadata_sync, col, ids[start : start + STORE_PAGE])
                values = await self.embedder.embed([str(md["text"]) for md in metadatas])
                for md in metadatas:
                    md[VECTOR_KEY] = space
                await self._run(
                    tmp.add, ids=[str(md["id"]) for md in metadatas], embeddings=values, metadatas=metadatas
                )
        except BaseException:
            await self._run(self.client.delete_collection, name + REBUILD_SUFFIX)
            raise
        await self._run(self.client.delete_collection, name)
        await self._run(tmp.modify, name=name)
        log.info("rebuilt collection=%s records=%d dim=%d", kind.value, len(ids), dim)
        return await self._run(self.client.get_collection, name, embedding_function=None)

    async def close(self) -> None:
        if self.embedder is not None:
            await self.embedder.close()
        self._executor.shutdown(wait=True)

    # --- vectors ------------------------------------------------------------------------
    async def vectors(self, texts: Sequence[str], kind: Collection = Collection.MEMORIES) -> Vectors:
        """Embedder vectors for ``texts``; on any embedder failure, hashed ones (never a failed write)."""
        if self.embedder is not None and self.status.ready:
            started = time.perf_counter()
            try:
                values = await asyncio.wait_for(self.embedder.embed(list(texts)), EMBED_TIMEOUT_S)
                return Vectors(values, self.embedder.name)
            except Exception as exc:
                self.embed_failures += 1
                log.warning(
                    "embedding failed, using lexical vectors name=%s error=%s ms=%.0f",
                    self.embedder.name,
                    type(exc).__name__,
                    (time.perf_counter() - started) * 1000,
                )
        dim = self._hash_dims.get(kind, HASH_DIM)
        return Vectors([hashed_vector(t, dim) for t in texts], HASH_SPACE)

    # --- reading ------------------------------------------------------------------------
    def _get_sync(self, kind: Collection, ids: Sequence[str]) -> list[dict[str, MetadataValue]]:
        if not ids:
            return []
        page = self._cols[kind].get(ids=list(dict.fromkeys(ids)), include=["metadatas"])
        by_id = {i: dict(md) for i, md in zip(page["ids"], page["metadatas"], strict=True)}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]

    def _scan_sync(self, kind: Collection, where: dict[str, Any]) -> list[dict[str, MetadataValue]]:
        # Ids first (cheap), then metadata by id: Chroma's offset paging re-reads every page before it.
        ids = self._cols[kind].get(where=where, include=[])["ids"]
        out: list[dict[str, MetadataValue]] = []
        for start in range(0, len(ids), STORE_PAGE):
            out.extend(self._get_sync(kind, ids[start : start + STORE_PAGE]))
        return out

    async def get_memories(self, ids: Sequence[str]) -> list[MemoryRecord]:
        return [from_metadata(md) for md in await self._run(self._get_sync, Collection.MEMORIES, ids)]

    async def get_memory(self, memory_id: str) -> MemoryRecord | None:
        found = await self.get_memories([memory_id])
        return found[0] if found else None

    async def get_notes(self, ids: Sequence[str]) -> list[Note]:
        return [note_from_metadata(md) for md in await self._run(self._get_sync, Collection.NOTES, ids)]

    async def memories_of(
        self, person: str, *, statuses: Sequence[Status] | None = (Status.ACTIVE,)
    ) -> list[MemoryRecord]:
        """A person's memories (``statuses=None``: every status), oldest first."""
        status = {"$in": [s.value for s in statuses]} if statuses is not None else None
        rows = await self._run(self._scan_sync, Collection.MEMORIES, _where(person=person, status=status))
        return sorted((from_metadata(md) for md in rows), key=lambda r: (r.created_at, r.id))

    async def pinned_of(self, person: str) -> list[MemoryRecord]:
        """The person's active pinned memories, oldest first.

        With a change log, from memory (current: other processes' writes caught up with first);
        without, a filtered read of Chroma (no scan of all their memories).
        """
        if self.changes is not None:
            await self._catch_up()
            index = await self._index(person)
            return sorted((index.records[i] for i in index.pinned), key=lambda r: (r.created_at, r.id))
        rows = await self._run(
            self._scan_sync,
            Collection.MEMORIES,
            _where(person=person, status=Status.ACTIVE.value, pinned=True),
        )
        return sorted((from_metadata(md) for md in rows), key=lambda r: (r.created_at, r.id))

    async def active_of(self, person: str) -> list[MemoryRecord]:
        """The person's active memories, oldest first: from memory with a change log (caught up first)."""
        if self.changes is None:
            return await self.memories_of(person)
        await self._catch_up()
        index = await self._index(person)
        return sorted(index.records.values(), key=lambda r: (r.created_at, r.id))

    async def notes_of(self, person: str, *, unpromoted_only: bool = False) -> list[Note]:
        """The person's staged notes, oldest first; unpromoted ones come from memory with a change log."""
        if unpromoted_only and self.changes is not None:
            await self._catch_up()
            staged = self._staged.get(person)
            if staged is None and self._warm_epoch == self._epoch and person not in self._notes_unknown:
                staged = self._staged[person] = []  # warmed up complete: nobody staged a note for them since
            if staged is None:
                before = (self._epoch, self._note_writes.get(person, 0))
                staged = await self._read_notes(person, unpromoted_only=True)
                if (self._epoch, self._note_writes.get(person, 0)) == before:  # no write raced the read
                    self._staged[person] = staged
                    self._notes_unknown.discard(person)
            return list(staged)
        return await self._read_notes(person, unpromoted_only=unpromoted_only)

    def _notes_touched(self, persons: Iterable[str]) -> None:
        for person in persons:
            self._note_writes[person] = self._note_writes.get(person, 0) + 1
            self._staged.pop(person, None)
            self._notes_unknown.add(person)

    async def _log_notes(self, entries: Iterable[tuple[str, str]]) -> None:
        """Note writes go in the change log too, so other processes drop their copies of those notes."""
        entries = list(entries)
        self._notes_touched({person for person, _id in entries})
        await self._log((person, NOTE_CHANGE_PREFIX + note_id) for person, note_id in entries)

    async def _read_notes(self, person: str, *, unpromoted_only: bool) -> list[Note]:
        rows = await self._run(
            self._scan_sync,
            Collection.NOTES,
            _where(person=person, note_promoted=False if unpromoted_only else None),
        )
        return sorted(
            (note_from_metadata(md) for md in rows), key=lambda n: (n.record.created_at, n.record.id)
        )

    async def count(self, kind: Collection) -> int:
        return int(await self._run(self._cols[kind].count))

    def _nearest_sync(
        self, person: str | None, vector: Vector, k: int, scope: Scope | None = None
    ) -> tuple[list[str], list[float]]:
        where = (
            _where(person=person, status=Status.ACTIVE.value, scope=scope.value if scope else None)
            if person is not None
            else None
        )
        result = self._cols[Collection.MEMORIES].query(
            query_embeddings=[vector], n_results=k, where=where, include=["distances"]
        )
        return list(result["ids"][0]), list(result["distances"][0])

    def _records_sync(self, ids: Sequence[str]) -> list[tuple[dict[str, MetadataValue], npt.NDArray[np.float32]]]:
        """Memories by id with their stored vectors (float32), in the order asked; missing ids left out."""
        unique = list(dict.fromkeys(ids))
        by_id: dict[str, tuple[dict[str, MetadataValue], npt.NDArray[np.float32]]] = {}
        for start in range(0, len(unique), STORE_PAGE):
            page = self._cols[Collection.MEMORIES].get(
                ids=unique[start : start + STORE_PAGE], include=["metadatas", "embeddings"]
            )
            if not page["ids"]:
                continue
            values = np.asarray(page["embeddings"], dtype=np.float32).reshape(len(page["ids"]), -1)
            for row, (memory_id, md) in enumerate(zip(page["ids"], page["metadatas"], strict=True)):
                by_id[memory_id] = (dict(md), values[row])
        return [by_id[i] for i in unique if i in by_id]

    def _person_vectors_sync(self, person: str) -> tuple[list[str], npt.NDArray[np.float32]]:
        """Ids and stored vectors of the person's active memories, read in one job on the Chroma thread."""
        col = self._cols[Collection.MEMORIES]
        ids = col.get(where=_where(person=person, status=Status.ACTIVE.value), include=[])["ids"]
        found: list[str] = []
        chunks: list[npt.NDArray[np.float32]] = []
        for start in range(0, len(ids), STORE_PAGE):
            page = col.get(ids=ids[start : start + STORE_PAGE], include=["embeddings"])
            if page["ids"]:
                found.extend(page["ids"])
                chunks.append(np.asarray(page["embeddings"], dtype=np.float32).reshape(len(page["ids"]), -1))
        if not chunks:
            return [], np.zeros((0, self._hash_dims.get(Collection.MEMORIES, HASH_DIM)), dtype=np.float32)
        return found, np.concatenate(chunks)

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
        await self._catch_up()
        index = await self._index(person)
        ranked = index.bm25.search(index.distinctive(query), k, index.allowed(scope))
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
        await self._catch_up()
        index = await self._index(person)
        ranked = (
            index.bm25.search(index.distinctive(query, max_query_words), k, index.allowed(scope)) if query else []
        )
        if vectors is not None and not isinstance(vectors, Vectors):
            vectors = await vectors
        near = await self._candidates(person, vectors=vectors, k=k, scope=scope) if vectors is not None else []
        index = await self._index(person)
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

    async def _fresh(self, person: str, ids: Sequence[str]) -> list[MemoryRecord]:
        """The records as stored now; ids gone or changed elsewhere (an operator's forget) leave the index."""
        if not ids:
            return []
        rows = {str(md["id"]): md for md in await self._run(self._get_sync, Collection.MEMORIES, ids)}
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
        index = self._indexes.get(person)
        if index is not None:
            index.drop(memory_id)

    async def candidates(
        self,
        person: str,
        *,
        vectors: Vectors | None = None,
        query: str | None = None,
        k: int,
        max_query_words: int | None = None,
        scope: Scope | None = None,
    ) -> list[Candidate]:
        """The person's active memories nearest ``vectors`` and best for ``query`` (BM25), from memory.

        With a change log the vector search runs in memory too, after catching up with other
        processes. Without one Chroma is asked for ids and distances only, and summaries may
        trail another process's writes; writers re-read.
        """
        await self._catch_up()
        return await self._candidates(
            person, vectors=vectors, query=query, k=k, max_query_words=max_query_words, scope=scope
        )

    async def _candidates(
        self,
        person: str,
        *,
        vectors: Vectors | None = None,
        query: str | None = None,
        k: int,
        max_query_words: int | None = None,
        scope: Scope | None = None,
    ) -> list[Candidate]:
        if k <= 0:
            return []
        index = await self._index(person)
        found: dict[str, Candidate] = {}
        if vectors is not None:
            if self.changes is not None:
                near = (await self._vector_table(person, index)).nearest(vectors.values[0], k, scope)
            else:
                near = await self._nearest_in_chroma(person, index, vectors.values[0], k, scope)
            for memory_id, cosine in near:
                summary = index.summaries.get(memory_id)
                if summary is not None and len(found) < k:
                    trusted = vectors.from_embedder and summary.space == vectors.space
                    found[memory_id] = Candidate(summary, cosine, trusted)
        if query:
            ranked = index.bm25.search(index.distinctive(query, max_query_words), k, index.allowed(scope))
            for memory_id, _score in ranked:
                if memory_id not in found and memory_id in index.summaries:
                    found[memory_id] = Candidate(index.summaries[memory_id], None, False)
        return list(found.values())

    async def _nearest_in_chroma(
        self, person: str, index: _PersonIndex, vector: Vector, k: int, scope: Scope | None
    ) -> list[tuple[str, float]]:
        """Chroma's nearest neighbours of the person's: (id, cosine), best first.

        Chroma's metadata-filtered search costs time in proportion to the person's memories, so a
        person with many is searched unfiltered, with enough extra results to hold ``k`` of theirs.
        """
        own = len(index.summaries) if scope is None else len(index.scoped[scope])
        pool = math.ceil(k * NEAREST_OVERSAMPLE * max(self._memory_total, own, 1) / max(own, 1))
        filtered = own <= self.filtered_query_max or pool > NEAREST_POOL_MAX
        ids, distances = await self._run(
            self._nearest_sync,
            person if filtered else None,
            vector,
            k if filtered else pool,
            scope if filtered else None,
        )
        unknown = [i for i in ids if i not in index.summaries] if filtered else []
        if unknown:  # written by another process since the index was built: learn them
            for md in await self._run(self._get_sync, Collection.MEMORIES, unknown):
                index.put(from_metadata(md), str(md.get(VECTOR_KEY, HASH_SPACE)))
        out: list[tuple[str, float]] = []
        for memory_id, distance in zip(ids, distances, strict=True):
            record = index.records.get(memory_id)
            if record is not None and (scope is None or record.scope is scope):
                out.append((memory_id, 1.0 - float(distance)))
        return out

    async def _vector_table(self, person: str, index: _PersonIndex) -> VectorTable:
        """The person's vectors as one float32 matrix, loaded from Chroma on first use."""
        if index.vectors is None:
            async with self._index_locks.hold([f"vectors\x00{person}"]):
                if index.vectors is None:
                    started = time.perf_counter()
                    ids, values = await self._run(self._person_vectors_sync, person)
                    # Installed before anything else runs: a write queued behind this read on the
                    # Chroma thread resumes after this, and ``_touched`` then puts its vector here.
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

    async def _catch_up(self) -> None:
        """Apply what other processes logged since the last call: re-read those memories from Chroma."""
        if self.changes is None:
            return
        version = self.changes.version()
        if version is not None and version == self._caught_up_at:
            return  # nobody appended to the log since the last read: nothing to catch up with
        if self._catchup_lock.locked():
            # One read serves callers that overlap (a recall's pinned part and its search): a change
            # committed while that read is under way is as concurrent as it gets; the next recall has it.
            # Should that read fail, the waiters go on uncaught-up this once, like the reader itself.
            async with self._catchup_lock:
                return
        async with self._catchup_lock:
            found = await self.changes.since(self._cursor, self._writer, CHANGE_CATCHUP_MAX)
            if not found.complete:
                log.info(
                    "memory change log out of reach cursor=%d head=%d; indexes rebuilt from chroma",
                    self._cursor,
                    found.head,
                )
                self._drop_indexes()
                self._applied.clear()
            else:
                fresh = [c for c in found.changes if c.seq not in self._applied]
                if fresh:
                    await self._apply_changes(fresh)
                    self._applied.update(c.seq for c in fresh)
            self._cursor = max(self._cursor, found.head)
            self._caught_up_at = found.version
            horizon = self._cursor - self.changes.overlap
            self._applied = {seq for seq in self._applied if seq > horizon}

    async def _apply_changes(self, changes: Sequence[Change]) -> None:
        # Only memories some index holds need re-reading: an index built later reads Chroma anyway.
        # A move is logged under both people, so the new owner's index learns it too.
        notes = [c for c in changes if c.memory_id.startswith(NOTE_CHANGE_PREFIX)]
        self._notes_touched({c.person for c in notes})
        changes = [c for c in changes if not c.memory_id.startswith(NOTE_CHANGE_PREFIX)]
        wanted = [c.memory_id for c in changes if c.person in self._indexes]
        rows = await self._run(self._records_sync, wanted) if wanted else []
        # At once after the read, like a write of this store after its Chroma call.
        for change in changes:
            self._touched(None, person=change.person, dropped=change.memory_id)
        for md, vector in rows:
            self._touched(from_metadata(md), str(md.get(VECTOR_KEY, HASH_SPACE)), vector=vector)
        log.info("memory changes from other processes applied changes=%d reread=%d", len(changes), len(rows))

    def _drop_indexes(self) -> None:
        self._indexes.clear()
        self._staged.clear()
        self._epoch += 1

    async def _index(self, person: str) -> _PersonIndex:
        index = self._indexes.get(person)
        if index is not None:
            return index
        async with self._index_locks.hold([person]):
            if person not in self._indexes and self._warm_epoch == self._epoch and person not in self._unknown:
                self._indexes[person] = _PersonIndex()  # warmed up complete: no memory of theirs was written since
            while person not in self._indexes:
                seen = (self._epoch, self._writes.get(person, 0))
                rows = await self._run(
                    self._scan_sync, Collection.MEMORIES, _where(person=person, status=Status.ACTIVE.value)
                )
                if (self._epoch, self._writes.get(person, 0)) != seen:
                    continue  # a write landed while reading: read again so the index misses nothing
                built = _PersonIndex()
                for md in rows:
                    built.put(from_metadata(md), str(md.get(VECTOR_KEY, HASH_SPACE)))
                self._indexes[person] = built
        return self._indexes[person]

    async def warm(self) -> int:
        """Build every person's in-memory index in one pass (run it in the background at start-up).

        Returns how many people were indexed. A person written to meanwhile is left to the lazy build.
        Vectors are not loaded here: each person's are, on their first vector search.
        """
        epoch = self._epoch
        seen = dict(self._writes)
        seen_notes = dict(self._note_writes)
        rows = await self._run(self._scan_sync, Collection.MEMORIES, {"status": Status.ACTIVE.value})
        note_rows = await self._run(self._scan_sync, Collection.NOTES, {"note_promoted": False})
        if self._epoch != epoch:
            return 0
        built: dict[str, _PersonIndex] = {}
        for md in rows:
            built.setdefault(str(md["person"]), _PersonIndex()).put(
                from_metadata(md), str(md.get(VECTOR_KEY, HASH_SPACE))
            )
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
                self._staged[person] = sorted(notes, key=lambda n: (n.record.created_at, n.record.id))
        # Whoever was written to while this read ran is in the unknown sets already (see _touched).
        self._warm_epoch = epoch
        log.info("memory indexes warmed people=%d memories=%d", installed, len(rows))
        return installed

    def _touched(
        self,
        record: MemoryRecord | None,
        space: str = HASH_SPACE,
        *,
        person: str | None = None,
        dropped: str | None = None,
        vector: npt.ArrayLike | None = None,
    ) -> None:
        """Keep the in-memory index in step with a write (``vector`` None: the stored one did not change)."""
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

    async def _log(self, entries: Iterable[tuple[str, str]]) -> None:
        """Tell other processes which (person, memory) pairs this store just changed in Chroma."""
        if self.changes is not None:
            await self.changes.append(self._writer, list(entries), datetime.now(UTC))

    # --- writing ------------------------------------------------------------------------
    async def add_memory(self, record: MemoryRecord, vectors: Vectors | None = None) -> MemoryRecord:
        """Store a new memory (a fresh id) with its vector."""
        vectors = vectors or await self.vectors([record.text])
        md = to_metadata(record) | {VECTOR_KEY: vectors.space}
        await self._run(
            self._cols[Collection.MEMORIES].add,
            ids=[record.id],
            embeddings=vectors.values[:1],
            metadatas=[md],
        )
        self._memory_total += 1
        self._touched(record, vectors.space, vector=vectors.values[0])
        await self._log([(record.person, record.id)])
        return record

    async def add_memories(self, records: Sequence[MemoryRecord], vectors: Vectors | None = None) -> None:
        """Store many new memories in one round trip (imports, benchmarks)."""
        if not records:
            return
        vectors = vectors or await self.vectors([r.text for r in records])
        metadatas = [to_metadata(r) | {VECTOR_KEY: vectors.space} for r in records]
        await self._run(
            self._cols[Collection.MEMORIES].add,
            ids=[r.id for r in records],
            embeddings=vectors.values,
            metadatas=metadatas,
        )
        self._memory_total += len(records)
        for record, value in zip(records, vectors.values, strict=True):
            self._touched(record, vectors.space, vector=value)
        await self._log((r.person, r.id) for r in records)

    def _add_absent_sync(
        self,
        kind: Collection,
        ids: list[str],
        values: list[Vector],
        metadatas: list[dict[str, MetadataValue]],
    ) -> list[str]:
        existing = set(self._cols[kind].get(ids=ids, include=[])["ids"])
        fresh = [i for i, record_id in enumerate(ids) if record_id not in existing]
        if fresh:
            self._cols[kind].add(
                ids=[ids[i] for i in fresh],
                embeddings=[values[i] for i in fresh],
                metadatas=[metadatas[i] for i in fresh],
            )
        return [ids[i] for i in fresh]

    async def add_notes(self, notes: Sequence[Note], vectors: Vectors | None = None) -> list[str]:
        """Stage notes whose id is not stored yet; returns the ids actually added."""
        if not notes:
            return []
        vectors = vectors or await self.vectors([n.record.text for n in notes], Collection.NOTES)
        metadatas = [note_metadata(n) | {VECTOR_KEY: vectors.space} for n in notes]
        added: list[str] = await self._run(
            self._add_absent_sync, Collection.NOTES, [n.record.id for n in notes], vectors.values, metadatas
        )
        fresh = set(added)
        await self._log_notes((n.record.person, n.record.id) for n in notes if n.record.id in fresh)
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
            await self._run(
                self._cols[Collection.NOTES].update,
                ids=[n.record.id for n in marked],
                metadatas=[note_metadata(n) for n in marked],
            )
            await self._log_notes((n.record.person, n.record.id) for n in marked)
        return len(notes)

    async def replace_memory(self, record: MemoryRecord) -> MemoryRecord:
        """Compare-and-swap: store ``record`` if the memory is still at ``record.revision``.

        Returns the stored record (revision bumped). Raises RevisionConflict for a stale writer
        and MemoryNotFound when the memory is gone.
        """
        async with self._cas.hold([record.id]):
            rows = await self._run(self._get_sync, Collection.MEMORIES, [record.id])
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
                md[VECTOR_KEY] = rows[0].get(VECTOR_KEY, HASH_SPACE)
            await self._run(self._cols[Collection.MEMORIES].update, ids=[record.id], metadatas=[md], **kwargs)
            self._touched(stored, str(md[VECTOR_KEY]), vector=vector)
        await self._log([(stored.person, stored.id)])
        return stored

    async def delete_memories(self, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        async with self._cas.hold(ids):
            rows = await self._run(self._get_sync, Collection.MEMORIES, ids)
            await self._run(self._cols[Collection.MEMORIES].delete, ids=list(ids))
        self._memory_total -= len(rows)
        for md in rows:
            self._touched(None, person=str(md["person"]), dropped=str(md["id"]))
        await self._log((str(md["person"]), str(md["id"])) for md in rows)
        return len(rows)

    async def delete_notes(self, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        rows = await self._run(self._get_sync, Collection.NOTES, ids)
        await self._run(self._cols[Collection.NOTES].delete, ids=list(ids))
        await self._log_notes((str(md["person"]), str(md["id"])) for md in rows)
        return len(rows)

    async def replace_notes(self, notes: Sequence[Note]) -> int:
        """Store ``notes`` over the staged notes of their ids (a forget rewriting their receipts); their
        vectors stay. Returns how many were still there to rewrite."""
        if not notes:
            return 0
        present = {str(md["id"]) for md in await self._run(self._get_sync, Collection.NOTES,
                                                               [n.record.id for n in notes])}
        kept = [n for n in notes if n.record.id in present]
        if kept:
            await self._run(self._cols[Collection.NOTES].update, ids=[n.record.id for n in kept],
                            metadatas=[note_metadata(n) for n in kept])
            await self._log_notes((n.record.person, n.record.id) for n in kept)
        return len(kept)

    async def scrub_log(self, ids: Sequence[str], *, kept: Sequence[str] = ()) -> int:
        """After deleting ``ids`` (and rewriting ``kept``), take their old words out of embedded Chroma's file.

        Chroma keeps every add and update in its ``embeddings_queue`` table, metadata (our text and
        evidence) and vector included, long after the record is deleted or rewritten; and its deletes
        leave the old bytes in free space. Entries the collection's metadata segment has applied are
        blanked in place (their sequence numbers stay, which Chroma relies on): a deleted record's lose
        metadata and vector (a unit vector stands in); a ``kept`` record's lose their metadata only, since
        the vector segment keeps its own progress and may replay them, and their vector holds none of the
        words taken out (it embeds the memory's text, which the forget left alone). Then the file is
        rebuilt with VACUUM. Returns the queue entries blanked; a server's storage is its own (0).
        """
        gone = set(ids)
        kept = [i for i in dict.fromkeys(kept) if i not in gone]
        if self.sqlite_path is None or not (ids or kept) or not self.sqlite_path.exists():
            return 0
        return await self._run(self._scrub_log_sync, self.sqlite_path, list(dict.fromkeys(ids)), kept)

    @staticmethod
    def _scrub_log_sync(path: Path, ids: list[str], kept: list[str]) -> int:
        conn = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            conn.execute("PRAGMA secure_delete=ON")
            blanked = 0
            conn.execute("BEGIN IMMEDIATE")
            try:
                for group, whole in ((ids, True), (kept, False)):
                    for start in range(0, len(group), STORE_PAGE):
                        chunk = group[start : start + STORE_PAGE]
                        marks = ",".join("?" * len(chunk))
                        rows = conn.execute(
                            "SELECT q.seq_id, length(q.vector) FROM embeddings_queue q WHERE q.id IN (" + marks
                            + ") AND q.seq_id <= COALESCE((SELECT MIN(m.seq_id) FROM max_seq_id m JOIN segments s "
                            "ON s.id = m.segment_id WHERE q.topic LIKE '%/' || s.collection), -1)",
                            chunk,
                        ).fetchall()
                        for seq_id, size in rows:
                            if whole:
                                conn.execute(
                                    "UPDATE embeddings_queue SET metadata = NULL, vector = ? WHERE seq_id = ?",
                                    (_unit_vector(size), seq_id),
                                )
                            else:
                                conn.execute("UPDATE embeddings_queue SET metadata = NULL WHERE seq_id = ?",
                                             (seq_id,))
                        blanked += len(rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("VACUUM")
            return blanked
        finally:
            conn.close()

    async def notes_older_than(self, cutoff: datetime) -> list[str]:
        rows = await self._run(
            self._scan_sync, Collection.NOTES, {"created_at_ts": {"$lt": cutoff.timestamp()}}
        )
        return [str(md["id"]) for md in rows]

    async def reassign(self, old: str, new: str, now: datetime | None = None) -> tuple[int, int]:
        """Move every note and memory of person ``old`` to ``new``; returns (notes, memories) moved."""
        now = now or datetime.now(UTC)
        moved_notes = 0
        while True:
            page = await self._run(
                self._cols[Collection.NOTES].get,
                where={"person": old},
                include=["metadatas"],
                limit=STORE_PAGE,
            )
            if not page["ids"]:
                break
            metadatas = [dict(md) | {"person": new} for md in page["metadatas"]]
            await self._run(self._cols[Collection.NOTES].update, ids=page["ids"], metadatas=metadatas)
            await self._log_notes([(person, str(i)) for i in page["ids"] for person in (old, new)])
            moved_notes += len(page["ids"])
        moved_memories = 0
        while True:
            page = await self._run(
                self._cols[Collection.MEMORIES].get, where={"person": old}, include=[], limit=STORE_PAGE
            )
            if not page["ids"]:
                break
            ids = list(page["ids"])
            async with self._cas.hold(ids):
                rows = await self._run(self._records_sync, ids)
                # The person change is a write like any other: stale writers must see a new revision.
                moved: list[tuple[MemoryRecord, str, npt.NDArray[np.float32]]] = []
                for md, vector in rows:
                    record = replace(
                        from_metadata(md), person=new, revision=int(md["revision"]) + 1, updated_at=now
                    )
                    moved.append((record, str(md.get(VECTOR_KEY, HASH_SPACE)), vector))
                if moved:
                    await self._run(
                        self._cols[Collection.MEMORIES].update,
                        ids=[record.id for record, _space, _vector in moved],
                        metadatas=[to_metadata(record) | {VECTOR_KEY: space} for record, space, _vector in moved],
                    )
                # Records, BM25 and vectors go from one person's index to the other's.
                for record, space, vector in moved:
                    self._touched(None, person=old, dropped=record.id)
                    self._touched(record, space, vector=vector)
            await self._log(pair for record, _s, _v in moved for pair in ((old, record.id), (new, record.id)))
            moved_memories += len(rows)
        log.info("memory reassigned notes=%d memories=%d", moved_notes, moved_memories)
        return moved_notes, moved_memories


def _unit_vector(size: int | None) -> bytes | None:
    """A float32 vector of ``size`` bytes that says nothing: 1 then zeros (a zero vector has no direction)."""
    if not size:
        return None
    dim = size // 4
    return struct.pack(f"<{dim}f", 1.0, *([0.0] * (dim - 1)))


async def check_chroma(settings: Settings) -> CheckResult:
    """``bot.py doctor``: can kith open its Chroma (embedded directory, or the server at chroma_url)?"""
    where = settings.memory.chroma_url or str(settings.storage.data_path() / "chroma")

    def probe() -> None:
        client = make_client(settings.memory, settings.storage.data_path())
        client.heartbeat()

    try:
        await asyncio.wait_for(asyncio.to_thread(probe), CHROMA_CHECK_TIMEOUT_S)
    except Exception as exc:
        hint = (
            "start the server or fix memory.chroma_url"
            if settings.memory.chroma_url
            else "set [storage] data_dir"
        )
        return CheckResult("chroma", False, f"cannot open {where} ({type(exc).__name__}); {hint}")
    return CheckResult(
        "chroma", True, f"{'server' if settings.memory.chroma_url else 'embedded'} at {where} answers"
    )
