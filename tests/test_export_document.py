"""The export is everything kith stores about one person, and nothing about anyone else: the chat's /export
and ``bot.py memory export`` give the same document, and every field of it is the one docs/export.md lists."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from delivery import outbox
from ground.config import Settings
from ground.db import metadata
from ground.types import ChatKind, InboundMessage, OutboundMessage
from heartbeat.consolidation import consolidation_chunks
from heartbeat.decay import decay_retirements, decay_runs
from heartbeat.due import mark_handled
from kith.app import schema  # noqa: F401  (gathers every table into the metadata)
from kith.app.lifecycle import App
from kith.app.wiring import build_app
from kith.control.dispatch import run_command
from kith.operator.memory_cli import add_memory_parser
from memory.store.notes import Note
from people import directory, history
from tests.conftest import ROOT
from tests.helpers import inbound
from tests.support.memory import candidate, record

DOC = ROOT / "docs" / "export.md"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def dm(text: str, who: str, *, platform: str = "telegram", name: str = "") -> InboundMessage:
    return inbound(text, platform=platform, chat_id=who, sender_id=who, sender_name=name or who)


def in_group(text: str, who: str, name: str) -> InboundMessage:
    return inbound(text, platform="telegram", chat_id="-100", sender_id=who, sender_name=name,
                   chat_kind=ChatKind.GROUP)


async def command(app: App, message: InboundMessage) -> OutboundMessage:
    reply = await app.commands(message)
    assert reply is not None, message.text
    return reply


async def person(app: App, message: InboundMessage) -> str:
    return (await app.core.speaker_of(message)).person


def _insert(conn: Connection, table: sa.Table, **values: Any) -> int:
    return int(conn.execute(table.insert().values(**values)).inserted_primary_key[0])


async def live_through(app: App, who: str, name: str, words: dict[str, str]) -> str:
    """One person's life with kith, every place it is stored: the same for Ana and Ben, in their own words."""
    say = dm(words["said"], who, name=name)
    await app.core.handle(say)
    me = await person(app, say)
    await command(app, dm(f"/remember {words['remember']}", who, name=name))
    await app.memory.store.add_notes([Note(record(me, words["note"]), conversation=f"telegram:{who}")])
    await command(app, dm(f"/goals add {words['goal']} due 2027-05-01", who, name=name))
    await command(app, dm("/pause", who, name=name))
    await app.core.handle(dm(words["paused"], who, name=name))
    await command(app, dm("/resume", who, name=name))
    await app.core.handle(in_group(words["group"], who, name))
    await command(app, dm("/link", who, name=name))  # a code asked for, not yet used
    await command(app, dm("/link QQQQQQ", who, name=name))  # a code that does not work
    await app.journal.record("telegram", f"waiting-{who}", message=dm(words["waiting"], who, name=name))
    await app.db.run(outbox.enqueue, OutboundMessage("telegram", who, words["outbox"], recipient_id=who),
                     source="test", now=NOW)
    rows = await app.db.run(history.recent, f"telegram:{who}", 100)
    await app.db.run(history.advance_summary, f"telegram:{who}", expected_through=0, new_through=rows[-1].id,
                     text=words["summary"], now=NOW)
    await app.db.run(mark_handled, me, [f"goal:{who}"], NOW)
    run_id = await app.db.run(_insert, decay_runs, started_at=NOW)
    gone = await app.memory.gate.admit(me, candidate(words["decayed"]))
    await app.db.run(_insert, decay_retirements, run_id=run_id, memory_id=gone.memory_id, person=me, reason="stale",
                     prev_status="active", prev_updated_at=NOW, revision_after=2)
    return me


ANA_WORDS = {"said": "My sister lives in Lisbon", "remember": "I keep bees on the roof",
             "note": "Ana is learning Rust", "goal": "run a marathon", "paused": "I am moving to Porto",
             "group": "hi from the flat", "waiting": "still waiting for an answer", "outbox": "your parcel left",
             "summary": "Ana talked about Lisbon", "decayed": "Ana once liked jazz"}
BEN_WORDS = {"said": "I collect typewriters", "remember": "I keep a sailing boat in Gdynia",
             "note": "Ben is learning Haskell", "goal": "sail to Madeira", "paused": "my passport number is secret",
             "group": "my plan is to sail alone", "waiting": "Ben asked about tides", "outbox": "your tide table",
             "summary": "Ben talked about typewriters", "decayed": "Ben once liked opera"}


