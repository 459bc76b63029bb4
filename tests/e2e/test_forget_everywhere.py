"""A confirmed /forget is final: the words are in no table of kith.db, in no byte of its file or log, in no
file of the Chroma directory, and not in the next request the model receives. Run end to end on Telegram
(the app from build_app, the loopback fake Bot API and model, embedded Chroma and SQLite)."""

# ruff: noqa: F811

from __future__ import annotations

import json
from datetime import UTC, datetime

import sqlalchemy as sa

from delivery import outbox
from ground.config import MemorySettings
from ground.db import metadata
from llm.client import import_litellm
from memory.forgetting.tombstones import tombstones
from people import directory, history
from tests.fakes.openai_api import Scripted
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, telegram_api  # noqa: F401
from tests.support.at_rest import files_holding, rows_as_text
from tests.support.messages import inbound
from tests.support.telegram_app import start_telegram_app, telegram_settings

BACKENDS = ("sqlite", "postgres")  # the relational store under test: both (tests/conftest.py)

import_litellm()

ANA = 6101
WORD = "lighthouse"
CAPTURE_PROMPT_START = "The transcript and the stored memories"


async def test_a_confirmed_forget_leaves_the_words_nowhere(telegram_api, fake_llm, make_settings,
                                                          monkeypatch, backend) -> None:
    settings = telegram_settings(make_settings(fake_llm), telegram_api,
                                 memory=MemorySettings(embedder="none", capture=True), policy={"dm": "open"})

    def route(request):
        if request["messages"][0]["content"].startswith(CAPTURE_PROMPT_START):
            if WORD in json.dumps(request["messages"]):
                return Scripted(text=json.dumps({"memories": [
                    {"kind": "fact", "text": f"PERSON has a {WORD} tattoo on their back",
                     "evidence": f"I have a {WORD} tattoo on my back"}]}))
            return Scripted(text='{"memories": []}')
        return None

    fake_llm.route = route
    fake_llm.default = lambda _r: f"A {WORD} tattoo! Which {WORD}?"
    app = await start_telegram_app(settings, monkeypatch)
    data = settings.storage.data_path()
    try:
        telegram_api.push_text(ANA, ANA, f"I have a {WORD} tattoo on my back. My sister lives in Lisbon.")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) == 1)
        await app.background.drain()
        ana = app.db.run_sync(directory.person_of, f"telegram:{ANA}")
        assert ana is not None and app.memory is not None
        assert (await app.memory.promote(ana)).notes == 1
        (kept,) = await app.memory.list_memories(ana)
        # On PostgreSQL the memories live in its tables (rows_as_text reads them too), not in a Chroma directory.
        assert (data / "chroma").exists() == (backend == "sqlite")
        conversation = f"telegram:{ANA}"
        last = app.db.run_sync(history.recent, conversation, 1)[0].id
        app.db.run_sync(history.advance_summary, conversation, expected_through=0, new_through=last,
                        text=f"Ana told me about her {WORD} tattoo. Her sister lives in Lisbon.",
                        now=datetime.now(UTC))
        # An /export still waiting in the outbox, its file holding the memory.
        assert app.memory_commands is not None
        export = await app.memory_commands.export(inbound("/export", platform="telegram", chat_id=str(ANA),
                                                          sender_id=str(ANA), sender_name="Ana"), "")
        assert export.attachment_bytes is not None and WORD.encode() in export.attachment_bytes
        app.db.run_sync(outbox.enqueue, export, source="test", now=datetime.now(UTC))
        assert WORD in rows_as_text(app.db.url)
        # One more turn, so the thread's window (its summary included) is what the process keeps in memory.
        fake_llm.default = lambda _r: "Anytime."
        telegram_api.push_text(ANA, ANA, "Thanks for listening")
        await telegram_api.wait_until(lambda: "Anytime." in telegram_api.texts_to(ANA))

        telegram_api.push_text(ANA, ANA, f"/forget {WORD}")
        await telegram_api.wait_until(lambda: any(t.startswith("If I forget") for t in telegram_api.texts_to(ANA)))
        plan = next(m for m in telegram_api.sent if m.visible_text.startswith("If I forget"))
        # The plan names the memory as Ana reads it, and counts every place its words are.
        assert f"You have a {WORD} tattoo" in plan.visible_text and "PERSON" not in plan.visible_text
        assert "2 history rows" in plan.visible_text and "1 summary" in plan.visible_text
        assert "outbox row" in plan.visible_text
        yes = next(row[0]["callback_data"] for row in plan.reply_markup["inline_keyboard"]
                   if row[0]["text"] == "Yes, forget them")
        telegram_api.push_callback_query(ANA, ANA, yes)
        await telegram_api.wait_until(lambda: any(t.startswith("Forgotten") for t in telegram_api.texts_to(ANA)))
        assert telegram_api.texts_to(ANA)[-1].startswith("Forgotten: 1 memory, ")

        assert await app.memory.get(kept.id) is None
        rows = rows_as_text(app.db.url)
        assert WORD not in rows.lower()
        assert "Lisbon" in rows  # the rest of what was said stays
        assert "[forgotten]" in app.db.run_sync(history.get_summary, conversation).text
        digests = app.db.run_sync(lambda conn: conn.execute(sa.select(tombstones.c.digest)).scalars().all())
        assert digests and all(len(d) == 64 for d in digests)  # tombstones: hashes only
        assert "consolidation_chunks" in metadata.tables  # the consolidation's summaries were looked at too

        # The raw bytes: the database, its write-ahead log, every file of Chroma's directory.
        assert files_holding(data, WORD.encode()) == []

        fake_llm.default = lambda _r: "Of course."
        telegram_api.push_text(ANA, ANA, "What do you remember about my back?")
        await telegram_api.wait_until(lambda: telegram_api.texts_to(ANA)[-1] == "Of course.")
        replies = [r for r in fake_llm.requests if not r["messages"][0]["content"].startswith(CAPTURE_PROMPT_START)]
        assert replies[-1]["messages"][-1]["content"] == "What do you remember about my back?"
        assert WORD not in json.dumps(replies[-1]).lower()
    finally:
        await app.close()



