"""LoCoMo retrieval recall of kith's own recall engine, chosen by leave-one-conversation-out, and its latency.

For each LoCoMo conversation every dialog turn is stored as one memory through the memory
store's write path (``MemoryStore.vectors`` then ``MemoryStore.add_memories``), its text
``(<session date>) <previous speaker> said, "<previous turn>" Then <speaker> said, "<text>"``
(the turn before it in the same session as context; none for a session's first turn) plus
``[shares <caption>]`` where the turn shared an image, the turn's ``dia_id`` kept as the
memory's source message id. Each part of that format was kept because leave-one-out chose it
(the ablation table shows each taken out). LoCoMo dates sessions, not turns: turn i of a
session is dated i × 30 s after the session's start, so the turns of one chat are in said-at
order as real messages are. The clock is set to the
conversation's last session. Every question with evidence is then asked of
:class:`memory.recall.engine.RecallEngine` (kith's default RecallSettings, the embedding awaited) and
the fraction of its evidence turns in the top k is averaged, overall and per category, for
k = 5, 10, 25, 50 (prefixes of one top-50 ranking). The same run repeats the questions on the
keyword path alone (BM25 with the same recency, importance and use factors).

Leave-one-conversation-out (LOO): every question is gathered once per document format
(``RecallEngine.gather``) and ranked under every point of a small grid (vector/BM25 blend,
recency half-life, neighbour share and width, date boost; :mod:`bench.locomo_grid`, checked against
``RecallEngine.order`` on sampled pairs). For each conversation the grid point and document
format best on the other six (mean recall@5/10/25/50 over their questions) score it; the table
gives the mean and spread of the seven held-out scores and their pooled value. The ablation
table repeats LOO with each lever held off and held on. The question texts and answers are
only measured against: nothing is chosen from them except through LOO on the other
conversations.

Graph expansion (the person's graph in recall, :mod:`memory.recall.graph_reach`) is one more lever of the grid,
for the default document format: each conversation's graph is grown by ``PersonGraph.grow``, kith's own code,
from LoCoMo's per-session observations standing in for the relations capture's model would propose
(:mod:`bench.locomo_graph` says how, and the output says so). The 10,000-memory person gets a graph of its own
(its names, things and things-at-places), so the latency includes the graph's work.

Each distinct text is embedded once per run (vectors cached by text; ``--vector-cache FILE``
keeps them across runs, and then the LoCoMo latency line leaves out document embedding only,
never a new query's).

Latency is the wall time of one ``search`` call, query embedding included (every question is
new to the query cache), first on LoCoMo and then for one person with ``--synthetic`` (10,000)
generated memories, at the automatic context's size; odd queries ask as a group chat would
(shared memories only). That person's stored vectors are random unit vectors (``--seed``): a
search's cost does not depend on their values, and embedding 10,000 texts would take minutes;
the queries are embedded by the embedder for real. The parts are also timed apart: the query's
embedding alone, and the same search again with its embedding cached (a search overlaps the
embedding with its keyword work, so the parts add up to more than the whole). The store keeps
its change log in a SQLite database beside Chroma, as kith's processes do, so recall is
answered from memory.

    HF_HUB_OFFLINE=1 python -m bench.locomo_recall [--data PATH] [--embedder SPEC|none] [--seed N]
        [--limit-conversations N] [--synthetic N] [--no-loo] [--vector-cache FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import math
import pickle
import random
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench.common import percentile, verdict
from bench.locomo_graph import STAND_IN, Graphs, Observation, build
from bench.locomo_grid import (
    KS,
    Axes,
    IntArray,
    LooResult,
    Point,
    best_on_all,
    grid_recall,
    leave_one_out,
    question_arrays,
    rank_grid,
)
from ground import loop
from ground.config import MemorySettings, RecallSettings, Settings
from ground.db import Database
from kith.app.schema import create_schema
from memory.core import MemoryKind, MemoryRecord, Scope, Source
from memory.core.graph_records import Entity, EntityKind, Relation
from memory.encoders import CrossEncoderReranker, Embedder, EmbedderStatus, Vector, open_embedder, open_reranker
from memory.graph.names import name_key
from memory.graph.view import PersonGraph, entity_id, relation_id
from memory.recall import RecallEngine
from memory.store import ChangeLog, MemoryStore, Vectors

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "bench-data" / "locomo7.json"
DEFAULT_EMBEDDER = "onnx:all-MiniLM-L6-v2"
DEFAULT_SEED = 10_000
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
MULTI_HOP = 1
# LoCoMo paper (Maharana et al., 2024), DRAGON retriever over dialog turns, recall at k = 5/10/25/50.
DRAGON = {5: 56.7, 10: 66.2, 25: 76.7, 50: 82.7}
TARGETS = {5: 65.0, 10: 75.0, 25: 85.0, 50: 90.0}
MULTI_HOP_TARGET = 55.0
EMBED_CHUNK = 64
PREPARE_CHUNK = 256  # documents per call when embedding them ahead (sorted by length, so little padding)
LATENCY_TARGET_MS = 25.0
RERANKED_LATENCY_TARGET_MS = 80.0  # with a cross-encoder reranking the best few
TURN_SPACING = timedelta(seconds=30)
DIA_ID = re.compile(r"D\d+:\d+")
CHECK_PAIRS = 300  # (question, grid point) pairs whose fast ranking is checked against RecallEngine.order

# The grid LOO chooses from. Earlier values win ties, so a lever with no measurable effect stays off.
VECTOR_WEIGHTS = (0.7, 0.6, 0.8, 1.0)
HALF_LIVES = (0.0, 30.0, 365.0)
NEIGHBOUR_SHARES = (0.0, 0.5, 0.75, 1.0, 1.5)
NEIGHBOUR_WIDTHS = (1, 2, 3)
DATE_BOOSTS = (1.0, 1.25, 1.5, 2.0)
# The graph: (share, hops, best candidates whose beings count); off first. Only the default format has a graph.
GRAPH_OFF = (0.0, 1, 0)
GRAPH_POINTS = (GRAPH_OFF, *((share, hops, best) for share in (0.5, 1.0) for hops in (1, 2) for best in (0, 5)))


# --- the data ---------------------------------------------------------------------------
class MutableClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str
    date_text: str  # the session's date as LoCoMo writes it
    said_at: datetime


@dataclass(frozen=True, slots=True)
class Question:
    category: int
    text: str
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    last_session: datetime
    observations: list[Observation] = dataclasses.field(default_factory=list)


def parse_session_date(value: str) -> datetime:
    return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def evidence_ids(evidence: Sequence[str]) -> tuple[str, ...]:
    """Every dia id in a question's evidence; some strings pack several ("D8:6; D9:17")."""
    found: list[str] = []
    for item in evidence:
        found.extend(DIA_ID.findall(item.replace("D:", "D")))
    return tuple(dict.fromkeys(found))


