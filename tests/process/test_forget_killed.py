"""A forget the bot was killed in the middle of: the real ``bot.py run`` on the loopback fake Bot API, SIGKILLed
once the forget's journal entry is written, finishes it at its next start and says so."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

from memory.forgetting.journal import JOURNAL_DIR
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.at_rest import files_holding, rows_as_text
from tests.support.config_file import write_config
from tests.support.telegram_app import start_telegram_bot
from tests.support.waiting import until

ANA = 7301
WORD = "Mruczek"


async def test_a_bot_killed_during_a_confirmed_forget_finishes_it_at_its_next_start_and_says_so(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    data = tmp_path / "data"
    cfg = write_config(tmp_path / "kith.toml", fake_llm, data, extra=(
        f'[telegram]\nbase_url = "{telegram_api.base_url}"\npoll_timeout_s = 1\n[policy.telegram]\ndm = "open"\n'
        '[delivery]\ndebounce_ms = 100\n[heartbeat]\nenabled = false\n'))
    journal = data / JOURNAL_DIR

    bot = await start_telegram_bot(cfg)
    try:
        telegram_api.push_text(ANA, ANA, f"/remember My cat is called {WORD}")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) == 1, timeout=60)
        telegram_api.push_text(ANA, ANA, f"{WORD} sleeps on my keyboard all day.")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) == 2, timeout=30)
        telegram_api.push_text(ANA, ANA, f"/forget {WORD}")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) == 3, timeout=30)
        assert telegram_api.texts_to(ANA)[-1].startswith("If I forget")
        telegram_api.push_text(ANA, ANA, "yes")
        # Killed inside the confirmed forget: from its journal entry's appearance on, before it is done.
        await until(lambda: journal.is_dir() and any(journal.glob("*.json")), 30, what="the forget's journal entry")
    finally:
        bot.send_signal(signal.SIGKILL)
        await bot.wait()
    assert list(journal.glob("*.json")) and not any(t.startswith("Forgotten") for t in telegram_api.texts_to(ANA))

    bot = await start_telegram_bot(cfg)
    try:
        await telegram_api.wait_until(lambda: any(t.startswith("Forgotten") for t in telegram_api.texts_to(ANA)),
                                      timeout=60)
        assert telegram_api.texts_to(ANA)[-1].startswith(
            "Forgotten (I was restarted while doing it, and finished it when I came back)")
        assert list(journal.iterdir()) == []
        assert WORD.lower() not in rows_as_text(data / "kith.db").lower()
        # The raw bytes: the database, its write-ahead log, every file of Chroma's directory and the journal's.
        assert files_holding(data, WORD.lower().encode()) == []
        telegram_api.push_text(ANA, ANA, "What is my cat called?")
        await telegram_api.wait_until(lambda: telegram_api.texts_to(ANA)[-1] == "echo: What is my cat called?",
                                      timeout=30)
        assert WORD.lower() not in json.dumps(fake_llm.requests[-1]).lower()
    finally:
        bot.send_signal(signal.SIGTERM)
        _out, err = await asyncio.wait_for(bot.communicate(), 30)
    assert b"Traceback" not in err
