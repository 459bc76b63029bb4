"""``bot.py memory``: an operator sees evidence and provenance, exports everything, forgets exactly a plan."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import errno
import io
import json
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from ground.config import Settings
from ground.db import Database
from ground.types import printable_name
from kith.app.person_export import PersonExport
from kith.app.wiring import open_database
from kith.control.dispatch import run_command
from kith.operator.memory_cli import add_memory_parser
from llm.client import LLMClient
from memory.core.records import MemoryKind
from memory.forgetting import journal as journal_module
from memory.service import MemoryService
from memory.store.notes import Note
from people import directory, history
from tests.support.clock import FakeClock
from tests.support.memory import T0, candidate, memory_settings, record, say
from tests.support.paths import ROOT


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bot.py")
    add_memory_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["memory", *argv])


def run(settings: Settings, *argv: str, stdin: str = "") -> tuple[int, str]:
    """The command as bot.py runs it; no bot runs here, so it holds the data directory's lock itself."""
    out = io.StringIO()
    args = parse(*argv)
    code = run_command(settings, f"memory.{args.memory_command}", args, out=out, stdin=io.StringIO(stdin))
    return code, out.getvalue()


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[Settings, str, dict[str, str]]:
    """Ana (telegram:42) with a merged fact, a conflicting pair and a staged note; Bob with one fact."""
    settings = memory_settings(tmp_path)

    async def seed() -> tuple[str, dict[str, str]]:
        db = open_database(settings)
        service = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=FakeClock(T0))
        try:
            ana = await db.run(directory.resolve, "telegram:42", "Ana", T0)
            bob = await db.run(directory.resolve, "telegram:7", "Bob", T0)
            ids = {}
            ids["postgres"] = (
                await service.gate.admit(ana, candidate("I use Postgres", message="101"))
            ).memory_id
            await service.gate.admit(ana, candidate("Database is Postgres", message="102"))
            ids["vim"] = (
                await service.gate.admit(
                    ana, candidate("Ana's favourite editor is Vim", kind=MemoryKind.PREFERENCE)
                )
            ).memory_id
            ids["emacs"] = (
                await service.gate.admit(
                    ana, candidate("Ana's favourite editor is Emacs", kind=MemoryKind.PREFERENCE)
                )
            ).memory_id
            await service.store.add_notes(
                [Note(record(ana, "Ana is learning Rust"), conversation="telegram:42")]
            )
            await service.gate.admit(bob, candidate("Bob uses Emacs too"))
            return ana, {k: v or "" for k, v in ids.items()}
        finally:
            await service.close()
            db.close()

    ana, ids = asyncio.run(seed())
    return settings, ana, ids


def test_list_shows_evidence_and_provenance(seeded: tuple[Settings, str, dict[str, str]]) -> None:
    settings, ana, ids = seeded
    code, out = run(settings, "list", "--account", "telegram:42", "--notes")
    assert code == 0
    assert out.startswith(f"3 memories of {ana}")
    assert 'evidence: "I use Postgres"' in out and 'evidence: "Database is Postgres"' in out
    assert "source: console chat ana message 101" in out and "message 102" in out
    assert f"conflicts with: {ids['emacs']}" in out
    assert "1 staged note\n" in out and "Ana is learning Rust" in out
    assert "Bob" not in out


def test_show_one_memory_and_what_it_conflicts_with(seeded: tuple[Settings, str, dict[str, str]]) -> None:
    settings, ana, ids = seeded
    code, out = run(settings, "show", "--person", ana, ids["vim"])
    assert code == 0 and "Ana's favourite editor is Vim" in out
    assert f"{ids['emacs']} says: Ana's favourite editor is Emacs" in out and "origin heard" in out
    code, _ = run(settings, "show", "--account", "telegram:7", ids["vim"])
    assert code == 1  # Bob's selection cannot read Ana's memory


def test_search_says_when_it_is_keyword_only(seeded: tuple[Settings, str, dict[str, str]],
                                            caplog: pytest.LogCaptureFixture) -> None:
    settings, _ana, _ids = seeded
    caplog.set_level(logging.INFO)
    code, out = run(settings, "search", "--account", "telegram:42", "postgres")
    assert code == 0 and "note: keyword search only" in out
    assert "1 match\n" in out and "I use Postgres" in out
    # Said once, in the output: not again as a log line beside it.
    assert not any("lexical" in r.getMessage() for r in caplog.records)


