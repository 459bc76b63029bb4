"""The LoCoMo benchmark's parameter grid and leave-one-conversation-out choice: no I/O.

:func:`question_arrays` turns what :meth:`memory.recall.engine.RecallEngine.gather` found for one
question into arrays, and :func:`rank_grid` orders them under every point of a grid at once
the way :meth:`memory.recall.engine.RecallEngine.order` does (same formula, same order of operations,
ties by id), so a grid of a thousand settings costs one gather per question rather than one
search per question and setting. The benchmark checks the two orders against each other on
sampled pairs.

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

    def settings(self, base: RecallSettings) -> RecallSettings:
        return dataclasses.replace(base, vector_weight=self.vector_weight,
                                   bm25_weight=round(1.0 - self.vector_weight, 6),
                                   half_life_days=self.half_life_days, neighbour_share=self.neighbour_share,
                                   neighbour_width=self.neighbour_width, date_boost=self.date_boost)

    def label(self, blend: bool = True) -> str:
        neighbours = (f"neighbours={self.neighbour_share:g}x{self.neighbour_width}" if self.neighbour_share > 0
                      else "neighbours=off")
        parts = [f"half-life={self.half_life_days:g}d", neighbours, f"date-boost={self.date_boost:g}"]
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

    def points(self) -> list[Point]:
        """Every grid point in [vector weight, half-life, share, width, boost] order; with the share off,
        one width only (the width means nothing then)."""
        return [Point(*values) for values in itertools.product(
            self.vector_weights, self.half_lives, self.shares, self.widths, self.boosts)]

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        return (len(self.vector_weights), len(self.half_lives), len(self.shares), len(self.widths),
                len(self.boosts))


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
    )


@dataclass(frozen=True, slots=True)
class Rankings:
    """Every grid point's order of one question's candidates, best first, cut to a limit: ``order[w, h, s, d, b]``;
    ``valid`` marks the entries that are ranked at all (a candidate may be dropped)."""

    order: IntArray  # [W, H, S, D, B, limit]
    valid: BoolArray  # same shape


def rank_grid(q: QuestionArrays, axes: Axes, limit: int = max(KS)) -> Rankings:
    """The candidates' order under every grid point at once, as ``RecallEngine.order`` orders them
    (same formula and order of operations, so the same floats; ties by id)."""
    n = len(q.cosine)
    nw, nh, ns, nd, nb = axes.shape
    cut = min(limit, n)
    if n == 0:
        empty = np.zeros((nw, nh, ns, nd, nb, 0), dtype=np.int64)
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
    orders = np.empty((nw, nh, ns, nd, nb, cut), dtype=np.int64)
    valid = np.empty(orders.shape, dtype=np.bool_)
    plain_keep = relevance[:, None, None, :] > 0
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
                final = score + np.where(lifted, share * best_score, 0.0)
                keep = (relevance[:, None, None, :] + np.where(lifted, share * best_relevance, 0.0)) > 0
                keep = keep & ~kept_fetched
            else:
                final = score
                keep = plain_keep & ~q.fetched if share <= 0 else plain_keep & ~kept_fetched
            key = np.where(keep, -final, np.inf)
            ranked = np.argsort(key, axis=-1, kind="stable")[..., :cut]
            orders[:, :, si, di] = ranked
            valid[:, :, si, di] = np.take_along_axis(np.broadcast_to(keep, key.shape), ranked, axis=-1)
    return Rankings(orders, valid)


def grid_recall(q: QuestionArrays, rankings: Rankings) -> FloatArray:
    """[W, H, S, D, B, len(KS)]: the share of the question's evidence in each grid point's top k."""
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
