"""The forget plan and the operator's search show and find the person's own words, not kith's label alone (#32).

``/forget`` (end to end on Telegram) and ``bot.py memory forget`` list each memory and staged note a plan takes,
and each one that keeps its fact but loses a sentence, with the person's words first and kith's label under them,
a staged note marked as not yet reviewed; what the plan counts and how it is confirmed stay as they were.
``bot.py memory search`` finds a memory by a word only the person's sentence holds (the search index is over
labels), as ``/why`` does. The labels are English and the words Polish, German and Spanish, so a label never
holds what is searched for or shown.
"""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ground.config import MemorySettings, Settings
from ground.tunables import QUESTION_QUOTE_CHARS
from kith.app.lifecycle import App
from kith.app.wiring import open_database
from kith.settings import AppSettings
from llm.client import LLMClient, import_litellm
from memory.core.records import MemoryRecord
from memory.service import MemoryService
from memory.store.notes import Note
from people import directory
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.clock import FakeClock
from tests.support.memory import T0, memory_settings, said_memory
from tests.support.memory_cli import operator
from tests.support.telegram_app import ask, start_telegram_app, telegram_settings

import_litellm()

ANA, BEN = 801, 802
VIOLIN = "Ich spiele seit zehn Jahren Geige im Schulorchester."  # German: "I have played the violin for ten years"
SISTER = "Moja siostra Ola mieszka w Gdańsku."  # Polish: "My sister Ola lives in Gdańsk."
CAT = "Mam kota, który wabi się Mruczek."  # Polish: "I have a cat called Mruczek."
NURSE = "Trabajo como enfermera en el hospital de Valencia."  # Spanish: "I work as a nurse in Valencia's hospital."


# --- /forget in chat, end to end on Telegram ---------------------------------------------------------------
@pytest.fixture
async def app(telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings],
              monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[App]:
    settings = telegram_settings(make_settings(fake_llm), telegram_api, policy={"dm": "open"},
                                 memory=MemorySettings(embedder="none"))
    running = await start_telegram_app(settings, monkeypatch)
    try:
        yield running
    finally:
        await running.close()


async def seed_chat(app: App) -> tuple[str, MemoryRecord, MemoryRecord, MemoryRecord]:
    """Ana's German memory, Polish staged note and Polish memory; returns her person id and the three."""
    now = datetime.now(UTC)
    ana = await app.db.run(directory.resolve, f"telegram:{ANA}", "Ana", now)
    violin = said_memory("m_de01de01de01de01", ana, "PERSON plays the violin", "spiele seit zehn Jahren Geige",
                         VIOLIN, when=now - timedelta(days=2))
    cat = said_memory("m_ca7ca7ca7ca7ca7c", ana, "PERSON has a cat", "Mam kota", CAT, when=now - timedelta(days=1))
    sister = said_memory("n_0a0a0a0a0a0a0a0a0a0a", ana, "PERSON's sibling lives in Gdansk",
                         "Moja siostra Ola mieszka w Gdańsku", SISTER, when=now - timedelta(hours=1))
    await app.memory.store.add_memory(violin)
    await app.memory.store.add_memory(cat)
    await app.memory.store.add_notes([Note(sister, conversation=f"telegram:{ANA}")])
    return ana, violin, cat, sister


def entry(plan: str, record_id: str) -> tuple[str, str]:
    """The two lines a plan shows for one record: the one before its id's line (the words), and its own."""
    lines = plan.split("\n")
    at = next(i for i, line in enumerate(lines) if record_id in line)
    return lines[at - 1], lines[at]


