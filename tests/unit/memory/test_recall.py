"""Recall over the real (embedded) Chroma store: what a reply's automatic memory context contains.

Isolation (only the speaker's own live memories; nothing private in a group), the time budget
on the query embedding, the conflict notice, pinned facts, staged notes, the prompt budget,
use credit, and keyword matches in Chinese, Japanese and Polish. The stores keep a change log,
as kith's do, so recall is answered from memory and still never shows what another process forgot.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ground.config import BudgetSettings, RecallSettings
from ground.db import Database
from ground.turns import CompletedTurn, Speaker
from ground.types import ChatKind, InboundMessage
from kith.app.schema import create_schema
from memory.core.records import Horizon, MemoryKind, MemoryRecord, Scope, Source, Status
from memory.core.vector_table import cosine
from memory.forgetting import Forgetter, TombstoneBook
from memory.forgetting import tombstones as _tombstone_tables  # noqa: F401  (declares memory_tombstones)
from memory.recall import RecallEngine, UseRecorder
from memory.recall.prompt_part import RecallMemoryContext
from memory.store.memory_store import MemoryStore
from memory.store.notes import Note
from persona.labels import CONFLICT_NOTICE, RECALLED_NOTICE, TRUNCATED_FLAG
from tests.support.clock import FakeClock
from tests.support.memory import T0
from tests.support.messages import inbound
from tests.support.recall import ConceptEmbedder, open_store, remember

ANA = Speaker("p-ana", "console:ana", "Ana")
BEN = Speaker("p-ben", "console:ben", "Ben")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0 + timedelta(days=1))


@pytest.fixture
def embedder() -> ConceptEmbedder:
    return ConceptEmbedder()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """Not the shared fixture's ``kith.db``: a test opens that file as a second database, apart from this one."""
    database = Database(f"sqlite:///{tmp_path / 'memory.db'}")
    create_schema(database)
    yield database
    database.close()


@pytest.fixture
async def store(tmp_path: Path, embedder: ConceptEmbedder, db: Database) -> AsyncIterator[MemoryStore]:
    opened = await open_store(tmp_path / "data", embedder, db)
    yield opened
    await opened.close()


@pytest.fixture
async def lexical_store(tmp_path: Path, db: Database) -> AsyncIterator[MemoryStore]:
    opened = await open_store(tmp_path / "lexical", None, db)
    yield opened
    await opened.close()


def context(store: MemoryStore, clock: FakeClock, **recall: object) -> tuple[RecallEngine, RecallMemoryContext]:
    settings = RecallSettings(**recall)  # type: ignore[arg-type]
    engine = RecallEngine(store, settings, clock)
    return engine, RecallMemoryContext(engine, settings, BudgetSettings())


def group(text: str, sender: str = "ana", name: str = "Ana") -> InboundMessage:
    return inbound(text, chat_id="g1", chat_kind=ChatKind.GROUP, sender_id=sender, sender_name=name)


async def test_only_the_speakers_own_live_memories_are_recalled(store: MemoryStore, clock: FakeClock,
                                                                tmp_path: Path) -> None:
    biscuit = await remember(store, ANA.person, "Ana's dog is called Biscuit")
    await remember(store, BEN.person, "Ben's dog is called Pluto")
    await remember(store, ANA.person, "Ana's dog was called Rex", status=Status.SUPERSEDED)
    await remember(store, ANA.person, "Ana walks the dog at dawn", status=Status.RETIRED)
    await remember(store, ANA.person, "Ana's dog bit the postman", status=Status.FORGOTTEN)
    await remember(store, ANA.person, "Ana wants dog treats tonight", expires_at=T0 + timedelta(hours=1))
    deleted = await remember(store, ANA.person, "Ana's dog hates the vacuum cleaner")
    db = Database(f"sqlite:///{tmp_path / 'kith.db'}")
    create_schema(db)
    try:
        forgetter = Forgetter(store, TombstoneBook(db), clock)
        result = await forgetter.apply(await forgetter.plan(ANA.person, "vacuum cleaner"))
        assert result.memories_deleted == 1
    finally:
        db.close()
    engine, ctx = context(store, clock)
    slots = await ctx.slots(ANA, inbound("tell me about my dog"))
    assert slots.shown_ids == (biscuit.id,)
    assert "Biscuit" in slots.recalled and slots.recalled.startswith(RECALLED_NOTICE)
    for gone in ("Pluto", "Rex", "dawn", "postman", "treats", "vacuum", deleted.id):
        assert gone not in slots.recalled
    found = await engine.search(ANA.person, "dog", limit=20, shared_only=False, budget_s=None)
    assert [r.record.id for r in found.items] == [biscuit.id] and not found.lexical_only
    ben = await ctx.slots(BEN, inbound("tell me about my dog", sender_id="ben", sender_name="Ben"))
    assert "Pluto" in ben.recalled and "Biscuit" not in ben.recalled


