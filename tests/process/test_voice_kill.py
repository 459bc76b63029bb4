"""bot.py run SIGKILLed while a voice note is being transcribed (issue #35): the note waits in the inbox, and the
next start fetches and transcribes it again, once, and answers it once. The real process and its model process,
against the fake Bot API (getFile and its file server) and the fake model's transcription endpoint."""

# ruff: noqa: F811

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.config_file import write_config
from tests.support.telegram_app import start_telegram_bot
from tests.support.waiting import until

ANA = 7_301


async def test_a_voice_note_whose_transcription_a_kill_cut_is_transcribed_again_and_answered_once(
        telegram_api: FakeTelegramApi, fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "kith.toml", fake_llm, tmp_path / "data", extra=(
        f'[telegram]\nbase_url = "{telegram_api.base_url}"\npoll_timeout_s = 1\n[policy.telegram]\ndm = "open"\n'
        f'[heartbeat]\nenabled = false\n[media]\ntranscription_model = "openai/whisper-1"\n'
        f'transcription_api_base = "{fake_llm.base_url}"\n'))
    fake_llm.transcription_delays.append(15)  # the first transcription is still under way when the process dies
    bot = await start_telegram_bot(cfg)
    try:
        telegram_api.push_voice(ANA, ANA, b"pick up the cake at four", duration=2)
        await until(lambda: len(fake_llm.transcription_requests) == 1, 60, what="the transcription to start")
    finally:
        bot.send_signal(signal.SIGKILL)
        await bot.wait()
    assert telegram_api.sent == [] and fake_llm.requests == []

    bot = await start_telegram_bot(cfg)  # the fake model echoes: the reply names what it heard
    try:
        await telegram_api.wait_for_sent(1, timeout=60)
        await asyncio.sleep(1.0)  # time for anything doubled to show up
        heard = "echo: transcript of voice.ogg: pick up the cake at four"
        assert [m.visible_text for m in telegram_api.sent] == [heard]
        assert len(fake_llm.transcription_requests) == 2  # redone once, after the restart
        assert len(telegram_api.downloads) == 2
    finally:
        bot.send_signal(signal.SIGTERM)
        _out, err = await asyncio.wait_for(bot.communicate(), 30)
    assert b"Traceback" not in err