@dataclass
class Lived:
    settings: Settings
    app: App
    ana: str
    ben: str
    open: bool = True

    async def close(self) -> None:
        if self.open:
            self.open = False
            await self.app.close()


@pytest.fixture
async def lived(fake_llm, make_settings) -> AsyncIterator[Lived]:
    settings = make_settings(fake_llm)
    app = await build_app(settings, warm_llm=False)
    kept = Lived(settings, app, "", "")
    try:
        ana = await live_through(app, "501", "Ana", ANA_WORDS)
        ben = await live_through(app, "502", "Ben", BEN_WORDS)
        # A second account of Ana's, linked to her, and what she said from it.
        await app.db.run(directory.link, "discord:9001", ana, NOW)
        await app.core.handle(dm("hello from discord", "9001", platform="discord", name="Ana"))
        # Two of her memories that disagree: kith asks her which is right.
        await command(app, dm("/remember My favourite editor is Vim", "501", name="Ana"))
        await command(app, dm("/remember My favourite editor is Emacs", "501", name="Ana"))
        # Waiting for its answer, as she sent it: the export redacts it as history would.
        await app.journal.record("telegram", "waiting-pin", message=dm("and my bank PIN 4821", "501", name="Ana"))
        # A memory as the extractor words it: worded for whoever reads the export.
        await app.memory.gate.admit(ana, candidate("PERSON lives in Berlin", evidence=["I live in Berlin"]))
        # The night's consolidation summarised the group chat for each of them.
        await app.db.run(_insert, consolidation_chunks, day="2026-11-19", conversation="telegram:-100", first_id=1,
                         last_id=2, state="applied", persons=json.dumps([ana, ben]),
                         summaries=json.dumps({ana: "Ana greeted the flat", ben: "Ben plans to sail alone"}),
                         recorded_at=NOW)
        kept.ana, kept.ben = ana, ben
        yield kept
    finally:
        await kept.close()


async def test_the_export_holds_each_kind_of_thing_kith_keeps_and_nothing_of_anyone_else(
        lived: Lived) -> None:
    app, ana, ben = lived.app, lived.ana, lived.ben
    reply = await command(app, dm("/export", "501", name="Ana"))
    assert reply.attachment_name and reply.attachment_bytes
    data = json.loads(reply.attachment_bytes)
    assert "1 goal;" in reply.text and "1 note" in reply.text  # the reply counts what the file holds

    assert data["schema"] == 1 and data["person"] == ana
    assert {a["account"]: a["linked_at"] is not None for a in data["accounts"]} == {
        "telegram:501": False, "discord:9001": True}
    texts = {m["text"] for m in data["memories"]}
    assert {"I keep bees on the roof", "My favourite editor is Vim", "My favourite editor is Emacs",
            "You live in Berlin"} <= texts
    assert [n["text"] for n in data["notes"]] == ["Ana is learning Rust"]
    assert [(g["number"], g["text"], g["status"], g["due"]) for g in data["goals"]] == [
        (1, "run a marathon", "active", "2027-05-01")]
    (question,) = data["questions"]
    ids = {m["text"]: m["id"] for m in data["memories"]}
    assert (question["first"], question["second"], question["status"]) == (
        ids["My favourite editor is Vim"], ids["My favourite editor is Emacs"], "open")
    assert data["capture"] == {"paused": False, "since": None}

    said = [(m["from"], m["account"], m["chat_kind"], m["text"]) for m in data["messages"]]
    assert ("person", "telegram:501", "dm", "I am moving to Porto") in said  # sent while paused
    assert ("person", "discord:9001", "dm", "hello from discord") in said  # from her linked account
    assert ("kith", None, "dm", "echo: hello from discord") in said
    assert ("person", "telegram:501", "group", "hi from the flat") in said
    assert [t for f, _a, kind, t in said if f == "kith" and kind == "group"] == ['echo: "Ana": hi from the flat']
    assert data["waiting"][0]["text"] == "still waiting for an answer"
    assert len(data["waiting"]) == 2 and "4821" not in json.dumps(data)  # a secret is redacted here too
    assert [m["text"] for m in data["outbox"]] == ["your parcel left"]
    assert [s["summary"] for s in data["summaries"]] == ["Ana talked about Lisbon"]
    assert [s["summary"] for s in data["day_summaries"]] == ["Ana greeted the flat"]
    assert [c["item"] for c in data["check_ins"]] == ["goal:501"]
    assert [(d["memory"], d["reason"]) for d in data["decay"]] == [(ids["Ana once liked jazz"], "stale")]
    assert [r["asked_by"] for r in data["link_requests"]] == ["telegram:501"]
    assert [f["account"] for f in data["link_failures"]] == ["telegram:501"]

    raw = reply.attachment_bytes.decode()
    assert ben not in raw and "telegram:502" not in raw
    leaked = [w for w in BEN_WORDS.values() if w in raw] + [w for w in ("Ben", "Madeira", "typewriter") if w in raw]
    assert leaked == []


