"""The recall engine: one person's memories and staged notes that match a query, ranked.

Both paths run for every query, in one store lookup: BM25 over the person's active memories
and, when an embedder vector for the query is at hand, their nearest neighbours. The store
keeps both indexes and the records in memory; with its change log it answers without a Chroma
call, after re-reading whatever another process changed (so a memory forgotten with
``bot.py memory forget`` never reaches a prompt; see :mod:`memory.store.reads`). A group chat asks
the store for shared memories only, so nothing private is fetched and then thrown away.
Staged notes (each day's raw captures, not yet curated by the gate) are matched the same way,
with BM25 over the person's unpromoted notes and cosines from note vectors this engine keeps.
:mod:`memory.recall.ranking` blends and orders them.

Around the candidates, the engine looks up who was said near each in the same chat (the store's
chat timelines) and fetches those neighbours of each path's best that neither path found: the
reply to a message that matched often carries the answer in other words. The times the query
names ("last week", "on 8 May") are resolved against the clock (:mod:`memory.recall.when`). A search is
:meth:`RecallEngine.gather` (everything that may rank) then :meth:`RecallEngine.order` (the
ranking under the settings), so a benchmark can order one gathering under many settings.

With the person's graph (``graph``, any :class:`GraphSource`), the beings the query names and those the best
candidates' relations touch select the memories their relations came from (:mod:`memory.recall.graph_reach`):
those join the candidates, and the relations that brought the shown ones in come back with them
(:attr:`RecallResult.relations`) for the prompt to show as the person's own words. The query's
embedding has a time budget (:mod:`memory.recall.query_vectors`): nothing here ever blocks a reply on the embedder.

Isolation is enforced here for every caller: only ``person``'s records, only live ones
(active and not past their horizon: superseded, retired and forgotten memories never come
back), and with ``shared_only`` (a group chat) nothing said in a private chat: neither a memory nor a relation
of the graph said there. Only ``person``'s own graph is read.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from ground.config import RecallSettings
from ground.tunables import (
    RECALL_GRAPH_HUB,
    RECALL_NOTE_VECTOR_CACHE,
    RECALL_PINNED_READ_SHARE,
    RECALL_PINNED_REFRESH_S,
    RECALL_POOL_FACTOR,
    RECALL_POOL_MIN,
    RECALL_QUERY_CACHE,
    RECALL_QUERY_MAX_CHARS,
)
from memory.core.bm25 import BM25Index, normalize_scores
from memory.core.graph_records import Relation
from memory.core.records import MemoryRecord, Scope, Status, horizon_expiry
from memory.core.text import normalize
from memory.core.vector_table import cosine
from memory.encoders.reranker import CrossEncoderReranker, reranked
from memory.graph.view import PersonGraph
from memory.recall.graph_reach import GraphGroup, GraphReach, by_memory, reach, shown_relations
from memory.recall.query_vectors import QueryVectors, VectorCache
from memory.recall.ranking import (
    LookupMatches,
    Ranked,
    RecallMatch,
    latest_pinned,
    lookup_matches,
    memory_matches,
    rank,
)
from memory.recall.when import Window, query_windows
from memory.store.notes import Note
from memory.store.reads import MemoryReads
from memory.store.vectors import HASH_SPACE, Vectors
from persona.labels import EMBEDDING_LATE, KEYWORDS_AS_ASKED, NO_VECTORS_YET

log = logging.getLogger("kith.memory.recall")


class GraphSource(Protocol):
    """Where a person's graph is read (:class:`memory.graph.book.GraphBook`; a benchmark's graphs in memory)."""

    async def of(self, person: str) -> PersonGraph: ...


@dataclass(frozen=True, slots=True)
class Gathered:
    """What one search found before it is ordered (:meth:`RecallEngine.order` ranks it under any settings)."""

    matches: list[RecallMatch]
    neighbours: dict[str, dict[str, int]]  # by id, the memories said near it and how many places away
    fetched: frozenset[str]  # ids found only as someone's neighbour, beyond both paths' pools
    windows: tuple[Window, ...]  # the times the query names
    now: datetime
    vector_path: bool  # embedder cosines take part
    reason: str  # why not, when they do not
    started: float  # perf_counter at the start of the search
    graph_groups: tuple[GraphGroup, ...] = ()  # the beings the query selected in the person's graph
    graph_fetched: frozenset[str] = frozenset()  # ids found only through the graph
    graph_relations: dict[str, list[tuple[str, Relation]]] = field(default_factory=dict)  # see GraphReach
    graph: PersonGraph | None = None  # the person's graph as this gathering read it


@dataclass(frozen=True, slots=True)
class RecallResult:
    items: list[Ranked]
    lexical_only: bool  # no embedder cosine took part in this ranking
    reason: str = ""  # why, when lexical_only
    elapsed_ms: float = 0.0
    # The relations of the person's graph that brought the items in, best first (at most [recall] graph_relations)
    relations: list[Relation] = field(default_factory=list)
    graph: PersonGraph | None = None  # the graph they came from: the names of their ends (no second read)


def visible(record: MemoryRecord, person: str, now: datetime, *, shared_only: bool) -> bool:
    """The isolation rule every recall obeys."""
    if record.person != person or not record.is_live(now):
        return False
    return not shared_only or record.scope is Scope.SHARED


def note_is_live(note: Note, now: datetime) -> bool:
    """A staged note is recallable until the gate handled it or its horizon lapsed."""
    if note.promoted_at is not None or note.record.status is not Status.ACTIVE:
        return False
    expires = note.record.expires_at or horizon_expiry(note.horizon, note.record.created_at)
    return expires is None or expires > now


@dataclass(slots=True)
class RecallCounts:
    """What recall did since start, for people with something a query vector could find or not (kith's own
    counters: benchmarks read them, nothing parses logs)."""

    searches: int = 0
    embedded: int = 0  # searches that asked for the query's vector
    fell_back: int = 0  # of those, the vector was late (or the embedder failed): keywords alone
    slots_started: int = 0  # prompt memory parts begun (:class:`memory.recall.prompt_part.RecallMemoryContext`)
    slots_finished: int = 0  # and finished: the rest were cut off by the reply's timeout (or failed)
    slots_shrunk: int = 0  # of those finished, out of time: answered from keywords as the index held them

    def line(self) -> str:
        return (f"searches={self.searches} embedded={self.embedded} fell_back={self.fell_back} "
                f"slots_shrunk={self.slots_shrunk} slots_cut={self.slots_started - self.slots_finished}")


class RecallEngine:
    def __init__(self, store: MemoryReads, settings: RecallSettings, clock: Callable[[], datetime], *,
                 query_cache: int = RECALL_QUERY_CACHE, note_cache: int = RECALL_NOTE_VECTOR_CACHE,
                 reranker: CrossEncoderReranker | None = None, graph: GraphSource | None = None) -> None:
        self.store = store
        self.graph = graph  # the people's graphs; None: recall without them
        # Each graph's relations by memory (graph_reach.by_memory), kept while that graph object lives: the graph
        # source's own cache decides how long, and a graph it reads again is a new object, indexed anew.
        self._graph_indexes: weakref.WeakKeyDictionary[PersonGraph, dict[str, list[Relation]]] = (
            weakref.WeakKeyDictionary())
        self.settings = settings
        self.clock = clock
        # Rereads the query with each of the best and reorders them ([memory] reranker); closed with the engine.
        self.reranker = reranker
        self._reranking: asyncio.Future[list[float]] | None = None  # the cross-encoder's job under way, if any
        self.queries = QueryVectors(store, query_cache)
        self._note_vectors = VectorCache(note_cache)
        self._note_jobs: set[asyncio.Task[None]] = set()
        self._notes_embedding: set[str] = set()  # note ids whose embedding is under way
        self._pinned: dict[str, tuple[float, list[MemoryRecord]]] = {}  # person -> (re-read after, pins)
        self._pinned_jobs: dict[str, asyncio.Task[list[MemoryRecord]]] = {}
        # By whether the person had something a query vector could find (unknown counts as yes).
        self.counts = {True: RecallCounts(), False: RecallCounts()}

    def vectors_held(self, person: str, *, shared_only: bool) -> bool:
        """Whether ``person`` has anything a query vector could find in this chat (:meth:`MemoryReads.vectors_held`;
        not known without a read counts as yes). O(1), reads nothing."""
        if not self.store.vector_source.ready:
            return False
        held = self.store.vectors_held(person, self.store.vector_source.space,
                                       scope=Scope.SHARED if shared_only else None)
        return held is not False

    async def close(self) -> None:
        if self.reranker is not None:
            await self.reranker.close()
        await self.queries.close()
        jobs = [*self._note_jobs, *self._pinned_jobs.values()]
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)

    async def settle(self) -> None:
        """Wait for the background embeddings this engine started (tests and benchmarks)."""
        await self.queries.wait_idle()
        while self._note_jobs:
            await asyncio.gather(*self._note_jobs, return_exceptions=True)

    # --- searching ----------------------------------------------------------------------
    async def search(self, person: str, query: str, *, limit: int, shared_only: bool,
                     budget_s: float | None, min_relevance: float = 0.0, use_vectors: bool = True,
                     include_notes: bool = True) -> RecallResult:
        """The ``limit`` best live records of ``person`` for ``query``.

        ``budget_s``: how long the query embedding may take (``None``: wait for it).
        """
        found = await self.gather(person, query, limit=limit, shared_only=shared_only, budget_s=budget_s,
                                  use_vectors=use_vectors, include_notes=include_notes)
        ranked = self.order(found, min_relevance=min_relevance)
        if self.reranker is not None and self.settings.rerank_top > 1 and len(ranked) > 1:
            ranked = await self._reranked(query, ranked)
        shown = ranked[:limit]
        relations = shown_relations([r.record.id for r in shown if r.graph > 0 or r.graph_relevance > 0],
                                    found.graph_relations, self._counting(found), self.settings.graph_relations)
        elapsed = (time.perf_counter() - found.started) * 1000
        log.debug("recall person=%s candidates=%d neighbours=%d graph=%d windows=%d results=%d vector=%s ms=%.1f",
                  person, len(found.matches), len(found.fetched), len(found.graph_fetched), len(found.windows),
                  len(shown), found.vector_path, elapsed)
        return RecallResult(shown, not found.vector_path, found.reason, elapsed, relations,
                            found.graph if relations else None)

    async def _reranked(self, query: str, ranked: list[Ranked]) -> list[Ranked]:
        """``ranked`` with its best few reordered by the cross-encoder; as it was when the reranker fails or
        takes longer than its budget (it runs on, and the next query waits its turn behind it)."""
        assert self.reranker is not None
        if self._reranking is not None and not self._reranking.done():
            # An earlier query's scores are still being computed past their budget: queueing behind them
            # would put this reply over its budget too.
            log.info("rerank skipped: the cross-encoder is still busy")
            return ranked
        top = ranked[: self.settings.rerank_top]
        started = time.perf_counter()
        job = self._reranking = asyncio.ensure_future(
            self.reranker.scores(query[:RECALL_QUERY_MAX_CHARS], [r.record.text for r in top]))
        job.add_done_callback(_retrieve_quietly)
        try:
            scores = await asyncio.wait_for(asyncio.shield(job), self.settings.rerank_budget_ms / 1000)
        except TimeoutError:
            log.info("rerank over budget candidates=%d ms=%.0f", len(top), (time.perf_counter() - started) * 1000)
            return ranked
        except Exception as exc:  # a model that fails now is recall's own order, never a failed reply
            log.warning("rerank failed error=%s", type(exc).__name__)
            return ranked
        return reranked(ranked, scores)

    def order(self, found: Gathered, settings: RecallSettings | None = None, *,
              min_relevance: float = 0.0) -> list[Ranked]:
        """What :meth:`gather` found, best first under ``settings`` (the engine's own by default)."""
        settings = settings or self.settings
        width = settings.neighbour_width if settings.neighbour_share > 0 else 0
        neighbours = {memory_id: [other for other, steps in around.items() if steps <= width]
                      for memory_id, around in found.neighbours.items()} if width > 0 else {}
        # A memory there only as a neighbour stays only while it is near enough under these settings.
        near = {memory_id for memory_id in found.fetched if neighbours.get(memory_id)}
        groups = self._counting(found, settings)
        # ... and one there only through the graph while a being that reaches it counts under them.
        reached = {memory_id for g in groups for memory_id in g.members} if found.graph_fetched else set()
        matches = [m for m in found.matches if (m.record.id not in found.fetched or m.record.id in near)
                   and (m.record.id not in found.graph_fetched or m.record.id in reached)]
        return rank(matches, found.now, settings, vector_path=found.vector_path, min_relevance=min_relevance,
                    windows=found.windows, neighbours=neighbours, graph_groups=[g.members for g in groups],
                    # Everything gathered lends: under the engine's own settings that is what it keeps; only a
                    # benchmark ordering one gathering under narrower neighbours keeps fewer.
                    graph_lenders=found.matches)

    def _counting(self, found: Gathered, settings: RecallSettings | None = None) -> list[GraphGroup]:
        """The graph's groups that take part under ``settings``."""
        settings = settings or self.settings
        if settings.graph_share <= 0:
            return []
        return [g for g in found.graph_groups if g.counts(settings.graph_hops, settings.graph_from_best)]

    async def gather(self, person: str, query: str, *, limit: int, shared_only: bool, budget_s: float | None,
                     use_vectors: bool = True, include_notes: bool = True) -> Gathered:
        """Every live record of ``person`` that may rank for ``query``: both paths' candidates, their
        neighbours in their chats (when ``neighbour_share`` is on), the memories the beings the query selects in
        the person's graph came from (when ``graph_share`` is on), and the times the query names."""
        started = time.perf_counter()
        query = query[:RECALL_QUERY_MAX_CHARS]
        now = self.clock()
        pool = max(RECALL_POOL_MIN, limit * RECALL_POOL_FACTOR)
        # Three threads at once: the embedder embeds the query, Chroma's thread reads the staged notes,
        # and this one catches up with other processes and runs BM25 before it needs the vector.
        notes_job = asyncio.ensure_future(self.store.notes_of(person, unpromoted_only=True) if include_notes
                                          else _no_notes())
        held = self.vectors_held(person, shared_only=shared_only)
        counts = self.counts[held]
        counts.searches += 1
        # Nothing a vector could find (no memory or staged note of theirs with one, that this chat may see):
        # no embedding, no wait.
        vector_job = asyncio.ensure_future(self.queries.get(query, budget_s)) if use_vectors and held else None
        counts.embedded += vector_job is not None
        try:
            hits, lexical = await self.store.lookup(person, vectors=vector_job, query=query, k=pool,
                                                    scope=Scope.SHARED if shared_only else None)
            notes = await notes_job
        except BaseException:
            jobs = [job for job in (notes_job, vector_job) if job is not None]
            for job in jobs:
                job.cancel()
            await asyncio.gather(*jobs, return_exceptions=True)
            raise
        vectors = vector_job.result() if vector_job is not None else None
        counts.fell_back += vector_job is not None and vectors is None
        found = lookup_matches(hits, lexical, lambda r: visible(r, person, now, shared_only=shared_only))
        live_notes = [n for n in notes if note_is_live(n, now) and visible(n.record, person, now,
                                                                             shared_only=shared_only)]
        note_matches = self._note_matches(live_notes, query, vectors, found.records)
        vector_path = bool(found.cosines) or any(c.cosine is not None for c in note_matches)
        matches = memory_matches(found, vector_path=vector_path)
        neighbours, fetched = await self._neighbours(person, found, now, limit, shared_only=shared_only)
        if fetched:
            # Beyond the pools: a cosine at most the vector pool's lowest, as for any record it did not reach.
            floor = min(found.cosines.values()) if found.cosines else 0.0
            matches.extend(RecallMatch(r, floor if vector_path else None, 0.0) for r in fetched.values())
        graph, through_graph = await self._graph_reach(person, query, found, fetched, now, limit,
                                                       shared_only=shared_only)
        if through_graph:
            floor = min(found.cosines.values()) if found.cosines else 0.0
            matches.extend(RecallMatch(r, floor if vector_path else None, 0.0) for r in through_graph.values())
        matches.extend(c if vector_path else replace(c, cosine=None) for c in note_matches)
        reason = "" if vector_path else self._lexical_reason(use_vectors, vector_job is not None, vectors)
        return Gathered(matches, neighbours, frozenset(fetched), query_windows(query, now), now, vector_path,
                        reason, started, tuple(graph.groups), frozenset(through_graph), graph.relations, graph.graph)

    async def _graph_reach(self, person: str, query: str, found: LookupMatches, fetched: dict[str, MemoryRecord],
                           now: datetime, limit: int, *, shared_only: bool
                           ) -> tuple[GraphReach, dict[str, MemoryRecord]]:
        """What ``person``'s graph selects for ``query`` and the memories it reaches that nothing else found (at
        most ``limit``, the most specific beings' first). A graph that cannot be read is recall without it."""
        rs = self.settings
        if self.graph is None or rs.graph_share <= 0 or rs.graph_hops <= 0:
            return GraphReach(), {}
        try:
            graph = await self.graph.of(person)
        except Exception as exc:  # a reply never fails on the graph
            log.warning("graph unreadable person=%s error=%s", person, type(exc).__name__)
            return GraphReach(), {}
        if graph.person != person or not graph.relations:  # another person's graph: never
            return GraphReach(), {}
        index = self._graph_indexes.get(graph)
        if index is None:
            index = self._graph_indexes[graph] = by_memory(graph)
        candidates = found.records | fetched
        found_reach = reach(graph, index, query, _best_first(found, rs.graph_from_best), candidates,
                            hops=rs.graph_hops, from_best=rs.graph_from_best, shared_only=shared_only,
                            hub=RECALL_GRAPH_HUB, fetch_max=limit)
        if not found_reach.fetch:
            return found_reach, {}
        records = await self.store.records_of(person, found_reach.fetch)
        return found_reach, {r.id: r for r in records if visible(r, person, now, shared_only=shared_only)}

    async def _neighbours(self, person: str, found: LookupMatches, now: datetime, limit: int, *,
                          shared_only: bool) -> tuple[dict[str, dict[str, int]], dict[str, MemoryRecord]]:
        """Who was said near each candidate, how many places away (both ways), and those of them the lookup
        had not found: the neighbours of each path's ``limit`` best, the only ones strong enough to carry a
        memory nobody asked about into the results."""
        rs = self.settings
        if rs.neighbour_share <= 0 or rs.neighbour_width <= 0 or not found.records:
            return {}, {}
        near = await self.store.neighbours(person, found.records, width=rs.neighbour_width,
                                           gap=timedelta(minutes=rs.neighbour_gap_minutes))
        anchors = set(heapq.nlargest(limit, found.cosines, key=found.cosines.__getitem__))
        anchors.update(heapq.nlargest(limit, found.bm25, key=found.bm25.__getitem__))
        fetched: dict[str, MemoryRecord] = {}
        for memory_id in (i for i in found.records if i in anchors):  # the lookup's order, not a set's
            for record, _steps in near.get(memory_id, ()):
                if (record.id not in found.records and record.id not in fetched
                        and visible(record, person, now, shared_only=shared_only)):
                    fetched[record.id] = record
        links: dict[str, dict[str, int]] = {}
        for memory_id, around in near.items():
            for record, steps in around:
                if record.id not in found.records and record.id not in fetched:
                    continue
                for a, b in ((memory_id, record.id), (record.id, memory_id)):
                    mine = links.setdefault(a, {})
                    mine[b] = min(steps, mine.get(b, steps))
        return links, fetched

    def _lexical_reason(self, use_vectors: bool, asked: bool, vectors: Vectors | None) -> str:
        if not use_vectors:
            return KEYWORDS_AS_ASKED
        if not self.store.vector_source.ready:
            return self.store.vector_source.status.line()
        if asked and vectors is None:
            return EMBEDDING_LATE
        return NO_VECTORS_YET

    def _note_matches(self, notes: Sequence[Note], query: str, vectors: Vectors | None,
                      memories: dict[str, MemoryRecord]) -> list[RecallMatch]:
        if not notes:
            return []
        known = {normalize(r.text).casefold() for r in memories.values()}
        notes = [n for n in notes if normalize(n.record.text).casefold() not in known]
        index = BM25Index()
        index.add_many((n.record.id, n.record.text) for n in notes)
        bm25 = dict(normalize_scores(index.search(query, len(notes))))
        out: list[RecallMatch] = []
        missing: list[Note] = []
        for note in notes:
            note_cosine: float | None = None
            if vectors is not None:
                stored = self._note_vectors.get(note.record.id)
                if stored is not None and stored[1] == vectors.space:
                    note_cosine = cosine(vectors.values[0], stored[0])
                else:
                    missing.append(note)
            out.append(RecallMatch(note.record, note_cosine if vectors is not None else None,
                                   bm25.get(note.record.id, 0.0), note=True))
        if missing:
            self._spawn_note_embedding(missing)
        return out

    def _spawn_note_embedding(self, notes: Sequence[Note]) -> None:
        # Notes' vectors are read (or embedded) after this reply, never before it: the next recall has them.
        todo = [n for n in notes if n.record.id not in self._notes_embedding]
        if not todo:
            return
        self._notes_embedding.update(n.record.id for n in todo)
        task = asyncio.get_running_loop().create_task(self._embed_notes(todo), name="recall-notes")
        self._note_jobs.add(task)
        task.add_done_callback(self._note_jobs.discard)

    async def _embed_notes(self, notes: list[Note]) -> None:
        """The notes' vectors into this engine's cache: the ones capture stored with them when they are of the
        embedder's space (read, not embedded again: the embedder is left to the queries replies wait on), the
        rest embedded now."""
        try:
            space = self.store.vector_source.space
            stored = await self.store.note_vectors([n.record.id for n in notes])
            read = {i: value for i, (value, stored_space) in stored.items()
                    if stored_space == space and space != HASH_SPACE}
            for note_id, value in read.items():
                self._note_vectors.put(note_id, (value, space))
            todo = [n for n in notes if n.record.id not in read]
            if not todo:
                return
            vectors = await self.store.vectors([n.record.text for n in todo])
            if vectors.from_embedder:
                for note, value in zip(todo, vectors.values, strict=True):
                    self._note_vectors.put(note.record.id, (value, vectors.space))
        finally:
            self._notes_embedding.difference_update(n.record.id for n in notes)

    async def keywords_soon(self, person: str, query: str, *, limit: int, shared_only: bool, wait_s: float
                            ) -> tuple[list[MemoryRecord], list[MemoryRecord]] | None:
        """Recall shrunk to what needs (almost) no wait: ``person``'s pinned facts and their ``limit`` best memories
        for ``query`` by BM25 alone, straight from their index (no vector, neighbours, notes, graph or reranker), for
        a reply out of time. ``None`` when the index is not built or not current within ``wait_s``
        (:meth:`MemoryReads.held_soon`)."""
        index = await self.store.held_soon(person, wait_s)
        if index is None:
            return None
        now = self.clock()
        scope = Scope.SHARED if shared_only else None
        pinned = latest_pinned([r for i in index.pinned if visible(r := index.records[i], person, now,
                                                                     shared_only=shared_only)],
                               self.settings.pinned_max, now)
        found = [index.records[i] for i, score in index.lexical(query[:RECALL_QUERY_MAX_CHARS], limit * 2, scope)
                 if score > 0 and i in index.records]
        return pinned, [r for r in found if visible(r, person, now, shared_only=shared_only)][:limit]

    # --- pinned facts and conflicts -----------------------------------------------------
    async def pinned(self, person: str, *, shared_only: bool, budget_s: float) -> list[MemoryRecord]:
        """The latest ``pinned_max`` pinned facts of ``person`` visible here, newest first.

        When the store answers from memory (its change log keeps that current across processes)
        the pins are read there on every call. Otherwise the list is re-read from Chroma at most
        every RECALL_PINNED_REFRESH_S (longer for a person with many memories); a re-read slower
        than ``budget_s`` finishes in the background and this reply uses the last list.
        :meth:`forget_pinned` forces a re-read after a pin changed.
        """
        now = self.clock()
        if self.store.answers_from_memory:
            current = await self.store.pinned_of(person)
            shown = [r for r in current if visible(r, person, now, shared_only=shared_only)]
            return latest_pinned(shown, self.settings.pinned_max, now)
        entry = self._pinned.get(person)
        if entry is None or time.monotonic() > entry[0]:
            job = self._pinned_jobs.get(person)
            if job is None:
                job = asyncio.get_running_loop().create_task(self._read_pinned(person), name="recall-pinned")
                self._pinned_jobs[person] = job
            done, _ = await asyncio.wait({job}, timeout=max(0.0, budget_s))
            if not done:
                log.info("pinned facts re-read over budget person=%s; using the last list", person)
            entry = self._pinned.get(person)
        records = entry[1] if entry is not None else []
        shown = [r for r in records if visible(r, person, now, shared_only=shared_only)]
        return latest_pinned(shown, self.settings.pinned_max, now)

    async def _read_pinned(self, person: str) -> list[MemoryRecord]:
        started = time.monotonic()
        try:
            try:
                records = await self.store.pinned_of(person)
            except Exception as exc:  # keep the last list; try again after the usual pause
                log.warning("pinned facts unreadable person=%s error=%s", person, type(exc).__name__)
                records = self._pinned.get(person, (0.0, []))[1]
            took = time.monotonic() - started
            next_read = time.monotonic() + max(RECALL_PINNED_REFRESH_S, took / RECALL_PINNED_READ_SHARE)
            self._pinned[person] = (next_read, records)
            return records
        finally:
            self._pinned_jobs.pop(person, None)

    def forget_pinned(self, person: str) -> None:
        """A pin changed: read the person's pinned facts afresh on the next recall."""
        self._pinned.pop(person, None)

    async def conflict_partners(self, person: str, records: Iterable[MemoryRecord], *,
                                shared_only: bool) -> dict[str, list[MemoryRecord]]:
        """For each record, the live memories it is flagged as conflicting with (shown as disputed: kith asserts
        neither side of a conflict).

        A link to a memory that was forgotten, superseded or retired is no conflict any more.
        Partners this chat may not see are still counted: the fact stays disputed.
        """
        records = list(records)
        wanted = sorted({i for r in records for i in r.conflicts_with})
        if not wanted:
            return {}
        now = self.clock()
        found = {m.id: m for m in await self.store.get_memories(wanted)
                 if visible(m, person, now, shared_only=False)}
        out: dict[str, list[MemoryRecord]] = {}
        for record in records:
            partners = [found[i] for i in record.conflicts_with if i in found]
            if partners:
                out[record.id] = partners
        return out


async def _no_notes() -> list[Note]:
    return []


def _best_first(found: LookupMatches, n: int) -> list[str]:
    """The ``n`` best candidates, each path's in turn (the vector path's best, the keyword path's best, ...): the
    engine has not ranked them yet, and either path's best is a strong match."""
    if n <= 0:
        return []
    by_cosine = heapq.nlargest(n, found.cosines, key=found.cosines.__getitem__)
    by_bm25 = heapq.nlargest(n, found.bm25, key=found.bm25.__getitem__)
    out: dict[str, None] = {}
    for pair in zip(by_cosine + [""] * (n - len(by_cosine)), by_bm25 + [""] * (n - len(by_bm25)), strict=True):
        for memory_id in pair:
            if memory_id and len(out) < n:
                out[memory_id] = None
    return list(out)



def _retrieve_quietly(job: asyncio.Future[list[float]]) -> None:
    if not job.cancelled():
        job.exception()  # a job that ran past its budget is not awaited: its failure is not news
