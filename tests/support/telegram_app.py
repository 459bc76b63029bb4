"""A whole kith on the fake Telegram Bot API, as ``bot.py run`` builds it: settings and start-up, in the test's
process or as ``bot.py run`` itself."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from channels.telegram.settings import TelegramSettings
from ground.config import DeliverySettings
from kith.app.lifecycle import App
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.settings import AppSettings
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi
from tests.support.paths import ROOT

# Quick retries and a short debounce, so a test waits on behaviour rather than on production timings.
QUICK_DELIVERY = DeliverySettings(debounce_ms=30, backoff_base_s=0.05, backoff_max_s=0.2, max_attempts=4)


def telegram_settings(base: AppSettings, tg: FakeTelegramApi, *, policy: dict[str, Any],
                      **replaced: Any) -> AppSettings:
    """``base`` talking to ``tg`` with quick delivery, ``policy`` as ``[policy.telegram]``, and any other
    sections replaced (``memory=…``)."""
    return dataclasses.replace(base, telegram=TelegramSettings(base_url=tg.base_url, poll_timeout_s=1),
                               delivery=QUICK_DELIVERY, policy={"telegram": policy}, **replaced)


async def start_telegram_app(settings: AppSettings, monkeypatch: pytest.MonkeyPatch) -> App:
    """Build kith and start its Telegram channel (and only that one)."""
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", FAKE_BOT_TOKEN)
    app = await build_app(settings, warm_llm=False)
    assert await app.start(platform_channels(settings, app)) == ["telegram"]
    return app


async def ask(tg: FakeTelegramApi, user: int, text: str) -> str:
    """What kith answers ``user`` in their DM to ``text``."""
    before = len(tg.texts_to(user))
    tg.push_text(user, user, text)
    await tg.wait_until(lambda: len(tg.texts_to(user)) > before)
    return tg.texts_to(user)[before]


async def start_telegram_bot(cfg: Path) -> asyncio.subprocess.Process:
    """``bot.py run`` over ``cfg`` as its own process, with the fake Bot API's token; stderr piped for the test
    to read, stdout dropped."""
    return await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), "run", cwd=str(ROOT),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TELEGRAM_BOT_TOKEN": FAKE_BOT_TOKEN})
