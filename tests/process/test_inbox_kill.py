"""Waiting is not trying: bot.py run SIGKILLed again and again while a person's turns hang in the model, against
the loopback fake Bot API and the fake LLM. A message that waits behind them through every kill is answered
once it is reached; a turn that is under way at every kill gets the honest reply after its attempts."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path
from typing import Any

from delivery.inbox import UNHANDLED_REPLY
from ground.tunables import INBOX_REPLAYS_MAX
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.fakes.telegram_api import FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.telegram_app import start_telegram_bot
from tests.support.waiting import until

ANA = 801
STUCK = ("first, the one that never gets an answer", "second, just as stuck")  # the model hangs on these
WAITING = "third, waiting behind them"
# Far longer than it takes to see the request and kill the bot; short enough that the fake model's shutdown,
# which waits for the requests it is still answering, does not hold up the test.
HANG_S = 12.0


def _config(path: Path, fake: FakeOpenAI, tg: FakeTelegramApi, data: Path) -> Path:
    # The model's deadline is far beyond the test: a hanging turn is under way until the kill, never failed.
    path.write_text(
        f'[llm]\nmodel = "openai/fake-model"\napi_base = "{fake.base_url}"\ntimeout_s = 600.0\nmax_retries = 0\n'
        f'[storage]\ndata_dir = "{data}"\n[memory]\nembedder = "none"\ncapture = false\n'
        f'[telegram]\nbase_url = "{tg.base_url}"\npoll_timeout_s = 1\n[policy.telegram]\ndm = "open"\n'
        '[delivery]\ndebounce_ms = 200\n[heartbeat]\nenabled = false\n', encoding="utf-8")
    return path


async def _kill(bot: asyncio.subprocess.Process) -> None:
    bot.send_signal(signal.SIGKILL)
    await bot.wait()


def _kept(data: Path) -> list[str]:
    with sqlite3.connect(data / "kith.db") as conn:
        try:
            return [row[0] for row in conn.execute("SELECT message_id FROM inbox ORDER BY id")]
        except sqlite3.OperationalError:
            return []  # not created yet


def _asked(fake: FakeOpenAI, text: str) -> int:
    return sum(1 for r in fake.requests if r["messages"][-1]["content"] == text)


async def test_kills_before_a_message_is_reached_never_drop_it_and_a_turn_under_way_at_every_kill_gets_an_answer(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    def route(request: dict[str, Any]) -> Scripted | None:
        return Scripted(text="too late", delay_s=HANG_S) if request["messages"][-1]["content"] in STUCK else None

    fake_llm.route = route
    data = tmp_path / "data"
    cfg = _config(tmp_path / "kith.toml", fake_llm, telegram_api, data)
    bot = await start_telegram_bot(cfg)
    try:
        telegram_api.push_text(ANA, ANA, STUCK[0])
        await until(lambda: _asked(fake_llm, STUCK[0]) == 1, 60)  # its turn is under way
        telegram_api.push_text(ANA, ANA, STUCK[1])
        await until(lambda: len(_kept(data)) == 2, 60)
        await asyncio.sleep(1.0)  # past the debounce window: the next one is a turn of its own
        telegram_api.push_text(ANA, ANA, WAITING)
        await until(lambda: len(_kept(data)) == 3, 60)
    finally:
        await _kill(bot)
    kills = 1
    for stuck in STUCK:
        while _asked(fake_llm, stuck) < INBOX_REPLAYS_MAX:
            expected = _asked(fake_llm, stuck) + 1
            bot = await start_telegram_bot(cfg)
            try:
                await until(lambda: _asked(fake_llm, stuck) == expected, 60)  # noqa: B023
            finally:
                await _kill(bot)
            kills += 1
    assert kills == 2 * INBOX_REPLAYS_MAX
    # The waiting message was kept through every kill, never reached; the first stuck one was answered honestly.
    assert _asked(fake_llm, WAITING) == 0 and len(_kept(data)) == 2
    assert [m.visible_text for m in telegram_api.sent] == [UNHANDLED_REPLY]

    bot = await start_telegram_bot(cfg)
    try:
        await telegram_api.wait_for_sent(3, timeout=60)
        await until(lambda: _kept(data) == [], 60)
        await asyncio.sleep(1.0)  # time for anything doubled to show up
        assert [m.visible_text for m in telegram_api.sent] == [UNHANDLED_REPLY, UNHANDLED_REPLY, f"echo: {WAITING}"]
        assert [_asked(fake_llm, t) for t in (*STUCK, WAITING)] == [INBOX_REPLAYS_MAX, INBOX_REPLAYS_MAX, 1]
    finally:
        bot.send_signal(signal.SIGTERM)
        _out, err = await asyncio.wait_for(bot.communicate(), 30)
    assert b"Traceback" not in err
