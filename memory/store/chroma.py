"""kith's Chroma: the client, the two collections and their vector space, every call on one thread.

Chroma runs embedded (``PersistentClient`` under ``<data_dir>/chroma``) unless
``memory.chroma_url`` names a server (``HttpClient``); both go through the same code, telemetry
off. With the memory tables chosen (``[memory] store``, :mod:`memory.store.placement`), a
:class:`~memory.store.table_client.TableClient` over kith's own database stands in for Chroma's
client, and the same code runs over it. Chroma is synchronous, so every call runs on one thread of
its own and the event loop never waits on it: the ``*_sync`` methods are the jobs for that thread,
:meth:`ChromaCollections.run` hands one over.

There are two collections: ``notes`` (staged captures, the raw daily notes the gate has not
curated yet) and ``memories`` (curated). Vectors are always passed in (Chroma's own embedding
function is never invoked: it would fetch a model). Opening adapts the collections to the
embedder of this start (:mod:`memory.store.reembed`, shared with ``bot.py memory reembed``): every
record whose vector is from another space (hashed while the embedder was off, or another
embedder's) gets the embedder's, and a collection whose vector size changed is rebuilt under a
temporary name and swapped in. Both resume where one cut short stopped. If re-embedding fails,
what was done is kept, the rest of the records stay intact and this start runs lexical.

:func:`check_chroma` is ``bot.py doctor``'s probe of the Chroma in use.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import functools
import importlib
import logging
import sys
import types
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa

from ground.checks import CheckResult
from ground.config import MemorySettings, Settings
from ground.db import Database
from ground.tunables import CHROMA_CHECK_TIMEOUT_S, HASH_DIM, STORE_PAGE
from memory.core.records import MetadataValue, Scope, Status
from memory.encoders.embedders import Vector
from memory.store import reembed
from memory.store.chroma_scrub import index_save_ids, index_save_writes
from memory.store.placement import Place, memory_place
from memory.store.reembed import DIM_KEY, REBUILD_SUFFIX, VECTOR_KEY, ProgressFn, collection_metadata
from memory.store.table_client import TableClient
from memory.store.vectors import HASH_SPACE, VectorSource

log = logging.getLogger("kith.memory.chroma")

T = TypeVar("T")

CHROMA_SQLITE = "chroma.sqlite3"  # embedded Chroma's own database, in its directory


class Collection(enum.StrEnum):
    NOTES = "notes"
    MEMORIES = "memories"


def where(**conditions: Any) -> dict[str, Any]:
    """Chroma's where: one condition as is, several under $and (which needs two or more)."""
    parts = [{k: v} for k, v in conditions.items() if v is not None]
    return parts[0] if len(parts) == 1 else {"$and": parts}


def space_of(metadata: dict[str, MetadataValue]) -> str:
    """The vector space a stored record's vector came from."""
    return str(metadata.get(VECTOR_KEY, HASH_SPACE))


OTLP_EXPORTER = "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"


def _defer_otlp_exporter() -> None:
    """Chroma imports OpenTelemetry's gRPC span exporter when it is imported (grpc and protobuf: 12 MB of the
    process's memory), and constructs it only when its tracing is configured (``CHROMA_OTEL_GRANULARITY``), which
    kith never does. A stand-in module gives it the name; constructing the exporter imports the real one then and
    returns it, so tracing configured that way works as before."""
    if OTLP_EXPORTER in sys.modules:
        return

    class OTLPSpanExporter:
        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            sys.modules.pop(OTLP_EXPORTER, None)
            real = importlib.import_module(OTLP_EXPORTER)
            return real.OTLPSpanExporter(*args, **kwargs)

    stand_in = types.ModuleType(OTLP_EXPORTER, "kith's stand-in until Chroma's tracing needs the real exporter")
    stand_in.OTLPSpanExporter = OTLPSpanExporter  # type: ignore[attr-defined]
    sys.modules[OTLP_EXPORTER] = stand_in


