"""A voice note's extra latency beyond the transcription call itself (issue #35).

    .venv/bin/python -m bench.voice [--notes 40] [--size-kb 32]

kith as ``bot.py run`` builds it (its model process included) on the loopback fake Telegram Bot API, with the fake
OpenAI-compatible model answering both chat and transcription at once; both fakes run in this process. One person
sends, one at a time, ``--notes`` text messages and then ``--notes`` voice notes of ``--size-kb`` each. For each
message, the time from the update being pushed to the fake to the reply's sendMessage; for each voice note, the
transcription call as kith timed it (to the model process and back). What a voice note adds beyond that call is
its latency less the call less a text message's median latency: the getFile, the download, the hand-over to the
model process and back, the media step. Nothing is asserted; it prints figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from bench.common import percentile, summary_ms
from channels.telegram.settings import TelegramSettings
from ground import loop
from ground.config import DeliverySettings, LLMSettings, MediaSettings, MemorySettings, StorageSettings
from kith.app.lifecycle import freeze_startup_heap
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.settings import AppSettings
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi

ANA = 9_001


def _time_transcriptions(llm: Any) -> list[float]:
    """Wrap the model client's transcribe: each call's milliseconds, in order."""
    timings: list[float] = []
    transcribe = llm.transcribe

    async def timed(*args: Any, **kwargs: Any) -> str:
        started = time.perf_counter()
        try:
            return str(await transcribe(*args, **kwargs))
        finally:
            timings.append((time.perf_counter() - started) * 1000)

    llm.transcribe = timed
    return timings


async def _one(tg: FakeTelegramApi, push: Any) -> float:
    before = len(tg.sent)
    started = time.perf_counter()
    push()
    await tg.wait_until(lambda: len(tg.sent) > before, timeout=60)
    return (time.perf_counter() - started) * 1000


async def run(args: argparse.Namespace) -> int:
    audio = b"a" * (args.size_kb * 1024)
    async with FakeTelegramApi() as tg:
        model = await FakeOpenAI().start()
        model.transcripts = ["remind me to call mum on Sunday"] * (args.notes + 1)
        model.default = lambda _request: "Got it."
        os.environ["TELEGRAM_BOT_TOKEN"] = FAKE_BOT_TOKEN
        try:
            with tempfile.TemporaryDirectory() as tmp:
                settings = dataclasses.replace(
                    AppSettings(), llm=LLMSettings(model="openai/bench", api_base=model.base_url, max_retries=0),
                    storage=StorageSettings(data_dir=tmp), memory=MemorySettings(embedder="none", capture=False),
                    telegram=TelegramSettings(base_url=tg.base_url, poll_timeout_s=1),
                    delivery=DeliverySettings(debounce_ms=0, stream=[]),
                    media=MediaSettings(transcription_model="openai/whisper-1", transcription_api_base=model.base_url),
                    policy={"telegram": {"dm": "open", "rate_limit_burst": 100_000,
                                         "rate_limit_per_minute": 100_000.0}})
                app = await build_app(settings, warm_llm=False)
                await app.load_model_client()
                await app.start(platform_channels(settings, app))
                freeze_startup_heap()
                transcribed = _time_transcriptions(app.core.llm)  # the one client the media step uses too
                try:
                    for i in range(3):  # warm: the first calls load what a steady bot has loaded
                        await _one(tg, lambda i=i: tg.push_text(ANA, ANA, f"warm {i}"))
                    await _one(tg, lambda: tg.push_voice(ANA, ANA, b"warm", duration=1))
                    transcribed.clear()
                    texts = [await _one(tg, lambda i=i: tg.push_text(ANA, ANA, f"message {i}"))
                             for i in range(args.notes)]
                    voices = [await _one(tg, lambda: tg.push_voice(ANA, ANA, audio, duration=5))
                              for _ in range(args.notes)]
                finally:
                    await app.close()
        finally:
            await model.stop()
    text_p50 = statistics.median(texts)
    extra = [v - t - text_p50 for v, t in zip(voices, transcribed, strict=True)]
    print(f"kith on the fake Telegram with a fake model answering at once; {args.notes} of each, one at a time, "
          f"voice notes of {args.size_kb} KB; {os.cpu_count()} cores")
    print(f"text message, update -> reply sent: {summary_ms(texts)}")
    print(f"voice note, update -> reply sent: {summary_ms(voices)}")
    print(f"  ... its transcription call (to the model process and back, as kith timed it): {summary_ms(transcribed)}")
    print(f"  ... beyond that call and a text message's median: p50={percentile(extra, 50):.1f} ms "
          f"p95={percentile(extra, 95):.1f} ms (getFile, the download, the media step)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=40)
    parser.add_argument("--size-kb", type=int, default=32)
    return loop.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
