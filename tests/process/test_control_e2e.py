"""Operator commands beside a running bot: the real ``bot.py run`` (Telegram fake, capture on, embedded Chroma)
while ``forget``, ``consolidate``, ``heartbeat``, ``decay``, ``undo-decay`` and ``people link`` run beside it as
processes of their own, with messages flowing. The bot runs every command itself, over its control channel."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from ground.instance import Role, read_holder
from ground.types import utcnow
from kith.app.wiring import open_database
from kith.settings import load_settings
from llm.client import LLMClient
from memory.service import MemoryService
from people import directory, history
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.memory import record
from tests.support.paths import ROOT
from tests.support.waiting import until

ANA = 501
BEN = 502
CARL = 701
WAIT_S = 60.0  # generous: the machine may be busy; nothing here is a timing claim
CAPTURE = "The transcript and the stored memories"
CONSOLIDATE = "You consolidate one part of a past day"
HEAVY = ("litellm", "chromadb", "sqlalchemy", "telegram", "discord", "slack_bolt")


def _config(tmp_path: Path, fake: FakeOpenAI, api: FakeTelegramApi) -> Path:
    cfg = tmp_path / "kith.toml"
    cfg.write_text(
        f'[llm]\nmodel = "openai/fake-model"\napi_base = "{fake.base_url}"\ntimeout_s = 10.0\nmax_retries = 0\n'
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\n'
        '[memory]\nembedder = "none"\ncapture = true\n'
        f'[telegram]\nbase_url = "{api.base_url}"\npoll_timeout_s = 1\n'
        '[policy.telegram]\ndm = "open"\n[delivery]\ndebounce_ms = 50\n', encoding="utf-8")
    return cfg


async def _seed(cfg: Path) -> None:
    """Ana with a pinned fact (in every prompt of hers) and a line from yesterday; Carl with a fact; Ben."""
    settings = load_settings(str(cfg))
    db = open_database(settings)
    memory = await MemoryService.open(settings, db, LLMClient(settings.llm), announce=False)
    try:
        now = utcnow()
        ana = await db.run(directory.resolve, f"telegram:{ANA}", "Ana", now)
        carl = await db.run(directory.resolve, f"telegram:{CARL}", "Carl", now)
        await db.run(directory.resolve, f"telegram:{BEN}", "Ben", now)
        await memory.store.add_memory(dataclasses.replace(record(ana, "Ana's cat is called Mruczek"), pinned=True))
        await memory.store.add_memory(record(carl, "Carl plays chess on Sundays"))
        yesterday = now - timedelta(days=1)
        await db.run(lambda conn: history.append(
            conn, conversation=f"telegram:{ANA}", role="user", author=f"telegram:{ANA}", person=ana,
            platform="telegram", chat_id=str(ANA), text="I started learning the cello", created_at=yesterday,
            platform_message_id="y1"))
    finally:
        await memory.close()
        db.close()


def _route(request: dict[str, Any]) -> Scripted | None:
    """Capture keeps each "I like tea number N" it is shown; every other call is echoed."""
    if not request["messages"][0]["content"].startswith(CAPTURE):
        return None
    numbers = sorted(set(re.findall(r"I like tea number (\d+)", request["messages"][-1]["content"])))
    return Scripted(text=json.dumps({"memories": [
        {"kind": "preference", "text": f"likes tea number {n}", "evidence": [f"I like tea number {n}"]}
        for n in numbers]}))


async def _bot(cfg: Path, log: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), "run", cwd=str(ROOT),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=log.open("wb"),
        env={**os.environ, "TELEGRAM_BOT_TOKEN": FAKE_BOT_TOKEN})


async def _command(cfg: Path, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), *args, cwd=str(ROOT),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), WAIT_S)
    return proc.returncode or 0, out.decode(), err.decode()


def _replies(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [r for r in fake.requests if not r["messages"][0]["content"].startswith(CAPTURE)]


def _prompt_of(fake: FakeOpenAI, text: str) -> str:
    """Everything the model was shown when it answered ``text``."""
    for request in _replies(fake):
        if request["messages"][-1]["content"] == text:
            return "\n".join(str(m.get("content")) for m in request["messages"])
    raise AssertionError(f"no reply prompt for {text!r}")


async def test_commands_beside_a_running_bot_run_in_it_and_take_effect_at_once(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    cfg = _config(tmp_path, fake_llm, telegram_api)
    await _seed(cfg)
    fake_llm.route = _route
    log = tmp_path / "bot.log"
    bot = await _bot(cfg, log)
    sent: dict[int, list[int]] = {ANA: [], BEN: []}
    commands = [  # run in pairs, each pair at once; a pair's commands never depend on each other
        ("consolidate", "--now"), ("heartbeat", "--now", "--any-hour"),
        ("decay", "--now"), ("people", "link", f"telegram:{CARL}", "--to", f"telegram:{BEN}"),
        ("memory", "undo-decay"), ("people", "unlink", f"telegram:{CARL}"),
        ("memory", "forget", "--account", f"telegram:{BEN}", "chess", "--yes"),  # linked from Carl: Ben's now
    ]
    try:
        await until(lambda: "kith: running on telegram" in log.read_text(errors="replace"), WAIT_S,
                    what="the bot to start")
        telegram_api.push_text(ANA, ANA, "what do you know about me and Mruczek?")
        await telegram_api.wait_for_sent(1, timeout=WAIT_S)
        assert "Mruczek" in _prompt_of(fake_llm, "what do you know about me and Mruczek?")  # pinned, and said

        async def chatter() -> None:
            for n in range(12):
                who = ANA if n % 2 == 0 else BEN
                telegram_api.push_text(who, who, f"I like tea number {n}")
                sent[who].append(n)
                await asyncio.sleep(0.15)

        flowing = asyncio.ensure_future(chatter())
        results = []
        for _round in range(2):
            for first, second in zip(commands[::2], [*commands[1::2], None], strict=True):
                pair = [_command(cfg, *first)] + ([_command(cfg, *second)] if second else [])
                results += await asyncio.gather(*pair)  # two at a time: the bot runs writers one by one
        await flowing
        for (code, out, err), command in zip(results, commands * 2, strict=True):
            assert code == 0, (command, out, err)
            assert "Traceback" not in err, (command, err)
        assert "linked telegram:701 to" in "".join(out for _c, out, _e in results)
        assert "forgotten: 1 memor" in "".join(out for _c, out, _e in results)

        # Forgotten through the bot: gone from the very next prompt, with no wait: the pinned memory and the
        # words in the thread's recent window the bot holds in memory.
        code, out, err = await _command(cfg, "memory", "forget", "--account", f"telegram:{ANA}", "Mruczek", "--yes")
        assert code == 0 and "forgotten: 1 memor" in out, out + err
        telegram_api.push_text(ANA, ANA, "and now, what do you know?")
        await until(lambda: any(r["messages"][-1]["content"] == "and now, what do you know?"
                                for r in _replies(fake_llm)), WAIT_S, what="the next reply's prompt")
        assert "Mruczek" not in _prompt_of(fake_llm, "and now, what do you know?")

        # Through the running bot the command's process loads none of the heavy libraries.
        probe = ("import sys, bot\n"
                 f"code = bot.main(['--config', {str(cfg)!r}, 'people', 'list'])\n"
                 f"print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules), 'EXIT', code)")
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", probe, cwd=str(ROOT),
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out_b, err_b = await asyncio.wait_for(proc.communicate(), WAIT_S)
        assert "HEAVY [] EXIT 0" in out_b.decode() and "people: " in out_b.decode(), err_b.decode()

        # Every message answered: each reached a reply's prompt (a quick burst from one person may be one turn,
        # by debounce), and every turn's reply was sent.
        await until(lambda: _answered(fake_llm) >= set(range(12)), WAIT_S, what="a reply to every message")
        await telegram_api.wait_for_sent(len(_replies(fake_llm)), timeout=WAIT_S)
        await until(lambda: _captured(fake_llm) >= set(range(12)), WAIT_S, what="every message's capture call")
        await asyncio.sleep(1.0)  # the last capture's write lands
    finally:
        bot.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(bot.wait(), WAIT_S) == 0
    text = log.read_text(errors="replace")
    assert "InternalError" not in text and "Traceback" not in text, text[-3000:]
    assert "capture failed" not in text and "memory slots unavailable" not in text
    assert len(re.findall(r"control command command=\S+ exit=0", text)) == len(commands) * 2 + 2

    # The bot is stopped: a command still works, holding the data directory itself, and every capture was kept.
    for who, numbers in sent.items():
        code, out, err = await _command(cfg, "memory", "list", "--account", f"telegram:{who}", "--notes")
        assert code == 0, err
        assert {int(n) for n in re.findall(r'"I like tea number (\d+)"', out)} == set(numbers), out


def _answered(fake: FakeOpenAI) -> set[int]:
    """The numbered messages a reply's prompt carried as the person's turn."""
    return {int(n) for request in _replies(fake)
            for n in re.findall(r"I like tea number (\d+)", str(request["messages"][-1]["content"]))}


def _captured(fake: FakeOpenAI) -> set[int]:
    shown = set()
    for request in fake.requests:
        if request["messages"][0]["content"].startswith(CAPTURE):
            shown |= {int(n) for n in re.findall(r"I like tea number (\d+)", request["messages"][-1]["content"])}
    return shown


async def test_a_bot_started_during_a_command_waits_for_it_before_opening_the_stores(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    cfg = _config(tmp_path, fake_llm, telegram_api)
    await _seed(cfg)
    fake_llm.hang(4)  # consolidation's model call: the command holds the data directory meanwhile
    command = asyncio.ensure_future(_command(cfg, "consolidate", "--now"))
    await until(lambda: len(fake_llm.requests) == 1, WAIT_S, what="the command to reach the model")
    log = tmp_path / "bot.log"
    bot = await _bot(cfg, log)
    try:
        await until(lambda: "waiting for an operator command (pid" in log.read_text(errors="replace"), WAIT_S,
                    what="the bot to say what it waits for")
        data = tmp_path / "data"
        while (holder := read_holder(data)) is not None and holder.role is Role.COMMAND:
            # While the command holds the data directory the bot opens no store (its first line about one).
            assert "embedder" not in log.read_text(errors="replace")
            await asyncio.sleep(0.05)
        code, out, err = await command
        assert code == 0 and "consolidated 1/1 days" in out, out + err
        await until(lambda: "kith: running on telegram" in log.read_text(errors="replace"), WAIT_S,
                    what="the bot to start")
        code, out, err = await _command(cfg, "people", "list")  # and now through it
        assert code == 0 and out.startswith("people: 3"), out + err
    finally:
        bot.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(bot.wait(), WAIT_S) == 0
    text = log.read_text(errors="replace")
    assert text.index("waiting for an operator command") < text.index("embedder")
    assert "Traceback" not in text and len(re.findall(r"control command command=people.list exit=0", text)) == 1


async def test_a_long_consolidate_does_not_hold_up_other_commands(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    """A heartbeat job waits in the heartbeat's own line: a link or a forget sent meanwhile is not queued behind
    it (a nightly fold of many days takes minutes)."""
    cfg = _config(tmp_path, fake_llm, telegram_api)
    await _seed(cfg)

    def route(request: dict[str, Any]) -> Scripted | None:
        if CONSOLIDATE in str(request["messages"][0]["content"]):
            return Scripted(text=json.dumps({"summary": "Cello.", "memories": []}), delay_s=6.0)
        return None

    fake_llm.route = route
    log = tmp_path / "bot.log"
    bot = await _bot(cfg, log)
    try:
        await until(lambda: "kith: running on telegram" in log.read_text(errors="replace"), WAIT_S,
                    what="the bot to start")
        folding = asyncio.ensure_future(_command(cfg, "consolidate", "--now"))
        await until(lambda: any(CONSOLIDATE in str(r["messages"][0]["content"]) for r in fake_llm.requests), WAIT_S,
                    what="the consolidation to reach the model")
        code, out, err = await _command(cfg, "people", "link", f"telegram:{CARL}", "--to", f"telegram:{BEN}")
        assert code == 0 and "linked telegram:701 to" in out, out + err
        assert not folding.done()  # the link went through while the fold still waited on its model
        code, out, err = await folding
        assert code == 0 and "Traceback" not in err, out + err
    finally:
        bot.send_signal(signal.SIGTERM)
        await asyncio.wait_for(bot.wait(), WAIT_S)
