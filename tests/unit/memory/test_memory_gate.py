"""The merge/conflict gate: one fact not two, disagreements flagged both ways, nothing lost or deleted."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from ground.db import Database
from llm.client import LLMClient
from memory.capture.merge_gate import Outcome
from memory.core.records import MemoryKind, Status, Tier
from memory.core.similarity import Via
from memory.encoders.embedders import EmbedderStatus
from memory.service import MemoryService
from memory.store.chroma import VECTOR_KEY, Collection
from memory.store.notes import Note
from memory.store.vectors import HASH_SPACE
from tests.support.clock import FakeClock
from tests.support.memory import POSTGRES, T0, TableEmbedder, candidate, memory_settings, record

BACKENDS = ("sqlite", "postgres")  # the memory tables on PostgreSQL, beside Chroma on SQLite

SQLITE = [0.7, math.sqrt(1 - 0.49), 0.0]  # cosine 0.7 with POSTGRES: related, not the same


async def open_service(tmp_path: Path, db: Database, embedder: TableEmbedder | None = None,
                       **memory: object) -> MemoryService:
    settings = memory_settings(tmp_path, embedder="none" if embedder is None else "test", **memory)
    status = (
        EmbedderStatus("test", ready=True, dim=3)
        if embedder is not None
        else EmbedderStatus("none", ready=False, disabled=True)
    )
    return await MemoryService.open(
        settings, db, LLMClient(settings.llm), clock=FakeClock(T0), embedder=embedder, status=status
    )


@pytest.fixture
async def lexical(tmp_path: Path, db: Database) -> AsyncIterator[MemoryService]:
    service = await open_service(tmp_path, db)
    yield service
    await service.close()


async def test_a_restated_fact_merges_into_one_with_two_receipts(lexical: MemoryService) -> None:
    first = await lexical.gate.admit("p_ana", candidate("I use Postgres", message="m1"))
    second = await lexical.gate.admit(
        "p_ana", candidate("Database is Postgres", message="m2", importance=0.6)
    )
    assert first.outcome is Outcome.NEW
    assert second.outcome is Outcome.MERGED and second.memory_id == first.memory_id
    (memory,) = await lexical.list_memories("p_ana")
    assert memory.text == "I use Postgres"
    assert memory.evidence == ("I use Postgres", "Database is Postgres")
    assert [s.message_id for s in memory.sources] == ["m1", "m2"]
    assert memory.importance == pytest.approx(0.65)  # reinforced a little above the stronger claim
    assert memory.tier is Tier.BELIEF and memory.revision == 2


async def test_the_configured_merge_threshold_is_the_one_the_gate_uses(tmp_path: Path, db: Database) -> None:
    strict = await open_service(tmp_path, db, merge_threshold=1.0)  # [memory] merge_threshold: never merge
    try:
        first = await strict.gate.admit("p_ana", candidate("I use Postgres", message="m1"))
        second = await strict.gate.admit("p_ana", candidate("Database is Postgres", message="m2"))
        assert (first.outcome, second.outcome) == (Outcome.NEW, Outcome.NEW)  # merged at the default 0.85
        assert len(await strict.list_memories("p_ana")) == 2
    finally:
        await strict.close()


async def test_the_configured_conflict_threshold_is_the_one_the_gate_uses(tmp_path: Path, db: Database) -> None:
    embedder = TableEmbedder({"I use Postgres": POSTGRES, "I moved to SQLite": SQLITE})
    lenient = await open_service(tmp_path, db, embedder, conflict_threshold=1.0)  # [memory]: never a conflict
    try:
        await lenient.gate.admit("p_ana", candidate("I use Postgres", message="m1"))
        moved = await lenient.gate.admit("p_ana", candidate("I moved to SQLite", message="m2"))
        assert moved.outcome is Outcome.NEW and moved.linked == ()  # a conflict at the default threshold
    finally:
        await lenient.close()


async def test_the_same_receipt_again_changes_nothing(lexical: MemoryService) -> None:
    first = await lexical.gate.admit("p_ana", candidate("I use Postgres", message="m1"))
    again = await lexical.gate.admit("p_ana", candidate("I use Postgres", message="m1"))
    assert again.outcome is Outcome.MERGED and again.memory_id == first.memory_id
    memory = await lexical.get(first.memory_id or "")
    assert memory is not None and memory.revision == 1 and memory.importance == 0.5


async def test_a_disagreement_of_meaning_is_flagged_both_ways_with_an_embedder(
    tmp_path: Path, db: Database
) -> None:
    embedder = TableEmbedder(
        {"I use Postgres": POSTGRES, "Database is Postgres": POSTGRES, "I moved to SQLite": SQLITE}
    )
    service = await open_service(tmp_path, db, embedder)
    try:
        kept = await service.gate.admit("p_ana", candidate("I use Postgres", message="m1"))
        await service.gate.admit("p_ana", candidate("Database is Postgres", message="m2"))
        moved = await service.gate.admit("p_ana", candidate("I moved to SQLite", message="m3"))
        assert moved.outcome is Outcome.CONFLICT and moved.via is Via.EMBEDDING
        assert moved.linked == (kept.memory_id,)
        old = await service.get(kept.memory_id or "")
        new = await service.get(moved.memory_id or "")
        assert old is not None and new is not None
        assert old.conflicts_with == (new.id,) and new.conflicts_with == (old.id,)
        assert old.status is Status.ACTIVE and new.status is Status.ACTIVE  # neither is dropped
        assert len(await service.list_memories("p_ana")) == 2
    finally:
        await service.close()


async def test_without_an_embedder_meaning_alone_never_makes_a_conflict(lexical: MemoryService) -> None:
    await lexical.gate.admit("p_ana", candidate("I use Postgres"))
    view = await lexical.gate.compare("p_ana", "I moved to SQLite", MemoryKind.FACT)
    # Chroma did return the stored memory with a hashed-vector cosine, but it is not trusted.
    assert len(view.records) == 1 and view.cosines == {}
    moved = await lexical.gate.admit("p_ana", candidate("I moved to SQLite", message="m3"))
    assert moved.outcome is Outcome.NEW and moved.linked == ()


async def test_lexical_conflicts_need_the_same_kind(lexical: MemoryService) -> None:
    vim = await lexical.gate.admit(
        "p_ana", candidate("Ana's favourite editor is Vim", kind=MemoryKind.PREFERENCE)
    )
    emacs = await lexical.gate.admit(
        "p_ana", candidate("Ana's favourite editor is Emacs", kind=MemoryKind.PREFERENCE)
    )
    assert emacs.outcome is Outcome.CONFLICT and emacs.via is Via.LEXICAL and emacs.linked == (vim.memory_id,)
    nano = await lexical.gate.admit(
        "p_ana", candidate("Ana's favourite editor is Nano", kind=MemoryKind.FACT)
    )
    assert nano.outcome is Outcome.NEW


async def test_clearing_a_conflict_clears_both_sides(lexical: MemoryService) -> None:
    vim = await lexical.gate.admit(
        "p_ana", candidate("Ana's favourite editor is Vim", kind=MemoryKind.PREFERENCE)
    )
    emacs = await lexical.gate.admit(
        "p_ana", candidate("Ana's favourite editor is Emacs", kind=MemoryKind.PREFERENCE)
    )
    assert await lexical.clear_conflict(vim.memory_id or "", emacs.memory_id or "")
    for memory in await lexical.list_memories("p_ana"):
        assert memory.conflicts_with == ()


async def test_an_embedder_failure_falls_back_to_lexical_and_still_writes(
    tmp_path: Path, db: Database
) -> None:
    embedder = TableEmbedder({"I use Postgres": POSTGRES})
    service = await open_service(tmp_path, db, embedder)
    try:
        first = await service.gate.admit("p_ana", candidate("I use Postgres", message="m1"))
        embedder.fail = True
        merged = await service.gate.admit("p_ana", candidate("Database is Postgres", message="m2"))
        fresh = await service.gate.admit("p_ana", candidate("Ana keeps two cats", message="m3"))
        assert merged.outcome is Outcome.MERGED and merged.memory_id == first.memory_id
        assert not merged.embedder_cosines
        assert fresh.outcome is Outcome.NEW
        assert service.store.vector_source.failures == 2
        raw = await asyncio.to_thread(
            service.store.chroma.collection(Collection.MEMORIES).get, ids=[fresh.memory_id], include=["metadatas"]
        )
        assert raw["metadatas"][0][VECTOR_KEY] == HASH_SPACE  # re-embedded at the next start
        assert len(await service.list_memories("p_ana")) == 2
    finally:
        await service.close()


async def test_concurrent_merges_into_one_memory_lose_no_receipt(lexical: MemoryService) -> None:
    base = await lexical.gate.admit("p_ana", candidate("Ana drinks green tea", message="m0"))
    results = await asyncio.gather(
        *(
            lexical.gate.admit(
                "p_ana", candidate("Ana drinks green tea daily", evidence=[f"green tea {i}"], message=f"m{i}")
            )
            for i in range(1, 5)
        )
    )
    assert {r.outcome for r in results} == {Outcome.MERGED}
    (memory,) = await lexical.list_memories("p_ana")
    assert memory.id == base.memory_id
    assert set(memory.evidence) == {"Ana drinks green tea"} | {f"green tea {i}" for i in range(1, 5)}
    assert memory.revision == 5


async def test_an_explicit_correction_supersedes_and_keeps_the_old_fact(lexical: MemoryService) -> None:
    old = await lexical.gate.admit("p_ana", candidate("Ana lives in Lyon", message="m1"))
    new = await lexical.gate.admit(
        "p_ana", candidate("Ana lives in Porto now", message="m2", corrects=old.memory_id)
    )
    assert new.outcome is Outcome.NEW and new.superseded == old.memory_id and new.linked == ()
    previous = await lexical.get(old.memory_id or "")
    assert previous is not None and previous.status is Status.SUPERSEDED and previous.valid_to == T0
    assert [m.text for m in await lexical.list_memories("p_ana")] == ["Ana lives in Porto now"]


async def test_a_correction_never_retires_a_pinned_fact_it_asks_instead(lexical: MemoryService) -> None:
    old = await lexical.gate.admit("p_ana", candidate("Ana lives in Lyon", message="m1"))
    pinned = await lexical.get(old.memory_id or "")
    assert pinned is not None
    await lexical.store.replace_memory(dataclasses.replace(pinned, pinned=True))  # as /pin leaves it
    new = await lexical.gate.admit(
        "p_ana", candidate("Ana lives in Porto now", message="m2", corrects=old.memory_id)
    )
    assert new.outcome is Outcome.CONFLICT and new.superseded is None and new.linked == (old.memory_id,)
    lyon, porto = await lexical.get(old.memory_id or ""), await lexical.get(new.memory_id or "")
    assert lyon is not None and lyon.status is Status.ACTIVE and lyon.pinned
    assert lyon.conflicts_with == (porto.id,) and porto.conflicts_with == (lyon.id,)  # the person is asked
    assert [m.id for m in await lexical.store.pinned_of("p_ana")] == [lyon.id]


async def test_promote_curates_staged_notes_and_deletes_nothing(lexical: MemoryService) -> None:
    notes = [
        Note(record("p_ana", "I use Postgres"), conversation="console:ana"),
        Note(
            record("p_ana", "Database is Postgres", when=T0 + timedelta(minutes=1)),
            conversation="console:ana",
        ),
        Note(record("p_ana", "Ana keeps bees", when=T0 + timedelta(minutes=2)), conversation="console:ana"),
    ]
    await lexical.store.add_notes(notes)
    report = await lexical.promote("p_ana")
    assert report.notes == 3 and report.outcomes == {"new": 2, "merged": 1}
    memories = await lexical.list_memories("p_ana")
    assert sorted(m.text for m in memories) == ["Ana keeps bees", "I use Postgres"]
    staged = await lexical.list_notes("p_ana")
    assert len(staged) == 3 and all(n.promoted_at is not None for n in staged)
    postgres = next(m for m in memories if m.text == "I use Postgres")
    assert {n.promoted_to for n in staged if "Postgres" in n.record.text} == {postgres.id}
    assert (await lexical.promote("p_ana")).notes == 0