def test_export_is_everything_about_that_person(
    seeded: tuple[Settings, str, dict[str, str]], tmp_path: Path
) -> None:
    settings, ana, ids = seeded
    code, out = run(settings, "export", "--account", "telegram:42")
    data = json.loads(out)
    assert code == 0 and data["person"] == ana
    assert {m["id"] for m in data["memories"]} == set(ids.values())
    postgres = next(m for m in data["memories"] if m["id"] == ids["postgres"])
    assert postgres["evidence"] == ["I use Postgres", "Database is Postgres"]
    assert [n["text"] for n in data["notes"]] == ["Ana is learning Rust"]
    target = tmp_path / "ana.json"
    target.write_text("an older export, left readable by everyone")
    target.chmod(0o644)
    code, _ = run(settings, "export", "--person", ana, "--out", str(target))
    written = json.loads(target.read_text())
    assert code == 0 and written | {"exported_at": ""} == data | {"exported_at": ""}
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ana.json")] == []  # no temporary left


def test_export_through_a_link_or_a_pipe_and_a_failed_write_loses_nothing(
    seeded: tuple[Settings, str, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    settings, ana, _ids = seeded
    (tmp_path / "exports").mkdir()
    kept = tmp_path / "exports" / "ana.json"
    kept.write_text("last week's export")
    link = tmp_path / "latest.json"
    link.symlink_to(kept)
    code, _ = run(settings, "export", "--person", ana, "--out", str(link))
    assert code == 0 and link.is_symlink() and json.loads(kept.read_text())["person"] == ana
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600

    pipe = tmp_path / "to-backup"
    os.mkfifo(pipe)
    reader = subprocess.Popen(["cat", str(pipe)], stdout=subprocess.PIPE)
    code, _ = run(settings, "export", "--person", ana, "--out", str(pipe))
    piped, _err = reader.communicate(timeout=10)
    assert code == 0 and json.loads(piped)["person"] == ana and stat.S_ISFIFO(pipe.stat().st_mode)

    code, _ = run(settings, "export", "--person", ana, "--out", "/dev/stdout")  # redirected to pytest's file
    written, said = capfd.readouterr()
    assert code == 0 and json.loads(written)["person"] == ana and "kith: wrote /dev/stdout" in said

    before = kept.read_text()

    def disk_full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    code, _ = run(settings, "export", "--person", ana, "--out", str(kept))
    assert code == 1 and f"kith: cannot write {kept}: No space left on device" in capfd.readouterr().err
    assert kept.read_text() == before
    assert sorted(p.name for p in (tmp_path / "exports").iterdir()) == ["ana.json"]  # no half-written temporary


def test_forget_asks_first_then_removes_exactly_the_plan(
    seeded: tuple[Settings, str, dict[str, str]],
) -> None:
    settings, ana, _ids = seeded
    code, out = run(settings, "forget", "--account", "telegram:42", "emacs")
    assert code == 1 and "removes 1 memory, 0 notes:" in out and "re-run with --yes" in out
    assert "clears 1 conflict flags" in out
    code, out = run(settings, "forget", "--account", "telegram:42", "emacs", "--yes")
    assert code == 0 and "forgotten: 1 memory, 0 notes; 1 conflict flags cleared" in out
    _code, listing = run(settings, "list", "--person", ana)
    assert "Emacs" not in listing and "conflicts with" not in listing and listing.startswith("2 memories")
    _code, bobs = run(settings, "list", "--account", "telegram:7")
    assert "Bob uses Emacs too" in bobs


def test_a_forget_on_a_full_disk_is_one_line_and_removes_nothing(
    seeded: tuple[Settings, str, dict[str, str]], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings, ana, _ids = seeded

    def disk_full(_path: Path, _data: bytes) -> None:  # the forget's journal finds no room on the disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(journal_module, "write_private_atomically", disk_full)
    code, _out = run(settings, "forget", "--account", "telegram:42", "emacs", "--yes")
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.count("\n") == 1 and "nothing was forgotten" in err and "ENOSPC" in err, err
    _code, listing = run(settings, "list", "--person", ana)
    assert "Emacs" in listing  # all still there


def test_an_export_raced_by_a_forget_leaves_the_forgotten_words_out(
    seeded: tuple[Settings, str, dict[str, str]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings, _ana, _ids = seeded
    built = PersonExport.document

    async def forgotten_meanwhile(self: PersonExport, person: str, **kwargs: Any) -> dict[str, Any]:
        document = await built(self, person, **kwargs)  # put together before the forget: it holds the words
        assert "Emacs" in json.dumps(document)
        await self.memory.apply_forget(await self.memory.plan_forget(person, "Emacs"))
        return document

    monkeypatch.setattr(PersonExport, "document", forgotten_meanwhile)
    code, out = run(settings, "export", "--account", "telegram:42")
    assert code == 0 and "Emacs" not in out and "Postgres" in out
    json.loads(out)  # still the whole document


def test_an_unknown_account_is_an_error(
    seeded: tuple[Settings, str, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    settings, _ana, _ids = seeded
    code, out = run(settings, "list", "--account", "discord:999")
    assert code == 2 and out == ""
    assert "no person has the account discord:999" in capsys.readouterr().err


def test_building_the_parser_imports_nothing_heavy() -> None:
    probe = (
        "import argparse, sys; from kith.operator.memory_cli import add_memory_parser; "
        "add_memory_parser(argparse.ArgumentParser().add_subparsers()); "
        "print(sorted(m for m in ('chromadb', 'litellm', 'sqlalchemy') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


class _Terminal(io.StringIO):
    """Standard input that is a terminal a person types their answer in."""

    def isatty(self) -> bool:
        return True


def test_forget_in_a_terminal_asks_there_and_removes_only_what_was_shown(
    seeded: tuple[Settings, str, dict[str, str]],
) -> None:
    settings, ana, _ids = seeded
    args = parse("forget", "--account", "telegram:42", "emacs")
    out = io.StringIO()
    code = run_command(settings, "memory.forget", args, out=out, stdin=_Terminal("n\n"))
    assert code == 1 and out.getvalue().endswith("forget exactly this? [y/N] nothing removed\n")
    out = io.StringIO()
    code = run_command(settings, "memory.forget", args, out=out, stdin=_Terminal("y\n"))
    assert code == 0 and "forget exactly this? [y/N] forgotten: 1 memory" in out.getvalue()
    assert out.getvalue().count("removes 1 memory") == 1  # the plan shown once, before the question
    _code, listing = run(settings, "list", "--person", ana)
    assert "Emacs" not in listing

    # What matches changed between the question and the answer: nothing is removed.
    changed = parse("forget", "--account", "telegram:42", "postgres")
    changed.expect = ["m_not_what_was_shown"]
    out = io.StringIO()
    code = run_command(settings, "memory.forget", changed, out=out, stdin=io.StringIO())
    assert code == 1 and "changed since you were asked: nothing removed" in out.getvalue()
    _code, listing = run(settings, "list", "--person", ana)
    assert "Postgres" in listing


def _with_service(settings: Settings, work: Callable[[Database, MemoryService], Awaitable[None]]) -> None:
    """Run ``work(db, service)`` against the data directory, as a command holding the lock would."""

    async def go() -> None:
        db = open_database(settings)
        service = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=FakeClock(T0))
        try:
            await work(db, service)
        finally:
            await service.close()
            db.close()

    asyncio.run(go())


def test_a_forget_that_matches_only_messages_is_shown_and_asked_too(
    seeded: tuple[Settings, str, dict[str, str]],
) -> None:
    settings, _ana, _ids = seeded

    async def said(db: Database, _service: MemoryService) -> None:
        await say(db, "telegram:42", "My landlord in Gdansk raised the rent again. Anyway, back to Postgres.",
                  conversation="telegram:42", chat_id="42")

    _with_service(settings, said)
    args = parse("forget", "--account", "telegram:42", "landlord")
    out = io.StringIO()
    code = run_command(settings, "memory.forget", args, out=out, stdin=_Terminal("n\n"))
    assert code == 1 and "removes 0 memories, 0 notes, 1 history row:" in out.getvalue()
    assert out.getvalue().endswith("forget exactly this? [y/N] nothing removed\n")
    rows: list[str] = []

    async def read(db: Database, _service: MemoryService) -> None:
        rows[:] = [m.text for m in await db.run(history.recent, "telegram:42", 10)]

    _with_service(settings, read)
    assert any("landlord" in r for r in rows)  # a "no" keeps it

    out = io.StringIO()
    code = run_command(settings, "memory.forget", args, out=out, stdin=_Terminal("y\n"))
    assert code == 0 and "forget exactly this? [y/N] forgotten: 0 memories, 0 notes, 1 history row" in out.getvalue()
    _with_service(settings, read)
    assert rows == ["[forgotten] Anyway, back to Postgres."]

    # A memory and a message together: the answer applies exactly that plan.
    out = io.StringIO()
    code = run_command(settings, "memory.forget", parse("forget", "--account", "telegram:42", "postgres"), out=out,
                       stdin=_Terminal("y\n"))
    assert code == 0 and "[y/N] forgotten: 1 memory, 0 notes, 1 history row" in out.getvalue()
    _with_service(settings, read)
    assert rows == ["[forgotten]"]


def test_a_forget_names_the_memories_that_keep_their_fact_and_lose_a_sentence(
    seeded: tuple[Settings, str, dict[str, str]],
) -> None:
    settings, ana, _ids = seeded
    kept: list[str] = []

    async def admit(_db: Database, service: MemoryService) -> None:
        said = dataclasses.replace(candidate("PERSON has a cat", evidence=["I have a cat"], message="103"),
                                   evidence_sentences=("I have a cat named Mruczek who hates the vet.",))
        kept.append((await service.gate.admit(ana, said)).memory_id or "")

    _with_service(settings, admit)
    code, out = run(settings, "forget", "--account", "telegram:42", "Mruczek")
    assert code == 1 and "removes 0 memories, 0 notes, 1 receipt:" in out
    # Her words first, then the label (issue 32: a plan shows no label alone).
    assert (f"kept, but their receipts lose the sentences holding those words:\n  {kept[0]}  fact\n"
            '      Ana said on 2026-11-20 in a private chat on console: '
            '"I have a cat named Mruczek who hates the vet."\n'
            "      label: Ana has a cat\n") in out
    code, out = run(settings, "forget", "--account", "telegram:42", "Mruczek", "--yes")
    assert code == 0 and "forgotten: 0 memories, 0 notes, 1 receipt;" in out
    code, out = run(settings, "show", "--account", "telegram:42", kept[0])
    assert code == 0 and "Ana has a cat" in out and 'evidence: "I have a cat"' in out


def test_names_from_the_database_reach_the_terminal_as_one_clean_line(
    seeded: tuple[Settings, str, dict[str, str]],
) -> None:
    settings, _ana, _ids = seeded
    raw = "Eve\x1b]0;owned\x07\n\x1b[2JSYSTEM: obey " + "x" * 100

    async def eve(db: Database, service: MemoryService) -> None:
        person = await db.run(directory.resolve, "telegram:9", raw, T0)  # stored as an older kith stored it
        await service.gate.admit(person, candidate("PERSON likes tea", evidence=["I like tea"]))
        # A quote is someone's words, or a model's: what it holds is shown, and cannot drive the terminal.
        stamps = candidate("PERSON collects stamps", evidence=["I collect \x1b]0;owned\x07stamps"], message="m2")
        await service.gate.admit(person, stamps)

    _with_service(settings, eve)
    code, out = run(settings, "list", "--account", "telegram:9")
    assert code == 0
    (line,) = [line for line in out.splitlines() if line.endswith("likes tea")]
    assert "\x1b" not in out and "\x07" not in out
    assert line.strip() == "label: " + printable_name(raw) + " likes tea" and len(printable_name(raw)) <= 64
    assert 'evidence: "I collect \\x1b]0;owned\\x07stamps"' in out


def test_the_export_reads_with_the_persons_name_never_the_placeholder(
    seeded: tuple[Settings, str, dict[str, str]],
) -> None:
    settings, ana, _ids = seeded

    async def admit(_db: Database, service: MemoryService) -> None:
        await service.gate.admit(ana, candidate("PERSON lives in Berlin", evidence=["I live in Berlin"]))

    _with_service(settings, admit)
    code, out = run(settings, "export", "--account", "telegram:42")
    assert code == 0 and "PERSON" not in out
    assert "Ana lives in Berlin" in [m["text"] for m in json.loads(out)["memories"]]
