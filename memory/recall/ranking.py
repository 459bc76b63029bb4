"""How recall orders and trims what matched a query: pure functions, no I/O.

Every ranked list of memories comes from here: the prompt's recalled part, the recall tool,
and the person's and operator's searches (``/why``, ``/pin``, ``bot.py memory search``).
:func:`lookup_matches` and :func:`memory_matches` turn what a store lookup found into
:class:`RecallMatch` es; :func:`rank` orders them. A match's score is its relevance times four
factors:

* **relevance**: the embedder's cosine blended with the BM25 score normalised to the best
  lexical hit, ``vector_weight`` : ``bm25_weight`` (80/20 by default: meaning counts most,
  exact words still lift a match). Without an embedder cosine for this query (no embedder, or
  it missed its time budget) relevance is BM25 alone;
* **recency**: a half-life on the time the memory was last *said* (not when it was stored or
  edited), over a floor, so an exact match from last year still beats a weak one from last week.
  Off by default (``half_life_days`` 0): it did not help under leave-one-out on LoCoMo;
* **importance**: ``(1 - importance_weight) + importance_weight * importance``;
* **use**: ``1 + min(use_credit_cap, use_credit * use_count)``. It multiplies, so a memory
  the person's replies drew on often rises among relevant candidates but cannot push an
  irrelevant one into the prompt;
* **dates**: ``date_boost`` when the query names a time (:mod:`memory.recall.when`) and the memory was
  said inside it, else 1.

Then **neighbours** (:func:`neighbour_lift`): a memory said within a few places of a strong match
in the same chat adds ``neighbour_share`` of that neighbour's score to its own. A question tends
to match the message that names its topic while the answer is in the reply next to it; a
memory's neighbours are its context. Which memories are neighbours is the caller's lookup
(:meth:`memory.store.reads.MemoryReads.neighbours`).

Then **the graph** (:func:`graph_lifts`): the memories whose relations touch one being the query selected in the
person's graph (:mod:`memory.recall.graph_reach`) are a group, and each adds ``graph_share`` of the best score
among its group's other memories, the graph's version of a neighbour: said in another session, in other words,
about the same someone or something.

Use is citation, not retrieval: being shown earns nothing. :func:`cited` is the rule: a shown memory counts as
used when the reply repeats its distinctive content words that the person's own message did
not already contain (so echoing the question is not drawing on memory): one such word for a
memory with at most ``CITE_FEW_WORDS`` of them, two otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from ground.config import RecallSettings
from ground.tunables import (
    CITE_FEW_WORDS,
    CITE_MIN_WORD_CHARS,
    RECALL_RECENCY_FLOOR,
)
from memory.core.bm25 import normalize_scores
from memory.core.records import MemoryRecord, said_at
from memory.core.text import content_words, is_cjk_token, is_negation, words_match
from memory.recall.when import Window, said_within
from memory.store.vectors import VectorHit

SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class RecallMatch:
    """One memory or staged note that matched a query on either path, with what its relevance is made of."""

    record: MemoryRecord
    cosine: float | None  # the embedder's cosine for this query; None when the vector path did not score it
    bm25: float  # BM25 normalised to the best lexical hit of this query, 0..1 (0: no keyword match)
    note: bool = False  # a staged capture the gate has not curated yet


@dataclass(frozen=True, slots=True)
class Ranked:
    match: RecallMatch
    score: float
    relevance: float
    recency: float
    importance: float
    use: float
    dated: float = 1.0  # the date boost, when the query named a time this was said in
    lift: float = 0.0  # what its neighbours added to ``score``
    lift_relevance: float = 0.0  # ... and to its relevance (so a neighbour's context passes a relevance floor)
    graph: float = 0.0  # what the memories sharing a being with it in the person's graph added to ``score``
    graph_relevance: float = 0.0  # ... and to its relevance

    @property
    def record(self) -> MemoryRecord:
        return self.match.record


def recency_factor(age_days: float, half_life_days: float, floor: float = RECALL_RECENCY_FLOOR) -> float:
    if half_life_days <= 0:
        return 1.0
    decay = 0.5 ** (max(0.0, age_days) / half_life_days)
    return floor + (1.0 - floor) * decay


def importance_factor(importance: float, weight: float) -> float:
    return (1.0 - weight) + weight * min(1.0, max(0.0, importance))


def use_factor(use_count: int, credit: float, cap: float) -> float:
    return 1.0 + min(cap, credit * max(0, use_count))


def relevance(cosine: float | None, bm25: float, settings: RecallSettings, *, vector_path: bool) -> float:
    """The blend of both paths, 0..1; BM25 alone when this query has no embedder vector."""
    if not vector_path:
        return bm25
    total = settings.vector_weight + settings.bm25_weight
    if total <= 0:
        return 0.0
    return (settings.vector_weight * max(0.0, cosine or 0.0) + settings.bm25_weight * bm25) / total


def date_factor(when: datetime, windows: Sequence[Window], boost: float) -> float:
    return boost if windows and said_within(when, windows) else 1.0


def score(match: RecallMatch, now: datetime, settings: RecallSettings, *, vector_path: bool,
          windows: Sequence[Window] = ()) -> Ranked:
    record = match.record
    rel = relevance(match.cosine, match.bm25, settings, vector_path=vector_path)
    when = said_at(record)
    age_days = (now - when).total_seconds() / SECONDS_PER_DAY
    rec = recency_factor(age_days, settings.half_life_days)
    imp = importance_factor(record.importance, settings.importance_weight)
    use = use_factor(record.use_count, settings.use_credit, settings.use_credit_cap)
    dated = date_factor(when, windows, settings.date_boost)
    return Ranked(match, rel * rec * imp * use * dated, rel, rec, imp, use, dated)


def neighbour_lift(scored: Sequence[Ranked], neighbours: Mapping[str, Sequence[str]], share: float) -> list[Ranked]:
    """Each memory plus ``share`` of its best-scoring neighbour's score (and relevance).

    ``neighbours``: by id, the ids said next to it; a neighbour not in ``scored`` lends nothing.
    Lifts are taken from the scores before lifting, so they do not compound along a chat.
    """
    if share <= 0 or not neighbours:
        return list(scored)
    by_id = {r.record.id: r for r in scored}
    out: list[Ranked] = []
    for ranked in scored:
        best: Ranked | None = None
        for other in neighbours.get(ranked.record.id, ()):
            candidate = by_id.get(other)
            if candidate is not None and candidate.record.id != ranked.record.id and (
                    best is None or candidate.score > best.score):
                best = candidate
        if best is None or best.score <= 0:
            out.append(ranked)
            continue
        lift = share * best.score
        # The constructor, not dataclasses.replace: this runs for most candidates of every recall.
        out.append(Ranked(ranked.match, ranked.score + lift, ranked.relevance, ranked.recency, ranked.importance,
                          ranked.use, ranked.dated, lift, share * best.relevance))
    return out


def graph_lifts(scored: Sequence[Ranked], groups: Sequence[Collection[str]], share: float
                ) -> dict[str, tuple[float, float]]:
    """By id, what the graph adds to a memory's score and to its relevance: ``share`` of the best score (and,
    apart, of the best relevance) among the other memories of any group it is in; a group member not in
    ``scored`` lends nothing. Members are read in id order, so among equal scores the first id is the best."""
    if share <= 0 or not groups:
        return {}
    by_id = {r.record.id: r for r in scored}
    out: dict[str, tuple[float, float]] = {}
    for members in groups:
        present = sorted(i for i in members if i in by_id)
        if len(present) < 2:
            continue
        top = _top_two([by_id[i].score for i in present])
        top_relevance = _top_two([by_id[i].relevance for i in present])
        for place, memory_id in enumerate(present):
            best = top[1] if place == top[2] else top[0]
            best_relevance = top_relevance[1] if place == top_relevance[2] else top_relevance[0]
            lift = share * best if best > 0 else 0.0
            lift_relevance = share * best_relevance if best_relevance > 0 else 0.0
            had = out.get(memory_id, (0.0, 0.0))
            out[memory_id] = (max(had[0], lift), max(had[1], lift_relevance))
    return out


def _top_two(values: Sequence[float]) -> tuple[float, float, int]:
    """The largest value, the largest of the others, and where the first largest is."""
    first, second, at = -float("inf"), -float("inf"), -1
    for place, value in enumerate(values):
        if value > first:
            first, second, at = value, first, place
        elif value > second:
            second = value
    return first, second, at


def _graph_lifted(ranked: Ranked, lift: float, lift_relevance: float) -> Ranked:
    if lift <= 0 and lift_relevance <= 0:
        return ranked
    return Ranked(ranked.match, ranked.score + lift, ranked.relevance, ranked.recency, ranked.importance,
                  ranked.use, ranked.dated, ranked.lift, ranked.lift_relevance, lift, lift_relevance)


@dataclass(frozen=True, slots=True)
class LookupMatches:
    """What one store lookup found for a query, kept to the records the caller may see."""

    records: dict[str, MemoryRecord]
    cosines: dict[str, float]  # trusted embedder cosines, by id
    bm25: dict[str, float]  # BM25 normalised to the best lexical hit, by id


def lookup_matches(hits: Iterable[VectorHit], lexical: Iterable[tuple[MemoryRecord, float]],
                   keep: Callable[[MemoryRecord], bool]) -> LookupMatches:
    """A lookup's vector hits and BM25 hits (``MemoryStore.lookup``), only those ``keep`` lets through."""
    records: dict[str, MemoryRecord] = {}
    cosines: dict[str, float] = {}
    for hit in hits:
        if keep(hit.record):
            records[hit.record.id] = hit.record
            if hit.trusted:
                cosines[hit.record.id] = hit.cosine
    kept = [(r, s) for r, s in lexical if keep(r)]
    bm25 = dict(normalize_scores([(r.id, s) for r, s in kept]))
    for record, _score in kept:
        records.setdefault(record.id, record)
    return LookupMatches(records, cosines, bm25)


