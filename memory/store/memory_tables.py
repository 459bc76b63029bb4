"""The memory tables: kith's memories and staged notes, with their vectors, in kith's own database.

With ``[memory] store = "database"`` (the default on PostgreSQL) these hold what Chroma holds otherwise, so
PostgreSQL's replication, backups and managed offerings carry every memory with the rest of kith. A collection is
a name with its metadata (the vector space and size); a record is its metadata as JSON, its vector as float32
bytes, and the two fields the store filters on most (``person``, ``status``) in columns of their own under one
index. Recall keeps its own per-person indexes in memory (:mod:`memory.store.person_index`), so no vector
extension is needed: the nearest-neighbour queries left (the gate's candidates) read one person's vectors by that
index and rank them in NumPy.
"""

from __future__ import annotations

import sqlalchemy as sa

from ground.db import metadata

memory_collections = sa.Table(
    "memory_collections",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("metadata", sa.Text, nullable=False),  # JSON: Chroma's collection metadata, space and size
)

memory_records = sa.Table(
    "memory_records",
    metadata,
    sa.Column("collection", sa.String(200), primary_key=True),
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("person", sa.String(200), nullable=True),
    sa.Column("status", sa.String(32), nullable=True),
    sa.Column("metadata", sa.Text, nullable=False),  # JSON, as Chroma's record metadata
    sa.Column("vector", sa.LargeBinary, nullable=False),  # float32, little-endian
    sa.Index("ix_memory_records_person", "collection", "person", "status"),
)

__all__ = ["memory_collections", "memory_records"]
