"""The LoCoMo benchmark's parameter grid and leave-one-conversation-out choice: no I/O.

:func:`question_arrays` turns what :meth:`memory.recall.engine.RecallEngine.gather` found for one
question into arrays, and :func:`rank_grid` orders them under every point of a grid at once
the way :meth:`memory.recall.engine.RecallEngine.order` does (same formula, same order of operations,
ties by id), so a grid of a thousand settings costs one gather per question rather than one
search per question and setting. The benchmark checks the two orders against each other on
sampled pairs. The person's graph (:mod:`memory.recall.graph_reach`) is one more axis: each of its settings
(share, hops, how many best candidates select beings) keeps the groups that count under it, as ``order`` does.

:func:`leave_one_out` chooses, for each conversation, the way of ranking with the best
objective on the *other* conversations' questions and scores the held-out one with it: nothing
about a conversation's questions reaches the choice made for it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ground.config import RecallSettings
from ground.tunables import RECALL_RECENCY_FLOOR
from memory.core import said_at
from memory.recall import SECONDS_PER_DAY, Gathered, importance_factor, said_within, use_factor

KS = (5, 10, 25, 50)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, order=True)
class Point:
    """One grid point: the ranking parameters the grid varies (the rest stay at kith's defaults)."""

    vector_weight: float  # the BM25 weight is 1 - this
    half_life_days: float  # 0: no recency
    neighbour_share: float  # 0: no neighbours
    neighbour_width: int
    date_boost: float  # 1: no date boost
    graph_share: float = 0.0  # 0: no graph expansion
    graph_hops: int = 1
    graph_from_best: int = 0

    def settings(self, base: RecallSettings) -> RecallSettings:
        return dataclasses.replace(base, vector_weight=self.vector_weight,
                                   bm25_weight=round(1.0 - self.vector_weight, 6),
                                   half_life_days=self.half_life_days, neighbour_share=self.neighbour_share,
                                   neighbour_width=self.neighbour_width, date_boost=self.date_boost,
                                   graph_share=self.graph_share, graph_hops=self.graph_hops,
                                   graph_from_best=self.graph_from_best)

    def label(self, blend: bool = True) -> str:
        neighbours = (f"neighbours={self.neighbour_share:g}x{self.neighbour_width}" if self.neighbour_share > 0
                      else "neighbours=off")
        graph = (f"graph={self.graph_share:g} hops={self.graph_hops} from-best={self.graph_from_best}"
                 if self.graph_share > 0 else "graph=off")
        parts = [f"half-life={self.half_life_days:g}d", neighbours, f"date-boost={self.date_boost:g}", graph]
        if blend:
            parts.insert(0, f"vector={self.vector_weight:g}/bm25={1 - self.vector_weight:.2g}")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Axes:
    """The grid's values along each parameter. Earlier values win ties, so a lever with no measurable
    effect stays at its first (off) value."""

    vector_weights: tuple[float, ...]
    half_lives: tuple[float, ...]
    shares: tuple[float, ...]  # 0 first: off
    widths: tuple[int, ...]
    boosts: tuple[float, ...]
    graphs: tuple[tuple[float, int, int], ...] = ((0.0, 1, 0),)  # (graph share, hops, from best); off first

    def points(self) -> list[Point]:
        """Every grid point in [vector weight, half-life, share, width, boost, graph] order."""
        return [Point(w, h, s, d, b, *g) for w, h, s, d, b, g in itertools.product(
            self.vector_weights, self.half_lives, self.shares, self.widths, self.boosts, self.graphs)]

    @property
    def shape(self) -> tuple[int, int, int, int, int, int]:
        return (len(self.vector_weights), len(self.half_lives), len(self.shares), len(self.widths),
                len(self.boosts), len(self.graphs))


@dataclass(frozen=True, slots=True)
class QuestionArrays:
    """One question's candidates as arrays (in id order), and which of them are its evidence."""

    cosine: FloatArray  # max(0, cosine); 0 without one
    bm25: FloatArray
    age_days: FloatArray
    importance: FloatArray  # the importance factor
    use: FloatArray  # the use factor
    in_window: BoolArray  # said inside a time the question names
    fetched: BoolArray  # there only as a neighbour
    neighbours: IntArray  # [n, d]: each one's neighbours (indices), in the engine's order, padded with n
    steps: IntArray  # [n, d]: how many places away each is (padding: a large number)
    evidence: BoolArray
    wanted: int  # evidence turns asked for (some may be missing from the candidates)
    vector_path: bool
    ids: list[str]
    graph_members: BoolArray  # [groups, n]: the candidates of each group the graph selected
    graph_level: IntArray  # [groups]
    graph_seed: IntArray  # [groups]
    graph_fetched: BoolArray  # [n]: there only through the graph

    def graph_counting(self, hops: int, from_best: int) -> BoolArray:
        """[groups]: the groups that count under these settings (GraphGroup.counts)."""
        return (self.graph_level <= hops) & ((self.graph_seed < 0) | (self.graph_seed < from_best))


FAR = 1 << 30


def question_arrays(found: Gathered, base: RecallSettings, evidence: set[str],
                    turn_of: Callable[[str], str]) -> QuestionArrays:
    """``turn_of``: a memory id's turn id (what the evidence names)."""
    matches = sorted(found.matches, key=lambda m: m.record.id)  # a stable sort then breaks ties by id
    ids = [m.record.id for m in matches]
    place = {memory_id: i for i, memory_id in enumerate(ids)}
    n = len(ids)
    rows = [[(place[o], steps) for o, steps in found.neighbours.get(memory_id, {}).items() if o in place]
            for memory_id in ids]
    width = max((len(r) for r in rows), default=0)
    neighbours = np.full((n, max(1, width)), n, dtype=np.int64)
    steps = np.full((n, max(1, width)), FAR, dtype=np.int64)
    for i, row in enumerate(rows):
        for j, (other, away) in enumerate(row):
            neighbours[i, j] = other
            steps[i, j] = away
    when = [said_at(m.record) for m in matches]
    groups = found.graph_groups
    members = np.zeros((len(groups), n), dtype=np.bool_)
    for g, group in enumerate(groups):
        for memory_id in group.members:
            if memory_id in place:
                members[g, place[memory_id]] = True
    return QuestionArrays(
        cosine=np.array([max(0.0, m.cosine or 0.0) for m in matches], dtype=np.float64),
        bm25=np.array([m.bm25 for m in matches], dtype=np.float64),
        age_days=np.array([(found.now - w).total_seconds() / SECONDS_PER_DAY for w in when], dtype=np.float64),
        importance=np.array([importance_factor(m.record.importance, base.importance_weight) for m in matches],
                            dtype=np.float64),
        use=np.array([use_factor(m.record.use_count, base.use_credit, base.use_credit_cap) for m in matches],
                     dtype=np.float64),
        in_window=np.array([bool(found.windows) and said_within(w, found.windows) for w in when], dtype=np.bool_),
        fetched=np.array([i in found.fetched for i in ids], dtype=np.bool_),
        neighbours=neighbours,
        steps=steps,
        evidence=np.array([turn_of(i) in evidence for i in ids], dtype=np.bool_),
        wanted=len(evidence),
        vector_path=found.vector_path,
        ids=ids,
        graph_members=members,
        graph_level=np.array([g.level for g in groups], dtype=np.int64),
        graph_seed=np.array([g.seed for g in groups], dtype=np.int64),
        graph_fetched=np.array([i in found.graph_fetched for i in ids], dtype=np.bool_),
    )


@dataclass(frozen=True, slots=True)
class Rankings:
    """Every grid point's order of one question's candidates, best first, cut to a limit: ``order[w, h, s, d, b]``;
    ``valid`` marks the entries that are ranked at all (a candidate may be dropped)."""

    order: IntArray  # [W, H, S, D, B, G, limit]
    valid: BoolArray  # same shape


def _best_other(values: FloatArray, members: BoolArray) -> FloatArray:
    """[..., n]: for each candidate, the largest of ``values`` [..., n] among the other members of each group
    ``members`` [groups, n] it is in (−inf where none), the first largest winning ties as the engine reads
    members in id order; then the largest over its groups."""
    masked = np.where(members, values[..., None, :], -np.inf)  # [..., G, n]
    at = np.argmax(masked, axis=-1)  # [..., G]
    first = np.take_along_axis(masked, at[..., None], axis=-1)  # [..., G, 1]
    np.put_along_axis(masked, at[..., None], -np.inf, axis=-1)
    second = masked.max(axis=-1, keepdims=True)
    other = np.where(np.arange(values.shape[-1]) == at[..., None], second, first)  # [..., G, n]
    return np.where(members, other, -np.inf)


def _graph_lift(score: FloatArray, relevance: FloatArray, members: BoolArray, share: float
                ) -> tuple[FloatArray, FloatArray]:
    """What :func:`memory.recall.ranking.graph_lifts` adds: ([W, H, B, n] to the score, [W, n] to relevance)."""
    if share <= 0 or not members.any():
        return np.zeros(score.shape), np.zeros(relevance.shape)
    best = _best_other(score, members)
    lift = np.where(best > 0, share * best, 0.0).max(axis=-2)
    best_relevance = _best_other(relevance, members)
    lift_relevance = np.where(best_relevance > 0, share * best_relevance, 0.0).max(axis=-2)
    return lift, lift_relevance


def rank_grid(q: QuestionArrays, axes: Axes, limit: int = max(KS)) -> Rankings:
    """The candidates' order under every grid point at once, as ``RecallEngine.order`` orders them
    (same formula and order of operations, so the same floats; ties by id)."""
    n = len(q.cosine)
    nw, nh, ns, nd, nb, ng = axes.shape
    cut = min(limit, n)
    if n == 0:
        empty = np.zeros((nw, nh, ns, nd, nb, ng, 0), dtype=np.int64)
        return Rankings(empty, empty.astype(np.bool_))
    if q.vector_path:
        weights = np.array(axes.vector_weights)[:, None]
        bm25_weights = np.array([round(1.0 - w, 6) for w in axes.vector_weights])[:, None]
        totals = weights + bm25_weights
        relevance = np.where(totals > 0, (weights * q.cosine + bm25_weights * q.bm25)
                             / np.where(totals > 0, totals, 1), 0.0)  # [W, n]
    else:
        relevance = np.broadcast_to(q.bm25, (nw, n))
    recency = np.stack([np.ones(n) if hl <= 0 else RECALL_RECENCY_FLOOR + (1.0 - RECALL_RECENCY_FLOOR) * 0.5 ** (
        np.maximum(0.0, q.age_days) / hl) for hl in axes.half_lives])  # [H, n]
    dated = np.stack([np.where(q.in_window, boost, 1.0) for boost in axes.boosts])  # [B, n]
    score = relevance[:, None, :] * recency[None, :, :]  # [W, H, n]
    score = score * q.importance
    score = score * q.use
    score = score[:, :, None, :] * dated[None, None, :, :]  # [W, H, B, n]
    padded = np.concatenate([score, np.full((*score.shape[:-1], 1), -np.inf)], axis=-1)
    relevance_padded = np.concatenate([relevance, np.zeros((nw, 1))], axis=-1)[:, None, None, :]
    # Each graph setting: what it adds (from the scores before any lifting) and what it leaves out.
    graph_lifts: list[tuple[FloatArray, FloatArray, BoolArray]] = []
    for share, hops, from_best in axes.graphs:
        counting = q.graph_members[q.graph_counting(hops, from_best)] if share > 0 else q.graph_members[:0]
        lift, lift_relevance = _graph_lift(score, relevance, counting, share)
        unreached = q.graph_fetched & ~counting.any(axis=0)
        graph_lifts.append((lift, lift_relevance[:, None, None, :], unreached))
    orders = np.empty((nw, nh, ns, nd, nb, ng, cut), dtype=np.int64)
    valid = np.empty(orders.shape, dtype=np.bool_)
    for di, width in enumerate(axes.widths):
        near = np.where(q.steps <= width, q.neighbours, n)  # [n, d]
        has_near = (near < n).any(axis=1)
        kept_fetched = q.fetched & ~has_near  # there only as a neighbour, and none is near enough
        if has_near.any():
            best_at = np.argmax(padded[..., near], axis=-1)  # [W, H, B, n]: the first best, as ``rank`` takes it
            best = near[np.arange(n), best_at]
            best_score = np.take_along_axis(padded, best, axis=-1)
            lifted = best_score > 0
            best_relevance = np.take_along_axis(relevance_padded, best, axis=-1)
        for si, share in enumerate(axes.shares):
            if share > 0 and has_near.any():
                neighboured = score + np.where(lifted, share * best_score, 0.0)
                kept_relevance = relevance[:, None, None, :] + np.where(lifted, share * best_relevance, 0.0)
                dropped = kept_fetched
            else:
                neighboured = score
                kept_relevance = np.broadcast_to(relevance[:, None, None, :], score.shape)
                dropped = q.fetched if share <= 0 else kept_fetched
            for gi, (lift, lift_relevance, unreached) in enumerate(graph_lifts):
                final = neighboured + lift
                keep = ((kept_relevance + lift_relevance) > 0) & ~dropped & ~unreached
                key = np.where(keep, -final, np.inf)
                ranked = np.argsort(key, axis=-1, kind="stable")[..., :cut]
                orders[:, :, si, di, :, gi] = ranked
                valid[:, :, si, di, :, gi] = np.take_along_axis(keep, ranked, axis=-1)
    return Rankings(orders, valid)


def grid_recall(q: QuestionArrays, rankings: Rankings) -> FloatArray:
    """[W, H, S, D, B, G, len(KS)]: the share of the question's evidence in each grid point's top k."""
    out = np.zeros((*rankings.order.shape[:-1], len(KS)))
    if not rankings.order.shape[-1]:
        return out
    hits = np.cumsum(q.evidence[rankings.order] & rankings.valid, axis=-1)
    for j, k in enumerate(KS):
        out[..., j] = hits[..., min(k, hits.shape[-1]) - 1] / q.wanted
    return out


@dataclass(frozen=True, slots=True)
class LooResult:
    chosen: dict[int, int]  # held-out conversation -> the index (among those offered) chosen on the others
    held_out: FloatArray  # [questions, len(KS)]: each question scored under its conversation's choice


def leave_one_out(results: FloatArray, conversation: IntArray, offered: Sequence[int]) -> LooResult:
    """``results``: [ways, questions, len(KS)] recall. For each conversation, the way among ``offered`` with
    the best mean recall over k = 5/10/25/50 on the *other* conversations' questions (each question counts
    once; a tie goes to the way offered first) scores that conversation's questions."""
    ways = np.asarray(offered, dtype=np.int64)
    per_question = results[ways].mean(axis=2)  # [offered, questions]
    convs = sorted(set(conversation.tolist()))
    totals = per_question.sum(axis=1)
    chosen: dict[int, int] = {}
    held_out = np.zeros((len(conversation), len(KS)))
    for held in convs:
        mask = conversation == held
        train_mean = (totals - per_question[:, mask].sum(axis=1)) / max(1, int((~mask).sum()))
        best = int(ways[int(np.argmax(train_mean))])
        chosen[held] = best
        held_out[mask] = results[best][mask]
    return LooResult(chosen, held_out)


def best_on_all(results: FloatArray, offered: Sequence[int]) -> int:
    """The way best on every conversation at once (what a default would be set to)."""
    ways = np.asarray(offered, dtype=np.int64)
    return int(ways[int(np.argmax(results[ways].mean(axis=(1, 2))))])
