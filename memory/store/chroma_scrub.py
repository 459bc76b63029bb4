"""Taking forgotten words out of embedded Chroma's files: its vector index before a record is deleted, its own
SQLite file after.

Chroma keeps every add and update in its ``embeddings_queue`` table, metadata (our text and
evidence) and vector included, long after the record is deleted or rewritten; and its deletes
leave the old bytes in free space. Entries the collection's metadata segment has applied are
blanked in place (their sequence numbers stay, which Chroma relies on): a deleted record's lose
metadata and vector (a unit vector stands in); a kept record's (one a forget rewrote) lose their
metadata only, since the vector segment keeps its own progress and may replay them, and their
vector holds none of the words taken out (it embeds the memory's text, which the forget left
alone). Then the file is rebuilt with VACUUM. A Chroma server's storage is its own: nothing here
reaches it.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import struct
import uuid
from pathlib import Path
from typing import Any

from ground.tunables import CHROMA_SYNC_THRESHOLD, HASH_DIM, SQLITE_BUSY_TIMEOUT_MS, STORE_PAGE
from memory.store.reembed import DIM_KEY

log = logging.getLogger("kith.memory.chroma_scrub")
INDEX_SAVE_PREFIX = "kith-index-save-"  # the ids of the blank records a save writes and deletes
SAVE_BATCH = 200  # records a job of an index save writes: other Chroma work waits at most that long


def scrub_queue_sync(path: Path, ids: list[str], kept: list[str]) -> int:
    """Blank the applied queue entries of deleted ``ids`` and rewritten ``kept`` records, then VACUUM.

    Returns the entries blanked. Runs on the Chroma thread: Chroma must not write meanwhile.
    """
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
                                (unit_vector(size), seq_id),
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
        orphans = remove_orphan_indexes(path.parent, conn)
        if orphans:
            log.info("vector indexes of deleted collections removed count=%d", orphans)
        return blanked
    finally:
        conn.close()


def meaningless_vector(dim: int) -> list[float]:
    """A unit vector that says nothing: 1 then zeros (a zero vector has no direction, which Chroma refuses)."""
    return [1.0] + [0.0] * (dim - 1)


def unit_vector(size: int | None) -> bytes | None:
    """:func:`meaningless_vector` as ``size`` bytes of float32, as the queue stores vectors."""
    if not size:
        return None
    dim = size // 4
    return struct.pack(f"<{dim}f", *meaningless_vector(dim))


def delete_blanked_sync(col: Any, ids: list[str]) -> None:
    """Delete ``ids``, each vector overwritten with :func:`meaningless_vector` (of its own size) first.

    Chroma's vector index frees a deleted record's slot without clearing it, and saves the index to
    disk with the old vector in it; overwritten before the delete, the slot keeps nothing once Chroma
    saves the index again. A delete that fails puts the vectors back: the records stay as they were.
    """
    originals: dict[str, list[float]] = {}
    for start in range(0, len(ids), STORE_PAGE):
        page = col.get(ids=ids[start : start + STORE_PAGE], include=["embeddings"])
        originals.update((i, [float(x) for x in v]) for i, v in zip(page["ids"], page["embeddings"], strict=True))
    found = list(originals)
    for start in range(0, len(found), STORE_PAGE):
        chunk = found[start : start + STORE_PAGE]
        col.update(ids=chunk, embeddings=[meaningless_vector(len(originals[i])) for i in chunk])
    try:
        col.delete(ids=ids)
    except BaseException:
        for start in range(0, len(found), STORE_PAGE):
            chunk = found[start : start + STORE_PAGE]
            col.update(ids=chunk, embeddings=[originals[i] for i in chunk])
        raise


def index_save_writes(col: Any) -> int:
    """How many writes make Chroma save this collection's vector index (its ``sync_threshold``)."""
    config = getattr(col, "configuration", None) or {}
    hnsw = config.get("hnsw") if isinstance(config, dict) else None
    threshold = hnsw.get("sync_threshold") if isinstance(hnsw, dict) else None
    return int(threshold) if isinstance(threshold, int) and threshold > 0 else CHROMA_SYNC_THRESHOLD


def index_save_batches(ids: list[str], writes: int) -> list[tuple[bool, list[str]]]:
    """How a save of a collection's vector index is written, one Chroma job a batch: ``(blank, ids)``.

    Chroma saves the index after every ``writes`` (its sync threshold) writes to the collection, not
    when a record is deleted or the client closes: till then the file on disk holds every vector it
    held at the last save, those of records deleted since included. Rewriting live records' vectors
    with their own values (``ids``) changes nothing they hold and makes Chroma save. With too few live
    records for that to take a few round trips, blank records (:func:`index_save_ids`) are written and
    deleted instead: their freed slots stay in the index, holding nothing (so a small store's index
    file grows by that many slots a forget); blank records a kill leaves behind are removed when the
    collection is next opened. Batches are small so that other work on Chroma's one thread is not held
    up for long (pure).
    """
    if len(ids) < STORE_PAGE:
        blanks = index_save_ids(writes)
        return [(True, blanks[start : start + SAVE_BATCH]) for start in range(0, len(blanks), SAVE_BATCH)]
    out: list[tuple[bool, list[str]]] = []
    done = 0
    while done < writes:
        for start in range(0, len(ids), SAVE_BATCH):
            page = ids[start : start + SAVE_BATCH]
            out.append((False, page))
            done += len(page)
            if done >= writes:
                break
    return out


def save_batch_sync(col: Any, blank: bool, ids: list[str]) -> int:
    """One batch of a save (:func:`index_save_batches`), as one job: blank records written and deleted (never
    seen by another job), or live records' vectors rewritten as they are (a write between the read and the
    rewrite cannot come in). The writes it made."""
    if blank:
        col.add(ids=ids, embeddings=[meaningless_vector(_dim(col))] * len(ids))
        col.delete(ids=ids)
        return 2 * len(ids)
    page = col.get(ids=ids, include=["embeddings"])
    if len(page["ids"]):
        col.update(ids=list(page["ids"]), embeddings=[list(v) for v in page["embeddings"]])
    return max(1, len(page["ids"]))


def index_save_ids(writes: int) -> list[str]:
    """The ids of the blank records a save may write (``writes`` at most)."""
    return [f"{INDEX_SAVE_PREFIX}{i}" for i in range(writes)]


def remove_orphan_indexes(chroma_dir: Path, conn: sqlite3.Connection) -> int:
    """Remove the vector index directories no collection uses any more; how many went.

    Chroma keeps each collection's vector index in a directory named by its segment's id, and leaves
    it on disk when the collection is deleted (a migration's swap deletes the original): with every
    vector it held, those of records forgotten since among them."""
    try:
        live = {str(row[0]) for row in conn.execute("SELECT id FROM segments")}
    except sqlite3.Error as exc:  # another Chroma's layout: which directories are in use is not known, keep all
        log.warning("vector index directories not checked error=%s", type(exc).__name__)
        return 0
    removed = 0
    for entry in chroma_dir.iterdir():
        try:
            uuid.UUID(entry.name)
        except ValueError:
            continue
        if entry.is_dir() and not entry.is_symlink() and entry.name not in live:
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


def index_saved(chroma_dir: Path) -> bool:
    """Whether embedded Chroma has saved a vector index yet: each lives in a directory of its own beside its
    SQLite file, made at the first save."""
    try:
        return any(entry.is_dir() and any(entry.iterdir()) for entry in chroma_dir.iterdir())
    except FileNotFoundError:
        return False


def _dim(col: Any) -> int:
    meta = dict(col.metadata or {})
    return int(meta.get(DIM_KEY) or HASH_DIM)