def memory_matches(found: LookupMatches, *, vector_path: bool) -> list[RecallMatch]:
    """The found memories as matches to rank; ``vector_path``: embedder cosines take part in this ranking."""
    # A record the vector pool did not reach has a cosine at most the pool's lowest.
    floor = min(found.cosines.values()) if found.cosines else 0.0
    return [RecallMatch(r, found.cosines.get(i, floor) if vector_path else None, found.bm25.get(i, 0.0))
            for i, r in found.records.items()]


def rank(matches: Iterable[RecallMatch], now: datetime, settings: RecallSettings, *, vector_path: bool,
         min_relevance: float = 0.0, windows: Sequence[Window] = (),
         neighbours: Mapping[str, Sequence[str]] | None = None,
         graph_groups: Sequence[Collection[str]] = (),
         graph_lenders: Iterable[RecallMatch] | None = None) -> list[Ranked]:
    """Matches best first (ties by id, so the order is stable); below ``min_relevance`` dropped.

    ``windows``: the times the query names (:func:`memory.recall.when.query_windows`); ``neighbours``: by id,
    the memories said next to it (see :func:`neighbour_lift`); ``graph_groups``: the memory ids of each being the
    query selected in the person's graph (see :func:`graph_lifts`), whose scores are lent by ``graph_lenders``
    (everything gathered, by default ``matches``).
    """
    scored = [score(m, now, settings, vector_path=vector_path, windows=windows) for m in matches]
    # From the scores before any lifting, as neighbours' lifts are.
    lifted: dict[str, tuple[float, float]] = {}
    if graph_groups and settings.graph_share > 0:
        lenders = scored
        if graph_lenders is not None:
            mine = {r.record.id: r for r in scored}
            lenders = [mine.get(m.record.id) or score(m, now, settings, vector_path=vector_path, windows=windows)
                       for m in graph_lenders]
        lifted = graph_lifts(lenders, graph_groups, settings.graph_share)
    if neighbours:
        scored = neighbour_lift(scored, neighbours, settings.neighbour_share)
    if lifted:
        scored = [_graph_lifted(r, *lifted[r.record.id]) if r.record.id in lifted else r for r in scored]
    kept = [r for r in scored
            if (total := r.relevance + r.lift_relevance + r.graph_relevance) > 0.0 and total >= min_relevance]
    kept.sort(key=lambda r: (-r.score, r.record.id))
    return kept


