"""Where a trusted embedder cosine calls two facts one: the dedupe-by-meaning threshold, chosen from data.

``bench/dedupe_pairs.tsv`` holds labelled pairs of facts as an extractor words them (English, Polish,
German, Spanish, French): ``same`` (one fact worded twice), ``topic`` (the same topic, another fact: another
place, person, number, thing, or negated) and ``other`` (unrelated). Each pair is embedded with the default
embedder (``onnx:all-MiniLM-L6-v2``, offline) and judged by kith's real decision
(:func:`memory.core.similarity.decide`: the lexical layer, the negation guard and
:func:`memory.core.similarity.disagree` included), for every candidate threshold.

The cut is chosen by stratified k-fold cross-validation: on each training split the threshold with the best
F0.5 (precision counts twice: a wrong merge loses a fact, a missed one only costs a conflict question or a
second memory), scored on the held-out split. Printed: each fold's choice and held-out precision/recall, the
pooled held-out figures, and the threshold chosen on the whole set (the value for
``ground.tunables.MEANING_MERGE_THRESHOLD``), with the pairs it gets wrong.

    python -m bench.dedupe_threshold [--folds 5] [--seed 7]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kith.settings import AppSettings
from memory.core.similarity import Action, decide, disagree
from memory.encoders.embedders import open_embedder

PAIRS = Path(__file__).with_name("dedupe_pairs.tsv")
CANDIDATES = [round(0.50 + 0.01 * i, 2) for i in range(50)]  # 0.50 .. 0.99


@dataclass(frozen=True)
class Pair:
    label: str
    language: str
    a: str
    b: str
    cosine: float

    @property
    def same(self) -> bool:
        return self.label == "same"


def merged(pair: Pair, threshold: float) -> bool:
    return decide(pair.a, pair.b, cosine=pair.cosine, cosine_from_embedder=True, same_kind=True,
                  meaning_at=threshold).action is Action.MERGE


def tally(pairs: list[Pair], merges: Callable[[Pair], bool]) -> tuple[int, int, int]:
    """True positives, false positives, false negatives of the decision ``merges``."""
    tp = fp = fn = 0
    for pair in pairs:
        said = merges(pair)
        tp += said and pair.same
        fp += said and not pair.same
        fn += not said and pair.same
    return tp, fp, fn


def counts(pairs: list[Pair], threshold: float) -> tuple[int, int, int]:
    """:func:`tally` of kith's decision at ``threshold``."""
    return tally(pairs, lambda pair: merged(pair, threshold))


def f_half(tp: int, fp: int, fn: int) -> float:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return 1.25 * precision * recall / (0.25 * precision + recall) if precision + recall else 0.0


def best_threshold(pairs: list[Pair]) -> float:
    # Ties go to the higher cut: the more careful one.
    return max(CANDIDATES, key=lambda t: (f_half(*counts(pairs, t)), t))


def folds(pairs: list[Pair], k: int, seed: int) -> list[list[Pair]]:
    """``k`` splits, each label spread evenly over them."""
    rng = random.Random(seed)
    split: list[list[Pair]] = [[] for _ in range(k)]
    for label in sorted({p.label for p in pairs}):
        group = [p for p in pairs if p.label == label]
        rng.shuffle(group)
        for i, pair in enumerate(group):
            split[i % k].append(pair)
    return split


async def load() -> list[Pair]:
    with PAIRS.open(encoding="utf-8") as handle:
        rows = [r for r in csv.reader(handle, delimiter="\t") if r and not r[0].startswith("#")]
    embedder, status = await open_embedder(AppSettings())
    if embedder is None:
        raise SystemExit(f"no embedder: {status.line()}")
    try:
        vectors_a = await embedder.embed([r[2] for r in rows])
        vectors_b = await embedder.embed([r[3] for r in rows])
    finally:
        await embedder.close()

    def cosine(x: list[float], y: list[float]) -> float:
        return sum(p * q for p, q in zip(x, y, strict=True)) / math.sqrt(sum(p * p for p in x) * sum(q * q for q in y))

    return [Pair(r[0], r[1], r[2], r[3], cosine(x, y)) for r, x, y in zip(rows, vectors_a, vectors_b, strict=True)]


def rate(tp: int, fp: int, fn: int) -> str:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return f"precision {precision:.2f} recall {recall:.2f} (merged right {tp}, merged wrong {fp}, missed {fn})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    pairs = asyncio.run(load())
    by_label = {label: sum(p.label == label for p in pairs) for label in ("same", "topic", "other")}
    print(f"{len(pairs)} pairs: {by_label}; languages {sorted({p.language for p in pairs})}")
    pooled = [0, 0, 0]
    chosen: list[float] = []
    split = folds(pairs, args.folds, args.seed)
    for i, held_out in enumerate(split):
        training = [p for j, s in enumerate(split) if j != i for p in s]
        threshold = best_threshold(training)
        chosen.append(threshold)
        result = counts(held_out, threshold)
        pooled = [x + y for x, y in zip(pooled, result, strict=True)]
        print(f"fold {i + 1}: threshold {threshold:.2f}, held out: {rate(*result)}")
    print(f"held out, pooled over {args.folds} folds: {rate(*pooled)}")
    final = best_threshold(pairs)
    print(f"chosen on the whole set: {final:.2f} (folds chose {min(chosen):.2f}..{max(chosen):.2f})")
    print(f"  whole set at {final:.2f}: {rate(*counts(pairs, final))}")
    cosine_only = tally(pairs, lambda pair: pair.cosine > final)
    print(f"  the cosine alone at {final:.2f}, without disagree(): {rate(*cosine_only)}")
    guarded = sum(disagree(p.a, p.b) for p in pairs if not p.same)
    print(f"  disagree() holds {guarded} of {len(pairs) - by_label['same']} pairs that are not one fact")
    for pair in pairs:
        if merged(pair, final) != pair.same:
            wrong = "merged" if not pair.same else "kept apart"
            print(f"  {wrong}: [{pair.label} {pair.language} {pair.cosine:.2f}] {pair.a!r} / {pair.b!r}")


if __name__ == "__main__":
    main()