async def test_a_word_said_only_around_a_quote_is_forgotten_from_the_receipt_too(
        telegram_api, fake_llm, make_settings, monkeypatch, backend) -> None:
    name = "Mruczek"
    settings = telegram_settings(make_settings(fake_llm), telegram_api,
                                 memory=MemorySettings(embedder="none", capture=True), policy={"dm": "open"})

    def route(request):
        if request["messages"][0]["content"].startswith(CAPTURE_PROMPT_START):
            if name in json.dumps(request["messages"]):
                return Scripted(text=json.dumps({"memories": [
                    {"kind": "fact", "text": "PERSON has a cat", "evidence": "I have a cat"}]}))
            return Scripted(text='{"memories": []}')
        return None

    fake_llm.route = route
    fake_llm.default = lambda _r: "A cat who hates the vet, a classic."
    app = await start_telegram_app(settings, monkeypatch)
    data = settings.storage.data_path()
    try:
        telegram_api.push_text(ANA, ANA, f"I have a cat named {name} who hates the vet. My sister lives in Lisbon.")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) == 1)
        await app.background.drain()
        ana = app.db.run_sync(directory.person_of, f"telegram:{ANA}")
        assert ana is not None and app.memory is not None and app.memory_commands is not None
        assert (await app.memory.promote(ana)).notes == 1
        (cat,) = await app.memory.list_memories(ana)
        # The export is data kith keeps about Ana: the whole sentence is in it, and the memory reads as hers.
        export = await app.memory_commands.export(inbound("/export", platform="telegram", chat_id=str(ANA),
                                                          sender_id=str(ANA), sender_name="Ana"), "")
        exported = json.loads(export.attachment_bytes or b"")
        (entry,) = exported["memories"]
        assert entry["text"] == "You have a cat" and any(name in s for s in entry["evidence_sentences"])
        if backend == "sqlite":
            assert files_holding(data / "chroma", name.lower().encode())  # in Chroma's metadata, before
        else:
            assert name.lower() in rows_as_text(app.db.url).lower()  # in the memory tables, before

        telegram_api.push_text(ANA, ANA, f"/forget {name}")
        await telegram_api.wait_until(lambda: any(t.startswith("If I forget") for t in telegram_api.texts_to(ANA)))
        plan = next(m for m in telegram_api.sent if m.visible_text.startswith("If I forget"))
        assert "2 receipts" in plan.visible_text and "1 history row" in plan.visible_text
        # Nothing goes for good: the plan says the fact stays and only its sentence leaves the receipt.
        assert "These go for good" not in plan.visible_text
        assert "These stay, without the sentences of yours" in plan.visible_text
        assert "You have a cat" in plan.visible_text
        yes = next(row[0]["callback_data"] for row in plan.reply_markup["inline_keyboard"]
                   if row[0]["text"] == "Yes, forget them")
        telegram_api.push_callback_query(ANA, ANA, yes)
        await telegram_api.wait_until(lambda: any(t.startswith("Forgotten") for t in telegram_api.texts_to(ANA)))

        # Ana keeps the fact she did not ask to forget, with her quote as its receipt; /why shows that.
        kept = await app.memory.get(cat.id)
        assert kept is not None and kept.evidence == ("I have a cat",)
        telegram_api.push_text(ANA, ANA, f"/why {cat.id}")
        await telegram_api.wait_until(lambda: "I have a cat" in telegram_api.texts_to(ANA)[-1])
        # No table, no byte of kith.db, its log or Chroma's files holds the name.
        assert name.lower() not in rows_as_text(app.db.url).lower()
        assert "Lisbon" in rows_as_text(app.db.url)
        assert files_holding(data, name.lower().encode()) == []

        fake_llm.default = lambda _r: "Of course."
        telegram_api.push_text(ANA, ANA, "What is my cat called?")
        await telegram_api.wait_until(lambda: telegram_api.texts_to(ANA)[-1] == "Of course.")
        replies = [r for r in fake_llm.requests if not r["messages"][0]["content"].startswith(CAPTURE_PROMPT_START)]
        assert replies[-1]["messages"][-1]["content"] == "What is my cat called?"
        assert name.lower() not in json.dumps(replies[-1]).lower()
    finally:
        await app.close()
