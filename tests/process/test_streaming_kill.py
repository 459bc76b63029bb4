"""bot.py run killed in the middle of a streamed reply: the real process, SIGKILLed while the person watches the
reply grow as a Telegram draft, then started again over the same data directory. The draft is never the reply: after
the restart the person gets the whole reply exactly once, and no half of it is left as the final word."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.fakes.telegram_api import FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.config_file import write_config
from tests.support.telegram_app import start_telegram_bot
from tests.support.waiting import until

ANA = 501
REPLY = ("Here is the whole plan for Monday, written slowly enough that it is still growing when the process "
         "dies: call Ola, book the train to Gdańsk, and pack the night before.")


async def test_a_reply_killed_mid_stream_arrives_once_and_whole_after_the_restart(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    data = tmp_path / "data"
    cfg = write_config(tmp_path / "kith.toml", fake_llm, data, extra=(
        f'[telegram]\nbase_url = "{telegram_api.base_url}"\npoll_timeout_s = 1\n'
        '[policy.telegram]\ndm = "open"\n[delivery]\ndebounce_ms = 50\nstream_gap_s = 0.2\n'
        '[heartbeat]\nenabled = false\n'))
    fake_llm.queue.append(Scripted(text=REPLY, chunk_chars=4, chunk_delay_s=0.25))  # about 10 s to write
    bot = await start_telegram_bot(cfg)
    try:
        telegram_api.push_text(ANA, ANA, "what's the plan?")
        await until(lambda: len(telegram_api.drafts_to(ANA)) >= 2, 60)  # she is watching it grow
    finally:
        bot.send_signal(signal.SIGKILL)
        await bot.wait()
    assert telegram_api.sent == []  # nothing of it was sent as a message
    partial = telegram_api.drafts_to(ANA)[-1].visible_text
    assert partial and REPLY.startswith(partial.rstrip()) and partial != REPLY

    fake_llm.queue.append(Scripted(text=REPLY, chunk_chars=40, chunk_delay_s=0.05))  # the turn taken up again
    bot = await start_telegram_bot(cfg)
    try:
        await telegram_api.wait_for_sent(1, timeout=60)
        await asyncio.sleep(1.0)  # time for anything doubled to show up
        view = telegram_api.seen_in(ANA)
        assert view.messages == (REPLY,) and view.draft is None  # once, whole, and the draft replaced
    finally:
        bot.send_signal(signal.SIGTERM)
        _out, err = await asyncio.wait_for(bot.communicate(), 30)
    assert b"Traceback" not in err