async def test_a_fact_said_in_private_never_surfaces_in_a_group(store: MemoryStore, clock: FakeClock) -> None:
    private = await remember(store, ANA.person, "Ana's dog Biscuit is on medication for anxiety")
    shared = await remember(store, ANA.person, "Ana's dog Biscuit loves the beach", scope=Scope.SHARED)
    pinned_private = await remember(store, ANA.person, "Ana's dog Biscuit needs a pill at noon", pinned=True)
    _engine, ctx = context(store, clock)
    in_group = await ctx.slots(ANA, group("how is Biscuit the dog?"))
    assert shared.id in in_group.shown_ids
    assert private.id not in in_group.shown_ids and pinned_private.id not in in_group.shown_ids
    assert "medication" not in in_group.recalled + in_group.pinned and "pill" not in in_group.pinned
    in_dm = await ctx.slots(ANA, inbound("how is Biscuit the dog?"))
    assert {private.id, shared.id, pinned_private.id} <= set(in_dm.shown_ids)
    assert "pill at noon" in in_dm.pinned


async def test_a_slow_query_embedding_leaves_this_reply_on_keywords_and_the_next_on_meaning(
        store: MemoryStore, embedder: ConceptEmbedder, clock: FakeClock) -> None:
    only_by_meaning = await remember(store, ANA.person, "My dog Biscuit")
    # Said a day apart: said in one exchange, each would come up as the other's context.
    by_keyword = await remember(store, ANA.person, "Ana bought pets insurance", when=T0 - timedelta(days=1))
    engine, ctx = context(store, clock, embed_budget_ms=50)
    question = "how are my pets doing?"
    embedder.gate.clear()
    first = await asyncio.wait_for(ctx.slots(ANA, inbound(question)), 5)
    # Back before the embedder finished, with what keywords found.
    assert question in embedder.started and question not in embedder.finished
    assert by_keyword.id in first.shown_ids and only_by_meaning.id not in first.shown_ids
    embedder.gate.set()
    await engine.settle()
    assert question in embedder.finished
    second = await ctx.slots(ANA, inbound("How are my pets   doing?"))  # the same query, normalised
    assert only_by_meaning.id in second.shown_ids and by_keyword.id in second.shown_ids
    assert embedder.started.count(question) == 1  # the cached vector was used, not a new embedding
    result = await engine.search(ANA.person, question, limit=6, shared_only=False, budget_s=0.0)
    assert not result.lexical_only


async def test_a_conflicting_fact_makes_the_model_ask_which_is_current(store: MemoryStore, clock: FakeClock) -> None:
    tea = await remember(store, ANA.person, "Ana drinks green tea every morning", memory_id="m_tea",
                         conflicts_with=("m_coffee",))
    coffee = await remember(store, ANA.person, "Ana drinks black coffee every morning", memory_id="m_coffee",
                            conflicts_with=("m_tea",))
    _engine, ctx = context(store, clock)
    slots = await ctx.slots(ANA, inbound("what should I drink this morning?"))
    assert {tea.id, coffee.id} <= set(slots.shown_ids)
    assert CONFLICT_NOTICE in slots.recalled and "ask the person which is current" in slots.recalled
    assert slots.recalled.count("- DISPUTED ") == 2
    # Once one side is superseded the other is simply current: no notice.
    from dataclasses import replace
    await store.replace_memory(replace(coffee, status=Status.SUPERSEDED, valid_to=clock()))
    slots = await ctx.slots(ANA, inbound("what should I drink this morning?"))
    assert tea.id in slots.shown_ids and coffee.id not in slots.shown_ids
    assert CONFLICT_NOTICE not in slots.recalled and "DISPUTED " not in slots.recalled


