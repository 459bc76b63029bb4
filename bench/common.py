"""Helpers shared by the benchmarks: percentiles, peak memory and a printed report."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import resource
import statistics
import sys
from collections.abc import AsyncIterator, Sequence


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


def process_peak_rss_mb(pid: int | None) -> float:
    """Another live process's peak RSS (Linux's VmHWM); 0 where it cannot be read."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def process_cpu_s(pid: int | None) -> float:
    """Another live process's CPU time so far, user and system (Linux's /proc); 0 where it cannot be read."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def verdict(value: float, target: float, *, higher_is_better: bool = False) -> str:
    ok = value >= target if higher_is_better else value <= target
    return "meets target" if ok else "MISSES target"


@dataclasses.dataclass(frozen=True, slots=True)
class FakeModel:
    url: str  # the OpenAI-compatible base URL
    pid: int


@contextlib.asynccontextmanager
async def fake_model_process(reply: str) -> AsyncIterator[FakeModel]:
    """An instant OpenAI-compatible model in its own process, as in production: its CPU is not kith's.

    The process is killed on the way out.
    """
    llm = await asyncio.create_subprocess_exec(sys.executable, "-m", "tests.fakes.openai_api", reply,
                                               stdout=asyncio.subprocess.PIPE)
    try:
        assert llm.stdout is not None
        yield FakeModel(f"http://127.0.0.1:{int(await llm.stdout.readline())}/v1", llm.pid)
    finally:
        llm.kill()
        await llm.wait()
