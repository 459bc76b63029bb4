"""``bot.py graph show|draw|unmerge|merge`` on a real database, as bot.py runs them with no bot running (issue #33).

The graph is written through :class:`memory.graph.GraphBook` as capture writes it; the commands read it back
through the same path every operator command takes (:func:`kith.control.dispatch.run_command`).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import shutil
import stat
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kith.app.wiring import open_database
from kith.control.dispatch import run_command
from kith.operator.graph_cli import add_graph_parser
from kith.settings import AppSettings
from memory.core import Scope, Source
from memory.core.graph_records import SELF_NAME, RelationProposal
from memory.graph import EntityKind, GraphBook, Proposed
from memory.graph.draw import DOT_MISSING
from people import directory

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
ACCOUNT = "telegram:42"


def said(subject: str, relation: str, obj: str, note: str, *, words: str, subject_kind: EntityKind | None = None,
         object_kind: EntityKind | None = None, scope: Scope = Scope.DM, memory_id: str | None = None) -> Proposed:
    return Proposed(RelationProposal(subject, subject_kind, relation, obj, object_kind), (words,), (words,),
                    (Source("telegram", "42", note, T0),), scope, T0, note_id=note, memory_id=memory_id)


@pytest.fixture
def settings(make_settings: Callable[..., AppSettings]) -> AppSettings:
    """Ana's graph: a sister said two ways (joined), where she lives, a dog said in a group, a move that ended."""
    settings = make_settings()
    db = open_database(settings)
    try:
        person = db.run_sync(directory.resolve, ACCOUNT, "Ana", T0)

        async def grow() -> None:
            book = GraphBook(db, lambda: T0)
            await book.add(person, [
                said("Ola", "sister of", SELF_NAME, "n1", words="Moja siostra Ola mieszka w Gdańsku.",
                     subject_kind=EntityKind.PERSON),
                said("Ola K.", "sister of", SELF_NAME, "n2", words="Ola K. is my sister",
                     subject_kind=EntityKind.PERSON),
                said("Ola", "lives in", "Gdańsk", "n3", words="Moja siostra Ola mieszka w Gdańsku.",
                     object_kind=EntityKind.PLACE),
                said("Reksio", "dog of", SELF_NAME, "n4", words="Reksio is my dog", subject_kind=EntityKind.PET,
                     scope=Scope.SHARED),
                said(SELF_NAME, "lives in", "Kraków", "n5", words='I live in "Kraków" \\ for now',
                     object_kind=EntityKind.PLACE, memory_id="m_krakow"),
            ])
            await book.answered(person, ["m_krakow"])  # she said she no longer does

        asyncio.run(grow())
    finally:
        db.close()
    return settings


def graph(settings: AppSettings, *argv: str) -> tuple[int, str, str]:
    """``bot.py graph ARGV…``: its exit code, standard output and standard error."""
    parser = argparse.ArgumentParser(prog="bot.py")
    add_graph_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["graph", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = run_command(settings, f"graph.{args.graph_action}", args, out=out, err=err, stdin=io.StringIO(""))
    return code, out.getvalue(), err.getvalue()


def test_show_lists_beings_and_relations_with_the_persons_words(settings: AppSettings) -> None:
    code, out, _err = graph(settings, "show", "--account", ACCOUNT)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].endswith("(Ana): 4 beings, 5 relations")
    assert "  Ola (person), also: Ola K." in lines and "  Gdańsk (place)" in lines and "  Reksio (pet)" in lines
    assert lines[1] == "beings:" and lines[6] == "relations:"
    assert "  Ola — sister of → Ana  [DM] holds since 2026-03-01 09:00 UTC" in lines
    assert "  Ola (said as Ola K.) — sister of → Ana  [DM] holds since 2026-03-01 09:00 UTC" in lines
    assert '      "Moja siostra Ola mieszka w Gdańsku."' in lines
    assert "  Reksio — dog of → Ana  [shared] holds since 2026-03-01 09:00 UTC" in lines
    ended = next(line for line in lines if "→ Kraków" in line)
    assert ended.startswith("  Ana — lives in → Kraków  [DM] held 2026-03-01 09:00 UTC until") and "(ended)" in ended
    assert '      "I live in \\"Kraków\\" \\\\ for now"' in lines  # quoted as one string, on one line
    assert "      said on telegram, 2026-03-01 09:00 UTC" in lines


def test_an_unknown_account_is_one_line_and_a_nonzero_exit(settings: AppSettings) -> None:
    code, out, err = graph(settings, "show", "--account", "telegram:999")
    assert code == 2 and out == "" and err == "kith: no person has the account telegram:999\n"


