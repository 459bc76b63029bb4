"""Core overhead per message, with a fake LLM that answers at once.

Measures, over N messages: the time from an InboundMessage to the LLM request leaving, and
from the reply to its hand-over to the channel (the model's own time excluded), plus
messages per second end to end, and how long `bot.py --help` takes.

    .venv/bin/python -m bench.core_overhead [--messages 1000]
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import fake_model_process, percentile, summary_ms, verdict
from ground import loop
from ground.config import LLMSettings, MemorySettings, Settings, StorageSettings
from ground.types import ChatKind, InboundMessage, OutboundMessage, RenderedChunk, SentMessage, utcnow
from kith.app.lifecycle import freeze_startup_heap
from kith.app.wiring import build_app

ROOT = Path(__file__).resolve().parent.parent


class NullChannel:
    name = "console"

    def __init__(self) -> None:
        self.handed_over = 0
        self.handed_over_at = 0.0  # time.perf_counter() of the latest hand-over

    async def start(self, on_message, on_button=None) -> None:
        return None

    async def stop(self) -> None:
        return None

    def render(self, message: OutboundMessage) -> list[RenderedChunk]:
        return [RenderedChunk(message.text, None, message.text)]

    async def send_chunk(self, message: OutboundMessage, chunk: RenderedChunk, index: int, *,
                         plain: bool = False) -> SentMessage:
        self.handed_over += 1
        self.handed_over_at = time.perf_counter()
        return SentMessage(str(self.handed_over))

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        return None


async def measure(n: int) -> None:
    async with fake_model_process("ok, noted.") as fake_model:
        await _measure(n, fake_model.url)


async def _measure(n: int, llm_url: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = dataclasses.replace(
            Settings(), llm=LLMSettings(model="openai/bench", api_base=llm_url, max_retries=0),
            storage=StorageSettings(data_dir=tmp),
            memory=MemorySettings(embedder="none", capture=False))
        app = await build_app(settings, warm_llm=False)
        channel = NullChannel()
        await app.start([channel])
        await app.load_model_client()  # bot.py loads it while starting: never inside a measured turn
        freeze_startup_heap()  # as bot.py run and chat do once started
        assert app.router is not None
        before, after = [], []
        # warm up: litellm import and connection pool
        for i in range(20):
            await app.router.on_message(_msg(i, 0))
        started = time.perf_counter()
        for i in range(n):
            msg = _msg(i, 100)
            arrived = time.perf_counter()
            await app.router.on_message(msg)
            # From the channel's hand-over through dedupe, policy and the prompt to the model request.
            before.append((app.core.last_timings.request_at - arrived) * 1000)
            # From the model's reply through the history, the outbox and the worker to the channel.
            after.append((channel.handed_over_at - app.core.last_timings.reply_at) * 1000)
        elapsed = time.perf_counter() - started
        await app.close()
    overhead = [b + a for b, a in zip(before, after, strict=True)]
    print(f"core overhead, inbound -> LLM request: {summary_ms(before)}")
    print(f"core overhead, reply -> channel:       {summary_ms(after)}")
    p95 = percentile(overhead, 95)
    print(f"core overhead, total per message:      {summary_ms(overhead)}  "
          f"(target p95 <= 5 ms: {verdict(p95, 5.0)})")
    print(f"throughput end to end (fake LLM over loopback HTTP): {n / elapsed:.0f} messages/s over {n} messages")


def _msg(i: int, chats: int) -> InboundMessage:
    chat = f"chat{i % chats}" if chats else "warmup"
    return InboundMessage(platform="console", bot_account="kith", chat_id=chat, chat_kind=ChatKind.DM,
                          sender_id=chat, sender_name=chat, text=f"message {i}: how was your day?",
                          message_id=f"b{i}-{chat}", timestamp=utcnow())


def measure_help(runs: int = 10) -> None:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "bot.py"), "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    p50 = percentile(times, 50)
    print(f"bot.py --help: p50={p50 * 1000:.0f} ms max={max(times) * 1000:.0f} ms over {runs} runs "
          f"(target <= 300 ms: {verdict(p50, 0.3)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    loop.run(measure(args.messages))
    measure_help()


if __name__ == "__main__":
    main()