async def test_keyword_recall_matches_chinese_japanese_and_polish(lexical_store: MemoryStore,
                                                                  clock: FakeClock) -> None:
    # Said days apart: facts said in one exchange would come up as each other's context.
    polish = await remember(lexical_store, ANA.person, "Mój pies Burek mieszka ze mną w Warszawie")
    chinese = await remember(lexical_store, ANA.person, "我最喜欢吃北京烤鸭", when=T0 - timedelta(days=1))
    japanese = await remember(lexical_store, ANA.person, "週末は京都で写真を撮ります", when=T0 - timedelta(days=2))
    await remember(lexical_store, ANA.person, "Ana plays the cello on Sundays", when=T0 - timedelta(days=3))
    engine, ctx = context(lexical_store, clock)
    for query, expected in (("Co słychać w Warszawa?", polish), ("烤鸭好吃吗？", chinese),
                            ("京都の写真を見せて", japanese), ("Jak się ma pies?", polish)):
        result = await engine.search(ANA.person, query, limit=6, shared_only=False, budget_s=0.1)
        assert result.lexical_only and [r.record.id for r in result.items][:1] == [expected.id], query
        slots = await ctx.slots(ANA, inbound(query))
        assert slots.shown_ids == (expected.id,) and expected.text in slots.recalled


async def test_pinned_facts_come_first_capped_at_the_latest_twelve(store: MemoryStore, clock: FakeClock) -> None:
    pins = [await remember(store, ANA.person, f"Pinned rule number {i}: call me Ania", pinned=True,
                           when=T0 - timedelta(hours=20 - i)) for i in range(14)]
    _engine, ctx = context(store, clock)
    slots = await ctx.slots(ANA, inbound("what should you call me? a rule?"))
    assert slots.shown_ids[:12] == tuple(p.id for p in reversed(pins[2:]))  # the latest twelve, newest first
    assert slots.pinned.index("number 13:") < slots.pinned.index("number 2:")
    assert "number 0:" not in slots.pinned and "number 1:" not in slots.pinned
    # The older pins are a budget's casualties, not lost: recall still reaches them.
    assert "number 0:" in slots.recalled and "number 1:" in slots.recalled
    # A pinned fact in the pinned part is not repeated among the recalled candidates.
    assert not any(f"number {i}:" in slots.recalled for i in range(2, 14))


async def test_staged_notes_are_recalled_until_curated_or_lapsed(store: MemoryStore, clock: FakeClock) -> None:
    def note(text: str, *, when: datetime = T0, horizon: Horizon | None = None) -> Note:
        record = MemoryRecord(id="n_" + secrets.token_hex(6), person=ANA.person, kind=MemoryKind.FACT, text=text,
                              evidence=(text,), sources=(Source("telegram", "c1", "x", when),), scope=Scope.DM,
                              created_at=when, updated_at=when)
        return Note(record, horizon=horizon)

    fresh = note("Ana starts a pottery class on Tuesday")
    lapsed = note("Ana wants pottery clay delivered today", when=T0 - timedelta(days=40), horizon=Horizon.ONE_OFF)
    handled = note("Ana sold her pottery wheel")
    await store.add_notes([fresh, lapsed, handled])
    await store.mark_promoted(handled.record.id, None, clock())
    engine, ctx = context(store, clock)
    slots = await ctx.slots(ANA, inbound("how is the pottery going?"))
    assert slots.shown_ids == (fresh.record.id,) and "not yet reviewed" in slots.recalled
    await engine.settle()  # the note's vector is embedded after the reply, for the next one
    result = await engine.search(ANA.person, "pottery", limit=6, shared_only=False, budget_s=None)
    assert [r.record.id for r in result.items] == [fresh.record.id] and result.items[0].match.cosine


async def test_the_recalled_part_keeps_to_six_items_and_its_character_budget(store: MemoryStore,
                                                                          clock: FakeClock) -> None:
    short = [await remember(store, ANA.person, f"Ana grew garden vegetable number {i}") for i in range(10)]
    _engine, ctx = context(store, clock)
    slots = await ctx.slots(ANA, inbound("how is my garden?"))
    assert len(slots.shown_ids) == 6 and set(slots.shown_ids) <= {m.id for m in short}
    assert TRUNCATED_FLAG not in slots.recalled
    for i in range(10):
        await remember(store, ANA.person, f"Garden diary {i}: " + "the tomatoes and the garden beans grew " * 20,
                       importance=0.9)
    slots = await ctx.slots(ANA, inbound("how is my garden diary?"))
    assert 3 <= len(slots.shown_ids) <= 6
    assert len(slots.recalled) <= BudgetSettings().recall_chars
    lines = [line for line in slots.recalled.splitlines() if line.startswith("- ")]
    assert len(lines) == len(slots.shown_ids)
    assert all(line.endswith(TRUNCATED_FLAG) for line in lines if "diary" in line)
    # Each memory's own text is cut to item_chars (the label and flag come on top).
    # Each line: who said it, when and where, then their quoted words, which are what the 320 characters hold.
    assert all(len(line.split(": ", 1)[1].removesuffix(TRUNCATED_FLAG)) <= 320 for line in lines)


