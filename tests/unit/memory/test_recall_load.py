"""Recall under load (issue #34): no query embedding for a person with nothing a vector could find, the embeddings of
a burst in few embedder calls, and a query whose vector is late still answered from keywords in the prompt."""

from __future__ import annotations

import asyncio
import gc
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from ground.config import BudgetSettings, RecallSettings
from ground.db import Database
from ground.tunables import MEMORY_SLOTS_TIMEOUT_S
from ground.turns import Speaker
from ground.types import ChatKind
from memory.core.records import MemoryKind, MemoryRecord, Scope, Source
from memory.graph.view import PersonGraph
from memory.recall import RecallEngine
from memory.recall.prompt_part import RecallMemoryContext
from memory.store.memory_store import MemoryStore
from memory.store.notes import Note
from memory.store.reads import MemoryReads
from tests.support.clock import FakeClock
from tests.support.memory import T0
from tests.support.messages import inbound
from tests.support.recall import ConceptEmbedder, open_store, remember

ANA = Speaker("p-ana", "console:ana", "Ana")
NEW = Speaker("p-new", "console:new", "New")


class CountingEmbedder(ConceptEmbedder):
    """Counts the embedder's calls (each a list of texts)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    async def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls.append(list(texts))
        return await super().embed(texts)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
async def store(tmp_path: Path, embedder: CountingEmbedder, db: Database) -> AsyncIterator[MemoryStore]:
    opened = await open_store(tmp_path / "data", embedder, db)
    yield opened
    await opened.close()


def context(store: MemoryStore, clock: FakeClock, **recall: object) -> tuple[RecallEngine, RecallMemoryContext]:
    settings = RecallSettings(**recall)  # type: ignore[arg-type]
    engine = RecallEngine(store, settings, clock)
    return engine, RecallMemoryContext(engine, settings, BudgetSettings())


def queries_embedded(embedder: CountingEmbedder, *queries: str) -> list[str]:
    return [q for call in embedder.calls for q in call if q in queries]


async def test_a_person_with_nothing_stored_gets_no_query_embedding(store: MemoryStore, embedder: CountingEmbedder,
                                                                    clock: FakeClock) -> None:
    await remember(store, ANA.person, "Ana's dog is called Biscuit")
    await store.indexes.warm()  # as kith does at start
    embedder.calls.clear()
    engine, ctx = context(store, clock)
    slots = await ctx.slots(NEW, inbound("how is my dog?", sender_id="new", sender_name="New"))
    assert slots.recalled == "" and queries_embedded(embedder, "how is my dog?") == []
    assert engine.counts[False].searches == 1 and engine.counts[False].embedded == 0
    # Ana has a memory with a vector: her query is embedded.
    slots = await ctx.slots(ANA, inbound("how are my pets?"))
    assert queries_embedded(embedder, "how are my pets?") == ["how are my pets?"]
    assert engine.counts[True].embedded == 1 and engine.counts[True].fell_back == 0


async def test_without_a_warm_up_only_the_first_search_of_a_new_person_embeds(
        store: MemoryStore, embedder: CountingEmbedder, clock: FakeClock) -> None:
    engine, _ctx = context(store, clock)
    await engine.search(NEW.person, "first question", limit=6, shared_only=False, budget_s=None)
    await engine.search(NEW.person, "second question", limit=6, shared_only=False, budget_s=None)
    assert queries_embedded(embedder, "first question", "second question") == ["first question"]


async def test_a_private_memory_is_nothing_to_find_in_a_group_but_a_staged_note_is(
        store: MemoryStore, embedder: CountingEmbedder, clock: FakeClock) -> None:
    await remember(store, ANA.person, "Ana's dog is called Biscuit", scope=Scope.DM)
    await store.indexes.warm()
    engine, _ctx = context(store, clock)
    await engine.search(ANA.person, "dog in the group", limit=6, shared_only=True, budget_s=None)
    assert queries_embedded(embedder, "dog in the group") == []
    record = MemoryRecord(id="n_" + secrets.token_hex(6), person=NEW.person, kind=MemoryKind.FACT,
                          text="New starts pottery", evidence=("New starts pottery",),
                          sources=(Source("telegram", "c1", "x", T0),), scope=Scope.DM, created_at=T0, updated_at=T0)
    await store.add_notes([Note(record)])
    found = await engine.search(NEW.person, "pottery class", limit=6, shared_only=False, budget_s=None)
    assert queries_embedded(embedder, "pottery class") == ["pottery class"]
    assert [r.record.id for r in found.items] == [record.id]


async def test_a_group_query_is_embedded_when_a_shared_memory_has_a_vector(
        store: MemoryStore, embedder: CountingEmbedder, clock: FakeClock) -> None:
    await remember(store, ANA.person, "Ana's dog loves the beach", scope=Scope.SHARED)
    await store.indexes.warm()
    _engine, ctx = context(store, clock)
    message = inbound("how are the pets?", chat_id="g1", chat_kind=ChatKind.GROUP)
    slots = await ctx.slots(ANA, message)
    assert queries_embedded(embedder, "how are the pets?") == ["how are the pets?"] and "beach" in slots.recalled


async def test_a_burst_of_queries_makes_fewer_embedder_calls_than_queries(
        store: MemoryStore, embedder: CountingEmbedder, clock: FakeClock) -> None:
    await remember(store, ANA.person, "Ana's dog is called Biscuit")
    engine, _ctx = context(store, clock)
    embedder.calls.clear()
    embedder.gate.clear()  # the first call is slow: the rest of the burst gathers behind it
    questions = [f"question {i} about the dog" for i in range(20)]
    searches = [asyncio.ensure_future(engine.search(ANA.person, q, limit=6, shared_only=False, budget_s=None))
                for q in questions]
    await asyncio.sleep(0.05)
    embedder.gate.set()
    results = await asyncio.gather(*searches)
    assert all(not r.lexical_only for r in results)  # each got its own vector
    embedded = [q for call in embedder.calls for q in call if q in questions]
    assert sorted(embedded) == sorted(questions)  # each embedded once
    assert len([c for c in embedder.calls if set(c) & set(questions)]) <= 2 < len(questions)
    assert engine.queries.calls <= 2


async def test_each_query_keeps_its_own_budget_in_a_batch(store: MemoryStore, embedder: CountingEmbedder,
                                                         clock: FakeClock) -> None:
    await remember(store, ANA.person, "Ana's dog is called Biscuit")
    engine, _ctx = context(store, clock)
    embedder.gate.clear()
    late = await engine.search(ANA.person, "a quick one about pets", limit=6, shared_only=False, budget_s=0.02)
    assert late.lexical_only and engine.counts[True].fell_back == 1 and engine.queries.late == 1
    waiting = asyncio.ensure_future(engine.search(ANA.person, "a patient one about pets", limit=6,
                                                  shared_only=False, budget_s=None))
    await asyncio.sleep(0.02)
    embedder.gate.set()
    assert not (await waiting).lexical_only
    await engine.settle()
    assert engine.queries.cached("a quick one about pets")  # the late one finished in the background
    await engine.close()


async def test_an_embedding_budget_past_the_replys_memory_timeout_still_leaves_keywords_in_the_prompt(
        store: MemoryStore, embedder: CountingEmbedder, clock: FakeClock) -> None:
    by_keyword = await remember(store, ANA.person, "Ana bought pets insurance")
    engine, ctx = context(store, clock, embed_budget_ms=5_000)  # an operator's generous budget
    embedder.gate.clear()  # the embedder never answers in time
    async with asyncio.timeout(MEMORY_SLOTS_TIMEOUT_S):  # as conversation.core waits for the memory part
        slots = await ctx.slots(ANA, inbound("how are my pets doing?"))
    assert slots.shown_ids == (by_keyword.id,) and "insurance" in slots.recalled
    assert engine.counts[True].fell_back == 1 and engine.counts[True].slots_finished == 1
    embedder.gate.set()
    await engine.close()


class SlowGraph:
    """A person's graph that takes longer to read than a reply may wait."""

    async def of(self, person: str) -> PersonGraph:
        await asyncio.sleep(5)
        raise AssertionError("never read in time")


