"""The memory tables behind the part of Chroma's client the store uses, so that every read and write of the
memory store runs unchanged over kith's own database (:mod:`memory.store.memory_tables`).

:class:`TableClient` and :class:`TableCollection` answer as Chroma 1.x does, where the store depends on it:

* ``add`` keeps a record already stored and skips the new one; ``update`` merges metadata into the stored (a key
  set to None goes) and ignores ids that are not stored; ``delete`` of ids not stored is no error.
* ``get`` returns ``ids`` with ``metadatas`` and ``embeddings`` (a 2-D array) when included; ``limit`` and
  ``offset`` page in id order.
* ``query`` ranks by the collection's distance (cosine unless its metadata says otherwise), ties by id.
* ``modify(metadata=...)`` replaces the collection's metadata and keeps its distance, ``modify(name=...)`` renames.
* ``where`` filters as :mod:`memory.store.where` reads them; a filter on ``person`` or ``status`` narrows the
  rows read by their index first.

Every call is synchronous, like Chroma's, and runs on the store's thread; each is one transaction of kith's
database (:meth:`ground.db.Database.run_from_thread`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database
from memory.store.memory_tables import memory_collections, memory_records
from memory.store.where import COLUMN_FIELDS, Condition, column_values, matches, nearest

SPACE = "hnsw:space"
DEFAULT_SPACE = "l2"  # Chroma's when a collection's metadata names none
ID_CHUNK = 500  # ids to a statement: well under every driver's limit on parameters


class CollectionNotFound(LookupError):
    """No collection of that name (Chroma: NotFoundError)."""


class CollectionExists(ValueError):
    """A collection of that name is already there."""


def _vector_bytes(vector: Sequence[float] | npt.NDArray[Any]) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def _vectors(blobs: Sequence[bytes]) -> npt.NDArray[np.float32]:
    if not blobs:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([np.frombuffer(b, dtype="<f4") for b in blobs]).astype(np.float32)


def _chunks(ids: Sequence[str]) -> Iterable[list[str]]:
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), ID_CHUNK):
        yield unique[start : start + ID_CHUNK]


def _columns(md: Mapping[str, Any]) -> dict[str, str | None]:
    return {f: (str(md[f]) if isinstance(md.get(f), str) else None) for f in COLUMN_FIELDS}


class TableCollection:
    """One collection of the memory tables, answering as a Chroma collection does."""

    def __init__(self, client: TableClient, name: str, metadata: dict[str, Any], space: str) -> None:
        self._client = client
        self.name = name
        self.metadata = metadata
        self._space = space
        self.configuration: dict[str, Any] = {}  # no vector index of Chroma's to save: nothing configured

    def _run(self, fn: Any, *args: Any) -> Any:
        return self._client.run(fn, *args)

    # --- reading --------------------------------------------------------------------------------
    def _select(self, conn: Connection, ids: Sequence[str] | None, where: Condition | None,
                with_vectors: bool) -> list[Any]:
        t = memory_records
        cols = [t.c.id, t.c.metadata, *([t.c.vector] if with_vectors else [])]
        base = sa.select(*cols).where(t.c.collection == self.name)
        for field in COLUMN_FIELDS:
            allowed = column_values(where, field)
            if allowed is not None:
                base = base.where(t.c[field].in_(allowed))
        if ids is None:
            rows = list(conn.execute(base.order_by(t.c.id)))
        else:
            rows = []
            for chunk in _chunks(ids):
                rows.extend(conn.execute(base.where(t.c.id.in_(chunk))))
            rows.sort(key=lambda r: r.id)
        if not where:
            return rows
        return [r for r in rows if matches(where, json.loads(r.metadata))]

    def get(self, ids: Sequence[str] | None = None, where: Condition | None = None, limit: int | None = None,
            offset: int | None = None, include: Sequence[str] = ("metadatas",), **_: Any) -> dict[str, Any]:
        with_vectors = "embeddings" in include
        rows = self._run(self._select, list(ids) if ids is not None else None, where, with_vectors)
        start = offset or 0
        rows = rows[start : start + limit if limit is not None else None]
        return {
            "ids": [r.id for r in rows],
            "metadatas": [json.loads(r.metadata) for r in rows] if "metadatas" in include else None,
            "embeddings": _vectors([r.vector for r in rows]) if with_vectors else None,
            "included": list(include),
        }

    def count(self) -> int:
        def read(conn: Connection) -> int:
            t = memory_records
            return int(conn.execute(sa.select(sa.func.count()).where(t.c.collection == self.name)).scalar_one())

        return int(self._run(read))

    def query(self, query_embeddings: Sequence[Sequence[float]], n_results: int = 10,
              where: Condition | None = None, include: Sequence[str] = ("distances",), **_: Any) -> dict[str, Any]:
        rows = self._run(self._select, None, where, True)
        vectors = _vectors([r.vector for r in rows])
        ids: list[list[str]] = []
        dists: list[list[float]] = []
        for q in query_embeddings:
            order, d = nearest(self._space, np.asarray(q, dtype=np.float32), vectors, n_results)
            ids.append([rows[i].id for i in order])
            dists.append(d)
        return {"ids": ids, "distances": dists if "distances" in include else None, "included": list(include)}

    # --- writing --------------------------------------------------------------------------------
    def add(self, ids: Sequence[str], embeddings: Sequence[Sequence[float]] | npt.NDArray[Any],
            metadatas: Sequence[Mapping[str, Any]] | None = None, **_: Any) -> None:
        mds = list(metadatas) if metadatas is not None else [{} for _ in ids]
        values = list(embeddings)
        if not (len(ids) == len(values) == len(mds)):
            raise ValueError(f"add: {len(ids)} ids, {len(values)} vectors, {len(mds)} metadatas")

        def write(conn: Connection) -> None:
            t = memory_records
            stored: set[str] = set()
            for chunk in _chunks(ids):
                stored |= set(conn.execute(sa.select(t.c.id).where(t.c.collection == self.name,
                                                                   t.c.id.in_(chunk))).scalars())
            rows = []
            for record_id, vector, md in zip(ids, values, mds, strict=True):
                if record_id in stored:
                    continue  # Chroma keeps the stored record
                stored.add(record_id)
                rows.append({"collection": self.name, "id": record_id, "metadata": json.dumps(dict(md)),
                             "vector": _vector_bytes(vector), **_columns(md)})
            if rows:
                conn.execute(t.insert(), rows)

        self._run(write)

    def update(self, ids: Sequence[str], embeddings: Sequence[Sequence[float]] | npt.NDArray[Any] | None = None,
               metadatas: Sequence[Mapping[str, Any]] | None = None, **_: Any) -> None:
        values = list(embeddings) if embeddings is not None else None
        mds = list(metadatas) if metadatas is not None else None
        for given in (values, mds):
            if given is not None and len(given) != len(ids):
                raise ValueError(f"update: {len(ids)} ids, {len(given)} values")

        def write(conn: Connection) -> None:
            t = memory_records
            current: dict[str, dict[str, Any]] = {}
            for chunk in _chunks(ids):
                for row in conn.execute(sa.select(t.c.id, t.c.metadata).where(t.c.collection == self.name,
                                                                             t.c.id.in_(chunk))):
                    current[row.id] = json.loads(row.metadata)
            for i, record_id in enumerate(ids):
                if record_id not in current:
                    continue  # Chroma ignores an update of a record it does not hold
                change: dict[str, Any] = {}
                if mds is not None:
                    merged = current[record_id]
                    for key, value in mds[i].items():
                        if value is None:
                            merged.pop(key, None)
                        else:
                            merged[key] = value
                    change |= {"metadata": json.dumps(merged), **_columns(merged)}
                if values is not None:
                    change["vector"] = _vector_bytes(values[i])
                if change:
                    conn.execute(t.update().where(t.c.collection == self.name, t.c.id == record_id).values(change))

        self._run(write)

    def delete(self, ids: Sequence[str] | None = None, where: Condition | None = None, **_: Any) -> None:
        def write(conn: Connection) -> None:
            t = memory_records
            if where is not None:
                chosen = [r.id for r in self._select(conn, ids, where, False)]
            elif ids is not None:
                chosen = list(ids)
            else:
                return  # Chroma deletes nothing when told neither
            for chunk in _chunks(chosen):
                conn.execute(t.delete().where(t.c.collection == self.name, t.c.id.in_(chunk)))

        self._run(write)

    def modify(self, name: str | None = None, metadata: Mapping[str, Any] | None = None, **_: Any) -> None:
        new_name = name or self.name
        new_metadata = dict(metadata) if metadata is not None else self.metadata

        def write(conn: Connection) -> None:
            c, t = memory_collections, memory_records
            if new_name != self.name:
                if conn.execute(sa.select(c.c.name).where(c.c.name == new_name)).first() is not None:
                    raise CollectionExists(f"collection {new_name} exists")
                conn.execute(c.insert().values(name=new_name, metadata=_envelope(new_metadata, self._space)))
                conn.execute(t.update().where(t.c.collection == self.name).values(collection=new_name))
                conn.execute(c.delete().where(c.c.name == self.name))
            else:
                conn.execute(c.update().where(c.c.name == self.name)
                             .values(metadata=_envelope(new_metadata, self._space)))

        self._run(write)
        self.name, self.metadata = new_name, new_metadata


def _envelope(metadata: Mapping[str, Any], space: str) -> str:
    # The distance is the collection's for good, as in Chroma: kept apart from the metadata a modify replaces.
    return json.dumps({"metadata": dict(metadata), "space": space})


class TableClient:
    """Chroma's client, over the memory tables of ``db``: the collections by name."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def run(self, fn: Any, *args: Any) -> Any:
        return self.db.run_from_thread(fn, *args)

    def heartbeat(self) -> int:
        self.run(lambda conn: conn.execute(sa.select(sa.literal(1))).scalar_one())
        return time.time_ns()

    def _read(self, name: str) -> TableCollection | None:
        def read(conn: Connection) -> str | None:
            c = memory_collections
            return conn.execute(sa.select(c.c.metadata).where(c.c.name == name)).scalar()

        raw = self.run(read)
        if raw is None:
            return None
        envelope = json.loads(raw)
        return TableCollection(self, name, dict(envelope["metadata"]), str(envelope["space"]))

    def list_collections(self) -> list[TableCollection]:
        def read(conn: Connection) -> list[Any]:
            c = memory_collections
            return list(conn.execute(sa.select(c.c.name, c.c.metadata).order_by(c.c.name)))

        out = []
        for row in self.run(read):
            envelope = json.loads(row.metadata)
            out.append(TableCollection(self, row.name, dict(envelope["metadata"]), str(envelope["space"])))
        return out

    def get_collection(self, name: str, **_: Any) -> TableCollection:
        found = self._read(name)
        if found is None:
            raise CollectionNotFound(f"collection {name} does not exist")
        return found

    def create_collection(self, name: str, metadata: Mapping[str, Any] | None = None, **_: Any) -> TableCollection:
        md = dict(metadata or {})
        space = str(md.get(SPACE, DEFAULT_SPACE))

        def write(conn: Connection) -> None:
            c = memory_collections
            if conn.execute(sa.select(c.c.name).where(c.c.name == name)).first() is not None:
                raise CollectionExists(f"collection {name} exists")
            conn.execute(c.insert().values(name=name, metadata=_envelope(md, space)))

        self.run(write)
        return TableCollection(self, name, md, space)

    def get_or_create_collection(self, name: str, metadata: Mapping[str, Any] | None = None,
                                 **kwargs: Any) -> TableCollection:
        # As Chroma: a collection already there keeps its metadata.
        return self._read(name) or self.create_collection(name, metadata=metadata, **kwargs)

    def delete_collection(self, name: str) -> None:
        def write(conn: Connection) -> None:
            conn.execute(memory_records.delete().where(memory_records.c.collection == name))
            gone = conn.execute(memory_collections.delete().where(memory_collections.c.name == name)).rowcount
            if not gone:
                raise CollectionNotFound(f"collection {name} does not exist")

        self.run(write)

    def holds_memories(self) -> bool:
        def read(conn: Connection) -> bool:
            return conn.execute(sa.select(memory_records.c.id).limit(1)).first() is not None

        return bool(self.run(read))


__all__ = ["CollectionExists", "CollectionNotFound", "TableClient", "TableCollection"]
