"""The memory tables answer every call the store makes exactly as Chroma does: the same random sequence of adds,
updates, deletes, filtered reads and nearest-neighbour queries runs on embedded Chroma and on the tables (SQLite and
PostgreSQL), and each answer is compared."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ground.config import MemorySettings
from ground.db import Database
from ground.tunables import SHARED_CACHE_TRUST_S
from memory.encoders.embedders import EmbedderStatus
from memory.store import ChangeLog, MemoryStore
from memory.store.chroma import VECTOR_KEY, make_client
from memory.store.table_client import CollectionNotFound, TableClient
from memory.store.vectors import Vectors
from memory.store.where import column_values, matches
from tests.fakes.openai_api import hash_embedding
from tests.support.memory import record

BACKENDS = ("sqlite", "postgres")

PEOPLE = ["ana", "bo", "cy"]
STATUSES = ["active", "superseded", "forgotten"]


def _metadata(rng: random.Random) -> dict[str, Any]:
    md: dict[str, Any] = {"person": rng.choice(PEOPLE), "status": rng.choice(STATUSES),
                          "ts": rng.choice([0.0, 1.5, 2.5, 10.0]), "n": rng.randint(0, 3)}
    if rng.random() < 0.6:
        md["space"] = rng.choice(["hash", "onnx"])
    if rng.random() < 0.3:
        md["flag"] = rng.random() < 0.5
    return md


def _filters(rng: random.Random) -> dict[str, Any] | None:
    options: list[dict[str, Any] | None] = [
        None,
        {"person": rng.choice(PEOPLE)},
        {"$and": [{"person": rng.choice(PEOPLE)}, {"status": "active"}]},
        {"status": {"$in": rng.sample(STATUSES, 2)}},
        {"space": {"$ne": "onnx"}},  # untagged records match too, as the re-embedding planner counts on
        {"space": {"$nin": ["hash"]}},
        {"ts": {"$gt": 1.5}},
        {"$and": [{"ts": {"$gt": 0.0}}, {"ts": {"$lte": 2.5}}]},
        {"n": {"$gte": 2}},
        {"n": {"$lt": 1}},
        {"flag": True},
        {"$or": [{"person": "ana"}, {"n": 3}]},
        {"$and": [{"person": {"$in": ["ana", "bo"]}}, {"status": {"$eq": "active"}}, {"n": {"$ne": 0}}]},
    ]
    return rng.choice(options)


def _vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1, 1) for _ in range(8)]


def _ops(seed: int, count: int) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    ids = [f"m{i}" for i in range(40)]
    ops: list[tuple[str, dict[str, Any]]] = []
    for _ in range(count):
        kind = rng.choice(["add", "add", "update", "update", "delete", "get", "get", "query", "count"])
        chosen = rng.sample(ids, rng.randint(1, 5))
        if kind == "add":
            ops.append((kind, {"ids": chosen, "embeddings": [_vector(rng) for _ in chosen],
                               "metadatas": [_metadata(rng) for _ in chosen]}))
        elif kind == "update":
            change: dict[str, Any] = {"ids": chosen}
            if rng.random() < 0.5:
                change["embeddings"] = [_vector(rng) for _ in chosen]
            if rng.random() < 0.8 or "embeddings" not in change:
                change["metadatas"] = [{"n": rng.randint(0, 3), "space": None if rng.random() < 0.3 else "onnx",
                                        **({"person": rng.choice(PEOPLE)} if rng.random() < 0.3 else {})}
                                       for _ in chosen]
            ops.append((kind, change))
        elif kind == "delete":
            ops.append((kind, {"ids": chosen}))
        elif kind == "get":
            ops.append((kind, {"ids": chosen if rng.random() < 0.4 else None, "where": _filters(rng)}))
        elif kind == "query":
            ops.append((kind, {"vector": _vector(rng), "k": rng.randint(1, 6), "where": _filters(rng)}))
        else:
            ops.append((kind, {}))
    return ops


def _apply(col: Any, op: str, args: dict[str, Any]) -> Any:
    if op == "add":
        col.add(**args)
        return None
    if op == "update":
        col.update(**args)
        return None
    if op == "delete":
        col.delete(**args)
        return None
    if op == "count":
        return col.count()
    if op == "get":
        page = col.get(ids=args["ids"], where=args["where"], include=["metadatas", "embeddings"])
        order = sorted(range(len(page["ids"])), key=lambda i: page["ids"][i])
        return ([page["ids"][i] for i in order], [page["metadatas"][i] for i in order],
                Close([[float(x) for x in page["embeddings"][i]] for i in order]))
    page = col.query(query_embeddings=[args["vector"]], n_results=args["k"], where=args["where"],
                     include=["distances"])
    return list(page["ids"][0]), Close(page["distances"][0])


class Close:
    """Numbers stored as float32 compare equal within float32's precision."""

    def __init__(self, values: Any) -> None:
        self.values = np.asarray(values, dtype=np.float64)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Close) and self.values.shape == other.values.shape
                and bool(np.allclose(self.values, other.values, atol=1e-5)))

    def __repr__(self) -> str:
        return repr(self.values.round(5).tolist())