def load(path: Path, limit: int | None) -> list[Conversation]:
    samples = json.loads(path.read_text(encoding="utf-8"))
    out: list[Conversation] = []
    for sample in samples[:limit]:
        conv = sample["conversation"]
        turns: list[Turn] = []
        sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        last = datetime.min.replace(tzinfo=UTC)
        for n in sessions:
            date_text = conv[f"session_{n}_date_time"]
            when = parse_session_date(date_text)
            last = max(last, when)
            for i, turn in enumerate(conv[f"session_{n}"]):
                turns.append(Turn(turn["dia_id"], str(turn["speaker"]), str(turn["text"]),
                                  str(turn.get("blip_caption") or ""), date_text, when + i * TURN_SPACING))
        questions = [Question(int(q["category"]), q["question"], evidence_ids(q.get("evidence") or []))
                     for q in sample["qa"]]
        observations: list[Observation] = []
        for n in sessions:
            when = parse_session_date(conv[f"session_{n}_date_time"])
            for speaker, items in (sample.get("observation") or {}).get(f"session_{n}_observation", {}).items():
                for text, *evidence in items:
                    ids = evidence_ids([e for item in evidence for e in (item if isinstance(item, list) else [item])])
                    observations.append(Observation(str(speaker), str(text), ids, when))
        out.append(Conversation(str(sample["sample_id"]), turns, [q for q in questions if q.evidence], last,
                                observations))
    return out


# --- what is indexed --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DocumentFormat:
    """How a turn becomes a memory's text (embedded and keyword-indexed alike)."""

    name: str
    date: bool = True  # the session's date in front
    speaker: bool = True  # "<speaker> said, ..."
    previous: bool = False  # the turn before it in the session, as context

    def text(self, turn: Turn, previous: Turn | None) -> str:
        said = f'{turn.speaker} said, "{turn.text}"' if self.speaker else f'"{turn.text}"'
        if turn.caption:
            said += f" [shares {turn.caption}]"
        if self.previous and previous is not None:
            before = (f'{previous.speaker} said, "{previous.text}"' if self.speaker else f'"{previous.text}"')
            said = f"{before} Then {said}"
        return f"({turn.date_text}) {said}" if self.date else said


# The default, and each of its parts taken out alone.
DEFAULT_FORMAT = DocumentFormat("date+speaker+previous", previous=True)
FORMATS = (DEFAULT_FORMAT, DocumentFormat("date+speaker"),
           DocumentFormat("speaker+previous", date=False, previous=True),
           DocumentFormat("date+previous", speaker=False, previous=True))


def documents(conv: Conversation, fmt: DocumentFormat) -> list[str]:
    out: list[str] = []
    for i, turn in enumerate(conv.turns):
        before = conv.turns[i - 1] if i > 0 and conv.turns[i - 1].date_text == turn.date_text else None
        out.append(fmt.text(turn, before))
    return out


def person_of(conv: Conversation, fmt: DocumentFormat) -> str:
    return f"locomo:{fmt.name}:{conv.sample_id}"


