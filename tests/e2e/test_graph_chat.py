"""The person's graph in chat: what a person said about the people and places in their life, captured after the
reply, answers /who with their own words and is listed by /memory; /export holds it; another person's never."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from ground.config import MemorySettings, Settings
from ground.types import ChatKind
from kith.app.lifecycle import App
from kith.app.wiring import build_app
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.support.lived import command, dm
from tests.support.memory import answer, fact
from tests.support.messages import inbound

EXTRACTOR = "The transcript and the stored memories"


@pytest.fixture
async def app(fake_llm: FakeOpenAI, make_settings: Callable[..., Settings]) -> AsyncIterator[App]:
    settings = dataclasses.replace(make_settings(fake_llm), memory=MemorySettings(embedder="none", capture=True))
    built = await build_app(settings, warm_llm=False)
    yield built
    await built.close()


def rel(subject: str, relation: str, obj: str) -> dict[str, Any]:
    return {"subject": subject, "relation": relation, "object": obj}


async def tell(app: App, fake_llm: FakeOpenAI, who: str, text: str, *memories: dict[str, Any]) -> None:
    """``who`` says ``text`` in their DM; the capture model answers ``memories`` about it."""
    captured = answer(*memories)

    def route(request: dict[str, Any]) -> Scripted | None:
        return Scripted(text=captured) if request["messages"][0]["content"].startswith(EXTRACTOR) else None

    fake_llm.route = route
    await app.core.handle(dm(text, who, name="Ana" if who == "501" else "Ben"))
    await app.background.drain()


async def test_who_answers_with_the_persons_words_and_memory_lists_the_names(app: App, fake_llm: FakeOpenAI) -> None:
    await tell(app, fake_llm, "501", "My sister Ola lives in Gdańsk.",
               fact("Ana's sister Ola lives in Gdańsk", "My sister Ola lives in Gdańsk",
                    relations=[rel("Ola", "sister of", "PERSON"), rel("Ola", "lives in", "Gdańsk")]))
    await tell(app, fake_llm, "501", "My dog Rex hates the vet.",
               fact("Ana's dog Rex hates the vet", "My dog Rex hates the vet",
                    relations=[rel("Rex", "dog of", "PERSON")]))

    reply = (await command(app, dm("/who my sister", "501"))).text
    assert reply.splitlines()[0] == "Ola:"
    assert "you said “My sister Ola lives in Gdańsk.” (Ola sister of you;" in reply
    assert "(Ola lives in Gdańsk;" in reply and "in a private chat on telegram" in reply
    assert (await command(app, dm("/who Gdańsk", "501"))).text.startswith("Gdańsk:")

    unknown = (await command(app, dm("/who Kasia", "501"))).text
    assert unknown.startswith("You haven't told me who or what “Kasia” is.") and "Ola" in unknown

    listing = (await command(app, dm("/memory", "501"))).text
    assert "Who and what you've told me about: " in listing
    assert "Ola (sister of you)" in listing and "Rex (dog of you)" in listing

    exported = json.loads((await command(app, dm("/export", "501"))).attachment_bytes or b"{}")
    assert {(r["subject"], r["relation"], r["object"]) for r in exported["graph"]["relations"]} == {
        ("Ola", "sister of", "you"), ("Ola", "lives in", "Gdańsk"), ("Rex", "dog of", "you")}


async def test_another_persons_graph_is_never_theirs_and_who_is_private(app: App, fake_llm: FakeOpenAI) -> None:
    await tell(app, fake_llm, "501", "My sister Ola lives in Gdańsk.",
               fact("Ana's sister Ola lives in Gdańsk", "My sister Ola lives in Gdańsk",
                    relations=[rel("Ola", "sister of", "PERSON")]))
    ben = (await command(app, dm("/who Ola", "502"))).text
    assert ben.startswith("You haven't told me who or what “Ola” is.") and "Gdańsk" not in ben
    in_group = dataclasses.replace(inbound("/who Ola", platform="telegram", chat_id="-100", sender_id="501",
                                           sender_name="Ana"), chat_kind=ChatKind.GROUP)
    reply = await app.commands(in_group)
    assert reply is not None and "Gdańsk" not in reply.text and "private chat" in reply.text


async def test_two_places_she_lives_are_asked_about_in_her_dm_and_her_answer_ends_one(
        fake_llm: FakeOpenAI, make_settings: Callable[..., Settings]) -> None:
    # The wording gate calls nothing a conflict here: the question can only come from the graph.
    settings = dataclasses.replace(make_settings(fake_llm), memory=MemorySettings(
        embedder="none", capture=True, conflict_threshold=1.01))
    app = await build_app(settings, warm_llm=False)
    try:
        await tell(app, fake_llm, "501", "Since spring my home has been Gdańsk.",
                   fact("Ana's home is Gdańsk", "my home has been Gdańsk",
                        relations=[rel("PERSON", "home", "Gdańsk")]))
        ana = (await app.core.speaker_of(dm("x", "501"))).person
        await app.memory.promote(ana)
        await tell(app, fake_llm, "501", "These days my home is a flat in Sopot.",
                   fact("Ana's home is a flat in Sopot", "my home is a flat in Sopot",
                        relations=[rel("PERSON", "home", "Sopot")]))
        await app.memory.promote(ana)
        asked = await app.question_sender.maybe_ask(ana, force=True, send=False)
        assert asked is not None
        assert "my home has been Gdańsk" in asked.message.text and "my home is a flat in Sopot" in asked.message.text
        answer = await app.memory_commands.answer_if_pending(dm("the second", "501", name="Ana"))
        assert answer is not None and "Sopot" in answer.text
        graph = await app.memory.graph.of(ana)
        held = {graph.name(r.object): r.valid_to for r in graph.relations.values()}
        assert held["Sopot"] is None and held["Gdańsk"] is not None
    finally:
        await app.close()


async def test_a_name_in_a_message_brings_its_relations_and_their_memories_and_a_group_hears_no_dm(
        fake_llm: FakeOpenAI, make_settings: Callable[..., Settings]) -> None:
    from memory.core.graph_records import RelationProposal
    from memory.core.records import MemoryKind, MemoryRecord, Scope, Source
    from memory.graph import Proposed
    from tests.support.memory import memory_section

    app = await build_app(make_settings(fake_llm), warm_llm=False)
    try:
        ana = (await app.core.speaker_of(dm("hi", "501", name="Ana"))).person
        now = app.clock()

        async def keep(memory_id: str, sentence: str, scope: Scope, *relations: RelationProposal,
                       chat: str = "") -> None:
            label = sentence.replace("My ", "PERSON's ").replace("our", "PERSON's").rstrip(".")
            source = Source("telegram", chat or ("501" if scope is Scope.DM else "-100"), memory_id, now)
            await app.memory.store.add_memory(MemoryRecord(
                id=memory_id, person=ana, kind=MemoryKind.FACT, text=label, evidence=(sentence,),
                evidence_sentences=(sentence,), sources=(source,), scope=scope, created_at=now, updated_at=now))
            await app.memory.graph.add(ana, [Proposed(r, (sentence,), (sentence,), (source,), scope, now,
                                                      memory_id=memory_id) for r in relations])

        await keep("m_gdansk", "My sister Ola lives in Gdańsk.", Scope.DM,
                   RelationProposal("Ola", None, "sister of", "PERSON", None),
                   RelationProposal("Ola", None, "lives in", "Gdańsk", None))
        # Said without her name, in another chat (no neighbour of anything): only the graph knows it is about Ola.
        await keep("m_job", "My sister got a job at Baltic Labs.", Scope.DM,
                   RelationProposal("my sister", None, "job at", "Baltic Labs", None), chat="502")
        await keep("m_cello", "Ola plays the cello in our band.", Scope.SHARED,
                   RelationProposal("Ola", None, "plays", "cello", None))

        await app.core.handle(dm("How is Ola doing these days?", "501", name="Ana"))
        system = fake_llm.requests[-1]["messages"][0]["content"]
        private = memory_section(system)
        assert "My sister got a job at Baltic Labs." in private  # joined through the graph alone
        assert "How people and things they named connect" in private
        assert '- Ola / job at / Baltic Labs: "My sister got a job at Baltic Labs."' in private
        assert '- Ola / lives in / Gdańsk: "My sister Ola lives in Gdańsk."' in private

        group = dataclasses.replace(inbound("How is Ola doing these days?", platform="telegram", chat_id="-100",
                                            sender_id="501", sender_name="Ana"), chat_kind=ChatKind.GROUP)
        await app.core.handle(group)
        shared = fake_llm.requests[-1]["messages"][0]["content"]
        assert "Ola plays the cello in our band." in shared
        assert "Gdańsk" not in shared and "Baltic" not in shared and "sister" not in shared
    finally:
        await app.close()