async def test_the_tables_answer_as_chroma_does(tmp_path: Path, db: Database) -> None:
    chroma = make_client(MemorySettings(), tmp_path / "chroma-home")
    tables = TableClient(db)

    def run() -> None:
        for seed in range(3):
            name = f"memories{seed}"
            ours = tables.get_or_create_collection(name, metadata={"hnsw:space": "cosine", "dim": 8})
            theirs = chroma.get_or_create_collection(name, embedding_function=None,
                                                     metadata={"hnsw:space": "cosine", "dim": 8})
            for step, (op, args) in enumerate(_ops(seed, 150)):
                expected = _apply(theirs, op, args)
                got = _apply(ours, op, args)
                assert got == expected, f"seed {seed} step {step}: {op} {args}"

    await asyncio.to_thread(run)


async def test_collections_are_made_renamed_and_dropped_as_in_chroma(db: Database) -> None:
    tables = TableClient(db)

    def run() -> None:
        col = tables.create_collection("notes_rebuild", metadata={"hnsw:space": "cosine", "dim": 4})
        col.add(ids=["a"], embeddings=[[1.0, 0, 0, 0]], metadatas=[{"person": "ana"}])
        # A collection there keeps its metadata when asked for again with other metadata.
        again = tables.get_or_create_collection("notes_rebuild", metadata={"dim": 99})
        assert again.metadata == {"hnsw:space": "cosine", "dim": 4}
        col.modify(name="notes")
        assert {c.name for c in tables.list_collections()} == {"notes"}
        moved = tables.get_collection("notes")
        assert moved.get(ids=["a"])["metadatas"] == [{"person": "ana"}]
        # A modify of the metadata replaces it; the distance stays the collection's.
        moved.modify(metadata={"dim": 4})
        assert tables.get_collection("notes").metadata == {"dim": 4}
        near = tables.get_collection("notes").query(query_embeddings=[[0, 1.0, 0, 0]], n_results=1)
        assert near["distances"] == [[1.0]]  # cosine: orthogonal; l2 would say 2.0
        tables.delete_collection("notes")
        with pytest.raises(CollectionNotFound):
            tables.get_collection("notes")
        assert not tables.holds_memories()

    await asyncio.to_thread(run)


def test_a_filter_on_person_or_status_narrows_by_their_columns() -> None:
    where = {"$and": [{"person": "ana"}, {"status": {"$in": ["active", "superseded"]}}, {"n": {"$gt": 1}}]}
    assert column_values(where, "person") == ["ana"]
    assert column_values(where, "status") == ["active", "superseded"]
    assert column_values({"$or": [{"person": "ana"}, {"person": "bo"}]}, "person") is None  # not a bound
    assert column_values({"person": {"$ne": "ana"}}, "person") is None


def test_values_of_different_types_never_match() -> None:
    assert not matches({"flag": 1}, {"flag": True})
    assert not matches({"n": True}, {"n": 1})
    assert matches({"n": 1}, {"n": 1.0})
    assert not matches({"ts": {"$gt": 0}}, {"ts": "5"})
    assert matches({"space": {"$ne": "onnx"}}, {})
    assert not matches({"space": {"$in": ["onnx"]}}, {})