def memory_id(conv: Conversation, fmt: DocumentFormat, turn: Turn) -> str:
    return f"m_{fmt.name}_{conv.sample_id}_{turn.dia_id.replace(':', '_')}"


def grow_graphs(graphs: Graphs, convs: Sequence[Conversation], fmt: DocumentFormat) -> tuple[int, int]:
    """Each conversation's graph for ``fmt``'s memories (see :mod:`bench.locomo_graph`); (names, relations)."""
    names = relations = 0
    for conv in convs:
        by_dia = {t.dia_id: memory_id(conv, fmt, t) for t in conv.turns}
        graph = build(person_of(conv, fmt), conv.observations, by_dia.get, conv.sample_id, conv.last_session)
        graphs.by_person[graph.person] = graph
        names += len(graph.entities)
        relations += len(graph.relations)
    return names, relations


# --- embedding each text once -----------------------------------------------------------
class CachedEmbedder:
    """The embedder, with documents embedded once per run (:meth:`prepare`), spread over copies of it.

    Other texts (the questions, the latency person's queries) go to the embedder every time: a
    search's latency includes its query's embedding.
    """

    def __init__(self, inner: Sequence[Embedder], cache: dict[str, Vector] | None = None) -> None:
        self.inner = list(inner)
        self.name = self.inner[0].name
        self.cache: dict[str, Vector] = cache if cache is not None else {}
        self.embedded = 0  # documents the embedder embedded this run

    async def prepare(self, texts: Sequence[str]) -> None:
        # Texts of like length together: a batch is padded to its longest text.
        missing = sorted(dict.fromkeys(t for t in texts if t not in self.cache), key=len)
        chunks = [missing[i:i + PREPARE_CHUNK] for i in range(0, len(missing), PREPARE_CHUNK)]
        queue: asyncio.Queue[list[str]] = asyncio.Queue()
        for chunk in chunks:
            queue.put_nowait(chunk)

        async def worker(embedder: Embedder) -> None:
            while not queue.empty():
                chunk = queue.get_nowait()
                for text, vector in zip(chunk, await embedder.embed(chunk), strict=True):
                    self.cache[text] = vector

        await asyncio.gather(*(worker(e) for e in self.inner[:len(chunks)]))
        self.embedded += len(missing)

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        if all(t in self.cache for t in texts):
            return [self.cache[t] for t in texts]
        return await self.inner[0].embed(texts)

    async def close(self) -> None:
        for embedder in self.inner:
            await embedder.close()


def read_vector_cache(path: Path | None, space: str) -> dict[str, Vector]:
    if path is None or not path.exists():
        return {}
    with path.open("rb") as f:
        stored = pickle.load(f)
    return dict(stored.get(space, {}))


def write_vector_cache(path: Path | None, space: str, cache: dict[str, Vector]) -> None:
    if path is None:
        return
    stored = {}
    if path.exists():
        with path.open("rb") as f:
            stored = pickle.load(f)
    stored[space] = cache
    with path.open("wb") as f:
        pickle.dump(stored, f)


async def store_turns(store: MemoryStore, conv: Conversation, fmt: DocumentFormat) -> int:
    """Write every turn as a memory; returns how many got the hashed fallback vector instead."""
    fallback = 0
    person = person_of(conv, fmt)
    docs = documents(conv, fmt)
    for start in range(0, len(conv.turns), EMBED_CHUNK):
        chunk = list(zip(conv.turns[start:start + EMBED_CHUNK], docs[start:start + EMBED_CHUNK], strict=True))
        vectors = await store.vectors([doc for _turn, doc in chunk])
        fallback += 0 if vectors.from_embedder else len(chunk)
        records = [
            MemoryRecord(id=memory_id(conv, fmt, turn), person=person, kind=MemoryKind.EPISODE, text=doc,
                         evidence=(doc,), sources=(Source("locomo", conv.sample_id, turn.dia_id, turn.said_at),),
                         scope=Scope.DM, created_at=turn.said_at, updated_at=turn.said_at)
            for turn, doc in chunk]
        await store.add_memories(records, vectors)
    return fallback


# --- asking -----------------------------------------------------------------------------
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


async def ask_all(engine: RecallEngine, clock: MutableClock, convs: Sequence[Conversation], fmt: DocumentFormat, *,
                  use_vectors: bool, latencies: list[float] | None = None) -> Scores:
    scores = Scores()
    for conv in convs:
        clock.now = conv.last_session
        person = person_of(conv, fmt)
        for q in conv.questions:
            started = time.perf_counter()
            result = await engine.search(person, q.text, limit=max(KS), shared_only=False, budget_s=None,
                                         use_vectors=use_vectors)
            if latencies is not None:
                latencies.append((time.perf_counter() - started) * 1000)
            ids = [r.record.sources[0].message_id for r in result.items]
            scores.add(q.category, ids, q.evidence)
    return scores


