"""Where memories live: Chroma, each person's in-memory index, and the change log that keeps processes in step.

* ``memory_store``: :class:`MemoryStore`, every read and every compare-and-swap write, opened and closed together:
  ``reads`` (:class:`MemoryReads`) and ``writes`` (:class:`MemoryWrites`, :meth:`~MemoryWrites.edit`) over the
  same ``parts``.
* ``chroma``: the client, the two collections, every call on one thread; ``chroma_scrub`` takes forgotten words
  out of embedded Chroma's files.
* ``placement``, ``memory_tables``, ``table_client`` and ``where``: the memories kept in kith's own database
  instead (``[memory] store``), behind the part of Chroma's client the store uses.
* ``notes``: staged notes, what capture wrote down before the gate curated it.
* ``vectors``: a text's vector, the embedder's or the hashed fallback.
* ``person_index`` and ``index_search``: each person's active memories in memory, and the search over them.
* ``changes`` and ``catch_up``: the change log every writer appends to, and this store's reading of it.
* ``reembed``: moving stored vectors into the embedder's space, resumable.
"""

from memory.store.changes import ChangeLog
from memory.store.chroma import ChromaCollections, Collection, check_chroma, place_of
from memory.store.memory_store import MemoryStore
from memory.store.memory_tables import memory_collections, memory_records
from memory.store.moving import MOVED_INTO, CollectionCount, move_from_chroma, moves_from_chroma
from memory.store.notes import Note
from memory.store.reads import MemoryReads
from memory.store.reembed import Progress
from memory.store.vectors import Vectors, VectorSource
from memory.store.writes import MemoryNotFound, MemoryWrites, RevisionConflict

__all__ = [
    "MOVED_INTO",
    "ChangeLog",
    "ChromaCollections",
    "Collection",
    "CollectionCount",
    "MemoryNotFound",
    "MemoryReads",
    "MemoryStore",
    "MemoryWrites",
    "Note",
    "Progress",
    "RevisionConflict",
    "VectorSource",
    "Vectors",
    "check_chroma",
    "memory_collections",
    "memory_records",
    "move_from_chroma",
    "moves_from_chroma",
    "place_of",
]
