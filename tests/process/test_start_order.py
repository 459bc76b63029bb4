"""A start: no platform is polled before the model process is ready (or has failed for real), and the model
process's warm-up sends nothing anywhere.

Each test starts a real model process (``python -m llm.worker``, or a command standing in for one that loads
slowly or cannot start) and the Telegram channel on the loopback fake Bot API, as ``bot.py run`` wires them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from collections.abc import Callable

import pytest

from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.settings import AppSettings
from llm.client import HONEST_FAILURE_REPLY
from llm.process import ModelProcess
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi
from tests.support.telegram_app import ask, telegram_settings
from tests.support.waiting import until

SLOW_LOAD_S = 1.5  # how much longer than litellm's own load the stand-in child takes
USER = 4_301


def _polls(tg: FakeTelegramApi) -> list[float]:
    return [c.at for c in tg.calls if c.method.lower() == "getupdates"]


def _separate(settings: AppSettings) -> AppSettings:
    return dataclasses.replace(settings, llm=dataclasses.replace(settings.llm, separate_process=True))


async def test_telegram_is_polled_only_once_a_slow_model_process_is_ready(
        fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    slow = (sys.executable, "-c", f"import runpy, time; time.sleep({SLOW_LOAD_S}); "
            "runpy.run_module('llm.worker', run_name='__main__', alter_sys=True)")
    model_process = ModelProcess(start_timeout_s=120, stop_timeout_s=5, restart_backoff_s=10, command=slow)
    ready_at: list[float] = []

    async def note_ready() -> None:
        await model_process.start()
        ready_at.append(time.monotonic())

    noting = asyncio.create_task(note_ready())
    async with FakeTelegramApi() as tg:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", FAKE_BOT_TOKEN)
        settings = telegram_settings(_separate(make_settings(fake_llm)), tg, policy={"dm": "open"})
        app = await build_app(settings, model_process=model_process)  # warms the model client, as bot.py does
        try:
            assert await app.start(platform_channels(settings, app)) == ["telegram"]
            await until(lambda: bool(_polls(tg)), 30, what="a poll of telegram")
            await noting
            assert _polls(tg)[0] >= ready_at[0], "telegram was polled while the model process was still loading"
            fake_llm.reply("Ready when you are.")
            assert await ask(tg, USER, "hi") == "Ready when you are."
            # The warm-up is answered by litellm itself: the model heard the person's one turn and nothing else.
            assert len(fake_llm.requests) == 1
        finally:
            await app.close()


async def test_a_model_process_that_cannot_start_does_not_keep_the_platforms_from_being_polled(
        fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings], monkeypatch: pytest.MonkeyPatch) -> None:
    broken = (sys.executable, "-c", "raise SystemExit(3)")
    model_process = ModelProcess(start_timeout_s=120, stop_timeout_s=5, restart_backoff_s=60, command=broken,
                                 start_attempts=2, respawn_pause_s=0.05)
    async with FakeTelegramApi() as tg:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", FAKE_BOT_TOKEN)
        settings = telegram_settings(_separate(make_settings(fake_llm)), tg, policy={"dm": "open"})
        app = await build_app(settings, model_process=model_process)
        try:
            assert await app.start(platform_channels(settings, app)) == ["telegram"]
            await until(lambda: bool(_polls(tg)), 30, what="a poll of telegram")
            assert model_process.spawned == 2  # it failed for real first: both attempts died
            assert await ask(tg, USER, "hello?") == HONEST_FAILURE_REPLY  # not silence
        finally:
            await app.close()
