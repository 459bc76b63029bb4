"""The person's graph from capture: relations only where the person's words support them, aliases joined and
undoable, a contradiction linked to be asked and an additive relation not, and forget taking exactly what only its
receipts supported."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ground.db import Database
from llm.client import LLMClient
from memory.core.graph_records import SELF
from memory.graph.view import PersonGraph
from memory.service import MemoryService
from tests.fakes.openai_api import FakeOpenAI
from tests.support.clock import FakeClock
from tests.support.memory import answer, fact, memory_settings, reply, say

CONV = "console:ana"


@pytest.fixture
async def service(tmp_path: Path, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
                  ) -> AsyncIterator[MemoryService]:
    # The wording gate never calls two memories a conflict here: every link these tests see is the graph's.
    settings = memory_settings(tmp_path, llm_base=fake_llm.base_url, conflict_threshold=1.01)
    opened = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=clock)
    yield opened
    await opened.close()


def rel(subject: str, relation: str, obj: str, **kinds: str) -> dict[str, Any]:
    return {"subject": subject, "relation": relation, "object": obj, **kinds}


async def said(service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock, text: str,
               *memories: dict[str, Any]) -> str:
    """Ana says ``text``; the capture model answers ``memories``; capture runs. Returns Ana's person id."""
    clock.advance(minutes=5)
    ana, _ = await say(db, "console:ana", text, when=clock())
    last = await reply(db, "I see.", when=clock())
    fake_llm.reply(answer(*memories))
    await service.capture.run(CONV, last)
    return ana


def triples(graph: PersonGraph) -> set[tuple[str, str, str]]:
    return {(graph.name(r.subject), r.relation, graph.name(r.object)) for r in graph.holding()}