async def test_the_chat_forget_plan_shows_her_words_first_and_the_label_second(
        app: App, telegram_api: FakeTelegramApi) -> None:
    _ana, violin, _cat, _sister = await seed_chat(app)

    plan = await ask(telegram_api, ANA, "/forget Geige")
    print("\n--- /forget Geige ---\n" + plan)
    words, label = entry(plan, violin.id)
    assert f"you said “{VIOLIN}”" in words and "private chat on telegram" in words
    assert label.strip().startswith("my label: You play the violin")
    assert plan.index(VIOLIN) < plan.index("You play the violin")
    assert "not yet reviewed" not in plan  # a memory, reviewed
    # What the plan counts and how it is confirmed are as before.
    assert "These go for good:" in plan and "In all: 1 memory, 0 notes." in plan
    message = next(m for m in reversed(telegram_api.sent) if m.chat_id == ANA)
    assert [row[0]["text"] for row in message.reply_markup["inline_keyboard"]] == ["Yes, forget them", "Cancel"]
    done = await ask(telegram_api, ANA, "yes")
    assert done.startswith("Forgotten: 1 memory, 0 notes")
    assert await app.memory.get(violin.id) is None


async def test_the_chat_forget_plan_marks_a_staged_note_and_names_a_kept_fact_by_her_words(
        app: App, telegram_api: FakeTelegramApi) -> None:
    _ana, _violin, cat, sister = await seed_chat(app)

    plan = await ask(telegram_api, ANA, "/forget Ola")
    print("\n--- /forget Ola ---\n" + plan)
    words, label = entry(plan, sister.id)
    assert f"you said “{SISTER}”" in words and "(not yet reviewed)" in words
    assert "my label: Your sibling lives in Gdansk" in label
    assert "In all: 0 memories, 1 note." in plan
    assert (await ask(telegram_api, ANA, "no")).startswith("Cancelled")

    # A memory that keeps its fact and loses the sentence holding the words is shown by that sentence too.
    plan = await ask(telegram_api, ANA, "/forget Mruczek")
    print("\n--- /forget Mruczek ---\n" + plan)
    assert "These stay, without the sentences of yours that held those words:" in plan
    words, label = entry(plan, cat.id)
    assert f"you said “{CAT}”" in words and "my label: You have a cat" in label
    assert "In all: 0 memories, 0 notes, 1 receipt." in plan
    assert (await ask(telegram_api, ANA, "yes")).startswith("Forgotten: 0 memories, 0 notes, 1 receipt")
    kept = await app.memory.get(cat.id)
    assert kept is not None and kept.text == "PERSON has a cat" and "Mruczek" not in " ".join(kept.evidence_sentences)

    # Someone else's /forget of her words shows him nothing of hers.
    other = await ask(telegram_api, BEN, "/forget Ola")
    assert "Ola" not in other.replace("“Ola”", "") and SISTER not in other and sister.id not in other


async def test_a_long_sentence_in_a_plan_is_clipped_to_the_same_budget_as_before(
        app: App, telegram_api: FakeTelegramApi) -> None:
    now = datetime.now(UTC)
    ana = await app.db.run(directory.resolve, f"telegram:{ANA}", "Ana", now)
    sentence = "Seit dem Umzug nach Leipzig fahre ich jeden Morgen mit dem Fahrrad zur Arbeit, " * 5 + "wirklich."
    await app.memory.store.add_memory(said_memory("m_1e1e1e1e1e1e1e1e", ana, "PERSON cycles to work",
                                                  "fahre ich jeden Morgen mit dem Fahrrad", sentence, when=now))
    plan = await ask(telegram_api, ANA, "/forget Fahrrad")
    words, label = entry(plan, "m_1e1e1e1e1e1e1e1e")
    quoted = words[words.index("“") + 1:words.index("”")]
    assert quoted.startswith("Seit dem Umzug nach Leipzig") and quoted.endswith("…")
    assert len(quoted) <= QUESTION_QUOTE_CHARS
    assert "my label: You cycle to work" in label


