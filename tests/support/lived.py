"""Two people who lived through every kind of thing kith keeps: what the export and the per-person data tests read."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from delivery import outbox
from ground.config import Settings
from ground.types import ChatKind, InboundMessage, OutboundMessage
from heartbeat.consolidation import consolidation_chunks
from heartbeat.decay import decay_retirements, decay_runs
from heartbeat.due import mark_handled
from kith.app.lifecycle import App
from kith.app.wiring import build_app
from memory.core.graph_records import EntityKind, RelationProposal
from memory.core.records import Scope, Source
from memory.graph.view import Proposed
from memory.store.notes import Note
from people import directory, history
from tests.support.memory import candidate, record
from tests.support.messages import inbound

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


def insert_row(conn: Connection, table: sa.Table, **values: Any) -> int:
    return int(conn.execute(table.insert().values(**values)).inserted_primary_key[0])


async def live_through(app: App, who: str, name: str, words: dict[str, str]) -> str:
    """One person's life with kith, every place it is stored: the same for Ana and Ben, in their own words."""
    say = dm(words["said"], who, name=name)
    await app.core.handle(say)
    me = await person(app, say)
    await command(app, dm(f"/remember {words['remember']}", who, name=name))
    await app.memory.store.add_notes([Note(record(me, words["note"]), conversation=f"telegram:{who}")])
    await command(app, dm(f"/goals add {words['goal']} due 2027-05-01", who, name=name))
    assert app.router.media is not None and app.router.media.documents is not None
    await app.router.media.documents.keep(key=f"telegram:{who}:doc:0", account=f"telegram:{who}", sender_name=name,
                                          name="notes.md", kind="markdown", pages=[words["document"]],
                                          source=("telegram", who, "doc"))
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
    run_id = await app.db.run(insert_row, decay_runs, started_at=NOW)
    gone = await app.memory.gate.admit(me, candidate(words["decayed"]))
    await app.db.run(insert_row, decay_retirements, run_id=run_id, memory_id=gone.memory_id, person=me, reason="stale",
                     prev_status="active", prev_updated_at=NOW, revision_after=2)
    await graph_of_their_own(app, me, who, words["relative"])
    return me


async def graph_of_their_own(app: App, me: str, who: str, relative: str) -> None:
    """A relative named twice (the second name joined to the first, then pulled apart): every part of a graph."""
    for index, name in enumerate((relative, f"{relative} K.")):
        sentence = f"{name} is my sister"
        source = Source("telegram", who, f"graph-{who}-{index}", NOW)
        await app.memory.graph.add(me, [Proposed(RelationProposal(name, EntityKind.PERSON, "sister of", "PERSON", None),
                                                 (sentence,), (sentence + ".",), (source,), Scope.DM, NOW,
                                                 note_id=f"graph-{who}-{index}")])
    graph = await app.memory.graph.of(me)
    joined = next(e.id for e in graph.entities.values() if e.merged_into is not None)
    await app.memory.graph.unmerge(me, joined)


ANA_WORDS = {"said": "My sister lives in Lisbon", "relative": "Ola", "remember": "I keep bees on the roof",
             "note": "Ana is learning Rust", "goal": "run a marathon", "paused": "I am moving to Porto",
             "group": "hi from the flat", "waiting": "still waiting for an answer", "outbox": "your parcel left",
             "summary": "Ana talked about Lisbon", "decayed": "Ana once liked jazz",
             "document": "Beekeeping log: the roof hive swarmed in June"}
BEN_WORDS = {"said": "I collect typewriters", "relative": "Marta", "remember": "I keep a sailing boat in Gdynia",
             "note": "Ben is learning Haskell", "goal": "sail to Madeira", "paused": "my passport number is secret",
             "group": "my plan is to sail alone", "waiting": "Ben asked about tides", "outbox": "your tide table",
             "summary": "Ben talked about typewriters", "decayed": "Ben once liked opera",
             "document": "Tide tables for Gdynia harbour"}


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


@asynccontextmanager
async def lived_through(settings: Settings) -> AsyncIterator[Lived]:
    """Ana and Ben, each with one of every kind of thing kith keeps, and Ana's linked account, question and summary."""
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
        await app.db.run(insert_row, consolidation_chunks, day="2026-11-19", conversation="telegram:-100", first_id=1,
                         last_id=2, state="applied", persons=json.dumps([ana, ben]),
                         summaries=json.dumps({ana: "Ana greeted the flat", ben: "Ben plans to sail alone"}),
                         recorded_at=NOW)
        kept.ana, kept.ben = ana, ben
        yield kept
    finally:
        await kept.close()
