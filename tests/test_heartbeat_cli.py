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

from core import history, people
from core.app import open_database
from core.config import Settings
from core.control.dispatch import run_command
from core.types import utcnow
from heartbeat import goals
from heartbeat.cli import add_consolidate_parser, add_decay_parser, add_heartbeat_parser, add_undo_decay_action
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
            person = people.resolve(conn, "console:ana", "Ana", when)
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


async def test_consolidate_now_sweeps_the_past_days_with_a_progress_bar(
    fake_llm: FakeOpenAI, make_settings: Callable[..., Settings], capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings(fake_llm)
    seed(settings, "I have a cat called Mruczek.")
    memory = {"kind": "fact", "text": "Ana has a cat called Mruczek", "evidence": "a cat called Mruczek"}
    fake_llm.route = lambda body: Scripted(text=json.dumps({"summary": "Cats.", "memories": [memory]}))

    code, out = await run("consolidate", settings)

    assert code == 0
    assert "consolidated 1/1 days, 1 chunks" in out and "1 new" in out
    assert "consolidating [##############################] 1/1 chunks" in capsys.readouterr().err
    code, out = await run("consolidate", settings)
    assert code == 0 and "consolidated 0/0 days" in out and len(fake_llm.requests) == 1


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

    assert code == 0 and "1 people with something due, 1 model calls: posted 1" in out
    assert "outbox" in out


async def test_decay_now_and_undo_decay(fake_llm: FakeOpenAI, make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(fake_llm)
    code, out = await run("memory.undo-decay", settings)
    assert code == 1 and out == "no decay run to undo\n"
    code, out = await run("decay", settings)
    assert code == 0 and out.startswith("decay run 1: retired 0")
    code, out = await run("memory.undo-decay", settings)
    assert code == 0 and out.startswith("undid decay run 1: restored 0")
