"""Memory capture-and-gate throughput, and the gate's latency against a large store.

1. Throughput: turns are recorded, capture asks an instant in-process model (no network, no
   HTTP) that answers with two receipts-backed memories per turn, validation and the note
   writes run for real, then promotion sends every note through the gate into Chroma.
2. Latency: one person with 1k, 10k and 100k synthetic memories (embedded Chroma); for each
   size, the gate's comparison of a new fact (embedding + Chroma nearest + BM25 + similarity)
   and a full admit (comparison + write), p50/p95.

    python -m bench.memory_gate [--sizes 1000,10000,100000] [--embedder none|sentence-transformers:...]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import peak_rss_mb, percentile, summary_ms, verdict
from ground import loop
from ground.config import LLMSettings, MemorySettings, Settings, StorageSettings
from ground.db import Database
from kith.app.schema import create_schema
from llm.client import LLMClient
from memory.capture import new_memory_id
from memory.core import MemoryCandidate, MemoryKind, MemoryRecord, Scope, Source
from memory.service import MemoryService
from people import directory, history

TARGET_P95_MS = {10_000: 25.0, 100_000: 60.0}
LOAD_BATCH = 1_000
SAMPLES = 200

VERBS = [
    "likes",
    "owns",
    "visited",
    "is learning",
    "plays",
    "collects",
    "cooks",
    "avoids",
    "repairs",
    "paints",
    "reads about",
    "grows",
    "teaches",
    "studies",
    "photographs",
    "sells",
    "builds",
    "misses",
    "writes",
    "trains",
]
THINGS = [
    f"{a}{b}"
    for a in [
        "vel",
        "mar",
        "tor",
        "sil",
        "qua",
        "bren",
        "lum",
        "dor",
        "kesh",
        "pav",
        "rin",
        "zol",
        "fen",
        "gar",
        "hol",
        "jas",
        "mik",
        "nor",
        "osk",
        "pell",
    ]
    for b in [
        "ant",
        "ber",
        "cio",
        "dal",
        "eno",
        "fir",
        "gat",
        "hux",
        "ilo",
        "jun",
        "kor",
        "lex",
        "mop",
        "nix",
        "orb",
        "pim",
        "quo",
        "ros",
        "sut",
        "tav",
    ]
]  # 400 made-up nouns
PLACES = [
    "Lyon",
    "Porto",
    "Gdansk",
    "Osaka",
    "Quito",
    "Tartu",
    "Cork",
    "Leeds",
    "Bergen",
    "Split",
    "Graz",
    "Turin",
    "Brno",
    "Malmo",
    "Vigo",
    "Nantes",
    "Aarhus",
    "Kaunas",
    "Ghent",
    "Basel",
]


def fact_text(rng: random.Random) -> str:
    return f"Ana {rng.choice(VERBS)} {rng.choice(THINGS)} in {rng.choice(PLACES)} {rng.randint(1, 60)}"


def synthetic(person: str, n: int, rng: random.Random, now: datetime) -> list[MemoryRecord]:
    out = []
    for _ in range(n):
        text = fact_text(rng)
        out.append(
            MemoryRecord(
                id=new_memory_id(),
                person=person,
                kind=rng.choice(list(MemoryKind)),
                text=text,
                evidence=(text,),
                sources=(Source("console", "ana", "m1", now),),
                scope=Scope.DM,
                created_at=now,
                updated_at=now,
            )
        )
    return out


class InstantModel:
    """An in-process stand-in for litellm: answers every capture at once with two quoted memories."""

    async def acompletion(self, **kwargs: Any) -> Any:
        transcript = kwargs["messages"][1]["content"]
        said = [
            line.removeprefix("PERSON: ") for line in transcript.splitlines() if line.startswith("PERSON: ")
        ]
        first, _, second = said[-1].partition(" and ")
        # Each memory restates what Ana said about herself ("I love Porto 3" -> "Ana love Porto 3"), so the
        # receipt rules let it through: a memory may not add a verb of saying that her words do not hold.
        memories = [
            {"kind": "fact", "text": f"Ana {first.removeprefix('I ')}", "evidence": first},
            {"kind": "preference", "text": f"Ana {second.removeprefix('I ')}", "evidence": second},
        ]
        message = type("M", (), {"content": json.dumps({"memories": memories}), "tool_calls": None})
        return type("R", (), {"choices": [type("C", (), {"message": message})], "usage": None})


def settings_for(tmp: Path, embedder: str) -> Settings:
    return Settings(
        llm=LLMSettings(model="openai/instant", api_base="http://127.0.0.1:9/v1", max_retries=0),
        storage=StorageSettings(data_dir=str(tmp)),
        memory=MemorySettings(embedder=embedder),
    )


async def throughput(tmp: Path, embedder: str, turns: int) -> None:
    settings = settings_for(tmp, embedder)
    db = Database(f"sqlite:///{tmp / 'kith.db'}")
    create_schema(db)
    service = await MemoryService.open(settings, db, LLMClient(settings.llm, litellm_module=InstantModel()))
    rng = random.Random(7)
    now = datetime.now(UTC)
    person = await db.run(directory.resolve, "console:ana", "Ana", now)
    written = 0
    started = time.perf_counter()
    for i in range(turns):
        text = f"I {rng.choice(VERBS)} {rng.choice(THINGS)} {i} and I love {rng.choice(PLACES)} {i}"
        await db.run(
            history.append,
            conversation="console:ana",
            role="user",
            author="console:ana",
            person=person,
            platform="console",
            chat_id="ana",
            text=text,
            created_at=now,
            platform_message_id=f"u{i}",
        )
        last = await db.run(
            history.append,
            conversation="console:ana",
            role="assistant",
            author="kith",
            platform="console",
            chat_id="ana",
            text="Nice.",
            created_at=now,
        )
        written += (await service.capture.run("console:ana", last)).written
    captured_s = time.perf_counter() - started
    started = time.perf_counter()
    report = await service.promote(person)
    promoted_s = time.perf_counter() - started
    await service.close()
    db.close()
    print(
        f"capture: {turns} turns -> {written} notes validated and written in {captured_s:.2f} s "
        f"= {written / captured_s:.0f} memories/s"
    )
    print(
        f"promote: {report.notes} notes through the gate in {promoted_s:.2f} s = "
        f"{report.notes / promoted_s:.0f} "
        f"memories/s {report.outcomes}"
    )
    print(f"capture + gate end to end: {written / (captured_s + promoted_s):.0f} memories/s")


async def latency(tmp: Path, embedder: str, sizes: list[int]) -> None:
    settings = settings_for(tmp, embedder)
    db = Database(f"sqlite:///{tmp / 'latency.db'}")
    create_schema(db)
    service = await MemoryService.open(settings, db, LLMClient(settings.llm))
    print(service.status.line())
    rng = random.Random(11)
    now = datetime.now(UTC) - timedelta(days=1)
    loaded = 0
    for size in sizes:
        started = time.perf_counter()
        while loaded < size:
            batch = synthetic("p_bench", min(LOAD_BATCH, size - loaded), rng, now)
            await service.store.add_memories(batch)
            loaded += len(batch)
        load_s = time.perf_counter() - started
        await service.store.lexical("p_bench", "warm", 1)  # the per-person BM25 index builds once, lazily
        compare_ms, admit_ms = [], []
        for i in range(SAMPLES):
            text = fact_text(rng)
            t0 = time.perf_counter()
            await service.gate.compare("p_bench", text, MemoryKind.FACT)
            compare_ms.append((time.perf_counter() - t0) * 1000)
            candidate = MemoryCandidate(
                kind=MemoryKind.FACT,
                text=text,
                evidence=(text,),
                sources=(Source("console", "ana", f"s{size}-{i}", now),),
            )
            t0 = time.perf_counter()
            await service.gate.admit("p_bench", candidate)
            admit_ms.append((time.perf_counter() - t0) * 1000)
        loaded += SAMPLES  # admits add (or merge into) memories too
        p95 = percentile(compare_ms, 95)
        target = TARGET_P95_MS.get(size)
        goal = f" target p95 <= {target:.0f} ms: {verdict(p95, target)}" if target else ""
        print(f"{size:>7} memories (loaded in {load_s:.1f} s): gate decision {summary_ms(compare_ms)}{goal}")
        print(f"{'':>7}          full admit incl. write: {summary_ms(admit_ms)}")
    await service.close()
    db.close()


async def main(sizes: list[int], embedder: str, turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        print(f"embedder: {embedder}")
        await throughput(Path(tmp) / "throughput", embedder, turns)
        await latency(Path(tmp) / "latency", embedder, sizes)
    print(f"peak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--embedder", default="none")
    parser.add_argument("--turns", type=int, default=300)
    ns = parser.parse_args()
    loop.run(main([int(s) for s in ns.sizes.split(",")], ns.embedder, ns.turns))