def latest_pinned(records: Iterable[MemoryRecord], limit: int, now: datetime) -> list[MemoryRecord]:
    """The ``limit`` most recently pinned live facts, newest first: the prompt gives pins a fixed budget, not room
    for every pin ever made, so the newest win.

    A pin has no timestamp of its own; pinning is a write, so ``updated_at`` stands for it.
    """
    pinned = [r for r in records if r.pinned and r.is_live(now)]
    pinned.sort(key=lambda r: (r.updated_at, r.created_at, r.id), reverse=True)
    return pinned[:max(0, limit)]


# --- use is citation --------------------------------------------------------------------
def _distinctive(words: Iterable[str]) -> set[str]:
    return {w for w in words if not is_negation(w) and (is_cjk_token(w) or len(w) >= CITE_MIN_WORD_CHARS)}


def _contains(pool: Iterable[str], word: str) -> bool:
    return any(words_match(word, other) for other in pool)


def cited(memory_text: str, reply: str, message: str, speaker_name: str = "") -> bool:
    """Whether ``reply`` drew on a memory shown to it (see the module docstring for the rule)."""
    asked = set(content_words(message)) | set(content_words(speaker_name))
    own = [w for w in _distinctive(content_words(memory_text)) if not _contains(asked, w)]
    if not own:
        return False
    replied = set(content_words(reply))
    hits = sum(1 for w in own if _contains(replied, w))
    return hits >= (1 if len(own) <= CITE_FEW_WORDS else 2)
