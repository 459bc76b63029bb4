"""Two kith processes on one data directory: the real ``bot.py run`` and an operator command started beside it
from another shell (``heartbeat``, ``consolidate``, ``pairing``), a second ``run``, and commands SIGKILLed half-way,
against the loopback fake Bot API and the fake model. Nothing is answered twice and nothing is lost."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from ground.types import utcnow
from heartbeat.scheduler import CONSOLIDATION_JOB, HEARTBEAT_JOB, HeartbeatScheduler
from heartbeat.service import build_heartbeat
from heartbeat.settings import HeartbeatSettings, resolve_timezone
from kith.app.wiring import open_database
from kith.settings import load_settings
from memory import goals
from people import directory, history
from persona.instructions import HEARTBEAT_INSTRUCTION
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.heartbeat import close_rig, make_rig
from tests.support.paths import ROOT
from tests.support.waiting import until

ANA = 601
BEN = 602
WAIT_S = 60.0  # generous: the machine may be busy; no assertion here is a timing claim
CHECK_IN = "How did the exam go?"
CONSOLIDATE = "You consolidate one part of a past day"


def _config(tmp_path: Path, fake: FakeOpenAI, api: FakeTelegramApi, *, dm: str = "open") -> Path:
    cfg = tmp_path / "kith.toml"
    cfg.write_text(
        f'[llm]\nmodel = "openai/fake-model"\napi_base = "{fake.base_url}"\ntimeout_s = 20.0\nmax_retries = 0\n'
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\n[memory]\nembedder = "none"\ncapture = false\n'
        f'[telegram]\nbase_url = "{api.base_url}"\npoll_timeout_s = 1\n[policy.telegram]\ndm = "{dm}"\n'
        '[delivery]\ndebounce_ms = 50\n'
        # Always inside active hours; the recurring tick far away unless a test makes one owed.
        '[heartbeat]\nactive_hours = "00:00-24:00"\ntimezone = "UTC"\nevery_minutes = 600\n', encoding="utf-8")
    return cfg


def _is_check_in(request: dict[str, Any]) -> bool:
    return HEARTBEAT_INSTRUCTION in str(request["messages"][0]["content"])


def _is_consolidation(request: dict[str, Any]) -> bool:
    return CONSOLIDATE in str(request["messages"][0]["content"])


def _route(check_in_delay_s: float = 0.0, consolidation_delay_s: float = 0.0) -> Any:
    """Check-ins and consolidation answered (after the delays given); every other call is echoed."""
    def route(request: dict[str, Any]) -> Scripted | None:
        if _is_check_in(request):
            return Scripted(text=CHECK_IN, delay_s=check_in_delay_s)
        if _is_consolidation(request):
            said = request["messages"][-1]["content"]
            memories = [{"kind": "fact", "text": f"Ana has a {pet}", "evidence": f"I have a {pet}"}
                        for pet in re.findall(r"I have a ((?:cat|dog) called \w+)", said)]
            return Scripted(text=json.dumps({"summary": "Pets.", "memories": memories}),
                            delay_s=consolidation_delay_s)
        return None

    return route


async def _seed(cfg: Path, *, goal: bool = False, pets: tuple[tuple[int, str], ...] = ()) -> str:
    """Ana, who wrote to kith in a Telegram DM today; a goal of hers due yesterday; ``pets`` said days ago."""
    settings = load_settings(str(cfg))
    db = open_database(settings)
    try:
        now = utcnow()

        def write(conn: Any) -> str:
            ana = directory.resolve(conn, f"telegram:{ANA}", "Ana", now)
            lines = [*((now - timedelta(days=days), f"I have a {pet}") for days, pet in pets),
                     (now, "Exam next week.")]
            for i, (when, text) in enumerate(lines):
                history.append(conn, conversation=f"telegram:{ANA}", role="user", author=f"telegram:{ANA}",
                               person=ana, platform="telegram", chat_id=str(ANA), text=text, created_at=when,
                               platform_message_id=f"seed{i}")
            if goal:
                goals.add(conn, ana, "Pass the exam", now.date() - timedelta(days=1), now)
            return ana

        return db.run_sync(write)
    finally:
        db.close()


async def _owe(cfg: Path, *job_ids: str) -> None:
    """The bot's recurring ``job_ids`` due now in its job store, as after a night it was off: it runs them at
    its start."""
    settings = load_settings(str(cfg))
    db = open_database(settings)
    tz = resolve_timezone(settings.heartbeat.timezone)
    scheduler = HeartbeatScheduler(db.engine, object(), hb=settings.heartbeat,  # type: ignore[arg-type]
                                   consolidation_hour=settings.memory.consolidation_hour, tz=tz, clock=utcnow)
    try:
        await scheduler.start(paused=True)
        for job_id in job_ids:
            scheduler.scheduler.modify_job(job_id, next_run_time=utcnow() - timedelta(seconds=1))
        await scheduler.shutdown()
    finally:
        db.close()


async def _bot(cfg: Path, log: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), "run", cwd=str(ROOT),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=log.open("ab"),
        env={**os.environ, "TELEGRAM_BOT_TOKEN": FAKE_BOT_TOKEN})


async def _started(cfg: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), *args, cwd=str(ROOT),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TELEGRAM_BOT_TOKEN": FAKE_BOT_TOKEN})


async def _command(cfg: Path, *args: str) -> tuple[int, str, str]:
    proc = await _started(cfg, *args)
    out, err = await asyncio.wait_for(proc.communicate(), WAIT_S)
    return proc.returncode or 0, out.decode(), err.decode()


async def _stop(bot: asyncio.subprocess.Process, log: Path) -> None:
    bot.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(bot.wait(), WAIT_S) == 0
    _no_traceback(log)


def _no_traceback(log: Path) -> None:
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-3000:]


def _running(log: Path) -> bool:
    return "kith: running on telegram" in log.read_text(errors="replace")


def _rows(data: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(data / "kith.db") as conn:
        return list(conn.execute(sql))


async def test_commands_killed_half_way_leave_nothing_and_the_bot_then_runs_each_job_once_beside_its_commands(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    """One data directory, one bot start, every check on it: a ``heartbeat --now`` and a ``consolidate --now``
    run with no bot are SIGKILLed while the model answers; the bot started after them runs the tick and the night
    it owes, and the same commands sent from another shell while those runs wait for the model wait for them and
    find the work done. One check-in, each day folded once, the day cut short by the kill folded again."""
    cfg = _config(tmp_path, fake_llm, telegram_api)
    telegram_api.add_chat(ANA, first_name="Ana")
    await _seed(cfg, goal=True, pets=((2, "cat called Mruczek"), (1, "dog called Burek")))
    data = tmp_path / "data"

    # A heartbeat command holding the data directory, killed while the model writes the check-in: nothing of it
    # is left to send.
    fake_llm.route = _route(check_in_delay_s=3.0)
    command = await _started(cfg, "heartbeat", "--now", "--any-hour")
    await until(lambda: any(map(_is_check_in, fake_llm.requests)), WAIT_S, what="the command to ask the model")
    command.send_signal(signal.SIGKILL)
    await command.wait()
    assert _rows(data, "SELECT count(*) FROM outbox") == [(0,)]

    # A consolidate command killed while the second day waits for its answer: the first day stays folded.
    answer = _route()

    def burek_is_slow(request: dict[str, Any]) -> Scripted | None:
        script = answer(request)
        if script is not None and "Burek" in request["messages"][-1]["content"]:
            script.delay_s = 3.0
        return script

    fake_llm.route = burek_is_slow
    command = await _started(cfg, "consolidate", "--now")
    await until(lambda: sum(map(_is_consolidation, fake_llm.requests)) == 2, WAIT_S, what="the second day's model call")
    command.send_signal(signal.SIGKILL)
    await command.wait()
    assert _rows(data, "SELECT count(*) FROM consolidation_days") == [(1,)]

    # The bot starts owing its tick and its night; both are still waiting for the model...
    await _owe(cfg, HEARTBEAT_JOB, CONSOLIDATION_JOB)
    fake_llm.route = _route(check_in_delay_s=1.5, consolidation_delay_s=4.0)
    log = tmp_path / "bot.log"
    bot = await _bot(cfg, log)
    try:
        await until(lambda: sum(map(_is_check_in, fake_llm.requests)) == 2
                    and sum(map(_is_consolidation, fake_llm.requests)) == 3,
                    WAIT_S, what="the bot's own runs to ask the model")
        # ...when the operator sends the same two jobs from another shell.
        (hb_code, hb_out, hb_err), (code, out, err) = await asyncio.gather(
            _command(cfg, "heartbeat", "--now", "--any-hour"), _command(cfg, "consolidate", "--now"))
        assert hb_code == 0, hb_out + hb_err
        assert code == 0, out + err
        # It waited for the bot's own run and found every day folded; it says so rather than claim the work.
        assert "the bot's own consolidation is under way" in err
        assert out.startswith("nothing to consolidate"), out
        await telegram_api.wait_for_sent(1, timeout=WAIT_S)
        await asyncio.sleep(1.0)  # time for a second check-in to show up
        assert telegram_api.texts_to(ANA) == [CHECK_IN]
        code, listed, err = await _command(cfg, "memory", "list", "--account", f"telegram:{ANA}")
        assert code == 0, err
    finally:
        await _stop(bot, log)
    assert sum(map(_is_check_in, fake_llm.requests)) == 2  # the killed command's, and the bot's: none by the command
    assert _rows(data, "SELECT count(*) FROM outbox") == [(1,)]
    assert _rows(data, "SELECT count(*) FROM messages WHERE role = 'assistant'") == [(1,)]
    assert listed.startswith("2 memories") and listed.count("has a cat called Mruczek") == 1 and \
        listed.count("has a dog called Burek") == 1, listed
    assert _rows(data, "SELECT count(*) FROM consolidation_days") == [(2,)]
    asked = [r["messages"][-1]["content"] for r in fake_llm.requests if _is_consolidation(r)]
    assert ["Burek" in a for a in asked] == [False, True, True]  # the first day once; the second again after the kill


async def test_a_second_run_refuses_and_pairing_changes_from_another_shell_reach_the_running_bot_at_once(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    cfg = _config(tmp_path, fake_llm, telegram_api, dm="pairing")
    log = tmp_path / "bot.log"
    bot = await _bot(cfg, log)
    try:
        await until(lambda: _running(log), WAIT_S, what="the bot to start")
        code, out, err = await _command(cfg, "run")
        assert code == 1 and out == ""
        assert err.splitlines() == [f"kith: another kith is already running on {tmp_path / 'data'} "
                                    f"(a kith bot (pid {bot.pid})); stop it first, or give this one its own "
                                    "[storage] data_dir"], err

        # The first bot goes on untouched: a stranger gets a code, approved from this shell, then an answer.
        telegram_api.push_text(BEN, BEN, "hello?")
        (notice,) = await telegram_api.wait_for_sent(1, timeout=WAIT_S)
        found = re.search(r"pairing code is ([A-Z2-9]{8})", notice.visible_text)
        assert found is not None, notice.visible_text
        code, out, err = await _command(cfg, "pairing", "approve", found.group(1))
        assert code == 0 and out == f"approved telegram:{BEN}\n", out + err
        telegram_api.push_text(BEN, BEN, "may I talk now?")
        await telegram_api.wait_for_sent(2, timeout=WAIT_S)
        assert telegram_api.texts_to(BEN)[1:] == ["echo: may I talk now?"]

        code, out, err = await _command(cfg, "pairing", "revoke", f"telegram:{BEN}")
        assert code == 0 and out == f"revoked telegram:{BEN}\n", out + err
        telegram_api.push_text(BEN, BEN, "and now?")
        await telegram_api.wait_until(lambda: len(telegram_api.sent) >= 3, timeout=WAIT_S)
        await asyncio.sleep(1.0)  # time for an answer that should not come
        assert "echo: and now?" not in telegram_api.texts_to(BEN)
        assert not any(r["messages"][-1]["content"] == "and now?" for r in fake_llm.requests)
    finally:
        await _stop(bot, log)


async def test_two_kiths_on_one_database_and_a_retry_beside_a_tick_send_one_check_in(
        fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    """What the data directory's lock cannot guard: two machines on one shared database each run a tick, and in
    one bot a person's retry comes due while a tick is writing to them. The transaction that writes a check-in
    finds its items handled meanwhile and writes nothing."""
    rig = await make_rig(tmp_path, fake_llm, hb=HeartbeatSettings(timezone="UTC", active_hours="00:00-24:00"))
    try:
        ana = await rig.ana_says("Exam next week.")
        await rig.heartbeat.goals.add(ana, "Pass the exam", rig.clock.now.date())
        fake_llm.route = _route(check_in_delay_s=0.5)
        other = build_heartbeat(settings=rig.heartbeat.settings, db=rig.db, llm=rig.heartbeat.turns.llm,
                                memory=rig.memory, clock=rig.clock, outbound=rig.worker, hb=rig.heartbeat.hb)

        reports = await asyncio.gather(rig.heartbeat.tick(), other.tick())
        await rig.worker.wait_idle()
        assert sorted(o for r in reports for o in r.outcomes) == ["handled_elsewhere", "posted"]
        assert rig.channel.texts("ana") == [f"<b>{CHECK_IN}</b>"]

        await rig.heartbeat.goals.add(ana, "Return the library books", rig.clock.now.date())
        report, retried = await asyncio.gather(rig.heartbeat.tick(), rig.heartbeat.person_turn(ana, 1))
        await rig.worker.wait_idle()
        assert report.outcomes == {"posted": 1} and retried.value == "nothing_due"
        assert rig.channel.texts("ana") == [f"<b>{CHECK_IN}</b>"] * 2
        assert sum(map(_is_check_in, fake_llm.requests)) == 3  # one bot asks the model once per person
    finally:
        await close_rig(rig)
