"""A sentence-transformers model's forward pass traced and frozen with TorchScript, for short queries.

``SentenceTransformer.encode`` runs the Hugging Face model op by op from Python; for one short
query on these 2-core machines that Python costs about as much as the arithmetic
(all-MiniLM-L6-v2: 12.7 ms p50 per query through ``encode``, 8.0 ms traced and frozen). The traced
module replaces ``encode`` only when it computes the same thing: at load it must agree with
``encode`` on probe texts (short, longer than the model's window, Japanese, Polish, one padded
batch). Anything else (another pooling, a tokenizer without token types, a torch whose TorchScript
is gone: it is deprecated in favour of ``torch.compile``, which needs a C++ toolchain at run time)
keeps ``encode``.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from ground.tunables import EMBED_TRACE_MIN_COSINE

log = logging.getLogger("kith.memory.embedders")

Encode = Callable[[list[str]], list[list[float]]]

PROBES = (
    "dog vet appointment",
    "What did Caroline say about the support group she went to last week?",
    "二〇二六年の春に、妹と京都へ旅行しました。",
    "W przyszłym tygodniu jadę z psem do weterynarza na szczepienie.",
    "a long note that runs past the model's window " * 40,
    "ok",
)


def traced_encoder(model: Any) -> Encode | None:
    """``model``'s mean-pooled, normalised embeddings through TorchScript, or None to keep ``encode``."""
    try:
        import torch

        tokenizer, transformer, max_length = model.tokenizer, model[0].auto_model, model.max_seq_length
        example = tokenizer([PROBES[1]], return_tensors="pt")
        if set(example) != {"input_ids", "attention_mask", "token_type_ids"}:
            return None

        class MeanPooled(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.transformer = transformer

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                hidden = self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                                          token_type_ids=token_type_ids).last_hidden_state
                mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
                mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                return torch.nn.functional.normalize(mean, dim=1)

        with warnings.catch_warnings(), torch.inference_mode(), _quiet_transformers():
            warnings.simplefilter("ignore")  # TorchScript's deprecation notice and the tracer's shape notes
            traced = torch.jit.trace(MeanPooled().eval(), (example["input_ids"], example["attention_mask"],
                                                           example["token_type_ids"]), check_trace=False)
            traced = torch.jit.optimize_for_inference(torch.jit.freeze(traced))

        def encode(texts: list[str]) -> list[list[float]]:
            if not texts:
                return []
            with torch.inference_mode():
                batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
                vectors: list[list[float]] = traced(batch["input_ids"], batch["attention_mask"],
                                                    batch["token_type_ids"]).tolist()
                return vectors

        reference = model.encode(list(PROBES), normalize_embeddings=True).tolist()
        candidates = encode(list(PROBES)) + [encode([probe])[0] for probe in PROBES]
        # A model with more layers after pooling (a Dense projection) gives vectors of another length.
        agreement = min(_cosine(c, reference[i % len(PROBES)]) for i, c in enumerate(candidates))
    except Exception as exc:  # any failure only means the slower, certain path
        log.info("traced encoder unavailable error=%s; using encode()", type(exc).__name__)
        return None
    if agreement < EMBED_TRACE_MIN_COSINE:
        log.info("traced encoder disagrees with encode() cosine=%.6f; using encode()", agreement)
        return None
    return encode


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Tracing reads every attribute of the model; transformers warns about unused config keys on the way."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = (sum(x * x for x in a) * sum(y * y for y in b)) ** 0.5
    return dot / norm if norm else 0.0