def place_of(settings: MemorySettings, database: Database | None) -> Place:
    """Where this store's memories live (:func:`memory.store.placement.memory_place`); without ``database``,
    Chroma."""
    if database is None:
        return "chroma"

    def holds() -> bool:
        return TableClient(database).holds_memories()

    return memory_place(settings.store, chroma_url=settings.chroma_url,
                        server_database=not database.serializes_writers, database_holds_memories=holds)


def make_client(settings: MemorySettings, data_dir: Path, database: Database | None = None) -> Any:
    """A Chroma client: the memory tables of ``database`` when they are the memories' place, a server when
    ``chroma_url`` is set, else embedded under ``data_dir/chroma``."""
    if database is not None and place_of(settings, database) == "database":
        return TableClient(database)
    _defer_otlp_exporter()
    import chromadb  # slow to import: only once Chroma is needed
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


class ChromaCollections:
    """The two collections of one Chroma, and the one thread every call to them runs on."""

    def __init__(
        self,
        client: Any,
        executor: concurrent.futures.ThreadPoolExecutor,
        *,
        namespace: str = "",
        sqlite_path: Path | None = None,
    ) -> None:
        self.client = client
        self.namespace = namespace
        # Embedded Chroma's own SQLite file (None for a server): a forget scrubs its queue there.
        self.sqlite_path = sqlite_path
        self._executor = executor
        self._cols: dict[Collection, Any] = {}
        self._hash_dims: dict[Collection, int] = {}

    # --- opening and closing --------------------------------------------------------------
    @classmethod
    async def connect(cls, settings: MemorySettings, data_dir: Path, *, namespace: str = "",
                      database: Database | None = None) -> ChromaCollections:
        """The client (Chroma's, or the memory tables' of ``database``: :func:`make_client`), on its own thread;
        :meth:`prepare` then opens the collections."""
        executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kith-chroma")
        try:
            client = await asyncio.get_running_loop().run_in_executor(
                executor, make_client, settings, data_dir, database)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        embedded = not settings.chroma_url and not isinstance(client, TableClient)
        sqlite_path = data_dir / "chroma" / CHROMA_SQLITE if embedded else None
        return cls(client, executor, namespace=namespace, sqlite_path=sqlite_path)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one Chroma job on this client's thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def close(self) -> None:
        self._executor.shutdown(wait=True)

    def abandon(self) -> None:
        """Opening failed: let the thread go without waiting for it."""
        self._executor.shutdown(wait=False)

    @property
    def in_database(self) -> bool:
        """Whether the memories live in kith's own database (the memory tables) rather than in Chroma."""
        return isinstance(self.client, TableClient)

    def collection(self, kind: Collection) -> Any:
        return self._cols[kind]

    def hash_dim(self, kind: Collection) -> int:
        """The size of a hashed vector in ``kind``: the collection's own, so it fits there."""
        return self._hash_dims.get(kind, HASH_DIM)

    def rebuild_copy_sync(self, kind: Collection) -> Any | None:
        """The copy of ``kind`` a migration to another vector size began and has not swapped in yet, if any."""
        name = self._name(kind) + REBUILD_SUFFIX
        if name not in reembed.collection_names_sync(self.client):
            return None
        return self.client.get_collection(name, embedding_function=None)

    def _name(self, kind: Collection) -> str:
        return f"{self.namespace}{kind.value}"

    def _open_collection(self, name: str, space: str, dim: int) -> Any:
        names = reembed.collection_names_sync(self.client)
        rebuild = name + REBUILD_SUFFIX
        if rebuild in names and name not in names:
            # The original is dropped only once its copy is complete: finish the swap. A copy beside its
            # original is a rebuild cut short; the next migration carries it on (memory.store.reembed).
            self.client.get_collection(rebuild, embedding_function=None).modify(name=name)
        col = self.client.get_or_create_collection(
            name, embedding_function=None, metadata=collection_metadata(space, dim)
        )
        # Blank records a forget killed while it saved the index left behind (they have no metadata).
        left = list(col.get(ids=index_save_ids(index_save_writes(col)), include=[])["ids"])
        if left:  # a delete of ids that are not there still writes to Chroma's queue: only when some are
            col.delete(ids=left)
        return col

    async def prepare(self, source: VectorSource) -> None:
        """Open both collections in the embedder's vector space (re-embedding or rebuilding as needed);
        when that fails, ``source`` is degraded to hashed vectors for this start."""
        if source.ready:
            try:
                await self.migrate(source, reembed.logged(source.space))
                return
            except Exception as exc:
                # What was re-embedded is kept, the rest is intact; this start stays lexical, the next resumes.
                log.warning("re-embedding failed error=%s; lexical until next start", type(exc).__name__)
                source.degrade(f"re-embedding stored memories failed ({type(exc).__name__})")
        for kind in Collection:
            col = await self.run(self._open_collection, self._name(kind), HASH_SPACE, HASH_DIM)
            self._cols[kind] = col
            self._hash_dims[kind] = int(dict(col.metadata or {}).get(DIM_KEY) or HASH_DIM)

    async def migrate(self, source: VectorSource, on_progress: ProgressFn | None = None) -> int:
        """Open both collections with every record's vector from ``source``'s (ready) embedder; the number of
        records that needed one. Raises when the embedder fails, keeping every batch written before."""
        embedder = source.embedder
        if embedder is None or not source.ready:
            raise ValueError("migrating needs a ready embedder")
        dim = source.status.dim or HASH_DIM
        kinds = list(Collection)
        cols = [await self.run(self._open_collection, self._name(kind), embedder.name, dim) for kind in kinds]
        done = await reembed.migrate(self, cols, embedder, dim, on_progress)
        for kind, col in zip(kinds, done.collections, strict=True):
            self._cols[kind] = col
            self._hash_dims[kind] = dim
        return done.records

    async def pending(self, source: VectorSource) -> int:
        """Records of the open collections that still need a vector from ``source``'s embedder."""
        if source.embedder is None or not source.ready:
            return 0
        dim = source.status.dim or HASH_DIM
        return await reembed.pending(self, list(self._cols.values()), source.embedder.name, dim)

    # --- jobs for the Chroma thread -------------------------------------------------------
    def ids_sync(self, kind: Collection, condition: dict[str, Any] | None) -> list[str]:
        """Ids of the records matching ``condition`` (None: all), without reading their metadata."""
        return list(self._cols[kind].get(where=condition, include=[])["ids"])

    def get_sync(self, kind: Collection, ids: Sequence[str]) -> list[dict[str, MetadataValue]]:
        """Metadata of the records with ``ids``, in the order asked; missing ids left out."""
        if not ids:
            return []
        page = self._cols[kind].get(ids=list(dict.fromkeys(ids)), include=["metadatas"])
        by_id = {i: dict(md) for i, md in zip(page["ids"], page["metadatas"], strict=True)}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]

    def scan_sync(self, kind: Collection, condition: dict[str, Any]) -> list[dict[str, MetadataValue]]:
        """Metadata of every record matching ``condition``."""
        # Ids first (cheap), then metadata by id: Chroma's offset paging re-reads every page before it.
        ids = self._cols[kind].get(where=condition, include=[])["ids"]
        out: list[dict[str, MetadataValue]] = []
        for start in range(0, len(ids), STORE_PAGE):
            out.extend(self.get_sync(kind, ids[start : start + STORE_PAGE]))
        return out

    def add_absent_sync(
        self,
        kind: Collection,
        ids: list[str],
        values: list[Vector],
        metadatas: list[dict[str, MetadataValue]],
    ) -> list[str]:
        """Add the records whose id is not stored yet; returns their ids."""
        existing = set(self._cols[kind].get(ids=ids, include=[])["ids"])
        fresh = [i for i, record_id in enumerate(ids) if record_id not in existing]
        if fresh:
            self._cols[kind].add(
                ids=[ids[i] for i in fresh],
                embeddings=[values[i] for i in fresh],
                metadatas=[metadatas[i] for i in fresh],
            )
        return [ids[i] for i in fresh]

    def nearest_sync(
        self, person: str | None, vector: Vector, k: int, scope: Scope | None = None
    ) -> tuple[list[str], list[float]]:
        """Chroma's ``k`` nearest memories (of ``person``'s active ones, or of all): ids and distances."""
        condition = (
            where(person=person, status=Status.ACTIVE.value, scope=scope.value if scope else None)
            if person is not None
            else None
        )
        result = self._cols[Collection.MEMORIES].query(
            query_embeddings=[vector], n_results=k, where=condition, include=["distances"]
        )
        return list(result["ids"][0]), list(result["distances"][0])

    def records_sync(
        self, ids: Sequence[str], kind: Collection = Collection.MEMORIES
    ) -> list[tuple[dict[str, MetadataValue], npt.NDArray[np.float32]]]:
        """Records of ``kind`` by id with their stored vectors (float32), in the order asked; missing ids left
        out."""
        unique = list(dict.fromkeys(ids))
        by_id: dict[str, tuple[dict[str, MetadataValue], npt.NDArray[np.float32]]] = {}
        for start in range(0, len(unique), STORE_PAGE):
            page = self._cols[kind].get(
                ids=unique[start : start + STORE_PAGE], include=["metadatas", "embeddings"]
            )
            if not page["ids"]:
                continue
            values = np.asarray(page["embeddings"], dtype=np.float32).reshape(len(page["ids"]), -1)
            for row, (memory_id, md) in enumerate(zip(page["ids"], page["metadatas"], strict=True)):
                by_id[memory_id] = (dict(md), values[row])
        return [by_id[i] for i in unique if i in by_id]

    def person_vectors_sync(self, person: str) -> tuple[list[str], npt.NDArray[np.float32]]:
        """Ids and stored vectors of the person's active memories, read in one job on the Chroma thread."""
        col = self._cols[Collection.MEMORIES]
        ids = col.get(where=where(person=person, status=Status.ACTIVE.value), include=[])["ids"]
        found: list[str] = []
        chunks: list[npt.NDArray[np.float32]] = []
        for start in range(0, len(ids), STORE_PAGE):
            page = col.get(ids=ids[start : start + STORE_PAGE], include=["embeddings"])
            if page["ids"]:
                found.extend(page["ids"])
                chunks.append(np.asarray(page["embeddings"], dtype=np.float32).reshape(len(page["ids"]), -1))
        if not chunks:
            return [], np.zeros((0, self.hash_dim(Collection.MEMORIES)), dtype=np.float32)
        return found, np.concatenate(chunks)

    async def count(self, kind: Collection) -> int:
        return int(await self.run(self._cols[kind].count))


async def check_chroma(settings: Settings) -> CheckResult:
    """``bot.py doctor``: can kith open its Chroma (embedded directory, or the server at chroma_url)?"""
    ms = settings.memory
    url = settings.storage.resolved_database_url()
    server = sa.engine.make_url(url).get_backend_name() != "sqlite"
    if memory_place(ms.store, chroma_url=ms.chroma_url, server_database=server,
                    database_holds_memories=lambda: False) == "database":
        return CheckResult("chroma", True, "not used: memories are kept in the database's own tables "
                                           "([memory] store), checked with the database")
    place = settings.memory.chroma_url or str(settings.storage.data_path() / "chroma")

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
        return CheckResult("chroma", False, f"cannot open {place} ({type(exc).__name__}); {hint}")
    return CheckResult(
        "chroma", True, f"{'server' if settings.memory.chroma_url else 'embedded'} at {place} answers"
    )
