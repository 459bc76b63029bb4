"""LoCoMo retrieval recall of kith's own recall engine, and its latency.

For each LoCoMo conversation every dialog turn is stored as one memory through the memory
store's write path (``MemoryStore.vectors`` then ``MemoryStore.add_memories``), its text
``(<session date>) <speaker> said, "<text>"`` plus ``[shares <caption>]`` where the turn
shared an image, the turn's ``dia_id`` kept as the memory's source message id; the clock is
set to the conversation's last session. Every question with evidence is then asked of
:class:`memory.recall.RecallEngine` (default RecallSettings, the embedding awaited) and the
fraction of its evidence turns in the top k is averaged, overall and per category, for
k = 5, 10, 25, 50 (prefixes of one top-50 ranking). The same run repeats the questions on the
keyword path alone (BM25 with the same recency, importance and use factors).

Latency is the wall time of one ``search`` call, query embedding included (every question is
new to the query cache), first on LoCoMo and then for one person with ``--synthetic`` (10,000)
generated memories, at the automatic context's size; odd queries ask as a group chat would
(shared memories only). For that person the parts are also timed apart: the query's embedding
alone, and the same search again with its embedding cached (a search overlaps the embedding
with its keyword work, so the parts add up to more than the whole). The store keeps its change
log in a SQLite database beside Chroma, as kith's processes do, so recall is answered from memory.

The question texts and answers are only measured against, never used to choose anything.

    HF_HUB_OFFLINE=1 python -m bench.locomo_recall [--data PATH] [--embedder SPEC|none]
        [--limit-conversations N] [--synthetic N] [--ablations]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import random
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import percentile, verdict
from ground import loop
from ground.config import MemorySettings, RecallSettings, Settings
from ground.db import Database
from kith.schema import create_schema
from memory.changes import ChangeLog
from memory.embedders import open_embedder
from memory.recall import RecallEngine
from memory.records import MemoryKind, MemoryRecord, Scope, Source
from memory.store import MemoryStore

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "bench-data" / "locomo7.json"
DEFAULT_EMBEDDER = "sentence-transformers:all-MiniLM-L6-v2"
KS = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
# LoCoMo paper (Maharana et al., 2024), DRAGON retriever over dialog turns, recall at k = 5/10/25/50.
DRAGON = {5: 56.7, 10: 66.2, 25: 76.7, 50: 82.7}
EMBED_CHUNK = 64
LATENCY_TARGET_MS = 25.0
DIA_ID = re.compile(r"D\d+:\d+")


class MutableClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@dataclass(frozen=True, slots=True)
class Question:
    category: int
    text: str
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    turns: list[tuple[str, str, datetime]]  # (dia_id, document, said at)
    questions: list[Question]
    last_session: datetime


def parse_session_date(value: str) -> datetime:
    return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def evidence_ids(evidence: Sequence[str]) -> tuple[str, ...]:
    """Every dia id in a question's evidence; some strings pack several ("D8:6; D9:17")."""
    found: list[str] = []
    for item in evidence:
        found.extend(DIA_ID.findall(item.replace("D:", "D")))
    return tuple(dict.fromkeys(found))


def document(date_text: str, turn: dict[str, object]) -> str:
    text = f'({date_text}) {turn["speaker"]} said, "{turn["text"]}"'
    caption = turn.get("blip_caption")
    return f"{text} [shares {caption}]" if caption else text


def load(path: Path, limit: int | None) -> list[Conversation]:
    samples = json.loads(path.read_text(encoding="utf-8"))
    out: list[Conversation] = []
    for sample in samples[:limit]:
        conv = sample["conversation"]
        turns: list[tuple[str, str, datetime]] = []
        sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        last = datetime.min.replace(tzinfo=UTC)
        for n in sessions:
            date_text = conv[f"session_{n}_date_time"]
            when = parse_session_date(date_text)
            last = max(last, when)
            for turn in conv[f"session_{n}"]:
                turns.append((turn["dia_id"], document(date_text, turn), when))
        questions = [Question(int(q["category"]), q["question"], evidence_ids(q.get("evidence") or []))
                     for q in sample["qa"]]
        out.append(Conversation(str(sample["sample_id"]), turns, [q for q in questions if q.evidence], last))
    return out


async def store_turns(store: MemoryStore, person: str, conv: Conversation) -> int:
    """Write every turn as a memory; returns how many got the hashed fallback vector instead."""
    fallback = 0
    for start in range(0, len(conv.turns), EMBED_CHUNK):
        chunk = conv.turns[start:start + EMBED_CHUNK]
        vectors = await store.vectors([doc for _id, doc, _when in chunk])
        fallback += 0 if vectors.from_embedder else len(chunk)
        records = [
            MemoryRecord(id=f"m_{conv.sample_id}_{dia_id.replace(':', '_')}", person=person,
                         kind=MemoryKind.EPISODE, text=doc, evidence=(doc,),
                         sources=(Source("locomo", conv.sample_id, dia_id, when),), scope=Scope.DM,
                         created_at=when, updated_at=when)
            for dia_id, doc, when in chunk]
        await store.add_memories(records, vectors)
    return fallback


