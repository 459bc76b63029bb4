"""A deterministic embedder and the store builders that the recall tests share."""

from __future__ import annotations

import asyncio
import hashlib
import math
import secrets
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ground.config import MemorySettings
from ground.db import Database
from memory.core.records import MemoryKind, MemoryRecord, Scope, Source, Status
from memory.core.text import content_words
from memory.encoders.embedders import EmbedderStatus
from memory.store.changes import ChangeLog
from memory.store.memory_store import MemoryStore
from tests.support.memory import T0

DIM = 64
# Words of one concept share an axis, so "pets" finds "dog" where keywords cannot.
CONCEPTS = {w: 0 for w in "dog dogs puppy pet pets animal animals cat cats".split()} | {
    w: 1 for w in "drink drinks tea coffee morning".split()}


class ConceptEmbedder:
    """A small deterministic embedder; ``gate`` closed makes it slow on purpose."""

    name = "test-concepts"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.started: list[str] = []
        self.finished: list[str] = []

    @staticmethod
    def vector(text: str) -> list[float]:
        vec = [0.0] * DIM
        for word in content_words(text):
            axis = CONCEPTS.get(word)
            if axis is None:
                axis = 8 + int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % (DIM - 8)
            vec[axis] += 1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec] if any(vec) else [1.0] + [0.0] * (DIM - 1)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.started.extend(texts)
        await self.gate.wait()
        self.finished.extend(texts)
        return [self.vector(t) for t in texts]

    async def close(self) -> None:
        return None


async def open_store(path: Path, embedder: ConceptEmbedder | None, db: Database | None = None) -> MemoryStore:
    """A store on ``path``; with ``db`` it keeps a change log there, as kith's processes do."""
    status = (EmbedderStatus("test", ready=True, dim=DIM) if embedder is not None
              else EmbedderStatus("none", ready=False, disabled=True))
    return await MemoryStore.open(MemorySettings(embedder="test" if embedder else "none"), path, embedder, status,
                                  changes=ChangeLog(db) if db is not None else None)


async def remember(store: MemoryStore, person: str, text: str, *, scope: Scope = Scope.DM,
                   status: Status = Status.ACTIVE, when: datetime = T0, pinned: bool = False,
                   conflicts_with: tuple[str, ...] = (), expires_at: datetime | None = None,
                   memory_id: str | None = None, importance: float = 0.5,
                   evidence: tuple[str, ...] | None = None, chat: str = "c1") -> MemoryRecord:
    """Write a fact for ``person`` straight into the store, past the gate: recall is what is under test."""
    record = MemoryRecord(id=memory_id or "m_" + secrets.token_hex(6), person=person, kind=MemoryKind.FACT,
                          text=text, evidence=evidence or (text,),
                          sources=(Source("telegram", chat, secrets.token_hex(3), when),),
                          scope=scope, status=status, pinned=pinned, conflicts_with=conflicts_with,
                          expires_at=expires_at, importance=importance, created_at=when, updated_at=when)
    return await store.add_memory(record)
