"""The memory room's page of one person with 10,000 memories: its render time, paged (issue #37).

    .venv/bin/python -m bench.web_page [--memories 10000] [--runs 50]

Runs kith as ``bot.py run`` builds it (SQLite and embedded Chroma in a temporary data directory, no embedder, the
fake Telegram Bot API on 127.0.0.1 for its one channel) with ``[web] enabled``, gives one person ``--memories``
memories, each with their own words and where and when they were said, and two pairs of them in conflict, then
signs in with the start-up link and asks for the person's page ``--runs`` times: the first page (the newest 50), a
page in the middle, and a search. Prints each one's time from request to the last byte of the page, p50 and p95
(one warm-up request first, not counted). Target: the person's page p95 <= 200 ms. Nothing is asserted; it prints
figures.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from bench.common import percentile, verdict
from channels.telegram.settings import TelegramSettings
from ground.config import LLMSettings, MemorySettings, StorageSettings, WebSettings
from kith.app.run import platform_channels
from kith.app.wiring import build_app
from kith.settings import AppSettings
from memory.core import MemoryKind, MemoryRecord, Scope, Source
from people import directory
from tests.fakes.telegram_api import FAKE_BOT_TOKEN, FakeTelegramApi

TARGET_P95_MS = 200.0
BATCH = 500
THINGS = ("tea", "violin", "Gdańsk", "the garden", "chess", "her sister Ola", "running", "Emacs", "the night shift",
          "a cat called Mruczek", "sourdough", "the choir", "Lisbon", "a red bicycle", "the orchard")
VERBS = ("loves", "is learning", "keeps talking about", "wants to try", "grew up with", "is tired of", "dreams of")


def memories(person: str, count: int, rng: random.Random) -> list[MemoryRecord]:
    """``count`` memories of ``person`` said over the last years, each with the sentence it came from."""
    now = datetime.now(UTC)
    out = []
    for i in range(count):
        thing, verb = rng.choice(THINGS), rng.choice(VERBS)
        sentence = f"Honestly, I {verb.replace('is ', 'am ')} {thing}, number {i} of the things I say."
        when = now - timedelta(minutes=rng.randrange(3 * 365 * 24 * 60))
        out.append(MemoryRecord(
            id=f"m_{i:016x}", person=person, kind=rng.choice((MemoryKind.FACT, MemoryKind.PREFERENCE)),
            text=f"PERSON {verb} {thing} ({i})", evidence=(sentence,), evidence_sentences=(sentence,),
            sources=(Source("telegram", "c1", f"msg-{i}", when),), scope=rng.choice((Scope.DM, Scope.SHARED)),
            created_at=when, updated_at=when))
    for a, b in ((0, 1), (2, 3)):  # two conflicts, shown side by side above the list
        out[a] = dataclasses.replace(out[a], conflicts_with=(out[b].id,))
        out[b] = dataclasses.replace(out[b], conflicts_with=(out[a].id,))
    return out


async def timed(client: httpx.AsyncClient, path: str, runs: int) -> list[float]:
    (await client.get(path)).raise_for_status()  # warm-up: not counted
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        answer = await client.get(path)
        answer.raise_for_status()
        _ = answer.content
        times.append((time.perf_counter() - started) * 1000)
    return times


async def main(count: int, runs: int) -> None:
    tg = FakeTelegramApi()
    await tg.start()
    os.environ["TELEGRAM_BOT_TOKEN"] = FAKE_BOT_TOKEN
    try:
        with tempfile.TemporaryDirectory(prefix="kith-web-bench-") as tmp:
            settings = AppSettings(
                llm=LLMSettings(model="openai/bench", api_base="http://127.0.0.1:9/v1", separate_process=False),
                storage=StorageSettings(data_dir=str(Path(tmp) / "data")),
                memory=MemorySettings(embedder="none", capture=False),
                telegram=TelegramSettings(base_url=tg.base_url, poll_timeout_s=1),
                web=WebSettings(enabled=True, port=0))
            app = await build_app(settings, warm_llm=False)
            async with app.running(platform_channels(settings, app)):
                assert app.web is not None
                person = await app.db.run(directory.resolve, "telegram:4242", "Ana", datetime.now(UTC))
                started = time.perf_counter()
                records = memories(person, count, random.Random(37))
                for at in range(0, len(records), BATCH):
                    await app.memory.store.add_memories(records[at:at + BATCH])
                print(f"{count:,} memories of one person stored in {time.perf_counter() - started:.1f} s")
                async with httpx.AsyncClient(base_url=app.web.address.rstrip("/"), follow_redirects=True) as client:
                    (await client.get(app.web.login_url())).raise_for_status()
                    pages = -(-count // 50)
                    for label, path in ((f"person page 1 of {pages}", f"/person/{person}"),
                                        (f"person page {pages // 2} of {pages}", f"/person/{person}?page={pages // 2}"),
                                        ("search 'sister Ola'", f"/person/{person}/search?q=sister+Ola")):
                        times = await timed(client, path, runs)
                        p50, p95 = percentile(times, 50), percentile(times, 95)
                        line = f"{label}: p50 {p50:.1f} ms, p95 {p95:.1f} ms over {runs} runs"
                        if label.startswith("person page"):
                            line += f" ({verdict(p95, TARGET_P95_MS)} p95 <= {TARGET_P95_MS:.0f} ms)"
                        print(line)
    finally:
        await tg.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=50)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.memories, arguments.runs))