@dataclass
class Scores:
    by_k: dict[int, dict[int, list[float]]] = dataclasses.field(
        default_factory=lambda: {k: defaultdict(list) for k in KS})

    def add(self, category: int, ranked_ids: Sequence[str], wanted: Sequence[str]) -> None:
        for k in KS:
            top = set(ranked_ids[:k])
            self.by_k[k][category].append(sum(1 for e in wanted if e in top) / len(wanted))

    def line(self, k: int, label: str = "") -> str:
        per = self.by_k[k]
        everything = [v for values in per.values() for v in values]
        parts = [f"recall@{k}{label} overall={100 * sum(everything) / max(1, len(everything)):.1f}"]
        for category, name in CATEGORIES.items():
            values = per.get(category, [])
            parts.append(f"{name}={100 * sum(values) / len(values):.1f}" if values else f"{name}=n/a")
        return " ".join(parts)

    def overall(self, k: int) -> float:
        everything = [v for values in self.by_k[k].values() for v in values]
        return 100 * sum(everything) / max(1, len(everything))


async def ask_all(engine: RecallEngine, clock: MutableClock, convs: Sequence[Conversation], *,
                  use_vectors: bool, latencies: list[float] | None = None) -> Scores:
    scores = Scores()
    for conv in convs:
        clock.now = conv.last_session
        person = f"locomo:{conv.sample_id}"
        for q in conv.questions:
            started = time.perf_counter()
            result = await engine.search(person, q.text, limit=max(KS), shared_only=False, budget_s=None,
                                         use_vectors=use_vectors)
            if latencies is not None:
                latencies.append((time.perf_counter() - started) * 1000)
            ids = [r.record.sources[0].message_id for r in result.items]
            scores.add(q.category, ids, q.evidence)
    return scores


# --- the 10,000-memory person -----------------------------------------------------------
_NAMES = "Ana Ben Chloe Dev Eli Fumiko Gosia Hugo Ines Jon Kasia Leo Mira Nils Omar Pia".split()
_VERBS = ("adopted", "painted", "visited", "cooked", "fixed", "bought", "lost", "found", "planted", "sold",
          "repaired", "borrowed", "photographed", "learned about", "wrote about", "argued about")
_THINGS = ("a red bicycle", "the old piano", "a sourdough starter", "a vintage camera", "tomato seedlings",
           "a rescue cat", "the garden shed", "a kayak", "a chess set", "the violin", "a telescope",
           "a wool scarf", "a ceramic vase", "the attic window", "a mountain bike", "a pottery wheel",
           "a sailing boat", "a record player", "the kitchen tiles", "a board game")
_PLACES = ("in Lisbon", "at the lake house", "near the harbour", "in Kraków", "at the community centre",
           "in the park", "at grandma's farm", "downtown", "in Osaka", "at the market", "by the river",
           "at school", "in the mountains", "at the office", "on the island")
_WHEN = ("last spring", "over the weekend", "after work", "in the morning", "during the holidays",
         "before the storm", "on her birthday", "with friends", "for the first time", "again")


def synthetic_texts(n: int, rng: random.Random) -> list[str]:
    return [f"{rng.choice(_NAMES)} {rng.choice(_VERBS)} {rng.choice(_THINGS)} {rng.choice(_PLACES)} "
            f"{rng.choice(_WHEN)} (note {i})" for i in range(n)]


async def synthetic_latency(store: MemoryStore, settings: RecallSettings, n: int, queries: int
                            ) -> tuple[list[float], list[float], list[float]]:
    """Times (ms) of ``queries`` recalls for one person with ``n`` memories: (whole, embedding, search)."""
    rng = random.Random(10_000)
    now = datetime(2026, 11, 20, 12, tzinfo=UTC)
    person = "synthetic:10k"
    texts = synthetic_texts(n, rng)
    for start in range(0, n, EMBED_CHUNK * 4):
        chunk = texts[start:start + EMBED_CHUNK * 4]
        vectors = await store.vectors(chunk)
        records = []
        for offset, text in enumerate(chunk):
            when = now - timedelta(days=rng.uniform(0, 720))
            records.append(MemoryRecord(
                id=f"m_syn_{start + offset}", person=person, kind=MemoryKind.FACT, text=text, evidence=(text,),
                sources=(Source("console", "syn", str(start + offset), when),),
                scope=Scope.DM if rng.random() < 0.7 else Scope.SHARED, importance=rng.uniform(0.2, 0.9),
                created_at=when, updated_at=when))
        await store.add_memories(records, vectors)
    engine = RecallEngine(store, settings, lambda: now)
    whole: list[float] = []
    embed: list[float] = []
    search: list[float] = []
    for i in range(queries):
        query = f"what did {rng.choice(_NAMES)} do with {rng.choice(_THINGS)} {rng.choice(_PLACES)}? ({i})"
        for times, step in ((whole, engine.search), (embed, None), (search, engine.search)):
            started = time.perf_counter()
            if step is None:  # the embedding alone, past the query cache
                await store.vectors([query])
            else:  # the first search embeds the new query; the second finds it cached
                await step(person, query, limit=settings.max_items, shared_only=bool(i % 2), budget_s=None)
            times.append((time.perf_counter() - started) * 1000)
    await engine.close()
    return whole, embed, search