async def test_use_is_credited_only_when_the_reply_cites_the_memory(store: MemoryStore, clock: FakeClock) -> None:
    dog = await remember(store, ANA.person, "Ana's dog is called Biscuit")
    job = await remember(store, ANA.person, "Ana works as a nurse in Gdańsk")
    recorder = UseRecorder(store, clock)
    message = inbound("what's my dog called?")
    turn = CompletedTurn(ANA, message, 1, "That's Biscuit, of course!", 2, (dog.id, job.id))
    assert await recorder.record(turn) == [dog.id]
    stored = {m.id: m for m in await store.get_memories([dog.id, job.id])}
    assert stored[dog.id].use_count == 1 and stored[dog.id].last_used_at == clock()
    assert stored[dog.id].updated_at == dog.updated_at  # use is not an edit of what it says
    assert stored[job.id].use_count == 0 and stored[job.id].last_used_at is None
    # Someone else's turn cannot credit Ana's memories.
    assert await recorder.record(CompletedTurn(BEN, message, 3, "Biscuit!", 4, (dog.id,))) == []
    assert (await store.get_memory(dog.id)).use_count == 1  # type: ignore[union-attr]


async def test_a_memory_forgotten_by_the_cli_in_another_process_never_reaches_the_prompt(
        store: MemoryStore, embedder: ConceptEmbedder, db: Database, clock: FakeClock, tmp_path: Path) -> None:
    biscuit = await remember(store, ANA.person, "Ana's dog is called Biscuit")
    vet = await remember(store, ANA.person, "Ana's dog sees the vet for anxiety pills")
    pill = await remember(store, ANA.person, "Ana's dog needs a pill at noon", pinned=True)
    _engine, ctx = context(store, clock)
    before = await ctx.slots(ANA, inbound("how is my dog?"))
    assert {biscuit.id, vet.id, pill.id} <= set(before.shown_ids) and "pill at noon" in before.pinned
    operator = await open_store(tmp_path / "data", embedder, db)  # `bot.py memory forget` is its own process
    try:
        forgetter = Forgetter(operator, TombstoneBook(db), clock)
        for query in ("vet anxiety", "pill noon"):
            assert (await forgetter.apply(await forgetter.plan(ANA.person, query))).memories_deleted == 1
    finally:
        await operator.close()
    after = await ctx.slots(ANA, inbound("how is my dog?"))
    assert biscuit.id in after.shown_ids and vet.id not in after.shown_ids and pill.id not in after.shown_ids
    for gone in ("vet", "anxiety", "pill"):
        assert gone not in after.recalled + after.pinned


async def test_a_staged_notes_stored_vector_is_read_for_recall_not_embedded_again(
    store: MemoryStore, clock: FakeClock, embedder: ConceptEmbedder
) -> None:
    # Capture embedded the note when it staged it; recall reads that vector, so the embedder stays free for the
    # queries replies wait on.
    text = "Ana starts a pottery class on Tuesday"
    record = MemoryRecord(id="n_" + secrets.token_hex(6), person=ANA.person, kind=MemoryKind.FACT, text=text,
                          evidence=(text,), sources=(Source("telegram", "c1", "x", T0),), scope=Scope.DM,
                          created_at=T0, updated_at=T0)
    await store.add_notes([Note(record)])
    assert embedder.started.count(text) == 1
    engine, ctx = context(store, clock)
    await ctx.slots(ANA, inbound("how is the pottery going?"))
    await engine.settle()
    result = await engine.search(ANA.person, "pottery class", limit=6, shared_only=False, budget_s=None)
    assert [r.record.id for r in result.items] == [record.id]
    assert result.items[0].match.cosine == pytest.approx(cosine(embedder.vector("pottery class"),
                                                                embedder.vector(text)), abs=1e-6)
    assert embedder.started.count(text) == 1
