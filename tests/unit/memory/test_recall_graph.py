"""The person's graph in recall: a name in the message brings the memories its relations came from, though they
share no word with it; never through a relation said in a private chat when the recall is for a group, never
through another person's graph, and not at all with ``graph_share`` 0.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from ground.config import BudgetSettings, RecallSettings
from ground.db import Database
from ground.turns import Speaker
from ground.types import ChatKind
from memory.core.graph_records import SELF_NAME, EntityKind, RelationProposal
from memory.core.records import MemoryKind, MemoryRecord, Scope, Source
from memory.graph.view import PersonGraph, Proposed
from memory.recall.engine import RecallEngine, RecallResult
from memory.recall.graph_reach import GraphGroup, by_memory, reach
from memory.recall.prompt_part import RecallMemoryContext
from memory.recall.ranking import RecallMatch, graph_lifts, rank, score
from memory.store.memory_store import MemoryStore
from persona.labels import RELATIONS_NOTICE, relation_line
from tests.support.clock import FakeClock
from tests.support.memory import T0
from tests.support.messages import inbound
from tests.support.recall import open_store, remember

ANA = "p-ana"
BEN = "p-ben"
DAY = timedelta(days=1)
SISTER = "Ana's sister Ola moved to Porto"
BAKERY = "She started at a bakery on Rua Augusta"  # about Ola, without her name
UNRELATED = "The dentist appointment is on Friday"


class Graphs:
    """Graphs by person, as GraphBook.of gives them."""

    def __init__(self, graphs: dict[str, PersonGraph]) -> None:
        self.graphs = graphs
        self.asked: list[str] = []

    async def of(self, person: str) -> PersonGraph:
        self.asked.append(person)
        return self.graphs.get(person) or PersonGraph(person)


def proposed(subject: str, relation: str, obj: str, memory: MemoryRecord, scope: Scope) -> Proposed:
    return Proposed(RelationProposal(subject, EntityKind.PERSON if subject != SELF_NAME else None, relation, obj,
                                     None),
                    evidence=(memory.text,), evidence_sentences=(memory.text,),
                    sources=(Source("telegram", "c1", memory.id, memory.created_at),), scope=scope,
                    said_at=memory.created_at, memory_id=memory.id)


def graph_of(person: str, *items: Proposed) -> PersonGraph:
    graph = PersonGraph(person)
    graph.grow(list(items), T0)
    return graph


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0 + timedelta(days=30))


@pytest.fixture
async def store(tmp_path: Path, db: Database) -> AsyncIterator[MemoryStore]:
    opened = await open_store(tmp_path / "data", None, db)
    yield opened
    await opened.close()


async def said(store: MemoryStore, *, bakery_scope: Scope = Scope.DM, memory_scope: Scope = Scope.DM
               ) -> tuple[MemoryRecord, MemoryRecord]:
    # Days apart: neither is the other's neighbour in the chat, so only the graph joins them.
    sister = await remember(store, ANA, SISTER, when=T0, scope=memory_scope, memory_id="m-sister")
    bakery = await remember(store, ANA, BAKERY, when=T0 + 5 * DAY, scope=memory_scope, memory_id="m-bakery")
    await remember(store, ANA, UNRELATED, when=T0 + 9 * DAY, scope=memory_scope)
    return sister, bakery


async def search(store: MemoryStore, clock: FakeClock, graphs: Graphs, query: str, *, shared_only: bool = False,
                 **recall: object) -> RecallResult:
    engine = RecallEngine(store, RecallSettings(**recall), clock, graph=graphs)  # type: ignore[arg-type]
    try:
        return await engine.search(ANA, query, limit=6, shared_only=shared_only, budget_s=None)
    finally:
        await engine.close()


def texts(result: RecallResult) -> list[str]:
    return [r.record.text for r in result.items]


async def test_a_name_in_the_message_brings_a_memory_joined_to_it_only_through_the_graph(
        store: MemoryStore, clock: FakeClock) -> None:
    sister, bakery = await said(store)
    graphs = Graphs({ANA: graph_of(ANA, proposed("Ola", "sister of", SELF_NAME, sister, Scope.DM),
                                   proposed("Ola", "works at", "the bakery", bakery, Scope.DM))})
    found = await search(store, clock, graphs, "how is Ola doing?")
    assert texts(found) == [SISTER, BAKERY]
    assert [(r.relation, r.memory_id) for r in found.relations] == [("works at", "m-bakery")]
    assert graphs.asked == [ANA]
    # Without the graph the same words find only the memory that says the name.
    assert texts(await search(store, clock, graphs, "how is Ola doing?", graph_share=0.0)) == [SISTER]
    assert texts(await search(store, clock, Graphs({}), "how is Ola doing?")) == [SISTER]


async def test_a_graph_read_anew_is_indexed_anew_and_a_dropped_one_is_not_kept(store: MemoryStore,
                                                                               clock: FakeClock) -> None:
    # GraphBook.of gives a new object after a write: the engine's memory index follows the object, not the person.
    sister, bakery = await said(store)
    graphs = Graphs({ANA: graph_of(ANA, proposed("Ola", "sister of", SELF_NAME, sister, Scope.DM))})
    engine = RecallEngine(store, RecallSettings(), clock, graph=graphs)  # type: ignore[arg-type]
    try:
        found = await engine.search(ANA, "how is Ola doing?", limit=6, shared_only=False, budget_s=None)
        assert texts(found) == [SISTER]
        graphs.graphs[ANA] = graph_of(ANA, proposed("Ola", "sister of", SELF_NAME, sister, Scope.DM),
                                      proposed("Ola", "works at", "the bakery", bakery, Scope.DM))
        found = await engine.search(ANA, "how is Ola doing?", limit=6, shared_only=False, budget_s=None)
        assert texts(found) == [SISTER, BAKERY]
        assert len(engine._graph_indexes) == 1  # the first graph, no longer held by its source, is gone
    finally:
        await engine.close()


async def test_the_prompt_shows_the_relation_that_brought_a_memory_in_reading_the_graph_once(
        store: MemoryStore, clock: FakeClock) -> None:
    sister, bakery = await said(store)
    graphs = Graphs({ANA: graph_of(ANA, proposed("Ola", "sister of", SELF_NAME, sister, Scope.DM),
                                   proposed("Ola", "works at", "the bakery", bakery, Scope.DM))})
    settings = RecallSettings()
    engine = RecallEngine(store, settings, clock, graph=graphs)  # type: ignore[arg-type]
    try:
        slots = await RecallMemoryContext(engine, settings, BudgetSettings()).slots(
            Speaker(ANA, "console:ana", "Ana"), inbound("how is Ola doing?"))
    finally:
        await engine.close()
    assert slots.shown_ids == (sister.id, bakery.id)
    relations = slots.recalled.split(RELATIONS_NOTICE + "\n")[1]
    assert relations == relation_line("Ola", "works at", "the bakery", f'"{BAKERY}"')
    assert graphs.asked == [ANA]  # the names come with the result: the graph is not read again for them
    # In a group the relation said in a private chat is not shown (nor are the private memories).
    engine = RecallEngine(store, settings, clock, graph=graphs)  # type: ignore[arg-type]
    try:
        slots = await RecallMemoryContext(engine, settings, BudgetSettings()).slots(
            Speaker(ANA, "console:ana", "Ana"), inbound("how is Ola doing?", chat_kind=ChatKind.GROUP))
    finally:
        await engine.close()
    assert RELATIONS_NOTICE not in slots.recalled


async def test_graph_share_zero_reads_no_graph_at_all(store: MemoryStore, clock: FakeClock) -> None:
    sister, bakery = await said(store)
    graphs = Graphs({ANA: graph_of(ANA, proposed("Ola", "sister of", SELF_NAME, sister, Scope.DM),
                                   proposed("Ola", "works at", "the bakery", bakery, Scope.DM))})
    found = await search(store, clock, graphs, "how is Ola doing?", graph_share=0.0)
    assert texts(found) == [SISTER] and found.relations == []
    assert graphs.asked == []


async def test_in_a_group_a_relation_said_in_a_private_chat_brings_nothing(store: MemoryStore,
                                                                         clock: FakeClock) -> None:
    # The memories themselves may be seen in the group; only the relation joining the second was said in a DM.
    sister, bakery = await said(store, memory_scope=Scope.SHARED)
    graphs = Graphs({ANA: graph_of(ANA, proposed("Ola", "sister of", SELF_NAME, sister, Scope.SHARED),
                                   proposed("Ola", "works at", "the bakery", bakery, Scope.DM))})
    in_group = await search(store, clock, graphs, "how is Ola doing?", shared_only=True)
    assert texts(in_group) == [SISTER] and in_group.relations == []
    in_dm = await search(store, clock, graphs, "how is Ola doing?")
    assert texts(in_dm) == [SISTER, BAKERY]  # the same relation, where it may be used


async def test_a_private_memory_never_comes_through_a_shared_relation_in_a_group(store: MemoryStore,
                                                                                clock: FakeClock) -> None:
    sister = await remember(store, ANA, SISTER, when=T0, scope=Scope.SHARED, memory_id="m-sister")
    bakery = await remember(store, ANA, BAKERY, when=T0 + 5 * DAY, scope=Scope.DM, memory_id="m-bakery")
    graphs = Graphs({ANA: graph_of(ANA, proposed("Ola", "sister of", SELF_NAME, sister, Scope.SHARED),
                                   proposed("Ola", "works at", "the bakery", bakery, Scope.SHARED))})
    assert texts(await search(store, clock, graphs, "how is Ola doing?", shared_only=True)) == [SISTER]


async def test_another_persons_graph_is_never_used(store: MemoryStore, clock: FakeClock) -> None:
    sister, bakery = await said(store)
    bens = graph_of(BEN, proposed("Ola", "sister of", SELF_NAME, sister, Scope.DM),
                    proposed("Ola", "works at", "the bakery", bakery, Scope.DM))
    # Ben's graph under Ben's name: Ana's recall asks for hers only.
    only_ben = Graphs({BEN: bens})
    assert texts(await search(store, clock, only_ben, "how is Ola doing?")) == [SISTER]
    assert only_ben.asked == [ANA]
    # A source that answers with Ben's graph for Ana: not used either.
    assert texts(await search(store, clock, Graphs({ANA: bens}), "how is Ola doing?")) == [SISTER]


# --- the pure parts -------------------------------------------------------------------------
def match(memory_id: str, bm25: float) -> RecallMatch:
    record = MemoryRecord(id=memory_id, person=ANA, kind=MemoryKind.FACT,
                          text=memory_id, evidence=("x",), sources=(Source("telegram", "c1", memory_id, T0),),
                          scope=Scope.DM, created_at=T0, updated_at=T0)
    return RecallMatch(record, None, bm25)


def test_a_group_member_gets_a_share_of_the_best_other_members_score() -> None:
    settings = RecallSettings(graph_share=0.5)
    strong, weak, alone = match("a-strong", 0.9), match("b-weak", 0.1), match("c-alone", 0.3)
    scored = [score(m, T0, settings, vector_path=False) for m in (strong, weak, alone)]
    lifts = graph_lifts(scored, [frozenset({"a-strong", "b-weak"})], 0.5)
    assert lifts["b-weak"][0] == pytest.approx(0.5 * scored[0].score)
    assert lifts["a-strong"][0] == pytest.approx(0.5 * scored[1].score)  # the best other, never itself
    assert "c-alone" not in lifts
    ranked = rank([strong, weak, alone], T0, settings, vector_path=False,
                  graph_groups=[frozenset({"a-strong", "b-weak"})])
    assert [r.record.id for r in ranked] == ["a-strong", "b-weak", "c-alone"]
    off = rank([strong, weak, alone], T0, RecallSettings(graph_share=0.0), vector_path=False,
               graph_groups=[frozenset({"a-strong", "b-weak"})])
    assert [r.record.id for r in off] == ["a-strong", "c-alone", "b-weak"]


def test_a_hub_lifts_the_candidates_that_touch_it_but_fetches_nothing() -> None:
    people = [match(f"m{i}", 0.0).record for i in range(5)]
    graph = graph_of(ANA, *(proposed("Ola", "met", f"thing {i}", r, Scope.DM) for i, r in enumerate(people)))
    index = by_memory(graph)
    wide = reach(graph, index, "Ola?", [], {"m0": None}, hops=1, from_best=0, shared_only=False, hub=10,
                 fetch_max=50)
    assert sorted(wide.fetch) == ["m1", "m2", "m3", "m4"]
    hub = reach(graph, index, "Ola?", [], {"m0": None}, hops=1, from_best=0, shared_only=False, hub=3,
                fetch_max=50)
    assert hub.fetch == [] and hub.groups == [GraphGroup(graph.resolve("Ola") or "", 1, -1, frozenset({"m0"}))]


def test_two_hops_never_pass_through_a_hub() -> None:
    """The hub rule's one home is PersonGraph: its neighbourhood reaches a hub but not through it, and so does recall's
    second hop (Ola is met in m0; Ola met five things; two hops from "the bakery" stop at Ola once she is a hub)."""
    memories = [match(f"m{i}", 0.0).record for i in range(6)]
    graph = graph_of(ANA, proposed("Ola", "works at", "the bakery", memories[0], Scope.DM),
                     *(proposed("Ola", "met", f"thing {i}", r, Scope.DM) for i, r in enumerate(memories[1:])))
    bakery, ola = graph.resolve("the bakery") or "", graph.resolve("Ola") or ""
    assert not graph.is_hub(ola, 10) and graph.is_hub(ola, 3) and not graph.is_hub(bakery, 3)
    through = {graph.name(r.object) for r, _hop in graph.neighbourhood([bakery], 2, shared_only=False, hub=10)}
    assert through == {"the bakery", *(f"thing {i}" for i in range(5))}
    stopped = graph.neighbourhood([bakery], 2, shared_only=False, hub=3)
    assert [(graph.name(r.object), hop) for r, hop in stopped] == [("the bakery", 1)]
    assert graph.neighbourhood([ola], 1, shared_only=False, hub=3) == []  # a hub as a root reaches nothing either
    index = by_memory(graph)
    wide = reach(graph, index, "the bakery?", [], {"m0": None}, hops=2, from_best=0, shared_only=False, hub=10,
                 fetch_max=50)
    assert sorted(wide.fetch) == ["m1", "m2", "m3", "m4", "m5"]
    narrow = reach(graph, index, "the bakery?", [], {"m0": None}, hops=2, from_best=0, shared_only=False, hub=3,
                   fetch_max=50)
    assert narrow.fetch == [] and {(g.being, g.level) for g in narrow.groups} == {(bakery, 1), (ola, 2)}