def latency_line(label: str, values: Sequence[float]) -> str:
    return (f"{label} p50={percentile(values, 50):.1f} ms p95={percentile(values, 95):.1f} ms n={len(values)}")


async def run(args: argparse.Namespace) -> int:
    convs = load(Path(args.data), args.limit_conversations)
    questions = sum(len(c.questions) for c in convs)
    turns = sum(len(c.turns) for c in convs)
    print(f"LoCoMo: {len(convs)} conversations, {turns} turns, {questions} questions with evidence; "
          f"embedder {args.embedder}", flush=True)
    settings = Settings(memory=MemorySettings(embedder=args.embedder))
    embedder, status = await open_embedder(settings)
    print(status.line(), flush=True)
    if args.embedder != "none" and not status.ready:
        print("the embedder is not ready; measuring it would measure BM25 twice", file=sys.stderr)
        return 2
    recall = RecallSettings()
    with tempfile.TemporaryDirectory(prefix="kith-locomo-") as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'kith.db'}")
        create_schema(db)
        store = await MemoryStore.open(settings.memory, Path(tmp), embedder, status, changes=ChangeLog(db))
        try:
            started = time.perf_counter()
            fallback = 0
            for conv in convs:
                fallback += await store_turns(store, f"locomo:{conv.sample_id}", conv)
            print(f"stored {turns} turns in {time.perf_counter() - started:.0f} s"
                  + (f" ({fallback} with the hashed fallback vector)" if fallback else ""), flush=True)
            clock = MutableClock(datetime.now(UTC))
            engine = RecallEngine(store, recall, clock, query_cache=max(512, questions + 16))
            latencies: list[float] = []
            scores = await ask_all(engine, clock, convs, use_vectors=True, latencies=latencies)
            lexical = await ask_all(engine, clock, convs, use_vectors=False)
            for k in KS:
                print(scores.line(k), flush=True)
            for k in KS:
                print(lexical.line(k, " bm25-only"), flush=True)
            print("reference DRAGON (LoCoMo paper): " + " ".join(f"recall@{k}={v:.1f}" for k, v in DRAGON.items()))
            print("vs DRAGON: " + " ".join(
                f"@{k} {scores.overall(k) - DRAGON[k]:+.1f}" for k in KS))
            print(latency_line("recall latency (LoCoMo, top 50, query embedding included)", latencies), flush=True)
            if args.ablations:
                await ablations(engine, clock, convs, recall)
            await engine.close()
            if args.synthetic > 0:
                started = time.perf_counter()
                total, embed, search = await synthetic_latency(store, recall, args.synthetic,
                                                               args.synthetic_queries)
                p95 = percentile(total, 95)
                print(latency_line(f"recall latency ({args.synthetic} memories of one person, top "
                                   f"{recall.max_items}, query embedding included)", total)
                      + f" target p95<={LATENCY_TARGET_MS:.0f} ms: {verdict(p95, LATENCY_TARGET_MS)}"
                      + f" (setup {time.perf_counter() - started:.0f} s)", flush=True)
                print("  apart: " + latency_line("query embedding", embed) + "; "
                      + latency_line("search, embedding cached", search), flush=True)
        finally:
            await store.close()
            db.close()
    return 0


async def ablations(engine: RecallEngine, clock: MutableClock, convs: Sequence[Conversation],
                    base: RecallSettings) -> None:
    """The same questions under other settings (the query embeddings are cached by now)."""
    variants = {
        "no-recency": dataclasses.replace(base, half_life_days=0.0),
        "blend-50/50": dataclasses.replace(base, vector_weight=0.5, bm25_weight=0.5),
        "blend-85/15": dataclasses.replace(base, vector_weight=0.85, bm25_weight=0.15),
        "vector-only": dataclasses.replace(base, vector_weight=1.0, bm25_weight=0.0),
    }
    for name, settings in variants.items():
        engine.settings = settings
        scores = await ask_all(engine, clock, convs, use_vectors=True)
        print(f"[{name}] " + " ".join(f"@{k}={scores.overall(k):.1f}" for k in KS), flush=True)
    engine.settings = base


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER,
                        help="a memory.embedder value, or none for BM25 only")
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--synthetic", type=int, default=10_000, help="memories of the latency person (0: skip)")
    parser.add_argument("--synthetic-queries", type=int, default=200)
    parser.add_argument("--ablations", action="store_true", help="also rank under a few other settings")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    return loop.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
