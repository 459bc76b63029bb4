"""An optional cross-encoder reranker: reads the query and one memory together and scores the pair.

A bi-encoder embeds the query and each memory apart, so it cannot see which words of one answer
the other; a cross-encoder reads both at once and orders the best few candidates better, at the
cost of one model pass per candidate. So it runs only over the top of the ranking
(``recall.rerank_top``), on ONNX Runtime like the default embedder, one thread, off the event
loop. ``[memory] reranker`` names a directory holding a BERT sequence-classification checkpoint
(``model.safetensors``, ``config.json``, ``tokenizer.json``: ms-marco-MiniLM-L-6-v2, say); its
graph is built and cached the same way as the embedder's (:mod:`memory.encoders.encoder_files`).

kith ships no reranker: no cross-encoder's weights are published on PyPI, and kith downloads
nothing at run time. A reranker that cannot load is one line at start-up and in ``doctor``, and
recall keeps its own ranking.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from ground.checks import CheckResult
from memory.encoders.encoder_files import (
    EncoderFilesUnavailable,
    default_cache_dir,
    encoder_graph,
    locate,
    open_graph,
)
from memory.encoders.onnx_encoder import EncoderBuildError

log = logging.getLogger("kith.memory.reranker")
T = TypeVar("T")

PAIR_MAX_TOKENS = 256  # the query and the memory together; the longer of the two is cut first


class RerankerUnavailable(Exception):
    """The reranker cannot work in this process; the message is the one-line reason."""


class CrossEncoderReranker:
    def __init__(self, directory: str, *, cache_dir: Path | None = None) -> None:
        self.directory = directory
        self.name = f"cross-encoder:{Path(directory).name or directory}"
        self._cache_dir = cache_dir or default_cache_dir()
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kith-rerank")
        self._model: Any = None

    def load_sync(self) -> None:
        """Load (building the graph the first time); RerankerUnavailable with the reason."""
        if self._model is not None:
            return
        try:
            files = locate(self.directory)
            graph = encoder_graph(files, self._cache_dir, self.directory, pair=True)
        except (EncoderFilesUnavailable, EncoderBuildError) as exc:
            raise RerankerUnavailable(str(exc)) from None
        except OSError as exc:
            raise RerankerUnavailable(
                f"cannot write the built reranker under {self._cache_dir} ({type(exc).__name__})"
            ) from None
        try:
            self._model = open_graph(graph, files.tokenizer, PAIR_MAX_TOKENS)
        except EncoderBuildError as exc:
            raise RerankerUnavailable(str(exc)) from None

    def _load_or_say_why(self) -> None:
        # The reranker is optional: whatever else goes wrong in the owner's files or the libraries reading them is
        # the same one line at start-up and in doctor, not a traceback that stops kith.
        try:
            self.load_sync()
        except RerankerUnavailable:
            raise
        except Exception as exc:
            log.debug("reranker load failed", exc_info=True)
            raise RerankerUnavailable(f"{self.directory} did not load ({type(exc).__name__})") from None

    def _scores_sync(self, query: str, passages: list[str]) -> list[float]:
        import numpy as np

        self.load_sync()
        session, tokenizer = self._model
        encoded = tokenizer.encode_batch([(query, passage) for passage in passages])
        feed = {
            "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
        }
        (scores,) = session.run(["score"], feed)
        return [float(s) for s in scores]

    async def load(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._load_or_say_why)

    async def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, higher is more relevant (the model's logit)."""
        if not passages:
            return []
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(self._scores_sync, query, list(passages)))

    async def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def reranked(ranked: Sequence[T], scores: Sequence[float]) -> list[T]:
    """``ranked`` with its first ``len(scores)`` items reordered by the cross-encoder's scores, highest first
    (ties keep recall's order); the items past them keep their places."""
    top = sorted(range(len(scores)), key=lambda i: -scores[i])
    return [ranked[i] for i in top] + list(ranked[len(scores):])


async def open_reranker(directory: str, *, cache_dir: Path | None = None) -> tuple[CrossEncoderReranker | None, str]:
    """The configured reranker, loaded, and its status in words; (None, why) when off or unusable."""
    if not directory:
        return None, "off"
    reranker = CrossEncoderReranker(directory, cache_dir=cache_dir)
    started = time.perf_counter()
    try:
        await reranker.load()
    except RerankerUnavailable as exc:
        await reranker.close()
        log.warning("reranker unavailable, recall keeps its own order: %s", exc)
        return None, str(exc)
    log.info("reranker ready name=%s ms=%.0f", reranker.name, (time.perf_counter() - started) * 1000)
    return reranker, "ready"


async def check_reranker(directory: str) -> CheckResult:
    """``bot.py doctor``: off, loads, or a warning (recall works without it)."""
    reranker, status = await open_reranker(directory)
    if reranker is None:
        if status == "off":
            return CheckResult("reranker", True, "off (set [memory] reranker to a cross-encoder's directory)")
        return CheckResult("reranker", True, f"{status}; recall keeps its own order", warn=True)
    await reranker.close()
    return CheckResult("reranker", True, f"{directory} loads: it reorders recall's top candidates")