async def test_a_memory_part_out_of_time_shrinks_to_keywords_instead_of_vanishing(
        store: MemoryStore, clock: FakeClock) -> None:
    pin = await remember(store, ANA.person, "Ana is allergic to penicillin", pinned=True)
    by_keyword = await remember(store, ANA.person, "Ana bought pets insurance")
    settings = RecallSettings()
    fast = RecallEngine(store, settings, clock)
    await fast.search(ANA.person, "anything", limit=6, shared_only=False, budget_s=None)  # index built, caught up
    engine = RecallEngine(store, settings, clock, graph=SlowGraph())
    ctx = RecallMemoryContext(engine, settings, BudgetSettings())
    async with asyncio.timeout(MEMORY_SLOTS_TIMEOUT_S):  # as conversation.core waits for the memory part
        slots = await ctx.slots(ANA, inbound("how are my pets doing?"))
    assert slots.shown_ids == (pin.id, by_keyword.id)
    assert "penicillin" in slots.pinned and "insurance" in slots.recalled
    assert engine.counts[True].slots_shrunk == 1 and engine.counts[True].slots_finished == 1
    # In a group, nothing said in private, shrunk or not.
    group = inbound("how are my pets doing?", chat_id="g1", chat_kind=ChatKind.GROUP)
    async with asyncio.timeout(MEMORY_SLOTS_TIMEOUT_S):
        in_group = await ctx.slots(ANA, group)
    assert in_group.shown_ids == () and in_group.recalled == "" and in_group.pinned == ""


async def test_a_catch_up_left_running_past_the_wait_fails_quietly() -> None:
    # MemoryReads.held_soon gives up on a slow catch-up; when it fails later that is the next lookup's news.
    release = asyncio.Event()

    async def with_others() -> None:
        await release.wait()
        raise RuntimeError("chroma is down")

    reads = SimpleNamespace(changes=object(), indexes=SimpleNamespace(built=lambda person: object()),
                            catch_up=SimpleNamespace(current=lambda: False, with_others=with_others))
    loop = asyncio.get_running_loop()
    unretrieved: list[dict[str, object]] = []
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))
    try:
        assert await MemoryReads.held_soon(reads, "p-ana", 0.0) is None  # type: ignore[arg-type]
        release.set()
        for _ in range(3):
            await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(before)
    assert unretrieved == []
