"""Vectors for memory texts: the embedder's when it works, else the hashed bag-of-words fallback.

Every vector is tagged with the space it came from: the embedder's name, or ``hash``. A hashed
vector's cosine measures shared words, not meaning, so it is never mistaken for an embedder's:
only two vectors of the embedder's own space make a trusted cosine. An embedder that fails or
times out never fails a write: the text gets a hashed vector, and the next start with a working
embedder re-embeds it (:mod:`memory.store.chroma`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ground.tunables import EMBED_TIMEOUT_S, HASH_DIM
from memory.core.records import MemoryRecord
from memory.encoders.embedders import Embedder, EmbedderStatus, Vector, hashed_vector

log = logging.getLogger("kith.memory.vectors")

HASH_SPACE = "hash"  # the space of hashed fallback vectors, not an embedder's


@dataclass(frozen=True, slots=True)
class Vectors:
    values: list[Vector]
    space: str  # the embedder's name, or HASH_SPACE

    @property
    def from_embedder(self) -> bool:
        return self.space != HASH_SPACE


@dataclass(frozen=True, slots=True)
class VectorHit:
    record: MemoryRecord
    cosine: float
    trusted: bool  # both vectors came from the embedder: the cosine means something


class VectorSource:
    """The embedder and its status: vectors for texts, hashed ones whenever the embedder cannot give them."""

    def __init__(self, embedder: Embedder | None, status: EmbedderStatus) -> None:
        self.embedder = embedder
        self.status = status
        self.failures = 0  # embeddings that failed since start and fell back to hashed vectors

    @property
    def ready(self) -> bool:
        return self.embedder is not None and self.status.ready

    @property
    def space(self) -> str:
        """The space new vectors come from while the embedder works."""
        return self.embedder.name if self.embedder is not None and self.status.ready else HASH_SPACE

    async def vectors(self, texts: Sequence[str], hash_dim: int = HASH_DIM) -> Vectors:
        """Embedder vectors for ``texts``; on any embedder failure, hashed ones of ``hash_dim``."""
        if self.embedder is not None and self.status.ready:
            started = time.perf_counter()
            try:
                values = await asyncio.wait_for(self.embedder.embed(list(texts)), EMBED_TIMEOUT_S)
                return Vectors(values, self.embedder.name)
            except Exception as exc:
                self.failures += 1
                log.warning(
                    "embedding failed, using lexical vectors name=%s error=%s ms=%.0f",
                    self.embedder.name,
                    type(exc).__name__,
                    (time.perf_counter() - started) * 1000,
                )
        return Vectors([hashed_vector(t, hash_dim) for t in texts], HASH_SPACE)

    def degrade(self, reason: str) -> None:
        """Stop using the embedder until the next start, saying why."""
        self.status = EmbedderStatus(self.status.configured, ready=False, reason=reason)
        self.embedder = None

    async def close(self) -> None:
        if self.embedder is not None:
            await self.embedder.close()
