"""Taking forgotten words out of embedded Chroma's own SQLite file, after the records themselves are gone.

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

import sqlite3
import struct
from pathlib import Path

from ground.tunables import SQLITE_BUSY_TIMEOUT_MS, STORE_PAGE


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
        return blanked
    finally:
        conn.close()


def unit_vector(size: int | None) -> bytes | None:
    """A float32 vector of ``size`` bytes that says nothing: 1 then zeros (a zero vector has no direction)."""
    if not size:
        return None
    dim = size // 4
    return struct.pack(f"<{dim}f", 1.0, *([0.0] * (dim - 1)))
