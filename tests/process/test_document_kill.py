"""bot.py run SIGKILLed after a document was kept but before its caption was answered (issue #35): the message
waits in the inbox; the next start fetches and reads the file again, keeps the document once (it is keyed by the
message it came in), and answers once. The real process and its model process, against the fake Bot API (getFile
and its file server) and the fake model."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.config_file import write_config
from tests.support.telegram_app import start_telegram_bot
from tests.support.waiting import until

ANA = 7_302
RECIPES = b"## Pancakes\n\nTwo eggs, flour and a pinch of cardamom.\n"


def _documents(data: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(data / "kith.db") as conn:
        return [(int(n), str(name)) for n, name in conn.execute("SELECT number, name FROM documents")]


async def test_a_document_whose_answer_a_kill_cut_is_kept_once_and_answered_once(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    data = tmp_path / "data"
    cfg = write_config(tmp_path / "kith.toml", fake_llm, data, extra=(
        f'[telegram]\nbase_url = "{telegram_api.base_url}"\npoll_timeout_s = 1\n[policy.telegram]\ndm = "open"\n'
        '[heartbeat]\nenabled = false\n'))
    fake_llm.hang(12)  # the caption's answer is still being written when the process dies
    bot = await start_telegram_bot(cfg)
    try:
        telegram_api.push_document(ANA, ANA, RECIPES, caption="my pancake recipe", file_name="recipes.md",
                                   mime_type="text/markdown")
        await until(lambda: len(fake_llm.requests) == 1, 60, what="the caption's model call to start")
        assert _documents(data) == [(1, "recipes.md")]  # kept before the answer was asked for
    finally:
        bot.send_signal(signal.SIGKILL)
        await bot.wait()
    assert telegram_api.sent == []

    bot = await start_telegram_bot(cfg)  # the fake model echoes the caption it was asked about
    try:
        await telegram_api.wait_for_sent(1, timeout=60)
        await asyncio.sleep(1.0)  # time for anything doubled to show up
        assert len(telegram_api.sent) == 1 and "my pancake recipe" in telegram_api.sent[0].visible_text
        assert _documents(data) == [(1, "recipes.md")]  # read again, kept once
        assert len(telegram_api.downloads) == 2
    finally:
        bot.send_signal(signal.SIGTERM)
        _out, err = await asyncio.wait_for(bot.communicate(), 30)
    assert b"Traceback" not in err