def _paths(value: Any, prefix: str = "") -> set[str]:
    """Every field path of a JSON value: ``a``, ``a.b``, ``a[].b``."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            path = f"{prefix}.{key}" if prefix else key
            found |= {path} | _paths(inner, path)
    elif isinstance(value, list):
        for item in value:
            found |= _paths(item, f"{prefix}[]")
    return found


def documented_fields() -> set[str]:
    """The first cell of every field table in docs/export.md."""
    return set(re.findall(r"^\| `([a-z_\[\].]+)` \|", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE))


async def test_every_field_is_documented_and_every_documented_field_is_in_the_export(
        lived: Lived) -> None:
    app = lived.app
    data = json.loads((await command(app, dm("/export", "501", name="Ana"))).attachment_bytes or b"")
    empty = [key for key, value in data.items() if value in ([], {})]
    assert empty == []  # every part holds something, so every field below it is seen
    documented = documented_fields()
    assert len(documented) > 100  # the tables were read
    assert sorted(_paths(data) - documented) == []  # in the export, not in the doc
    assert sorted(documented - _paths(data)) == []  # in the doc, not in the export
    assert "docs/export.md" in (ROOT / "README.md").read_text(encoding="utf-8")


async def test_the_chat_and_the_operator_get_the_same_document(lived: Lived) -> None:
    app, ana = lived.app, lived.ana
    chat = json.loads((await command(app, dm("/export", "501", name="Ana"))).attachment_bytes or b"")
    await lived.close()  # the operator's command opens the store itself when no bot runs

    parser = argparse.ArgumentParser(prog="bot.py")
    add_memory_parser(parser.add_subparsers(dest="command"))
    out = io.StringIO()
    args = parser.parse_args(["memory", "export", "--person", ana])
    code = await asyncio.to_thread(run_command, lived.settings, "memory.export", args, out=out, stdin=io.StringIO(""))
    cli = json.loads(out.getvalue())
    assert code == 0

    def worded(doc: dict[str, Any]) -> list[str]:
        return sorted(m["text"] for m in doc["memories"])

    assert "You live in Berlin" in worded(chat) and "Ana lives in Berlin" in worded(cli)  # its reader's words

    def rest(doc: dict[str, Any]) -> dict[str, Any]:
        memories = [{k: v for k, v in m.items() if k != "text"} for m in doc["memories"]]
        return doc | {"exported_at": "", "memories": memories}

    assert rest(chat) == rest(cli)


async def test_a_question_answered_and_a_goal_done_stay_in_the_export(lived: Lived) -> None:
    app = lived.app
    await command(app, dm("/goals done 1", "501", name="Ana"))
    answered = await app.memory_commands.answer_if_pending(dm("the first", "501", name="Ana"))
    assert answered is not None
    data = json.loads((await command(app, dm("/export", "501", name="Ana"))).attachment_bytes or b"")
    assert [g["status"] for g in data["goals"]] == ["done"]
    (question,) = data["questions"]
    assert (question["status"], question["answer"], question["answered_by"]) == ("answered", "first", "telegram:501")
    statuses = {m["text"]: m["status"] for m in data["memories"]}
    assert statuses["My favourite editor is Emacs"] == "superseded"  # kept, not deleted


def test_the_doc_names_every_table_kith_keeps() -> None:
    """Each table is in the export or said to be left out, and why: a new one cannot be forgotten silently."""
    text = DOC.read_text(encoding="utf-8")
    listed = text[text.index("## Where each part is kept"):]
    named = set(re.findall(r"^- `([a-z_]+)`(?: and `([a-z_]+)`)?", listed, flags=re.MULTILINE))
    named_tables = {name for pair in named for name in pair if name}
    named_tables |= set(re.findall(r"`([a-z_]+)`", listed.split("Left out,")[1]))
    assert named_tables == set(metadata.tables)
