"""Operator commands from another machine on a shared PostgreSQL database (issue #36): the active bot answers them,
so there is still one writer. Real ``bot.py`` processes, each with a data directory of its own (two machines), on the
test session's PostgreSQL cluster, against the fake Bot API."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import psycopg

from ground.active_bot import libpq_conninfo
from kith.control.dispatch import LocalHost, find_host
from kith.control.remote_client import DatabaseLock, bot_is_active
from kith.settings import load_settings
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401
from tests.process.test_standby import Lines, _config
from tests.support.postgres import cluster
from tests.support.telegram_app import start_telegram_bot
from tests.support.waiting import until

ROOT = Path(__file__).resolve().parents[2]
BEN = 7_502
WAIT_S = 60.0


async def _command(cfg: Path, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), *args, cwd=str(ROOT),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TELEGRAM_BOT_TOKEN": FAKE_BOT_TOKEN})
    out, err = await asyncio.wait_for(proc.communicate(), WAIT_S)
    return proc.returncode or 0, out.decode(), err.decode()


def _pairing(tmp_path: Path, name: str, fake: FakeOpenAI, tg: FakeTelegramApi, url: str) -> Path:
    path = _config(tmp_path, name, fake, tg, url)
    path.write_text(path.read_text(encoding="utf-8").replace('dm = "open"', 'dm = "pairing"'), encoding="utf-8")
    return path


async def test_a_pairing_approved_on_another_machine_is_approved_by_the_active_bot(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    url = cluster().new_database()
    active_cfg = _pairing(tmp_path, "active", fake_llm, telegram_api, url)
    other_cfg = _pairing(tmp_path, "other", fake_llm, telegram_api, url)  # a machine with the URL and no bot
    bot = await start_telegram_bot(active_cfg)
    log = Lines(bot)
    try:
        await until(lambda: log.has("running on telegram"), WAIT_S, what="the bot to start")
        telegram_api.push_text(BEN, BEN, "hello?")
        (notice,) = await telegram_api.wait_for_sent(1, timeout=WAIT_S)
        found = re.search(r"pairing code is ([A-Z2-9]{8})", notice.visible_text)
        assert found is not None, notice.visible_text

        code, out, err = await _command(other_cfg, "pairing", "approve", found.group(1))
        assert code == 0 and out == f"approved telegram:{BEN}\n", out + err
        # The bot ran it (the other machine opened no store of its own: its data directory holds nothing)...
        await until(lambda: log.has("command=pairing.approve exit=0"), WAIT_S, what="the bot's log line")
        assert not (tmp_path / "other" / "chroma").exists()
        # ...and at once: Ben is answered now.
        telegram_api.push_text(BEN, BEN, "may I talk now?")
        await telegram_api.wait_for_sent(2, timeout=WAIT_S)
        assert telegram_api.texts_to(BEN)[1:] == ["echo: may I talk now?"]

        # A read with output of many lines comes back whole and in order.
        code, out, err = await _command(other_cfg, "people", "list")
        assert code == 0, err
        assert f"telegram:{BEN}" in out

        # A code that is not pending is refused by the bot, in the same words as on its own machine.
        code, out, err = await _command(other_cfg, "pairing", "approve", "NOSUCHCODE")
        assert code == 1 and "no pending request has this code" in out + err, (code, out, err)
    finally:
        bot.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(bot.wait(), WAIT_S) == 0
        await log.close()
    assert not any("Traceback" in line for line in log.lines), log.lines


async def test_with_no_bot_active_a_command_is_the_one_writer_and_a_bot_started_meanwhile_waits(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    url = cluster().new_database()
    other_cfg = _config(tmp_path, "other", fake_llm, telegram_api, url)
    # The database's lock held as a command running on its own holds it: a bot started meanwhile waits.
    held = DatabaseLock(url)
    assert held.try_take()
    bot = await start_telegram_bot(_config(tmp_path, "active", fake_llm, telegram_api, url))
    log = Lines(bot)
    try:
        await until(lambda: log.has("waiting as its standby"), WAIT_S, what="the bot to wait")
        held.release()
        await until(lambda: log.has("running on telegram"), WAIT_S, what="the bot to take over")
        # With the bot active, the other machine's command goes to it instead of opening the stores.
        code, _out, err = await _command(other_cfg, "people", "list")
        assert code == 0, err
        await until(lambda: log.has("command=people.list exit=0"), WAIT_S, what="the bot to run it")
    finally:
        bot.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(bot.wait(), WAIT_S) == 0
        await log.close()
    # No bot now: the command runs itself, holding the database's lock as well as the directory's while it does
    # (a bot started meanwhile would wait), and lets go of both when it is done.
    code, _out, err = await _command(other_cfg, "people", "list")
    assert code == 0, err
    host = find_host(load_settings(other_cfg, require_environment=False), lambda _line: None, 1.0)
    try:
        assert isinstance(host, LocalHost) and host.database_lock is not None
        with psycopg.connect(libpq_conninfo(url), autocommit=True) as conn:
            assert bot_is_active(conn)
    finally:
        host.close()
    with psycopg.connect(libpq_conninfo(url), autocommit=True) as conn:
        assert not bot_is_active(conn)