# --- the operator's commands ------------------------------------------------------------------------------
@pytest.fixture
def seeded(tmp_path: Path) -> tuple[Settings, str]:
    """Ana (telegram:42): a German and a Spanish memory, a Polish staged note; Bob (telegram:7): one of his own."""
    settings = memory_settings(tmp_path)

    async def seed() -> str:
        db = open_database(settings)
        service = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=FakeClock(T0))
        try:
            ana = await db.run(directory.resolve, "telegram:42", "Ana", T0)
            bob = await db.run(directory.resolve, "telegram:7", "Bob", T0)
            await service.store.add_memory(said_memory("m_de01de01", ana, "PERSON plays the violin",
                                                       "spiele seit zehn Jahren Geige", VIOLIN, when=T0))
            await service.store.add_memory(said_memory("m_e5e5e5e5", ana, "PERSON is a nurse",
                                                       "Trabajo como enfermera", NURSE, when=T0 + timedelta(hours=2)))
            await service.store.add_memory(said_memory("m_b0b1b0b1", bob, "PERSON plays the viola",
                                                       "spiele Bratsche", "Ich spiele Bratsche und Geige.", when=T0))
            note = said_memory("n_ab12cd34ef56ab12cd34", ana, "PERSON's sibling lives in Gdansk",
                               "Moja siostra Ola mieszka w Gdańsku", SISTER, when=T0 + timedelta(hours=1))
            await service.store.add_notes([Note(note, conversation="telegram:42")])
            return ana
        finally:
            await service.close()
            db.close()

    return settings, asyncio.run(seed())


def block(out: str, record_id: str, size: int) -> list[str]:
    """The ``size`` lines of output that start at ``record_id``'s line."""
    lines = out.split("\n")
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(record_id))
    return lines[at:at + size]


def test_the_operators_forget_plan_shows_her_words_first(seeded: tuple[Settings, str]) -> None:
    settings, ana = seeded
    code, out = operator(settings, "forget", "--account", "telegram:42", "Geige")
    print("\n--- bot.py memory forget Geige ---\n" + out)
    assert code == 1 and "removes 1 memory, 0 notes:" in out and "re-run with --yes" in out  # counted as before
    assert block(out, "m_de01de01", 3) == [
        "  m_de01de01  fact",
        f'      Ana said on 2026-11-20 in a private chat on telegram: "{VIOLIN}"',
        "      label: Ana plays the violin",
    ]
    assert "m_b0b1b0b1" not in out and "Bratsche" not in out  # Bob said "Geige" too: his is not in her plan

    code, out = operator(settings, "forget", "--person", ana, "Gdańsku")
    print("\n--- bot.py memory forget Gdańsku ---\n" + out)
    assert code == 1 and "removes 0 memories, 1 note:" in out
    _head, words, label = block(out, "n_ab12cd34ef56ab12cd34", 3)
    assert words.endswith(f'(not yet reviewed): "{SISTER}"') and words.startswith("      Ana said")
    assert label == "      label: Ana's sibling lives in Gdansk"

    code, out = operator(settings, "forget", "--person", ana, "Gdańsku", "--yes")
    assert code == 0 and "forgotten: 0 memories, 1 note;" in out
    code, out = operator(settings, "list", "--person", ana)
    assert SISTER not in out and VIOLIN in out


def test_the_operators_search_finds_a_memory_by_a_word_only_her_sentence_holds(seeded: tuple[Settings, str]) -> None:
    settings, ana = seeded
    for query, sentence in (("Geige", VIOLIN), ("Schulorchester", VIOLIN), ("enfermera", NURSE),
                            ("siostra", SISTER), ("Gdańsku", SISTER)):
        code, out = operator(settings, "search", "--account", "telegram:42", query)
        print(f"\n--- bot.py memory search {query} ---\n" + out)
        assert code == 0 and "\n1 match\n" in f"\n{out}", (query, out)
        assert out.index(sentence) < out.index("label: Ana"), query  # her words, then the label
        assert "Bob" not in out and "Bratsche" not in out, query
    code, out = operator(settings, "search", "--person", ana, "Gdańsku")
    assert "(not yet reviewed)" in out  # the staged note recall already uses, marked

    # A word of the label is found as before, once, and nothing else comes with it.
    code, out = operator(settings, "search", "--person", ana, "violin")
    assert code == 0 and "1 match\n" in out and out.count("\nm_de01de01  ") == 1 and NURSE not in out
    # A word nobody said finds nothing; one only Bob said finds nothing of his through Ana.
    for query in ("Klavier", "Bratsche"):
        code, out = operator(settings, "search", "--person", ana, query)
        assert code == 0 and "0 matches\n" in out and "Bratsche und" not in out, query
