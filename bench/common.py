"""Helpers shared by the benchmarks: percentiles, peak memory and a printed report."""

from __future__ import annotations

import resource
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary_ms(values: Sequence[float]) -> str:
    return (f"p50={percentile(values, 50):.2f} ms p95={percentile(values, 95):.2f} ms "
            f"mean={statistics.fmean(values):.2f} ms n={len(values)}")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def verdict(value: float, target: float, *, higher_is_better: bool = False) -> str:
    ok = value >= target if higher_is_better else value <= target
    return "meets target" if ok else "MISSES target"
