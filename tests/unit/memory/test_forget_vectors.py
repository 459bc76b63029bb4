"""A deleted memory's vector, a trace of its words, does not stay in the files of embedded Chroma's vector index.

Chroma's index frees a deleted record's slot without clearing it and saves the index to disk as new
records arrive; a plain delete left the vector there for good. These tests store enough memories for
Chroma to save its index, delete some, store more so that it saves again, and read every file under
Chroma's directory for the deleted vectors' bytes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from memory.encoders.embedders import EmbedderStatus
from memory.store.changes import ChangeLog
from memory.store.chroma import Collection
from memory.store.chroma_scrub import SAVE_BATCH, index_save_batches, index_save_ids
from memory.store.memory_store import MemoryStore
from memory.store.notes import Note
from memory.store.vectors import HASH_SPACE, Vectors
from tests.support.database import open_db
from tests.support.memory import memory_settings, record

NONE_STATUS = EmbedderStatus("none", ready=False, disabled=True)
PAGE = 500
# Chroma saves its vector index every thousand or so new records: enough before the delete for the
# vectors to be on disk, and enough after for the index to be saved again.
BEFORE, AFTER = 1_100, 1_100


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> npt.NDArray[np.float32]:
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def copies_on_disk(root: Path, vector: npt.NDArray[np.float32]) -> int:
    """How many times ``vector`` stands, as float32 at any alignment, in the files under ``root``."""
    found = 0
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        for align in range(4):
            values = np.frombuffer(data[align:align + (len(data) - align) // 4 * 4], dtype=np.float32)
            with np.errstate(invalid="ignore"):
                starts = np.flatnonzero(np.abs(values - vector[0]) < 1e-6)
            found += sum(1 for i in starts if i + len(vector) <= len(values)
                         and np.allclose(values[i:i + len(vector)], vector, atol=1e-5))
    return found


async def store_many(store: MemoryStore, kind: Collection, rng: np.random.Generator, n: int, tag: str
                     ) -> tuple[list[str], npt.NDArray[np.float32]]:
    """``n`` memories (or staged notes) of one person, each with its own random vector."""
    rows = unit_rows(rng, n, store.chroma.hash_dim(kind))
    ids: list[str] = []
    for start in range(0, n, PAGE):
        records = [record("p_ana", f"said {tag} {i}", memory_id=f"m_{tag}_{i}")
                   for i in range(start, min(n, start + PAGE))]
        vectors = Vectors([r.tolist() for r in rows[start:start + PAGE]], HASH_SPACE)
        if kind is Collection.MEMORIES:
            await store.add_memories(records, vectors)
        else:
            await store.add_notes([Note(r) for r in records], vectors)
        ids += [r.id for r in records]
    return ids, rows


@pytest.fixture
async def opened(tmp_path: Path) -> AsyncIterator[tuple[MemoryStore, Path]]:
    settings = memory_settings(tmp_path)
    db = open_db(tmp_path)
    store = await MemoryStore.open(settings.memory, settings.storage.data_path(), None, NONE_STATUS,
                                   changes=ChangeLog(db))
    try:
        yield store, settings.storage.data_path() / "chroma"
    finally:
        await store.close()
        db.close()


@pytest.mark.parametrize("kind", [Collection.MEMORIES, Collection.NOTES])
async def test_a_deleted_records_vector_is_gone_from_the_index_files_once_chroma_saves_them(
        opened: tuple[MemoryStore, Path], kind: Collection) -> None:
    store, chroma_dir = opened
    rng = np.random.default_rng(7)
    ids, rows = await store_many(store, kind, rng, BEFORE, "a")
    forgotten, kept = 7, 100
    assert copies_on_disk(chroma_dir, rows[forgotten]) >= 1  # saved: what the delete must take back

    delete = store.delete_memories if kind is Collection.MEMORIES else store.delete_notes
    assert await delete([ids[forgotten]]) == 1
    await store_many(store, kind, rng, AFTER, "b")

    assert copies_on_disk(chroma_dir, rows[forgotten]) == 0
    assert copies_on_disk(chroma_dir, rows[kept]) >= 1  # the reading finds what is still there
    get = store.get_memories if kind is Collection.MEMORIES else store.get_notes
    assert len(await get([ids[forgotten], ids[kept]])) == 1


@pytest.mark.parametrize("left", [BEFORE - 3, 40], ids=["most-left", "few-left"])
async def test_a_forget_leaves_no_deleted_vector_in_the_index_files_at_once(
        opened: tuple[MemoryStore, Path], left: int) -> None:
    store, chroma_dir = opened
    rng = np.random.default_rng(9)
    ids, rows = await store_many(store, Collection.MEMORIES, rng, BEFORE, "a")
    forgotten = list(range(BEFORE - left))
    kept = [i for i in range(BEFORE) if i not in set(forgotten)]
    assert copies_on_disk(chroma_dir, rows[forgotten[-1]]) >= 1

    # What a forget does to the store: delete, then scrub Chroma's files. No write comes after.
    gone = [ids[i] for i in forgotten]
    assert await store.delete_memories(gone) == len(gone)
    await store.scrub_log(gone)

    assert [copies_on_disk(chroma_dir, rows[i]) for i in (forgotten[0], forgotten[-1])] == [0, 0]
    # Nor their words: no entry of Chroma's own queue keeps a forgotten record's metadata.
    with sqlite3.connect(chroma_dir / "chroma.sqlite3") as conn:
        marks = ",".join("?" * len(gone))
        assert conn.execute(f"SELECT count(*) FROM embeddings_queue WHERE id IN ({marks}) AND metadata IS NOT NULL",
                            gone).fetchone() == (0,)
    assert copies_on_disk(chroma_dir, rows[kept[0]]) >= 1
    # Every other memory keeps its own vector: the nearest to a memory's vector is that memory.
    for i in (kept[0], kept[len(kept) // 2], kept[-1]):
        found, _distances = await store.chroma.run(store.chroma.nearest_sync, None, rows[i].tolist(), 3)
        assert found[0] == ids[i]


async def test_a_forget_removes_the_index_files_a_deleted_collection_left(opened: tuple[MemoryStore, Path]) -> None:
    store, chroma_dir = opened
    rng = np.random.default_rng(10)
    # A migration to another vector size swaps in its copy and deletes the original collection; Chroma keeps the
    # original's index directory, every vector in it.
    old = await store.chroma.run(store.chroma.client.create_collection, "memories-before", embedding_function=None)
    rows = unit_rows(rng, BEFORE, 32)
    for start in range(0, BEFORE, PAGE):
        await store.chroma.run(old.add, ids=[f"o{i}" for i in range(start, min(BEFORE, start + PAGE))],
                               embeddings=[r.tolist() for r in rows[start:start + PAGE]])
    await store.chroma.run(store.chroma.client.delete_collection, "memories-before")
    assert copies_on_disk(chroma_dir, rows[5]) >= 1
    ids, _rows = await store_many(store, Collection.MEMORIES, rng, 3, "a")

    assert await store.delete_memories([ids[0]]) == 1
    await store.scrub_log([ids[0]])

    assert copies_on_disk(chroma_dir, rows[5]) == 0
    assert await store.get_memory(ids[1]) is not None


async def test_blank_records_a_killed_save_left_are_gone_at_the_next_open(tmp_path: Path) -> None:
    settings = memory_settings(tmp_path)
    db = open_db(tmp_path)
    store = await MemoryStore.open(settings.memory, settings.storage.data_path(), None, NONE_STATUS,
                                   changes=ChangeLog(db))
    try:
        await store_many(store, Collection.NOTES, np.random.default_rng(11), 2, "a")
        notes = store.chroma.collection(Collection.NOTES)
        blank = [1.0] + [0.0] * (store.chroma.hash_dim(Collection.NOTES) - 1)
        # What a kill between a save's add and its delete leaves: records with a vector and no metadata.
        await store.chroma.run(notes.add, ids=index_save_ids(3), embeddings=[blank] * 3)
    finally:
        await store.close()
    store = await MemoryStore.open(settings.memory, settings.storage.data_path(), None, NONE_STATUS,
                                   changes=ChangeLog(db))
    try:
        assert await store.chroma.count(Collection.NOTES) == 2
        assert len(await store.notes_of("p_ana")) == 2
    finally:
        await store.close()
        db.close()


@pytest.mark.parametrize("live", [0, 3, 499, 500, 2_500])
def test_an_index_save_writes_enough_in_batches_that_hold_others_up_briefly(live: int) -> None:
    ids = [f"m_{i}" for i in range(live)]
    batches = index_save_batches(ids, 1_000)
    assert all(0 < len(batch) <= SAVE_BATCH for _blank, batch in batches)
    writes = sum(2 * len(batch) if blank else len(batch) for blank, batch in batches)
    assert writes >= 1_000
    assert all(blank for blank, _b in batches) == (live < 500)  # blank records only where live ones are few