# --- the grid and leave-one-conversation-out -------------------------------------------------
@dataclass(frozen=True, slots=True)
class Way:
    """One way to rank: a document format, the vector path or BM25 alone, and a grid point."""

    fmt: str
    vectors: bool
    point: Point

    def describe(self) -> str:
        return (f"{self.fmt}, {'vectors+BM25' if self.vectors else 'BM25 alone'}, "
                f"{self.point.label(blend=self.vectors)}")


@dataclass
class Measured:
    """Every question's recall@k under every way of ranking, and whose question it is."""

    conversation: IntArray  # [questions] conversation index
    category: IntArray  # [questions]
    ways: list[Way] = dataclasses.field(default_factory=list)
    tables: list[np.ndarray] = dataclasses.field(default_factory=list)  # [questions, ways of one pass, len(KS)]
    checked: int = 0
    differing: int = 0
    _results: np.ndarray | None = None

    @property
    def results(self) -> np.ndarray:
        """[ways, questions, len(KS)]."""
        if self._results is None or len(self._results) != len(self.ways):
            self._results = np.concatenate([t.transpose(1, 0, 2) for t in self.tables]).astype(np.float64)
        return self._results

    def where(self, keep: Callable[[Way], bool]) -> list[int]:
        return [i for i, way in enumerate(self.ways) if keep(way)]


def axes_for(vectors: bool, graph: bool) -> Axes:
    # Without an embedder the blend has nothing to weigh; without a graph, graph expansion stays off.
    return Axes(VECTOR_WEIGHTS if vectors else (1.0,), HALF_LIVES, NEIGHBOUR_SHARES, NEIGHBOUR_WIDTHS,
                DATE_BOOSTS, GRAPH_POINTS if graph else (GRAPH_OFF,))


