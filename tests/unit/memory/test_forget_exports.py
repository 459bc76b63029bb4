"""Forgetting reaches every copy of the words: worded exports, decomposed Unicode, files of a person since
linked, a save cut short, and a file that cannot be rewritten (the rest still goes)."""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ground.db import Database
from llm.client import LLMClient
from memory.forgetting.scrub import FORGOTTEN_MARK, Eraser
from memory.service import MemoryService
from people import history
from tests.fakes.openai_api import FakeOpenAI
from tests.support.clock import FakeClock
from tests.support.memory import answer, candidate, fact, memory_settings, reply, say

CONV = "console:ana"


@pytest.fixture
async def service(tmp_path: Path, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
                  ) -> AsyncIterator[MemoryService]:
    settings = memory_settings(tmp_path, llm_base=fake_llm.base_url)
    opened = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=clock)
    yield opened
    await opened.close()


def exports_dir(service: MemoryService) -> Path:
    directory = service.forgetter.saved_exports
    assert directory is not None
    directory.mkdir(parents=True, exist_ok=True)
    return directory


async def save_export(service: MemoryService, person: str, name: str = "kith-export-1.json") -> Path:
    """What the terminal chat's /export saves: the person's document, worded for them."""
    path = exports_dir(service) / name
    path.write_text(json.dumps(await service.export(person, you=True), ensure_ascii=False, indent=2),
                    encoding="utf-8")
    return path


async def test_forgetting_a_memory_by_its_id_takes_its_worded_text_out_of_a_saved_export(
        service: MemoryService) -> None:
    await service.gate.admit("p_ana", candidate("PERSON lives in Lisbon", evidence=["I live in Lisbon"]))
    await service.gate.admit("p_ana", candidate("PERSON likes green tea", evidence=["I like green tea"]))
    home = next(m for m in await service.list_memories("p_ana") if "Lisbon" in m.text)
    saved = await save_export(service, "p_ana")
    assert "You live in Lisbon" in saved.read_text(encoding="utf-8")

    result = await service.apply_forget(await service.plan_forget("p_ana", home.id))

    text = saved.read_text(encoding="utf-8")
    assert "Lisbon" not in text and home.id not in text
    assert "You like green tea" in text  # the rest of the file stays
    assert (result.places.saved_exports, result.leftover) == (1, 0)


@pytest.mark.parametrize("form", ["NFC", "NFD"])
async def test_a_forget_finds_the_words_however_the_client_composed_them(
        service: MemoryService, db: Database, fake_llm: FakeOpenAI, clock: FakeClock, form: str) -> None:
    said = unicodedata.normalize(form, "I have a cat named Zoë who hates the vet. I work at the library.")
    ana, row = await say(db, CONV, said, when=clock())
    last = await reply(db, "Noted.", when=clock())
    fake_llm.reply(answer(fact(unicodedata.normalize(form, "Ana has a cat named Zoë"),
                               unicodedata.normalize(form, "I have a cat named Zoë"))))
    await service.capture.run(CONV, last)
    await service.promote(ana)
    (cat,) = await service.list_memories(ana)

    result = await service.apply_forget(await service.plan_forget(ana, cat.id))

    text = (await db.run(history.get, row)).text
    assert "cat" not in text and "library" in text
    assert (result.memories_deleted, result.leftover) == (1, 0)


async def test_a_saved_export_follows_its_person_through_a_link_and_is_forgotten_there(
        service: MemoryService) -> None:
    await service.gate.admit("p_old", candidate("PERSON lives in Lisbon", evidence=["I live in Lisbon"]))
    saved = await save_export(service, "p_old")

    assert (await service.reassign("p_old", "p_new"))["saved_exports"] == 1
    result = await service.apply_forget(await service.plan_forget("p_new", "Lisbon"))

    assert "Lisbon" not in saved.read_text(encoding="utf-8")
    assert (result.places.saved_exports, result.leftover) == (1, 0)


async def test_the_copy_a_save_left_when_it_was_killed_goes_with_the_words(service: MemoryService) -> None:
    await service.gate.admit("p_ana", candidate("PERSON lives in Lisbon", evidence=["I live in Lisbon"]))
    whole = json.dumps(await service.export("p_ana", you=True), indent=2)
    # A kill mid-write leaves the temporary copy, half written: not JSON, all words.
    left = exports_dir(service) / f".kith-export-1.json.{os.getpid() + 1}.tmp"
    left.write_text(whole[: len(whole) // 2 + 40], encoding="utf-8")
    assert "Lisbon" in left.read_text(encoding="utf-8")
    other = exports_dir(service) / f".kith-export-2.json.{os.getpid() + 1}.tmp"
    other.write_text('{"person": "p_ana", "memories": [{"text": "You like', encoding="utf-8")

    plan = await service.plan_forget("p_ana", "Lisbon")
    assert plan.places.saved_exports == 1
    result = await service.apply_forget(plan)

    assert not left.exists() and other.exists()  # a copy without the words is none of this forget's business
    assert result.leftover == 0


async def test_a_saved_export_that_cannot_be_rewritten_is_counted_as_left_and_the_rest_is_forgotten(
        service: MemoryService, db: Database, clock: FakeClock) -> None:
    ana, row = await say(db, CONV, "I live in Lisbon. I like tea.", when=clock())
    await reply(db, "Noted.", when=clock())
    await service.gate.admit(ana, candidate("PERSON lives in Lisbon", evidence=["I live in Lisbon"]))
    saved = await save_export(service, ana)
    # Where the rewrite's temporary file would go, something it cannot write to: as a full or read-only disk
    # refuses it, root included.
    (saved.parent / f".{saved.name}.{os.getpid()}.tmp").mkdir()

    result = await service.apply_forget(await service.plan_forget(ana, "Lisbon"))

    assert result.memories_deleted == 1 and result.leftover == 1  # the file it could not change, said
    assert "Lisbon" in saved.read_text(encoding="utf-8")
    assert "Lisbon" not in (await db.run(history.get, row)).text and "tea" in (await db.run(history.get, row)).text


# --- what the eraser takes, and what it leaves ---------------------------------------------------------------
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one emoji, joined by zero-width joiners


@pytest.mark.parametrize("quote", ["my co\u00adworker Sam is moving", "my service dog\u200d\U0001f9ba Rex bites"])
def test_a_quote_with_a_character_that_shows_nothing_is_found_in_its_own_message(quote: str) -> None:
    eraser = Eraser("m_0123", (quote,))
    assert eraser.erase(f"Guess what: {quote}. See you.") == f"Guess what: {FORGOTTEN_MARK}. See you."


def test_what_a_forget_leaves_of_a_message_keeps_its_characters() -> None:
    text = f"I live in Lisbon. Our family {FAMILY} is big \u200fok."
    assert Eraser("Lisbon").erase(text) == f"{FORGOTTEN_MARK} Our family {FAMILY} is big \u200fok."


def test_a_quote_is_never_taken_out_of_the_middle_of_a_word() -> None:
    eraser = Eraser("m_0123", ("You are 30",))
    assert eraser.erase("You are 300 km away") == "You are 300 km away"
    assert eraser.erase("Well, you are 30 today") == f"Well, {FORGOTTEN_MARK} today"
