"""The heartbeat's two costs: nightly consolidation throughput, and an idle tick over many people.

1. Consolidation: yesterday's transcripts of ``--people`` people (``--turns`` each) are swept by
   the real consolidator (chunking, validation, note staging, the merge/conflict gate into
   Chroma) against an instant in-process model (no network, no HTTP) that answers every chunk
   with one receipts-backed memory. Reported in transcript characters per second.
2. Idle tick: ``--idle-people`` people, each with a DM, ``--memories`` lasting memories and an
   undated goal, so nothing is due. The tick's wall time (target <= 100 ms) and its model calls
   (must be 0), over repeated ticks.

    python -m bench.heartbeat [--people 50 --turns 40] [--idle-people 1000 --memories 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import peak_rss_mb, summary_ms, verdict
from ground import loop
from ground.config import LLMSettings, MemorySettings, Settings, StorageSettings
from ground.db import Database
from heartbeat.service import build_heartbeat
from heartbeat.settings import HeartbeatSettings
from kith.app.schema import create_schema
from llm.client import LLMClient
from memory import goals as goal_table
from memory.capture import new_memory_id
from memory.core import MemoryKind, MemoryRecord, Scope, Source
from memory.core.text import lemmas
from memory.service import MemoryService
from people import directory, history
from tests.support.clock import FakeClock

IDLE_TARGET_MS = 100.0
IDLE_TICKS = 20
LOAD_BATCH = 1_000
NOW = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
TOPICS = ["sourdough baking", "bouldering", "the Baltic coast", "jazz piano", "birdwatching", "chess openings",
          "urban gardening", "Polish poetry", "trail running", "film photography"]


class InstantModel:
    """An in-process stand-in for litellm that counts calls; consolidation gets one quoted memory per chunk."""

    def __init__(self) -> None:
        self.calls = 0

    async def acompletion(self, **kwargs: Any) -> Any:
        self.calls += 1
        content = kwargs["messages"][1]["content"]
        said = [line.removeprefix("PERSON: ") for line in content.splitlines() if line.startswith("PERSON: ")]
        quote = said[-1][:60] if said else ""
        memories = [{"kind": "fact", "text": f"Says: {quote}", "evidence": quote}] if quote else []
        text = json.dumps({"summary": "A day of chat.", "memories": memories})
        message = type("M", (), {"content": text, "tool_calls": None})
        return type("R", (), {"choices": [type("C", (), {"message": message})], "usage": None})


def settings_for(tmp: Path) -> Settings:
    return Settings(llm=LLMSettings(model="openai/instant", api_base="http://127.0.0.1:9/v1", max_retries=0),
                    storage=StorageSettings(data_dir=str(tmp)),
                    memory=MemorySettings(embedder="none", capture=False))


async def open_parts(tmp: Path) -> tuple[Settings, Database, MemoryService, InstantModel, LLMClient]:
    settings = settings_for(tmp)
    db = Database(f"sqlite:///{tmp / 'kith.db'}")
    create_schema(db)
    model = InstantModel()
    llm = LLMClient(settings.llm, litellm_module=model)
    memory = await MemoryService.open(settings, db, llm, clock=lambda: NOW, announce=False)
    return settings, db, memory, model, llm


def _transcript(conn: Any, n_people: int, turns: int, day: datetime) -> int:
    chars = 0
    for p in range(n_people):
        account = f"console:u{p}"
        person = directory.resolve(conn, account, f"User {p}", day)
        for t in range(turns):
            when = day + timedelta(minutes=t)
            text = (f"Today I spent an hour on {TOPICS[(p + t) % len(TOPICS)]} number {t}, and honestly "
                    f"it went better than last week; person {p} turn {t}.")
            history.append(conn, conversation=account, role="user", author=account, person=person,
                           platform="console", chat_id=f"u{p}", text=text, created_at=when,
                           platform_message_id=f"m{p}-{t}")
            history.append(conn, conversation=account, role="assistant", author="kith", platform="console",
                           chat_id=f"u{p}", text="That sounds good, tell me more.", created_at=when)
            chars += len(text) + len("That sounds good, tell me more.")
    return chars


async def consolidation(tmp: Path, n_people: int, turns: int) -> None:
    settings, db, memory, model, llm = await open_parts(tmp)
    chars = await db.run(_transcript, n_people, turns, NOW - timedelta(days=1, hours=2))
    heartbeat = build_heartbeat(settings=settings, db=db, llm=llm, memory=memory, clock=lambda: NOW,
                                hb=HeartbeatSettings(timezone="UTC"))
    # The support rules' lemma dictionaries are read once per process, by its first capture (seconds of CPU): a
    # running bot has read them long before its nightly consolidation, so they are read before the clock starts.
    started = time.perf_counter()
    await asyncio.to_thread(lemmas, "warm")
    print(f"lemma dictionaries read in {time.perf_counter() - started:.2f} s (once per process, not timed below)")
    started = time.perf_counter()
    report = await heartbeat.consolidate()
    elapsed = time.perf_counter() - started
    print(f"consolidation: {n_people} people x {turns} turns = {chars:,} transcript characters, "
          f"{report.chunks} chunks, {report.calls} consolidation calls (+{model.calls - report.calls} thread "
          f"summaries), {sum(report.outcomes.values())} promotions {dict(report.outcomes)}")
    print(f"  {elapsed:.2f} s = {report.chars / elapsed:,.0f} characters/s "
          f"({report.chunks / elapsed:.1f} chunks/s) with an instant model")
    await memory.close()
    db.close()


def _idle_people(conn: Any, n_people: int) -> list[str]:
    persons = []
    for p in range(n_people):
        account = f"console:i{p}"
        person = directory.resolve(conn, account, f"Idle {p}", NOW)
        history.append(conn, conversation=account, role="user", author=account, person=person,
                       platform="console", chat_id=f"i{p}", text="hi", created_at=NOW - timedelta(days=2))
        goal_table.add(conn, person, "Learn to juggle", None, NOW)
        persons.append(person)
    return persons


async def idle_tick(tmp: Path, n_people: int, per_person: int) -> None:
    settings, db, memory, model, llm = await open_parts(tmp)
    persons = await db.run(_idle_people, n_people)
    records = [MemoryRecord(id=new_memory_id(), person=person, kind=MemoryKind.FACT,
                            text=f"{person} enjoys {TOPICS[i % len(TOPICS)]}", evidence=("x",),
                            sources=(Source("console", "c", "m", NOW),), scope=Scope.DM,
                            created_at=NOW - timedelta(days=1), updated_at=NOW - timedelta(days=1))
               for person in persons for i in range(per_person)]
    for start in range(0, len(records), LOAD_BATCH):
        await memory.store.add_memories(records[start:start + LOAD_BATCH])
    clock = FakeClock(NOW.replace(hour=9))
    heartbeat = build_heartbeat(settings=settings, db=db, llm=llm, memory=memory, clock=clock,
                                hb=HeartbeatSettings(timezone="UTC"))
    started = time.perf_counter()
    await heartbeat.tick()  # the first tick after a start also scans every memory for disputes
    first_ms = (time.perf_counter() - started) * 1000
    times = []
    for _ in range(IDLE_TICKS):
        clock.advance(minutes=30)
        started = time.perf_counter()
        report = await heartbeat.tick()
        times.append((time.perf_counter() - started) * 1000)
        assert not report.quiet and report.due_people == 0
    worst = max(times)
    print(f"idle tick: {n_people} people, {len(records):,} memories, {n_people} undated goals, one tick every "
          f"30 min: {summary_ms(times)} max={worst:.2f} ms; target <= {IDLE_TARGET_MS:.0f} ms: "
          f"{verdict(worst, IDLE_TARGET_MS)}")
    print(f"  first tick after a start (full dispute scan): {first_ms:.1f} ms")
    print(f"  model calls: {model.calls} (must be 0): {'ok' if model.calls == 0 else 'FAILS'}")
    await memory.close()
    db.close()


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        await consolidation(Path(tmp) / "consolidation", args.people, args.turns)
        await idle_tick(Path(tmp) / "idle", args.idle_people, args.memories)
    print(f"peak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, default=50)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--idle-people", type=int, default=1_000)
    parser.add_argument("--memories", type=int, default=5)
    loop.run(main(parser.parse_args()))