async def measure_grid(engine: RecallEngine, clock: MutableClock, convs: Sequence[Conversation],
                       fmt: DocumentFormat, measured: Measured, *, vectors: bool, rng: random.Random) -> None:
    """Gather each question once, rank it under every grid point, and check a sample against the engine."""
    base = RecallSettings()
    axes = axes_for(vectors, fmt == DEFAULT_FORMAT)
    points = axes.points()
    # Gathering fetches the neighbours the widest point uses, and what the widest graph setting reaches;
    # ``order`` keeps those each point reaches.
    engine.settings = dataclasses.replace(base, neighbour_share=max(NEIGHBOUR_SHARES),
                                          neighbour_width=max(NEIGHBOUR_WIDTHS),
                                          graph_share=max(g[0] for g in axes.graphs) or base.graph_share,
                                          graph_hops=max(g[1] for g in axes.graphs),
                                          graph_from_best=max(g[2] for g in axes.graphs))
    rows: list[np.ndarray] = []
    total = len(points) * sum(len(c.questions) for c in convs)
    check_every = max(1, total // CHECK_PAIRS)
    pair = rng.randrange(check_every)  # which pairs are checked: the seed's choice
    for conv in convs:
        clock.now = conv.last_session
        person = person_of(conv, fmt)
        turn_of = {memory_id(conv, fmt, t): t.dia_id for t in conv.turns}
        for q in conv.questions:
            found = await engine.gather(person, q.text, limit=max(KS), shared_only=False, budget_s=None,
                                        use_vectors=vectors)
            arrays = question_arrays(found, base, set(q.evidence), lambda i, m=turn_of: m.get(i, ""))
            rankings = rank_grid(arrays, axes)
            rows.append(grid_recall(arrays, rankings).reshape(len(points), len(KS)).astype(np.float32))
            orders = rankings.order.reshape(len(points), -1)
            valid = rankings.valid.reshape(len(points), -1)
            while pair < len(rows) * len(points):
                at = pair - (len(rows) - 1) * len(points)
                got = [arrays.ids[i] for i in orders[at][valid[at]]]
                expected = [r.record.id for r in engine.order(found, points[at].settings(base))[:max(KS)]]
                measured.checked += 1
                measured.differing += expected != got
                pair += check_every
    engine.settings = base
    measured.tables.append(np.stack(rows))
    measured.ways.extend(Way(fmt.name, vectors, point) for point in points)


@dataclass(frozen=True, slots=True)
class LooSummary:
    per_conversation: np.ndarray  # [conversations, len(KS)] held-out recall, percent
    multi_hop: np.ndarray  # [conversations] held-out multi-hop recall@10, percent (nan: none asked)
    pooled: np.ndarray  # [len(KS)] over every held-out question, percent
    pooled_multi_hop: float
    result: LooResult


def loo(measured: Measured, offered: Sequence[int]) -> LooSummary:
    result = leave_one_out(measured.results, measured.conversation, offered)
    convs = sorted(set(measured.conversation.tolist()))
    held = result.held_out * 100
    k10 = KS.index(10)
    multi: list[float] = []
    for c in convs:
        asked = (measured.conversation == c) & (measured.category == MULTI_HOP)
        multi.append(float(held[asked, k10].mean()) if asked.any() else math.nan)
    per = np.array([held[measured.conversation == c].mean(axis=0) for c in convs])
    mh = measured.category == MULTI_HOP
    return LooSummary(per, np.array(multi), held.mean(axis=0), float(held[mh, k10].mean()) if mh.any() else math.nan,
                      result)


def spread(values: np.ndarray) -> str:
    values = values[~np.isnan(values)]
    if not len(values):
        return "n/a"
    std = statistics.pstdev(values.tolist()) if len(values) > 1 else 0.0
    return f"{values.mean():.1f} (min {values.min():.1f} max {values.max():.1f} std {std:.1f})"


def loo_lines(summary: LooSummary) -> list[str]:
    lines = [f"  held-out recall@{k}: mean {spread(summary.per_conversation[:, j])}; pooled {summary.pooled[j]:.1f}"
             for j, k in enumerate(KS)]
    lines.append(f"  held-out multi-hop@10: mean {spread(summary.multi_hop)}; pooled {summary.pooled_multi_hop:.1f}")
    return lines


Row = tuple[str, str, LooSummary, LooSummary]


def ablation_rows(measured: Measured, vectors: bool) -> list[Row]:
    """(lever, what 'on' means, LOO with it on, LOO with it off); everything else chosen by LOO too, within
    the default document format unless the lever is the format. ``vectors``: the embedder ran."""
    default = DEFAULT_FORMAT.name
    rows: list[Row] = []

    def row(lever: str, meaning: str, on: Callable[[Way], bool], off: Callable[[Way], bool]) -> None:
        on_ways, off_ways = measured.where(on), measured.where(off)
        if on_ways and off_ways:
            rows.append((lever, meaning, loo(measured, on_ways), loo(measured, off_ways)))

    def main(way: Way) -> bool:
        return way.fmt == default and way.vectors == vectors

    row("neighbours", "share of a neighbour's score > 0",
        lambda w: main(w) and w.point.neighbour_share > 0, lambda w: main(w) and w.point.neighbour_share == 0)
    row("neighbours two or more away", "width >= 2 (vs width 1)",
        lambda w: main(w) and w.point.neighbour_share > 0 and w.point.neighbour_width >= 2,
        lambda w: main(w) and w.point.neighbour_share > 0 and w.point.neighbour_width == 1)
    row("graph expansion", "graph share > 0 (observations stand in)",
        lambda w: main(w) and w.point.graph_share > 0, lambda w: main(w) and w.point.graph_share == 0)
    row("graph: the best's beings too", "from best 5 (vs names in the query only)",
        lambda w: main(w) and w.point.graph_share > 0 and w.point.graph_from_best > 0,
        lambda w: main(w) and w.point.graph_share > 0 and w.point.graph_from_best == 0)
    row("graph: two hops", "hops 2 (vs 1)",
        lambda w: main(w) and w.point.graph_share > 0 and w.point.graph_hops == 2,
        lambda w: main(w) and w.point.graph_share > 0 and w.point.graph_hops == 1)
    row("query dates", "date boost > 1",
        lambda w: main(w) and w.point.date_boost > 1, lambda w: main(w) and w.point.date_boost == 1)
    row("recency", "half-life > 0",
        lambda w: main(w) and w.point.half_life_days > 0, lambda w: main(w) and w.point.half_life_days == 0)
    if vectors:
        row("BM25 in the blend", "bm25 weight > 0",
            lambda w: main(w) and w.point.vector_weight < 1, lambda w: main(w) and w.point.vector_weight == 1)
        row("embedder", "vectors+BM25 (vs BM25 alone)", main, lambda w: w.fmt == default and not w.vectors)

    def formatted(name: str) -> Callable[[Way], bool]:
        return lambda w: w.fmt == name and w.vectors == vectors

    # Each part of the default document format, taken out alone.
    for lever, off in (("speaker in the text", "date+previous"), ("session date in the text", "speaker+previous"),
                       ("previous turn in the text", "date+speaker")):
        row(lever, f"{default} vs {off}", formatted(default), formatted(off))
    return rows


def ablation_table(rows: Sequence[Row]) -> list[str]:
    out = [f"  {'lever':<28} {'on means':<46} {'LOO on: @5 @10 @25 @50 mh@10':<30} {'LOO off':<30} "
           "effect @10 / mean@k"]
    for lever, meaning, on, off in rows:
        cells = [" ".join(f"{s.pooled[j]:.1f}" for j in range(len(KS))) + f" {s.pooled_multi_hop:.1f}"
                 for s in (on, off)]
        k10 = KS.index(10)
        effect = on.pooled[k10] - off.pooled[k10]
        mean_effect = float(on.pooled.mean() - off.pooled.mean())
        out.append(f"  {lever:<28} {meaning:<46} {cells[0]:<30} {cells[1]:<30} {effect:+.1f} / {mean_effect:+.1f}")
    return out


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
_ASKED_WHEN = ("", " last week", " yesterday", " in May", "")


def synthetic_texts(n: int, rng: random.Random) -> list[str]:
    return [f"{rng.choice(_NAMES)} {rng.choice(_VERBS)} {rng.choice(_THINGS)} {rng.choice(_PLACES)} "
            f"{rng.choice(_WHEN)} (note {i})" for i in range(n)]


def random_unit_vectors(n: int, dim: int, rng: random.Random) -> list[Vector]:
    values = np.random.default_rng(rng.randrange(2**32)).standard_normal((n, dim))
    values /= np.linalg.norm(values, axis=1, keepdims=True)
    return values.tolist()


def synthetic_graph(person: str, records: Sequence[MemoryRecord], now: datetime) -> PersonGraph:
    """The latency person's graph: each memory's name did its thing, and did it at its place; the names and
    things are hubs (hundreds of relations each), each thing-at-a-place a few dozen. Built as rows, not grown:
    growing 20,000 relations one at a time would take minutes, and only reading it is timed."""
    entities: dict[str, Entity] = {}
    relations: list[Relation] = []

    def entity(name: str, kind: EntityKind | None) -> str:
        eid = entity_id(person, name_key(name))
        entities.setdefault(eid, Entity(eid, person, name, kind, now))
        return eid

    for r in records:
        name, rest = r.text.split(" ", 1)
        verb = next(v for v in _VERBS if rest.startswith(v + " "))
        rest = rest[len(verb) + 1:]
        thing = next(t for t in _THINGS if rest.startswith(t))
        place = next(p for p in _PLACES if rest[len(thing) + 1:].startswith(p))
        subject = entity(name, EntityKind.PERSON)
        for relation, obj in ((verb, entity(thing, EntityKind.THING)),
                              ("did it " + place, entity(f"{thing} {place}", EntityKind.EVENT))):
            relations.append(Relation(relation_id(person, subject, relation, obj, r.id), person, subject, relation,
                                      relation, obj, r.evidence, r.evidence, r.sources, r.scope, r.created_at,
                                      now, memory_id=r.id))
    return PersonGraph(person, entities.values(), relations)


async def synthetic_latency(store: MemoryStore, settings: RecallSettings, n: int, queries: int, dim: int,
                            seed: int, reranker: CrossEncoderReranker | None = None
                            ) -> tuple[list[float], list[float], list[float]]:
    """Times (ms) of ``queries`` recalls for one person with ``n`` memories: (whole, embedding, search)."""
    rng = random.Random(seed)
    now = datetime(2026, 11, 20, 12, tzinfo=UTC)
    person = "synthetic:10k"
    texts = synthetic_texts(n, rng)
    space = store.vector_source.space
    stored: list[MemoryRecord] = []
    for start in range(0, n, EMBED_CHUNK * 4):
        chunk = texts[start:start + EMBED_CHUNK * 4]
        vectors = Vectors(random_unit_vectors(len(chunk), dim, rng), space)
        records = []
        for offset, text in enumerate(chunk):
            when = now - timedelta(days=rng.uniform(0, 720))
            records.append(MemoryRecord(
                id=f"m_syn_{start + offset}", person=person, kind=MemoryKind.FACT, text=text, evidence=(text,),
                sources=(Source("console", "syn", str(start + offset), when),),
                scope=Scope.DM if rng.random() < 0.7 else Scope.SHARED, importance=rng.uniform(0.2, 0.9),
                created_at=when, updated_at=when))
        await store.add_memories(records, vectors)
        stored.extend(records)
    graphs = Graphs()
    graphs.by_person[person] = synthetic_graph(person, stored, now)
    engine = RecallEngine(store, settings, lambda: now, reranker=reranker, graph=graphs)
    whole: list[float] = []
    embed: list[float] = []
    search: list[float] = []
    for i in range(queries):
        query = (f"what did {rng.choice(_NAMES)} do with {rng.choice(_THINGS)} {rng.choice(_PLACES)}"
                 f"{rng.choice(_ASKED_WHEN)}? ({i})")
        for times, step in ((whole, engine.search), (embed, None), (search, engine.search)):
            started = time.perf_counter()
            if step is None:  # the embedding alone, past the query cache
                await store.vectors([query + " "])
            else:  # the first search embeds the new query; the second finds it cached
                await step(person, query, limit=settings.max_items + settings.pinned_max, shared_only=bool(i % 2),
                           budget_s=None)
            times.append((time.perf_counter() - started) * 1000)
    await engine.close()
    return whole, embed, search


def latency_line(label: str, values: Sequence[float]) -> str:
    return (f"{label} p50={percentile(values, 50):.1f} ms p95={percentile(values, 95):.1f} ms n={len(values)}")


# --- the run ----------------------------------------------------------------------------
async def open_embedders(args: argparse.Namespace) -> tuple[CachedEmbedder | None, EmbedderStatus]:
    settings = Settings(memory=MemorySettings(embedder=args.embedder))
    embedder, status = await open_embedder(settings)
    if embedder is None:
        return None, status
    extra = []
    for _ in range(max(0, args.embed_workers - 1)):
        more, more_status = await open_embedder(settings)
        if more is not None and more_status.ready:
            extra.append(more)
    return CachedEmbedder([embedder, *extra], read_vector_cache(args.vector_cache, embedder.name)), status


async def run(args: argparse.Namespace) -> int:
    started_run = time.perf_counter()
    convs = load(Path(args.data), args.limit_conversations)
    questions = sum(len(c.questions) for c in convs)
    turns = sum(len(c.turns) for c in convs)
    print(f"LoCoMo: {len(convs)} conversations, {turns} turns, {questions} questions with evidence; "
          f"embedder {args.embedder}; reranker {args.reranker or 'none'}; seed {args.seed}", flush=True)
    embedder, status = await open_embedders(args)
    print(status.line(), flush=True)
    reranker, reranker_status = await open_reranker(args.reranker)
    if args.reranker and reranker is None:
        print(f"the reranker is not ready: {reranker_status}", file=sys.stderr)
        return 2
    if args.embedder != "none" and embedder is None:
        print("the embedder is not ready; measuring it would measure BM25 twice", file=sys.stderr)
        return 2
    if embedder is not None and args.vector_cache is not None:
        print(f"vectors cached from earlier runs: {len(embedder.cache)} (document embedding time not measured)",
              flush=True)
    settings = Settings(memory=MemorySettings(embedder=args.embedder))
    recall = RecallSettings()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="kith-locomo-") as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'kith.db'}")
        create_schema(db)
        store = await MemoryStore.open(settings.memory, Path(tmp), embedder, status, changes=ChangeLog(db))
        try:
            started = time.perf_counter()
            if embedder is not None:  # every document at once: the copies of the embedder share the work
                await embedder.prepare([d for c in convs for d in documents(c, DEFAULT_FORMAT)])
            fallback = 0
            for conv in convs:
                fallback += await store_turns(store, conv, DEFAULT_FORMAT)
            print(f"stored {turns} turns in {time.perf_counter() - started:.0f} s"
                  + (f" ({fallback} with the hashed fallback vector)" if fallback else ""), flush=True)
            started = time.perf_counter()
            graphs = Graphs()
            names, relations = grow_graphs(graphs, convs, DEFAULT_FORMAT)
            print(f"{STAND_IN}: {sum(len(c.observations) for c in convs)} observations, {names} names, "
                  f"{relations} relations, grown by PersonGraph.grow in {time.perf_counter() - started:.0f} s",
                  flush=True)
            clock = MutableClock(datetime.now(UTC))
            engine = RecallEngine(store, recall, clock, query_cache=max(512, questions + 16), reranker=reranker,
                                  graph=graphs)
            latencies: list[float] = []
            scores = await ask_all(engine, clock, convs, DEFAULT_FORMAT, use_vectors=True, latencies=latencies)
            lexical = await ask_all(engine, clock, convs, DEFAULT_FORMAT, use_vectors=False)
            for k in KS:
                print(scores.line(k), flush=True)
            for k in KS:
                print(lexical.line(k, " bm25-only"), flush=True)
            print("reference DRAGON (LoCoMo paper): " + " ".join(f"recall@{k}={v:.1f}" for k, v in DRAGON.items()))
            print("vs DRAGON: " + " ".join(
                f"@{k} {scores.overall(k) - DRAGON[k]:+.1f}" for k in KS))
            print(latency_line("recall latency (LoCoMo, top 50, query embedding included)", latencies), flush=True)
            defaults = Way(DEFAULT_FORMAT.name, embedder is not None, default_point(recall))
            print(f"kith's defaults: {defaults.describe()}", flush=True)
            if not args.no_loo and len(convs) > 1:
                await leave_one_out_report(engine, clock, store, embedder, convs, rng)
            if args.synthetic > 0:
                started = time.perf_counter()
                dim = status.dim or 384
                total, embed, search = await synthetic_latency(store, recall, args.synthetic,
                                                               args.synthetic_queries, dim, args.seed, reranker)
                p95 = percentile(total, 95)
                target = LATENCY_TARGET_MS if reranker is None else RERANKED_LATENCY_TARGET_MS
                print(latency_line(f"recall latency ({args.synthetic} memories of one person, top "
                                   f"{recall.max_items + recall.pinned_max}, query embedding included"
                                   + (f", reranking the best {recall.rerank_top}" if reranker else "") + ")", total)
                      + f" target p95<={target:.0f} ms: {verdict(p95, target)}"
                      + f" (setup {time.perf_counter() - started:.0f} s)", flush=True)
                print("  apart: " + latency_line("query embedding", embed) + "; "
                      + latency_line("search, embedding cached", search), flush=True)
            await engine.close()  # last: closing an engine closes its reranker, which the latency person uses too
        finally:
            if reranker is not None:
                await reranker.close()
            await store.close()
            db.close()
            if embedder is not None:
                write_vector_cache(args.vector_cache, embedder.name, embedder.cache)
    print(f"whole run {time.perf_counter() - started_run:.0f} s", flush=True)
    return 0