def test_vectors_round_trip_as_float32(db: Database) -> None:
    col = TableClient(db).create_collection("memories", metadata={"hnsw:space": "cosine"})
    values = np.random.default_rng(1).standard_normal((3, 384)).astype(np.float32)
    col.add(ids=["a", "b", "c"], embeddings=values, metadatas=[{}, {}, {}])
    got = col.get(ids=["c", "a"], include=["embeddings"])
    assert got["ids"] == ["a", "c"]
    assert np.array_equal(got["embeddings"], values[[0, 2]])


class _Embedder:
    """Vectors from the fake endpoint's bag of words, in ``dim`` dimensions."""

    def __init__(self, name: str, dim: int) -> None:
        self.name = name
        self.dim = dim

    def status(self) -> EmbedderStatus:
        return EmbedderStatus(self.name, ready=True, dim=self.dim)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [hash_embedding(t, self.dim) for t in texts]

    async def close(self) -> None:
        return None


async def _store(tmp_path: Path, db: Database, embedder: _Embedder) -> MemoryStore:
    return await MemoryStore.open(MemorySettings(store="database", embedder="test"), tmp_path,
                                  embedder,  # type: ignore[arg-type]
                                  embedder.status(), changes=ChangeLog(db), database=db)


async def test_a_store_in_the_tables_moves_to_an_embedder_of_another_size(tmp_path: Path, db: Database) -> None:
    small = _Embedder("test-small", 8)
    store = await _store(tmp_path, db, small)
    try:
        await store.add_memories([record("p_1", f"fact {i} about the garden and town{i}") for i in range(30)])
        assert not (tmp_path / "chroma").exists()  # the database holds them, not Chroma
    finally:
        await store.close()
    large = _Embedder("test-large", 16)
    store = await _store(tmp_path, db, large)
    try:
        hits = await store.nearest("p_1", Vectors([hash_embedding("fact 3 about the garden and town3", 16)],
                                                  large.name), 1)
        assert hits[0].record.text == "fact 3 about the garden and town3"
    finally:
        await store.close()
    tables = TableClient(db)
    names = {c.name for c in tables.list_collections()}
    assert names == {"memories", "notes"}  # the rebuilt copy swapped in, none left behind
    page = tables.get_collection("memories").get(include=["embeddings", "metadatas"])
    assert len(page["ids"]) == 30 and page["embeddings"].shape == (30, 16)
    assert {md[VECTOR_KEY] for md in page["metadatas"]} == {"test-large"}


async def test_two_processes_on_the_tables_see_each_others_writes_and_deletes(tmp_path: Path, db: Database) -> None:
    """Two kith processes on one database (a bot and a command, or two machines on PostgreSQL), each with its own
    store and in-memory indexes: what one stores, the other finds; what one deletes (a forget), the other no longer
    finds, and no longer lists, through the shared change log (on SQLite, once the documented SHARED_CACHE_TRUST_S has
    passed)."""
    other_db = Database(db.url)
    settings = MemorySettings(store="database", embedder="none")
    off = EmbedderStatus("none", ready=False, disabled=True)
    first = await MemoryStore.open(settings, tmp_path / "a", None, off, changes=ChangeLog(db), database=db)
    second = await MemoryStore.open(settings, tmp_path / "b", None, off, changes=ChangeLog(other_db),
                                    database=other_db)
    try:
        assert await second.lexical("p_1", "lighthouse", 5) == []  # its index of p_1 built, empty
        kept = record("p_1", "PERSON has a lighthouse tattoo")
        await first.add_memory(kept)
        await asyncio.sleep(SHARED_CACHE_TRUST_S)
        assert [r.id for r, _s in await second.lexical("p_1", "lighthouse", 5)] == [kept.id]
        assert [r.id for r in await second.active_of("p_1")] == [kept.id]  # what /memory lists, from the index
        await second.delete_memories([kept.id])
        await asyncio.sleep(SHARED_CACHE_TRUST_S)
        assert await first.lexical("p_1", "lighthouse", 5) == []
        assert await first.active_of("p_1") == []  # a forget elsewhere is gone from the listing here too
        assert await first.get_memory(kept.id) is None
    finally:
        await first.close()
        await second.close()
        other_db.close()
