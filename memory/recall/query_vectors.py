"""Query embeddings under a time budget: a reply never waits on the embedder.

:class:`QueryVectors` starts a query's embedding, waits at most the budget, and when it is late lets the
caller go on with the lexical path alone; the embedding finishes in the background and lands in an LRU keyed by
the normalised query (:class:`VectorCache`), so asking again is instant.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import OrderedDict

from ground.tunables import RECALL_QUERY_CACHE
from memory.core.text import normalize
from memory.encoders.embedders import Vector
from memory.store.reads import MemoryReads
from memory.store.vectors import Vectors

log = logging.getLogger("kith.memory.recall")


def query_key(query: str) -> str:
    """The cache's key for ``query``: a digest, so the cache keeps no message's words (a sentence the person asks
    kith to forget is not held on in this process by the vectors cached for it)."""
    return hashlib.blake2b(normalize(query).casefold().encode("utf-8"), digest_size=16).hexdigest()


class VectorCache:
    """The newest ``size`` vectors (with their space) by key; the least recently used goes first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, tuple[Vector, str]] = OrderedDict()

    def get(self, key: str) -> tuple[Vector, str] | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: str, value: tuple[Vector, str]) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)


class QueryVectors:
    """Query embeddings under a time budget, finished in the background and cached."""

    def __init__(self, store: MemoryReads, size: int = RECALL_QUERY_CACHE) -> None:
        self.store = store
        self._cache = VectorCache(size)
        self._pending: dict[str, asyncio.Task[Vectors | None]] = {}
        self.late = 0  # embeddings that missed their budget

    def cached(self, query: str) -> bool:
        return query_key(query) in self._cache

    async def get(self, query: str, budget_s: float | None) -> Vectors | None:
        """The embedder's vector for ``query``; ``None`` when it is unavailable or later than ``budget_s``."""
        if not self.store.vector_source.ready:
            return None
        key = query_key(query)
        hit = self._cache.get(key)
        if hit is not None:
            return Vectors([hit[0]], hit[1])
        task = self._pending.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._embed(key, query), name="recall-embed")
            self._pending[key] = task
        if budget_s is None:
            return await asyncio.shield(task)
        done, _ = await asyncio.wait({task}, timeout=max(0.0, budget_s))
        if not done:
            self.late += 1
            log.info("query embedding over budget ms=%.0f; lexical recall for this reply", budget_s * 1000)
            return None
        return task.result()

    async def _embed(self, key: str, query: str) -> Vectors | None:
        try:
            vectors = await self.store.vectors([query])
            if not vectors.from_embedder:
                return None  # the store fell back to hashed vectors: nothing worth caching
            self._cache.put(key, (vectors.values[0], vectors.space))
            return vectors
        finally:
            self._pending.pop(key, None)

    async def wait_idle(self) -> None:
        """Let every background embedding finish (tests, shutdown)."""
        while self._pending:
            await asyncio.gather(*self._pending.values(), return_exceptions=True)

    async def close(self) -> None:
        tasks = list(self._pending.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["QueryVectors", "VectorCache", "query_key"]
