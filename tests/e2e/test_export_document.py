"""The export is everything kith stores about one person, and nothing about anyone else: the chat's /export
and ``bot.py memory export`` give the same document, and every field of it is the one docs/export.md lists."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import re
from typing import Any

from ground.db import metadata
from kith.app import schema  # noqa: F401  (gathers every table into the metadata)
from kith.control.dispatch import run_command
from kith.operator.memory_cli import add_memory_parser
from tests.support.lived import BEN_WORDS, Lived, command, dm
from tests.support.paths import ROOT

DOC = ROOT / "docs" / "export.md"


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
