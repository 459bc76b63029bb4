"""Telegram end to end: the real python-telegram-bot against the loopback fake Bot API, with an
instant fake LLM. Messages per second and latency from update to sendMessage for N messages
across C chats, and peak RSS.

    .venv/bin/python -m bench.telegram_e2e [--messages 1000] [--chats 100]

Debounce is set to 0 here: it is a deliberate wait for a person's next message, not overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import tempfile
import time

from bench.common import peak_rss_mb, percentile, summary_ms, verdict
from core.app import build_app
from core.commands import platform_channels
from core.config import DeliverySettings, LLMSettings, MemorySettings, Settings, StorageSettings, TelegramSettings
from persona.llm import import_litellm
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi


async def measure(n: int, chats: int) -> None:
    import_litellm()
    llm = await FakeOpenAI().start()
    llm.default = lambda _req: "Sounds good, tell me more."
    tg = FakeTelegramApi()
    await tg.start()
    pushed: dict[str, float] = {}
    delivered: dict[int, float] = {}


    class TimedList(list):  # stamps the moment the fake accepts each sendMessage
        def append(self, message) -> None:
            super().append(message)
            delivered[len(self)] = time.perf_counter()

    tg.sent = TimedList()
    os.environ["TELEGRAM_BOT_TOKEN"] = FAKE_BOT_TOKEN
    with tempfile.TemporaryDirectory() as tmp:
        settings = dataclasses.replace(
            Settings(), llm=LLMSettings(model="openai/bench", api_base=llm.base_url, max_retries=0),
            storage=StorageSettings(data_dir=tmp),
            memory=MemorySettings(embedder="none", capture=False),
            telegram=TelegramSettings(base_url=tg.base_url, poll_timeout_s=1),
            delivery=DeliverySettings(debounce_ms=0), policy={"telegram": {"dm": "open"}})
        app = await build_app(settings, warm_llm=False)
        await app.start_channels(platform_channels(settings, app))
        # rate limit is per sender; 100 chats x 10 messages stays inside the default burst
        started = time.perf_counter()
        for i in range(n):
            chat = 10_000 + i % chats
            update = tg.push_text(chat, chat, f"message {i}: what a day")
            pushed[str(update["update_id"])] = time.perf_counter()
            if i % chats == chats - 1:
                await asyncio.sleep(0)
        await tg.wait_for_sent(n, timeout=600)
        elapsed = time.perf_counter() - started
        await app.close()
    await tg.stop()
    await llm.stop()
    # Latency: each chat's k-th reply answers its k-th message (per-chat order is guaranteed).
    per_chat_sent: dict[int, list[float]] = {}
    for idx, message in enumerate(tg.sent, 1):
        per_chat_sent.setdefault(int(message.chat_id), []).append(delivered[idx])
    per_chat_push: dict[int, list[float]] = {}
    for i, t in enumerate(pushed.values()):
        per_chat_push.setdefault(10_000 + i % chats, []).append(t)
    latencies = [(s - p) * 1000 for chat, sends in per_chat_sent.items()
                 for p, s in zip(per_chat_push[chat], sends, strict=False)]
    rate = n / elapsed
    print(f"telegram end to end: {rate:.0f} messages/s over {n} messages in {chats} chats "
          f"(target >= 200: {verdict(rate, 200, higher_is_better=True)})")
    print(f"update -> sendMessage latency: {summary_ms(latencies)} "
          f"(target p95 <= 50 ms: {verdict(percentile(latencies, 95), 50)}; includes the loopback fake LLM)")
    rss = peak_rss_mb()
    print(f"peak RSS: {rss:.0f} MB (target <= 400 MB without a local embedder: {verdict(rss, 400)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--chats", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(measure(args.messages, args.chats))


if __name__ == "__main__":
    main()