async def test_relations_in_the_persons_words_join_the_graph_and_the_others_are_refused(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana = await said(service, db, fake_llm, clock, "My sister Ola lives in Gdańsk.",
                     fact("Ana's sister Ola lives in Gdańsk", "My sister Ola lives in Gdańsk", relations=[
                         rel("Ola", "sister of", "PERSON", subject_kind="person"),
                         rel("Ola", "lives in", "Gdańsk", object_kind="place"),
                         rel("Ola", "brother of", "PERSON"),  # "brother" is not in her words
                         rel("Ola", "works at", "Acme"),  # nor is Acme
                     ]))
    graph = await service.graph.of(ana)
    assert triples(graph) == {("Ola", "sister of", "PERSON"), ("Ola", "lives in", "Gdańsk")}
    gdansk = next(r for r in graph.holding() if r.relation == "lives in")
    assert gdansk.evidence == ("My sister Ola lives in Gdańsk",)
    assert gdansk.evidence_sentences == ("My sister Ola lives in Gdańsk.",)
    assert service.capture.totals["relation_refused_relation_not_said"] == 1
    assert service.capture.totals["relation_refused_name_not_said"] == 1


async def test_aliases_merge_into_one_being_and_a_merge_is_undone(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana = await said(service, db, fake_llm, clock, "Ola is my sister.",
                     fact("Ola is Ana's sister", "Ola is my sister", relations=[rel("Ola", "sister of", "PERSON")]))
    await said(service, db, fake_llm, clock, "My sister started a job at Baltic Labs.",
               fact("Ana's sister started a job at Baltic Labs", "My sister started a job at Baltic Labs",
                    relations=[rel("my sister", "job at", "Baltic Labs")]))
    await said(service, db, fake_llm, clock, "Ola K. runs marathons.",
               fact("Ola K. runs marathons", "Ola K. runs marathons", relations=[rel("Ola K.", "runs", "marathons")]))
    await said(service, db, fake_llm, clock, "ola is coming on friday",  # the same name typed otherwise: one row
               fact("Ola is coming on Friday", "ola is coming on friday",
                    relations=[rel("ola", "coming on", "friday")]))
    graph = await service.graph.of(ana)
    ola = graph.resolve("Ola")
    assert ola is not None and ola != SELF
    assert sorted(graph.names(ola)) == ["Ola", "Ola K.", "my sister"]
    assert len([e for e in graph.entities.values() if e.name.casefold() == "ola"]) == 1
    # Everything said under any of her names is hers.
    reached = {r.relation for r, _hop in graph.neighbourhood([ola], 1, shared_only=False)}
    assert {"sister of", "job at", "runs", "coming on"} <= reached

    alias = next(e.id for e in graph.entities.values() if e.name == "Ola K.")
    assert await service.graph.unmerge(ana, alias)
    graph = await service.graph.of(ana)
    assert graph.root(alias) == alias and "Ola K." not in graph.names(graph.resolve("my sister") or "")
    # Said again, the name she pulled apart is not joined again by the rules.
    await said(service, db, fake_llm, clock, "Ola K. ran Berlin.",
               fact("Ola K. ran Berlin", "Ola K. ran Berlin", relations=[rel("Ola K.", "ran", "Berlin")]))
    graph = await service.graph.of(ana)
    assert graph.root(alias) == alias


async def test_a_contradiction_is_linked_to_be_asked_and_an_additive_relation_is_not(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana = await said(service, db, fake_llm, clock, "I live in Gdańsk. Ola is my sister.",
                     fact("Ana lives in Gdańsk", "I live in Gdańsk",
                          relations=[rel("PERSON", "lives in", "Gdańsk", object_kind="place")]),
                     fact("Ola is Ana's sister", "Ola is my sister", relations=[rel("Ola", "sister of", "PERSON")]))
    await service.promote(ana)
    await said(service, db, fake_llm, clock, "I live in Sopot. Kasia is my sister too.",
               fact("Ana lives in Sopot", "I live in Sopot",
                    relations=[rel("PERSON", "lives in", "Sopot", object_kind="place")]),
               fact("Kasia is Ana's sister", "Kasia is my sister too", relations=[rel("Kasia", "sister of", "PERSON")]))
    report = await service.promote(ana)
    assert report.graph_conflicts == 1
    memories = {m.text: m for m in await service.list_memories(ana)}
    gdansk, sopot = memories["Ana lives in Gdańsk"], memories["Ana lives in Sopot"]
    assert sopot.id in gdansk.conflicts_with and gdansk.id in sopot.conflicts_with
    # A second sister adds; nothing about her or Ola is in conflict.
    assert not memories["Kasia is Ana's sister"].conflicts_with and not memories["Ola is Ana's sister"].conflicts_with
    # Nothing was ended by kith: both places hold until Ana answers.
    graph = await service.graph.of(ana)
    assert {("PERSON", "lives in", "Gdańsk"), ("PERSON", "lives in", "Sopot")} <= triples(graph)

    await service.graph.answered(ana, [gdansk.id])  # what answering "Sopot" does (controls call it)
    graph = await service.graph.of(ana)
    ended = next(r for r in graph.relations.values() if graph.name(r.object) == "Gdańsk")
    assert ended.valid_to == clock() and ("PERSON", "lives in", "Gdańsk") not in triples(graph)


async def test_two_things_said_at_once_are_additive_not_a_contradiction(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana = await said(service, db, fake_llm, clock, "I speak Polish and German.",
                     fact("Ana speaks Polish", "I speak Polish", relations=[rel("PERSON", "speaks", "Polish")]),
                     fact("Ana speaks German", "I speak Polish and German",
                          relations=[rel("PERSON", "speaks", "German")]))
    await service.promote(ana)
    await said(service, db, fake_llm, clock, "I speak French.",
               fact("Ana speaks French", "I speak French", relations=[rel("PERSON", "speaks", "French")]))
    report = await service.promote(ana)
    assert report.graph_conflicts == 0
    assert not any(m.conflicts_with for m in await service.list_memories(ana))


async def test_forget_removes_the_relations_and_names_only_its_receipts_supported(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana = await said(service, db, fake_llm, clock, "My sister Ola lives in Gdańsk.",
                     fact("Ana's sister Ola lives in Gdańsk", "My sister Ola lives in Gdańsk", relations=[
                         rel("Ola", "sister of", "PERSON"), rel("Ola", "lives in", "Gdańsk")]))
    await said(service, db, fake_llm, clock, "Ola is a nurse.",
               fact("Ola is a nurse", "Ola is a nurse", relations=[rel("Ola", "is a", "nurse")]))
    await service.promote(ana)
    plan = await service.plan_forget(ana, "Gdańsk")
    # Both relations said in the words with Gdańsk, and the name Gdańsk; Ola stays, her other receipt holds her.
    assert plan.places.graph == 3
    assert "graph entries" in plan.describe()
    result = await service.apply_forget(plan)
    assert result.leftover == 0
    graph = await service.graph.of(ana)
    assert triples(graph) == {("Ola", "is a", "nurse")}
    assert {e.name for e in graph.entities.values()} == {"Ola", "nurse"}
    dumped = repr(await db.run(lambda conn: [tuple(r) for t in ("graph_entities", "graph_relations")
                                                for r in conn.exec_driver_sql(f"select * from {t}")]))
    assert "Gdańsk" not in dumped and "Gdansk" not in dumped


async def test_a_dm_relation_is_private_and_a_group_one_shared(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    ana = await said(service, db, fake_llm, clock, "My dog Rex is sick.",
                     fact("Ana's dog Rex is sick", "My dog Rex is sick", relations=[rel("Rex", "dog of", "PERSON")]))
    clock.advance(minutes=5)
    await say(db, "console:ana", "I work at Acme.", conversation="console:group", chat_id="group", group=True,
              when=clock())
    last = await reply(db, "Cool.", conversation="console:group", chat_id="group", group=True, when=clock())
    fake_llm.reply(answer(fact("Ana works at Acme", "I work at Acme", relations=[rel("PERSON", "work at", "Acme")])))
    await service.capture.run("console:group", last)
    graph = await service.graph.of(ana)
    assert {(graph.name(r.subject), r.relation, graph.name(r.object)) for r in graph.holding(shared_only=True)} == {
        ("PERSON", "work at", "Acme")}
    assert ("Rex", "dog of", "PERSON") in triples(graph)
