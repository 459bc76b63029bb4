"""Operator commands: consolidate, heartbeat and decay run once on demand; undo-decay reverses a decay pass."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from delivery import outbox
from ground.config import Settings
from ground.types import utcnow
from kith.app.wiring import open_database
from kith.control.dispatch import run_command
from kith.operator.heartbeat_cli import (
    add_consolidate_parser,
    add_decay_parser,
    add_heartbeat_parser,
    add_undo_decay_action,
)
from memory import goals
from people import directory, history
from tests.fakes.openai_api import FakeOpenAI, Scripted


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="bot.py")
    sub = top.add_subparsers(dest="command")
    add_consolidate_parser(sub)
    add_heartbeat_parser(sub)
    add_decay_parser(sub)
    memory = sub.add_parser("memory").add_subparsers(dest="memory_command")
    add_undo_decay_action(memory)
    return top


def test_the_commands_parse_and_insist_on_now() -> None:
    p = parser()
    assert p.parse_args(["heartbeat", "--now", "--any-hour"]).any_hour is True
    assert p.parse_args(["memory", "undo-decay"]).memory_command == "undo-decay"
    with pytest.raises(SystemExit):
        p.parse_args(["consolidate"])


def seed(settings: Settings, *lines: str, days_ago: int = 1) -> str:
    db = open_database(settings)
    try:
        when = utcnow() - timedelta(days=days_ago)

        def write(conn: Any) -> str:
            person = directory.resolve(conn, "console:ana", "Ana", when)
            for i, line in enumerate(lines):
                history.append(conn, conversation="console:ana", role="user", author="console:ana", person=person,
                               platform="console", chat_id="ana", text=line, created_at=when,
                               platform_message_id=f"u{i}")
            return person

        return db.run_sync(write)
    finally:
        db.close()


async def run(name: str, settings: Settings, args: argparse.Namespace | None = None) -> tuple[int, str]:
    out = io.StringIO()
    # No bot runs: the command holds the lock and runs its own loop; the loopback model keeps serving on this one.
    code = await asyncio.to_thread(run_command, settings, name, args or argparse.Namespace(), out=out)
    return code, out.getvalue()


async def test_consolidate_now_sweeps_the_past_days_and_says_when_none_is_waiting(
    fake_llm: FakeOpenAI, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(fake_llm)
    seed(settings, "I have a cat called Mruczek.")
    memory = {"kind": "fact", "text": "Ana has a cat called Mruczek", "evidence": "a cat called Mruczek"}
    fake_llm.route = lambda body: Scripted(text=json.dumps({"summary": "Cats.", "memories": [memory]}))

    code, out = await run("consolidate", settings)

    assert code == 0
    assert "consolidated 1/1 days, 1 chunk (" in out and "1 new" in out
    code, out = await run("consolidate", settings)
    # Today is never folded: the second run says so instead of "0/0 chunks".
    assert code == 0 and out.startswith("nothing to consolidate: only days before today") and \
        len(fake_llm.requests) == 1


async def test_consolidate_now_reports_a_model_outage(
    fake_llm: FakeOpenAI, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(fake_llm)
    seed(settings, "I have a cat called Mruczek.")
    fake_llm.fail(500)
    code, out = await run("consolidate", settings)
    assert code == 1 and "the next run resumes" in out


async def test_heartbeat_now_writes_the_message_to_the_outbox(
    fake_llm: FakeOpenAI, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(fake_llm)
    ana = seed(settings, "Exam next week.", days_ago=0)
    db = open_database(settings)
    db.run_sync(goals.add, ana, "Pass the exam", utcnow().date() - timedelta(days=1), utcnow())
    db.close()
    fake_llm.reply("How did the exam prep go?")

    code, out = await run("heartbeat", settings, argparse.Namespace(any_hour=True))

    assert code == 0 and "1 person with something due, 1 model call: posted 1" in out
    assert "outbox" in out


async def test_decay_now_and_undo_decay(fake_llm: FakeOpenAI, make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(fake_llm)
    code, out = await run("memory.undo-decay", settings)
    assert code == 0 and out == "no decay run to undo\n"
    code, out = await run("decay", settings)
    assert code == 0 and out.startswith("decay run 1: retired 0")
    code, out = await run("memory.undo-decay", settings)
    assert code == 0 and out == "no decay run to undo\n"  # a pass that retired nothing is not one to undo


async def test_heartbeat_now_asks_a_flagged_conflict_with_buttons_not_in_a_free_text_turn(
    fake_llm: FakeOpenAI, make_settings: Callable[..., Settings]
) -> None:
    """A conflict the nightly consolidation flagged is asked at the heartbeat, as the real question, without the
    person writing first; the model is never asked to phrase it in a check-in no answer could settle."""
    from llm.client import LLMClient
    from memory.core.records import MemoryKind
    from memory.service import MemoryService
    from tests.support.memory import candidate

    settings = make_settings(fake_llm)
    ana = seed(settings, "I am back.", days_ago=0)  # she wrote in a DM once: somewhere private to ask
    db = open_database(settings)
    memory = await MemoryService.open(settings, db, LLMClient(settings.llm), announce=False)
    try:
        for editor in ("Vim", "Emacs"):
            await memory.gate.admit(ana, candidate(f"Ana's favourite editor is {editor}", kind=MemoryKind.PREFERENCE))
        assert sum(bool(m.conflicts_with) for m in await memory.active_memories(ana)) == 2
    finally:
        await memory.close()
        db.close()

    code, out = await run("heartbeat", settings, argparse.Namespace(any_hour=True))

    assert code == 0 and "questions asked 1" in out and "messages are in the outbox" in out
    assert not any("DISPUTED" in json.dumps(r["messages"]) for r in fake_llm.requests)
    db = open_database(settings)
    try:
        rows = db.run_sync(lambda conn: conn.execute(sa.select(outbox.outbox.c.text, outbox.outbox.c.buttons)).all())
    finally:
        db.close()
    assert len(rows) == 1 and "Which is right?" in rows[0].text
    assert "Vim" in rows[0].text and "Emacs" in rows[0].text
    assert [data.split(":")[0] for _label, data in json.loads(rows[0].buttons)] == ["q"] * 4
    code, out = await run("heartbeat", settings, argparse.Namespace(any_hour=True))
    assert code == 0 and "questions asked" not in out  # asked once: one open question per person
