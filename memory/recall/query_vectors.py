"""Query embeddings under a time budget: a reply never waits on the embedder.

:class:`QueryVectors` starts a query's embedding, waits at most the budget, and when it is late lets the
caller go on with the lexical path alone; the embedding finishes in the background and lands in an LRU keyed by
the normalised query (:class:`VectorCache`), so asking again is instant. The queries asked for while an embedder
call runs wait for the next call and go in it together (a micro-batch): a burst of replies costs a few embedder
calls, not one each, and a reply queued behind others waits for one call, not for all of theirs in turn.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import time
from collections import OrderedDict

from ground.tunables import RECALL_QUERY_CACHE
from memory.core.text import normalize
from memory.encoders.embedders import Vector
from memory.store.reads import MemoryReads
from memory.store.vectors import Vectors

log = logging.getLogger("kith.memory.recall")

QUERY_BATCH_MAX = 32  # queries in one embedder call: a burst's, gathered while the call before ran
LATE_LOG_EVERY_S = 60.0  # the "over budget" line at most this often; every late one is counted (``late``)


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
    """Query embeddings under a time budget, finished in the background and cached.

    The queries asked for while the embedder is busy are embedded together, in one call, once it is free (a burst
    of replies makes a few embedder calls, not one each); each caller still waits at most its own budget.
    """

    def __init__(self, store: MemoryReads, size: int = RECALL_QUERY_CACHE, batch_max: int = QUERY_BATCH_MAX) -> None:
        self.store = store
        self.batch_max = batch_max
        self._cache = VectorCache(size)
        self._pending: dict[str, asyncio.Future[Vectors | None]] = {}  # by key: asked for, not embedded yet
        self._waiting: dict[str, str] = {}  # key -> query: not yet handed to the embedder
        self._runner: asyncio.Task[None] | None = None  # the embedder calls under way, one after another
        self.late = 0  # embeddings that missed their budget
        self.calls = 0  # embedder calls made
        self._late_logged = 0.0  # monotonic time of the last "over budget" summary line
        self._late_since = 0  # late embeddings since that line

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
        future = self._pending.get(key)
        if future is None:
            future = self._pending[key] = asyncio.get_running_loop().create_future()
            self._waiting[key] = query
        if self._waiting and (self._runner is None or self._runner.done()):
            # Also when this query was already waiting: a runner cancelled before it took it left it there.
            self._runner = asyncio.get_running_loop().create_task(self._run(), name="recall-embed")
        if budget_s is None:
            return await asyncio.shield(future)
        done, _ = await asyncio.wait({future}, timeout=max(0.0, budget_s))
        if not done:
            self._count_late(budget_s)
            return None
        return future.result()

    def _count_late(self, budget_s: float) -> None:
        # Counted always; said at most once a minute (under a burst it is every reply's news, not each one's).
        self.late += 1
        self._late_since += 1
        now = time.monotonic()
        if now - self._late_logged >= LATE_LOG_EVERY_S:
            log.info("query embeddings over budget ms=%.0f: %d since the last such line (%d in all); lexical recall "
                     "for those replies", budget_s * 1000, self._late_since, self.late)
            self._late_logged, self._late_since = now, 0

    async def _run(self) -> None:
        """Embed what is waiting, at most ``batch_max`` queries a call, until nothing is."""
        while self._waiting:
            await asyncio.sleep(0)  # the queries asked for in this turn of the loop join the first call too
            keys = list(itertools.islice(self._waiting, self.batch_max))
            queries = [self._waiting.pop(k) for k in keys]
            self.calls += 1
            try:
                try:
                    vectors: Vectors | None = await self.store.vectors(queries)
                except Exception:  # the store falls back to hashed vectors itself; anything else: no vectors
                    log.exception("query embedding failed")
                    vectors = None
                if vectors is not None and vectors.from_embedder:  # hashed fallback vectors: nothing worth caching
                    for key, vector in zip(keys, vectors.values, strict=True):
                        self._cache.put(key, (vector, vectors.space))
                        self._resolve(key, Vectors([vector], vectors.space))
            finally:
                # Every query this call took is answered, whatever happened (failed, fallback, cancelled by close):
                # none is left with a waiter and no runner.
                for key in keys:
                    self._resolve(key, None)

    def _resolve(self, key: str, value: Vectors | None) -> None:
        future = self._pending.pop(key, None)
        if future is not None and not future.done():
            future.set_result(value)

    async def wait_idle(self) -> None:
        """Let every background embedding finish (tests, shutdown)."""
        while self._runner is not None and not self._runner.done():
            await asyncio.gather(self._runner, return_exceptions=True)

    async def close(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        for key in list(self._pending):
            self._resolve(key, None)
        self._waiting.clear()


__all__ = ["QueryVectors", "VectorCache", "query_key"]