def _dot_or_skip() -> None:
    if shutil.which("dot") is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must have Graphviz: {DOT_MISSING} (.ci/run installs it)")
        pytest.skip(DOT_MISSING)


def test_draw_writes_an_owner_only_svg_with_the_names_and_relations(settings: AppSettings, tmp_path: Path) -> None:
    _dot_or_skip()
    out_file = tmp_path / "ana.svg"
    code, out, err = graph(settings, "draw", "--account", ACCOUNT, "--out", str(out_file))
    assert (code, out, err) == (0, "", f"kith: drew {out_file}\n")
    assert stat.S_IMODE(out_file.stat().st_mode) == 0o600
    root = ET.parse(out_file).getroot()
    texts = " | ".join("".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text"))
    for words in ("you", "Ola", "also: Ola K.", "Gdańsk", "Reksio", "Kraków", "sister of ×2", "lives in",
                  "dog of", "lives in (ended)", "Ana: 4 beings"):
        assert words in texts, words


def test_draw_without_dot_is_one_clear_line(settings: AppSettings, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    out_file = tmp_path / "ana.svg"
    code, _out, err = graph(settings, "draw", "--account", ACCOUNT, "--out", str(out_file))
    assert (code, err) == (1, f"kith: {DOT_MISSING}\n") and not out_file.exists()


def test_unmerge_then_merge_a_name(settings: AppSettings) -> None:
    code, out, _err = graph(settings, "unmerge", "--account", ACCOUNT, "Ola K.")
    assert (code, out) == (0, 'unmerged "Ola K." from Ola: a being of its own, kept apart from it\n')
    _code, shown, _err = graph(settings, "show", "--account", ACCOUNT)
    assert "  Ola (person)" in shown.splitlines() and "  Ola K. (person)" in shown.splitlines()

    code, _out, err = graph(settings, "unmerge", "--account", ACCOUNT, "Ola K.")
    assert (code, err) == (1, 'kith: "Ola K." is not joined to another name\n')

    code, out, _err = graph(settings, "merge", "--account", ACCOUNT, "ola k.", "Ola")  # names as typed
    assert (code, out) == (0, 'merged "ola k." into Ola\n  Ola (person), also: Ola K.\n')
    code, _out, err = graph(settings, "unmerge", "--account", ACCOUNT, "Ola")
    assert (code, err) == (1, 'kith: "Ola" is not joined to another name; the names joined to it: Ola K.\n')


def test_merge_and_unmerge_refuse_unknown_names_and_names_already_one(settings: AppSettings) -> None:
    code, _out, err = graph(settings, "merge", "--account", ACCOUNT, "Ola", "Zosia")
    assert code == 1 and err.endswith("'s graph has no name \"Zosia\"\n") and err.count("\n") == 1
    code, _out, err = graph(settings, "merge", "--account", ACCOUNT, "Ola K.", "Ola")
    assert (code, err) == (1, 'kith: "Ola K." and "Ola" are already one\n')
    code, _out, err = graph(settings, "unmerge", "--account", ACCOUNT, "Zosia")
    assert code == 1 and err.count("\n") == 1 and "Zosia" in err


def test_a_person_with_no_graph_yet_has_an_empty_one(settings: AppSettings) -> None:
    db = open_database(settings)
    try:
        db.run_sync(directory.resolve, "slack:T1:U1", "", T0)
    finally:
        db.close()
    code, out, _err = graph(settings, "show", "--account", "slack:T1:U1")
    assert code == 0 and out.endswith(": 0 beings, 0 relations\n") and out.count("\n") == 1


async def test_in_a_running_bot_an_unmerge_is_in_its_graph_at_once(settings: AppSettings) -> None:
    from kith.app.wiring import build_app
    from kith.control.live import LiveParts
    from kith.control.operations import run_operation
    from kith.control.parts import Console

    app = await build_app(settings, warm_llm=False)
    try:
        assert app.memory is not None
        person = await app.db.run(directory.person_of, ACCOUNT)
        before = await app.memory.graph.of(person)  # cached in the bot, as recall reads it
        assert before.resolve("Ola K.") == before.resolve("Ola")
        out, err = io.StringIO(), io.StringIO()
        code = await run_operation(LiveParts(app), "graph.unmerge", {"account": ACCOUNT, "person": None,
                                                                     "name": "Ola K."}, Console(out, err))
        assert (code, err.getvalue()) == (0, "")
        after = await app.memory.graph.of(person)
        assert after.resolve("Ola K.") != after.resolve("Ola")
    finally:
        await app.close()
