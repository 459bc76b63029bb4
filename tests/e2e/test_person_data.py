"""Everything kith keeps about a person is declared once (ground.person_data), and the declarations are what
linking and the export go through: a table with a person column declared nowhere fails here, and so does a
declared kind that a link does not move or an export does not hold."""


from __future__ import annotations

import argparse
import importlib
import io
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ground.db import metadata
from ground.person_data import PersonData, export_parts, move_person
from ground.types import InboundMessage
from heartbeat.due import mark_handled
from kith.app import schema  # noqa: F401  (gathers every table into the metadata)
from kith.app.lifecycle import App
from kith.app.person_export import PersonExport
from kith.app.wiring import build_app
from kith.control.local import LocalParts
from kith.control.parts import Console
from kith.operator.people_cli import link_body
from memory.controls.questions import questions
from memory.store import Note
from people import directory, moves
from tests.support.lived import NOW, Lived, command, graph_of_their_own
from tests.support.lived import dm as dm_from
from tests.support.memory import record

# A column that names a person: person, persons, person_id, a first_person ...
PERSON_COLUMN = re.compile(r"^persons?(_ids?)?$|_persons?$")


def tables_with_a_person_column() -> set[str]:
    return {t.name for t in metadata.tables.values() if any(PERSON_COLUMN.search(c.name) for c in t.columns)}


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` names something that exists: a module, then attributes down from it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


@pytest.fixture
async def app(fake_llm, make_settings) -> AsyncIterator[App]:
    built = await build_app(make_settings(fake_llm), warm_llm=False)
    try:
        yield built
    finally:
        await built.close()


async def test_every_table_with_a_person_column_is_declared(app: App) -> None:
    found = tables_with_a_person_column()
    assert {"accounts", "messages", "goals", "consolidation_chunks"} <= found  # the scan sees person columns
    declared = {table.name for entry in app.person_data for table in entry.tables}
    assert sorted(found - declared) == []
    assert declared <= set(metadata.tables)


async def test_each_kind_is_declared_once_and_names_a_forget_step_that_exists(app: App) -> None:
    names = [entry.name for entry in app.person_data]
    assert len(names) == len(set(names))
    tables = [table.name for entry in app.person_data for table in entry.tables]
    assert len(tables) == len(set(tables))  # one home for each table
    missing = [entry.forgotten_by for entry in app.person_data
               if entry.forgotten_by and not resolves(entry.forgotten_by)]
    assert missing == []
    with pytest.raises(ValueError, match="give exactly one of move_rows, reassign, stays"):
        PersonData("nowhere", left_out="a test", kept_by_forget="a test")


def dm(text: str, who: str) -> InboundMessage:
    """Ana's DM from the Telegram account ``who`` (each test's Ana has accounts of her own)."""
    return dm_from(text, who, name="Ana")


async def keep_one_of_each_kind_that_moves(app: App, who: str) -> str:
    """The person behind ``who`` with something of every kind a link moves."""
    await app.core.handle(dm("hello", who))
    person = await app.db.run(directory.person_of, f"telegram:{who}")
    assert person is not None
    await command(app, dm("/remember I keep bees on the roof", who))
    await app.memory.store.add_notes([Note(record(person, "Ana is learning Rust"), conversation=f"telegram:{who}")])
    await app.memory.book.add(person, ["a-forgotten-digest"], NOW)
    await command(app, dm("/goals add run a marathon", who))
    assert app.router.media is not None and app.router.media.documents is not None
    await app.router.media.documents.keep(key=f"telegram:{who}:9:0", account=f"telegram:{who}", sender_name="Ana",
                                          name="hives.md", kind="markdown", pages=["The roof hive swarmed."],
                                          source=("telegram", who, "9"))
    await command(app, dm("/pause", who))
    await app.db.run(lambda conn: conn.execute(questions.insert().values(
        id="q_1", person=person, first_id="m_1", second_id="m_2", pair_key="m_1|m_2", evidence_key="e",
        evidence_count=1, platform="telegram", chat_id=who, status="open", asked_at=NOW)))
    await app.db.run(mark_handled, person, ["conflict:m_1:m_2"], NOW)  # the heartbeat asked about that pair
    await graph_of_their_own(app, person, who, "Ola")
    saved = app.settings.storage.exports_path()
    saved.mkdir(parents=True, exist_ok=True)
    (saved / "kith-export-1.json").write_text(json.dumps({"person": person}), encoding="utf-8")
    return person


@pytest.mark.parametrize("host", ["chat", "operator"])
async def test_a_link_moves_every_kind_that_moves(app: App, host: str) -> None:
    old = await keep_one_of_each_kind_that_moves(app, "701")
    new = await app.db.run(directory.resolve, "telegram:702", "Ana", NOW)
    kinds = app.person_data
    nobody = await export_parts(app.db, kinds, "p_nobody")
    before = await export_parts(app.db, kinds, old)
    if host == "chat":  # /link's way: the bot's own list
        assert app.linker.on_moved is not None
        moved = await app.linker.on_moved(old, new)
    else:  # bot.py people link with no bot running: the command gathers its own
        await app.close()
        parts = LocalParts(app.settings)
        try:
            kinds = await parts.person_data()
            moved = await move_person(parts.db, kinds, old, new)
        finally:
            await parts.close()
        app = await build_app(app.settings, warm_llm=False)
    try:
        assert isinstance(moved, dict)
        moving = [entry.name for entry in kinds if entry.moves]
        assert list(moved) == moving
        assert [name for name in moving if not moved[name]] == []  # each kind had something, and it moved
        after = await export_parts(app.db, app.person_data, old)
        theirs = await export_parts(app.db, app.person_data, new)
        for name in moving:
            if name in nobody:
                assert before[name] != nobody[name], name
                assert after[name] == nobody[name], name
                assert theirs[name] != nobody[name], name
    finally:
        if host == "operator":
            await app.close()


async def test_the_export_holds_every_kind_that_is_exported(lived: Lived) -> None:
    app = lived.app
    await command(app, dm("/pause", "501"))  # she resumed, and forgot nothing: both would read as nobody's
    await app.memory.book.add(lived.ana, ["a-forgotten-digest"], NOW)
    document = await PersonExport(app.db, app.memory, app.clock, app.person_data).document(lived.ana, you=True)
    nobody = await export_parts(app.db, app.person_data, "p_nobody")
    exported = [entry.name for entry in app.person_data if entry.exported]
    assert list(document) == ["schema", "exported_at", "person", *exported]
    assert [name for name in exported if document[name] == nobody[name]] == []  # each part was really read
    assert [entry.name for entry in app.person_data if not entry.exported and entry.name in document] == []


class MoveFailed(Exception):
    """A declared kind whose rows cannot move (a full disk, a constraint a later kind breaks)."""


def _fails(_conn: object, _old: str, _new: str) -> int:
    raise MoveFailed


async def test_a_failure_inside_the_row_moves_moves_no_row_and_the_link_can_be_moved_again(app: App) -> None:
    """Every kind's rows move in one transaction: when the last kind's move fails, none of the earlier kinds' rows
    has moved (no person is left with half of a link's rows), and moving again with the same list finishes it."""
    old = await keep_one_of_each_kind_that_moves(app, "711")
    new = await app.db.run(directory.resolve, "telegram:712", "Ana", NOW)
    in_rows = [entry.name for entry in app.person_data if entry.move_rows is not None]
    assert {"questions", "goals", "messages", "check_ins"} <= set(in_rows)
    before = await export_parts(app.db, app.person_data, old)
    failing = PersonData("failing", move_rows=_fails, left_out="a test", kept_by_forget="a test")

    with pytest.raises(MoveFailed):
        await move_person(app.db, (*app.person_data, failing), old, new)

    after = await export_parts(app.db, app.person_data, old)
    assert [name for name in in_rows if after[name] != before[name]] == []
    moved = await move_person(app.db, app.person_data, old, new)
    assert [name for name in in_rows if not moved[name]] == []  # each kind's rows were still there to move
    nobody = await export_parts(app.db, app.person_data, "p_nobody")
    left = await export_parts(app.db, app.person_data, old)
    assert [name for name in in_rows if left[name] != nobody[name]] == []


async def test_a_link_whose_move_stopped_halfway_is_finished_before_the_next_start_serves(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """``bot.py people link`` with no bot: the link commits, then its move stops halfway (here the last kind's rows
    fail; a kill or a Ctrl-C stops it the same way, or before it began). The person's memories then sit neither
    under the account's old person nor fully under the new one; the next start finishes the move before it
    answers anyone, and nothing of the old person is left out of the new person's reach."""
    old = await keep_one_of_each_kind_that_moves(app, "721")
    new = await app.db.run(directory.resolve, "telegram:722", "Ana", NOW)
    kinds = app.person_data
    nobody = await export_parts(app.db, kinds, "p_nobody")
    settings = app.settings
    await app.close()
    gathered = LocalParts.person_data

    async def stopping_halfway(parts: LocalParts) -> tuple[PersonData, ...]:
        failing = PersonData("failing", move_rows=_fails, left_out="a test", kept_by_forget="a test")
        return (*await gathered(parts), failing)

    monkeypatch.setattr(LocalParts, "person_data", stopping_halfway)
    parts = LocalParts(settings)
    try:
        with pytest.raises(MoveFailed):
            await link_body(parts, argparse.Namespace(account="telegram:721", to="telegram:722"),
                            Console(io.StringIO(), io.StringIO()))
        assert await parts.db.run(directory.person_of, "telegram:721") == new  # the link itself committed
    finally:
        await parts.close()
    monkeypatch.undo()

    app = await build_app(settings, warm_llm=False)
    try:
        assert await app.start([]) == []
        left = await export_parts(app.db, app.person_data, old)
        theirs = await export_parts(app.db, app.person_data, new)
        moving = [entry.name for entry in app.person_data if entry.moves]
        assert [name for name in moving if name in nobody and left[name] != nobody[name]] == []
        assert [name for name in moving if name in nobody and theirs[name] == nobody[name]] == []
        assert await app.db.run(lambda conn: conn.execute(moves.link_moves.select()).all()) == []
    finally:
        await app.close()


async def test_a_link_in_chat_moves_everything_and_leaves_no_move_recorded(app: App) -> None:
    """``/link`` in chat: once the first account says yes, the move recorded with the link has run and is gone."""
    old = await keep_one_of_each_kind_that_moves(app, "731")
    await app.core.handle(dm("hi", "732"))
    new = await app.db.run(directory.person_of, "telegram:732")
    code = (await command(app, dm("/link", "732"))).text.split("Your link code is ")[1][:8]
    assert "confirm" in (await command(app, dm(f"/link {code}", "731"))).text
    assert (await command(app, dm("/link yes", "732"))).text == "Linked: telegram:731 is you too."

    assert await app.db.run(directory.person_of, "telegram:731") == new
    assert await app.db.run(lambda conn: conn.execute(moves.link_moves.select()).all()) == []
    nobody = await export_parts(app.db, app.person_data, "p_nobody")
    left = await export_parts(app.db, app.person_data, old)
    assert [entry.name for entry in app.person_data if entry.moves and entry.name in nobody
            and left[entry.name] != nobody[entry.name]] == []