def default_point(recall: RecallSettings) -> Point:
    return Point(recall.vector_weight / max(1e-9, recall.vector_weight + recall.bm25_weight),
                 recall.half_life_days, recall.neighbour_share, recall.neighbour_width, recall.date_boost,
                 recall.graph_share, recall.graph_hops, recall.graph_from_best)


async def leave_one_out_report(engine: RecallEngine, clock: MutableClock, store: MemoryStore,
                               embedder: CachedEmbedder | None, convs: Sequence[Conversation], rng: random.Random
                               ) -> None:
    started = time.perf_counter()
    conversation = np.array([i for i, c in enumerate(convs) for _q in c.questions])
    category = np.array([q.category for c in convs for q in c.questions])
    measured = Measured(conversation, category)
    vectors = embedder is not None
    for fmt in FORMATS:
        if fmt != DEFAULT_FORMAT:
            if embedder is not None:
                await embedder.prepare([d for c in convs for d in documents(c, fmt)])
            for conv in convs:
                await store_turns(store, conv, fmt)
        await measure_grid(engine, clock, convs, fmt, measured, vectors=vectors, rng=rng)
        if fmt == DEFAULT_FORMAT and vectors:
            await measure_grid(engine, clock, convs, fmt, measured, vectors=False, rng=rng)
        print(f"  measured {fmt.name}: {time.perf_counter() - started:.0f} s", flush=True)
    print(f"leave-one-conversation-out: {len(convs)} folds; grid: vector weight {VECTOR_WEIGHTS} (BM25 = 1 - it), "
          f"half-life {HALF_LIVES} days, neighbour share {NEIGHBOUR_SHARES} x width {NEIGHBOUR_WIDTHS}, date boost "
          f"{DATE_BOOSTS}, graph (share, hops, from best) {GRAPH_POINTS} with {DEFAULT_FORMAT.name} only; "
          f"document formats {', '.join(f.name for f in FORMATS)}; objective: mean "
          f"recall@5/10/25/50 on the other conversations' questions; {len(measured.ways)} ways ranked "
          f"({time.perf_counter() - started:.0f} s)", flush=True)
    print(f"  fast ranking checked against RecallEngine.order on {measured.checked} (question, setting) pairs: "
          f"{measured.differing} differ", flush=True)
    everything = measured.where(lambda w: w.vectors == vectors)
    summary = loo(measured, everything)
    print("LOO, every lever and document format chosen on the other conversations:", flush=True)
    for line in loo_lines(summary):
        print(line, flush=True)
    for held, way in summary.result.chosen.items():
        print(f"  chosen for {convs[held].sample_id} (held out): {measured.ways[way].describe()}", flush=True)
    print(f"  best on all {len(convs)} conversations at once: "
          f"{measured.ways[best_on_all(measured.results, everything)].describe()}", flush=True)
    defaults = Way(DEFAULT_FORMAT.name, vectors, default_point(engine.settings))
    if defaults in measured.ways:
        fixed = measured.results[measured.ways.index(defaults)].mean(axis=0) * 100
        print("  kith's defaults, fixed (no choice): " + " ".join(f"@{k}={fixed[j]:.1f}" for j, k in enumerate(KS)),
              flush=True)
    print("targets (LOO pooled): " + " ".join(
        f"@{k}>={TARGETS[k]:.0f}: {'met' if summary.pooled[j] >= TARGETS[k] else 'not met'}"
        for j, k in enumerate(KS))
        + f"; multi-hop@10>={MULTI_HOP_TARGET:.0f}: "
        + ("met" if summary.pooled_multi_hop >= MULTI_HOP_TARGET else "not met"), flush=True)
    print("ablation (LOO pooled with the lever on vs off, everything else chosen on the other conversations; "
          "the grid ranks without a reranker):", flush=True)
    for line in ablation_table(ablation_rows(measured, vectors)):
        print(line, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER,
                        help="a memory.embedder value, or none for BM25 only")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help="the latency person's memories and queries, and which rankings are checked")
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--synthetic", type=int, default=10_000, help="memories of the latency person (0: skip)")
    parser.add_argument("--synthetic-queries", type=int, default=200)
    parser.add_argument("--reranker", default="",
                        help="a cross-encoder checkpoint directory ([memory] reranker): the main run and the latency "
                             "person rerank with it (the leave-one-out grid ranks without it)")
    parser.add_argument("--no-loo", action="store_true", help="skip leave-one-conversation-out and the ablations")
    parser.add_argument("--embed-workers", type=int, default=2, help="copies of the embedder embedding documents")
    parser.add_argument("--vector-cache", type=Path, default=None,
                        help="a file keeping document vectors across runs (development)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    return loop.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
