"""Dedupe by meaning (issue 32): rewordings of one fact become one memory with every receipt, with the real
default embedder; facts that disagree in what they turn on (a place, a number, a name, a negation) are never
folded, however close their embeddings; without an embedder the lexical fold works as before."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from ground.db import Database
from llm.client import LLMClient
from memory.core.similarity import Action, decide, disagree
from memory.service import MemoryService
from tests.fakes.openai_api import FakeOpenAI
from tests.support.clock import FakeClock
from tests.support.memory import T0, answer, fact, memory_settings, reply, say

BACKENDS = ("sqlite", "postgres")  # the memory tables on PostgreSQL, beside Chroma on SQLite

CONV = "console:ana"
DEFAULT_EMBEDDER = "onnx:all-MiniLM-L6-v2"

# A dozen ways of saying where one lives, each as the person said it and as an extractor would label it.
REWORDINGS = {
    "en": [
        ("I live in Gdańsk.", "Ana lives in Gdańsk"),
        ("I'm based in Gdańsk.", "Ana is based in Gdańsk"),
        ("My home is in Gdańsk.", "Ana's home is in Gdańsk"),
        ("I reside in Gdańsk.", "Ana resides in Gdańsk"),
        ("I live in the city of Gdańsk.", "Ana lives in the city of Gdańsk"),
        ("My home town is Gdańsk.", "Ana's home town is Gdańsk"),
        ("Gdańsk is my home.", "Gdańsk is Ana's home"),
        ("I am living in Gdańsk.", "Ana is living in Gdańsk"),
        ("I call Gdańsk home.", "Ana calls Gdańsk home"),
        ("My flat is in Gdańsk.", "Ana's flat is in Gdańsk"),
        ("I have settled in Gdańsk.", "Ana has settled in Gdańsk"),
        ("Gdańsk is where I live.", "Ana lives in Gdańsk, where she lives"),
    ],
    "pl": [
        ("Mieszkam w Gdańsku.", "Ana mieszka w Gdańsku"),
        ("Na stałe mieszkam w Gdańsku.", "Ana na stałe mieszka w Gdańsku"),
        ("Żyję w Gdańsku.", "Ana żyje w Gdańsku"),
        ("Mieszkam teraz w Gdańsku.", "Ana mieszka teraz w Gdańsku"),
        ("Mam mieszkanie w Gdańsku.", "Ana ma mieszkanie w Gdańsku"),
        ("Zamieszkałam w Gdańsku.", "Ana zamieszkała w Gdańsku"),
        ("Jestem mieszkanką Gdańska.", "Ana jest mieszkanką Gdańska"),
        ("Mieszkam na stałe w Gdańsku.", "Ana mieszka na stałe w Gdańsku"),
        ("Od lat mieszkam w Gdańsku.", "Ana od lat mieszka w Gdańsku"),
        ("Wynajmuję mieszkanie w Gdańsku.", "Ana wynajmuje mieszkanie w Gdańsku"),
        ("Osiadłam w Gdańsku.", "Ana osiadła w Gdańsku"),
        ("Moje mieszkanie jest w Gdańsku.", "Mieszkanie Any jest w Gdańsku"),
    ],
}


@pytest.fixture
async def service_for(
    tmp_path: Path, db: Database, fake_llm: FakeOpenAI
) -> AsyncIterator[Callable[..., Any]]:
    opened: list[MemoryService] = []

    async def make(embedder: str) -> MemoryService:
        settings = memory_settings(tmp_path, llm_base=fake_llm.base_url, embedder=embedder)
        service = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=FakeClock(T0))
        opened.append(service)
        return service

    yield make
    for service in opened:
        await service.close()


async def capture_said(service: MemoryService, db: Database, fake_llm: FakeOpenAI,
                       pairs: list[tuple[str, str]]) -> str:
    """The person says each sentence; the capture model answers one fact per sentence, quoting it; the notes are
    promoted. Returns the person."""
    person = ""
    for said, _text in pairs:
        person, _ = await say(db, CONV, said)
    last = await reply(db, "Noted.")
    fake_llm.reply(answer(*(fact(text, said.rstrip(".")) for said, text in pairs)))
    report = await service.capture.run(CONV, last)
    # Every receipt passed the rules; the validator's lexical fold may already have taken some as repeats.
    assert report.counts["accepted"] + report.counts["rejected_duplicate_in_run"] == len(pairs), report.as_counts()
    await service.promote(person)
    return person


@pytest.mark.parametrize("language", sorted(REWORDINGS))
async def test_a_dozen_rewordings_in_one_answer_become_one_memory_holding_every_quote(
    service_for: Callable[..., Any], db: Database, fake_llm: FakeOpenAI, language: str
) -> None:
    service = await service_for(DEFAULT_EMBEDDER)
    assert service.status.ready, service.status.line()
    pairs = REWORDINGS[language]
    person = await capture_said(service, db, fake_llm, pairs)
    (memory,) = await service.active_memories(person)
    assert sorted(memory.evidence) == sorted(said.rstrip(".") for said, _text in pairs)
    assert len(memory.sources) == len(pairs)  # each message it was said in is a receipt


async def test_a_new_rewording_of_a_stored_memory_merges_into_it(
    service_for: Callable[..., Any], db: Database, fake_llm: FakeOpenAI
) -> None:
    service = await service_for(DEFAULT_EMBEDDER)
    person = await capture_said(service, db, fake_llm, [("I work as a nurse.", "Ana works as a nurse")])
    (stored,) = await service.active_memories(person)
    person = await capture_said(service, db, fake_llm,
                                [("Nursing is my profession.", "Ana's profession is nursing")])
    (merged,) = await service.active_memories(person)
    assert merged.id == stored.id and merged.text == "Ana works as a nurse"
    assert merged.evidence == ("I work as a nurse", "Nursing is my profession")
    assert len(merged.sources) == 2


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("I live in Gdańsk.", "Ana lives in Gdańsk"), ("I live in Sopot.", "Ana lives in Sopot")),
        (("I have two daughters.", "Ana has two daughters"), ("I have three daughters.", "Ana has three daughters")),
        (("Mam 2 koty.", "Ana ma 2 koty"), ("Mam 5 kotów.", "Ana ma 5 kotów")),
        (("I drink coffee every morning.", "Ana drinks coffee every morning"),
         ("I drink tea every morning.", "Ana drinks tea every morning")),
    ],
    ids=["place", "number word", "digits, Polish", "one thing swapped"],
)
async def test_facts_that_disagree_stay_two_and_are_flagged_as_a_conflict(
    service_for: Callable[..., Any], db: Database, fake_llm: FakeOpenAI,
    first: tuple[str, str], second: tuple[str, str]
) -> None:
    service = await service_for(DEFAULT_EMBEDDER)
    person = await capture_said(service, db, fake_llm, [first])
    (stored,) = await service.active_memories(person)
    person = await capture_said(service, db, fake_llm, [second])
    memories = {m.text: m for m in await service.active_memories(person)}
    assert set(memories) == {first[1], second[1]}
    assert memories[second[1]].conflicts_with == (stored.id,)
    assert memories[first[1]].conflicts_with == (memories[second[1]].id,)


async def test_within_one_answer_facts_that_disagree_are_not_folded_into_one(
    service_for: Callable[..., Any], db: Database, fake_llm: FakeOpenAI
) -> None:
    service = await service_for(DEFAULT_EMBEDDER)
    person = await capture_said(service, db, fake_llm, [
        ("My sister earns 1,200 a month.", "Ana's sister earns 1,200 a month"),
        ("My brother earns 200 a month.", "Ana's brother earns 200 a month"),
    ])
    assert len(await service.active_memories(person)) == 2


async def test_without_an_embedder_the_lexical_fold_works_as_before(
    service_for: Callable[..., Any], db: Database, fake_llm: FakeOpenAI
) -> None:
    service = await service_for("none")
    assert not service.status.ready
    person = await capture_said(service, db, fake_llm, [
        ("I like green tea.", "Ana likes green tea"),
        ("Honestly I like green tea in the morning.", "Ana likes green tea in the morning"),
        ("I'm based in Gdańsk.", "Ana is based in Gdańsk"),
        ("My home town is Gdańsk.", "Ana's home town is Gdańsk"),
    ])
    memories = {m.text: m for m in await service.active_memories(person)}
    # Words the two share fold them; a rewording in other words needs the embedder, so it stays apart.
    assert set(memories) == {"Ana likes green tea", "Ana is based in Gdańsk", "Ana's home town is Gdańsk"}
    assert memories["Ana likes green tea"].evidence == ("I like green tea", "Honestly I like green tea in the morning")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("PERSON earns 1,200 a month", "PERSON earns 200 a month"),
        ("PERSON was born on 12.05.1990", "PERSON was born on 05.12.1990"),
        ("PERSON's train leaves at 10:30", "PERSON's train leaves at 30:10"),
        ("PERSON weighs 72.5 kg", "PERSON weighs 5 kg"),
        ("PERSON's dog is called Rex", "PERSON's dog is called Luna"),
        ("PERSON wohnt in Hamburg", "PERSON wohnt in Bremen"),
        ("PERSON tiene dos hermanos", "PERSON tiene cinco hermanos"),
        ("PERSON ma dwie córki", "PERSON ma 3 córki"),
        ("PERSON pije kawę każdego ranka", "PERSON pije herbatę każdego ranka"),
        ("PERSON's mother lives in Paris", "PERSON's father lives in Paris"),
    ],
)
def test_what_a_fact_turns_on_differs_so_no_cosine_merges_them(a: str, b: str) -> None:
    assert disagree(a, b) and disagree(b, a)
    decision = decide(a, b, cosine=0.97, cosine_from_embedder=True, same_kind=True)
    assert decision.action is Action.CONFLICT


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("PERSON has two daughters", "PERSON is the mother of 2 daughters"),
        ("PERSON lives in Gdańsk", "PERSON's home is in Gdańsk"),
        ("PERSON wohnt in Hamburg", "PERSON lebt in Hamburg"),
        ("PERSON runs 5 km every weekend", "PERSON goes for a 5 km run on weekends"),
        ("Moved to SQLite", "Now on SQLite3"),
    ],
)
def test_a_rewording_that_keeps_every_name_and_number_is_not_a_disagreement(a: str, b: str) -> None:
    assert not disagree(a, b)
    assert decide(a, b, cosine=0.9, cosine_from_embedder=True, same_kind=True).action is Action.MERGE


@pytest.mark.parametrize(("a", "b"), [("PERSON mag Katzen", "PERSON mag keine Katzen"),
                                      ("PERSON aime le fromage", "PERSON n'aime pas le fromage"),
                                      ("PERSON lubi zimę", "PERSON nie lubi zimy")])
def test_a_negation_on_one_side_is_never_merged_in_any_language(a: str, b: str) -> None:
    assert decide(a, b, cosine=0.95, cosine_from_embedder=True, same_kind=True).action is Action.CONFLICT
