"""bot.py run killed while messages wait for their answers: the real process, SIGKILLed, then started
again over the same data directory, against the loopback fake Bot API and the fake LLM."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path

from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.config_file import write_config
from tests.support.paths import ROOT
from tests.support.waiting import until

ANA = 501
BEN = 502


async def _start_bot(cfg: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), "run", cwd=str(ROOT),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TELEGRAM_BOT_TOKEN": FAKE_BOT_TOKEN})


def _kept(data_dir: Path) -> list[str]:
    """The message ids the bot's inbox holds, read from its database file as it stands on disk."""
    with sqlite3.connect(data_dir / "kith.db") as conn:
        try:
            return [row[0] for row in conn.execute("SELECT message_id FROM inbox ORDER BY id")]
        except sqlite3.OperationalError:
            return []  # not created yet


async def test_messages_waiting_for_an_answer_when_the_process_is_killed_are_answered_once_after_restart(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    data = tmp_path / "data"
    cfg = write_config(tmp_path / "kith.toml", fake_llm, data, extra=(
        f'[telegram]\nbase_url = "{telegram_api.base_url}"\npoll_timeout_s = 1\n'
        '[policy.telegram]\ndm = "open"\n[delivery]\ndebounce_ms = 1500\n[heartbeat]\nenabled = false\n'))
    fake_llm.hang(15)  # Ana's first answer never comes: the model is still thinking when the process dies
    bot = await _start_bot(cfg)
    try:
        telegram_api.push_text(ANA, ANA, "are you still there?")
        await until(lambda: len(fake_llm.requests) == 1, 30)  # her turn is open: her message is in history
        telegram_api.push_text(BEN, BEN, "good morning")
        await until(lambda: len(_kept(data)) == 2, 30)  # his waits out the debounce window
    finally:
        bot.send_signal(signal.SIGKILL)
        await bot.wait()
    assert telegram_api.sent == []

    bot = await _start_bot(cfg)  # the fake model now echoes: each reply names what it answers
    try:
        await telegram_api.wait_for_sent(2, timeout=60)
        await asyncio.sleep(1.0)  # time for anything doubled to show up
        replies = {m.chat_id: m.visible_text for m in telegram_api.sent}
        assert len(telegram_api.sent) == 2
        assert replies == {ANA: "echo: are you still there?", BEN: "echo: good morning"}
        asked = fake_llm.requests[1:]
        assert len(asked) == 2
        ana = next(r for r in asked if any(m["content"] == "are you still there?" for m in r["messages"]))
        # Her message was recorded before the kill: the turn goes on from that row, not from a copy.
        assert [m["content"] for m in ana["messages"]].count("are you still there?") == 1
        await until(lambda: _kept(data) == [], 30)
    finally:
        bot.send_signal(signal.SIGTERM)
        _out, err = await asyncio.wait_for(bot.communicate(), 30)
    assert b"Traceback" not in err


def _outbox_errors(data_dir: Path) -> list[str | None]:
    with sqlite3.connect(data_dir / "kith.db") as conn:
        return [row[0] for row in conn.execute("SELECT last_error FROM outbox WHERE status = 'pending'")]


async def test_a_reply_waiting_on_telegrams_retry_after_across_a_kill_is_sent_right_after_the_restart(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    data = tmp_path / "data"
    cfg = write_config(tmp_path / "kith.toml", fake_llm, data, extra=(
        f'[telegram]\nbase_url = "{telegram_api.base_url}"\npoll_timeout_s = 1\n'
        '[policy.telegram]\ndm = "open"\n[delivery]\ndebounce_ms = 100\nmax_attempts = 2\n'
        '[heartbeat]\nenabled = false\n'))
    refusals = 2  # the last one past the quick retries (max_attempts): an older kith grew its wait into minutes
    for _ in range(refusals):
        telegram_api.fail_next("sendMessage", status=429, retry_after=1)

    def refused() -> int:
        return sum(1 for c in telegram_api.calls if c.method == "sendMessage" and c.failed_status == 429)

    bot = await _start_bot(cfg)
    try:
        telegram_api.push_text(ANA, ANA, "hello?")
        await until(lambda: refused() == refusals, 30)
    finally:
        bot.send_signal(signal.SIGKILL)  # within the second Telegram asked for: the reply waits on its word
        await bot.wait()
    assert telegram_api.sent == [] and _outbox_errors(data) == ["SendError:retry_after"]

    restarted_at = time.monotonic()
    bot = await _start_bot(cfg)
    try:
        await telegram_api.wait_for_sent(1, timeout=30)
        delivered_at = time.monotonic()
        # The new process's first call to Telegram: the start is done, whatever Python's imports took.
        first_call = min(c.at for c in telegram_api.calls if c.at >= restarted_at)
        assert telegram_api.texts_to(ANA) == ["echo: hello?"]
        assert delivered_at - first_call < 5.0  # sent as the new process starts, not after a grown backoff
    finally:
        bot.send_signal(signal.SIGTERM)
        _out, err = await asyncio.wait_for(bot.communicate(), 30)
    assert b"Traceback" not in err
