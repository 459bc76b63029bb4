"""What a person costs a node, on disk and in memory, on SQLite with Chroma and on PostgreSQL (issue #36).

    .venv/bin/python -m bench.people_per_node [--people 10000] [--databases sqlite,postgres] [--indexed 1000]

Builds ``--people`` people as a lived-in store holds them (an account, 40 messages of a private thread and its
summary, 8 memories with their receipts and 8 staged notes, each with a vector of the default embedder's size),
written through kith's own tables and memory store, then prints the disk they take per 10,000 people (kith.db with
its log and the Chroma directory; on PostgreSQL the database's size, memory tables included) and the memory each
person's recall index takes once they have spoken since the start (``--indexed`` people's indexes built, the
process's resident memory measured before and after), and what that makes a node of 1 and 4 GiB carry. The text
is generated: it is there to take space, nothing is tuned on it. PostgreSQL is a throwaway local cluster of the
distribution's server (the test suite's). Nothing is asserted; it prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import sqlalchemy as sa

from ground.config import MemorySettings
from ground.db import Database
from kith.app.schema import create_schema
from memory.core.records import MemoryKind, MemoryRecord, Scope, Source
from memory.encoders.embedders import EmbedderStatus
from memory.store import ChangeLog, MemoryStore, Note
from memory.store.vectors import Vectors
from people import directory
from people.history import messages, summaries

DIM = 384  # the default embedder's (all-MiniLM-L6-v2)
SPACE = "onnx:all-MiniLM-L6-v2"
MESSAGES = 40
MEMORIES = 8
BATCH = 250  # people written per round trip
WORDS = ("garden morning sister coffee train weekend project recipe music rain office birthday dog walk book "
         "doctor holiday paint river friend market bicycle kitchen letter concert exam movie cousin beach").split()
T0 = datetime(2026, 6, 1, tzinfo=UTC)


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def unit_vectors(rng: np.random.Generator, n: int) -> list[list[float]]:
    values = rng.standard_normal((n, DIM)).astype(np.float32)
    values /= np.linalg.norm(values, axis=1, keepdims=True)
    return values.tolist()


def write_rows(conn: sa.Connection, rows: list[dict[str, object]], sums: list[dict[str, object]]) -> None:
    conn.execute(messages.insert(), rows)
    conn.execute(summaries.insert(), sums)


async def fill(db: Database, store: MemoryStore, people: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    vectors = np.random.default_rng(seed)
    ids: list[str] = []
    for start in range(0, people, BATCH):
        batch = range(start, min(start + BATCH, people))
        rows: list[dict[str, object]] = []
        sums: list[dict[str, object]] = []
        records: list[MemoryRecord] = []
        notes: list[Note] = []
        for n in batch:
            account = f"telegram:{100_000 + n}"
            person = await db.run(directory.resolve, account, f"Person {n}", T0)
            ids.append(person)
            conversation = f"telegram:{100_000 + n}"
            for m in range(MESSAGES):
                user = m % 2 == 0
                rows.append({"conversation": conversation, "role": "user" if user else "assistant",
                             "author": account if user else "kith", "person": person if user else None,
                             "platform": "telegram", "chat_id": str(100_000 + n), "chat_kind": "dm",
                             "platform_message_id": str(m), "text": sentence(rng, rng.randint(8, 22)),
                             "created_at": T0 + timedelta(minutes=m), "silent": False, "medium": ""})
            sums.append({"conversation": conversation, "summary": " ".join(sentence(rng, 12) for _ in range(5)),
                         "summary_through": 0, "updated_at": T0})
            for k in range(MEMORIES):
                said = sentence(rng, rng.randint(8, 16))
                source = Source("telegram", str(100_000 + n), str(2 * k), T0 + timedelta(minutes=2 * k))
                label = sentence(rng, 5)
                records.append(MemoryRecord(id=f"m_{n}_{k}", person=person, kind=MemoryKind.FACT, text=label,
                                            evidence=(said.split(".")[0][:60],), evidence_sentences=(said,),
                                            sources=(source,), scope=Scope.DM, created_at=T0, updated_at=T0))
                note = MemoryRecord(id=f"n_{n}_{k}", person=person, kind=MemoryKind.FACT, text=label,
                                    evidence=(said.split(".")[0][:60],), evidence_sentences=(said,),
                                    sources=(source,), scope=Scope.DM, created_at=T0, updated_at=T0)
                notes.append(Note(note, conversation=conversation, promoted_to=f"m_{n}_{k}", promoted_at=T0))

        await db.run(write_rows, rows, sums)
        await store.add_memories(records, Vectors(unit_vectors(vectors, len(records)), SPACE))
        await store.add_notes(notes, Vectors(unit_vectors(vectors, len(notes)), SPACE))
    return ids


async def measure(backend: str, url: str, data: Path, people: int, indexed: int) -> dict[str, float]:
    db = Database(url)
    create_schema(db)
    store = await MemoryStore.open(MemorySettings(embedder="none"), data, None,
                                   EmbedderStatus("none", ready=False, disabled=True), changes=ChangeLog(db),
                                   database=db)
    try:
        gc.collect()
        base = rss_mb()
        started = time.perf_counter()
        ids = await fill(db, store, people, seed=7)
        filled_s = time.perf_counter() - started
        gc.collect()
        filled = rss_mb()
        if backend == "sqlite":
            await db.run(lambda conn: conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)"))
            disk = dir_mb(data)
            print(f"  (kith.db and its log {dir_mb(data) - dir_mb(data / 'chroma'):.0f} MB, "
                  f"Chroma {dir_mb(data / 'chroma'):.0f} MB)")
        else:
            disk = await db.run(lambda conn: conn.execute(sa.text(
                "SELECT pg_database_size(current_database())")).scalar_one()) / 2**20
        # A first message's cost: building the person's index, timed on its own...
        timed = ids[indexed : 2 * indexed]
        started = time.perf_counter()
        for person in timed:
            await store.lexical(person, "garden coffee", 5)
        index_s = time.perf_counter() - started
        gc.collect()
        # ...and what the indexes hold, by Python's own count (NumPy's arrays included): the process's resident
        # size moves with what earlier work freed and the allocator kept, not with what these take.
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        sample = ids[:indexed]
        for person in sample:
            await store.lexical(person, "garden coffee", 5)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        after = rss_mb()
    finally:
        await store.close()
        db.close()
    return {"people": people, "filled_s": filled_s, "disk_mb": disk, "index_mb": held / 2**20,
            "indexed": len(sample), "index_ms": index_s * 1000 / max(1, len(timed)), "rss_mb": after,
            "stored_mb": filled - base}


def report(backend: str, r: dict[str, float]) -> None:
    per_10k = r["disk_mb"] * 10_000 / r["people"]
    per_person_kb = r["index_mb"] * 1024 / max(1, r["indexed"])
    print(f"{backend}: {int(r['people']):,} people written in {r['filled_s']:.0f} s")
    print(f"  disk: {r['disk_mb']:.0f} MB, {per_10k:,.0f} MB per 10,000 people "
          f"({MESSAGES} messages, a summary, {MEMORIES} memories and {MEMORIES} notes each)")
    stored_kb = max(0.0, r["stored_mb"]) * 1024 / r["people"]
    print(f"  resident for the stored people themselves: {r['stored_mb']:.0f} MB, {stored_kb:.1f} KB a person "
          "(embedded Chroma keeps its whole vector index in memory; the memory tables keep nothing)")
    print(f"  recall indexes: {per_person_kb:.1f} KB a person who has spoken since the start, built in "
          f"{r['index_ms']:.1f} ms on their first message; the process {r['rss_mb']:.0f} MB after")
    base = r["rss_mb"] - r["stored_mb"] - r["index_mb"]
    for budget_gb in (1, 4):
        spare = budget_gb * 1024 - base
        # Every stored person costs stored_kb; those who spoke since the start, per_person_kb more.
        stored = spare * 1024 / (stored_kb + per_person_kb)
        print(f"  a node of {budget_gb} GiB for this process: about {stored:,.0f} people, all active since its start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=10_000)
    parser.add_argument("--indexed", type=int, default=1_000)
    parser.add_argument("--databases", default="sqlite,postgres")
    args = parser.parse_args()
    backends = [b.strip() for b in args.databases.split(",") if b.strip()]
    if len(backends) > 1:  # each in a process of its own, so one's memory is not counted in the other's
        for backend in backends:
            subprocess.run([sys.executable, "-m", "bench.people_per_node", "--people", str(args.people),
                            "--indexed", str(args.indexed), "--databases", backend], check=True)
        return
    asyncio.run(run_one(backends[0], args.people, args.indexed))


async def run_one(backend: str, people: int, indexed: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="kith-people-"))
    try:
        if backend == "postgres":
            from tests.support.postgres import cluster  # the suite's throwaway cluster

            url = cluster().new_database()
        else:
            url = f"sqlite:///{work / 'kith.db'}"
        report(backend, await measure(backend, url, work, people, indexed))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if backend == "postgres":
            from tests.support.postgres import stop_cluster

            stop_cluster()


if __name__ == "__main__":
    main()
