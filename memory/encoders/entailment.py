"""An optional further check of a receipt: a small local entailment (NLI) model asked whether the person's
sentence entails the memory.

The support rules (``memory.capture.support_rules``) are the guarantee: they alone must refuse every unsupported
memory, and do so in every language they know. Where the operator has a local NLI cross-encoder on disk (``[memory]
entailment_model``, a directory; the ``local-embed`` extra brings sentence-transformers), a memory the rules let
through is also refused when the model does not find it entailed. Nothing is downloaded: the model is read from
that directory only. A model that cannot be loaded is reported in one line and the rules go on alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger("kith.memory")

# The person's sentences and the memory, as the model reads them: "The person said: ..." keeps a first-person
# sentence from reading as a claim about someone else.
PREMISE = "The person said: {sentences}"


class EntailmentUnavailable(Exception):
    """The configured model cannot be used; the message is one line naming what to fix."""


class Entailment(Protocol):
    def entails(self, premise: str, hypothesis: str) -> bool: ...


Entails = Callable[[Sequence[str], str], bool]  # (the evidence sentences, the memory) -> entailed?


def premise_of(sentences: Sequence[str]) -> str:
    return PREMISE.format(sentences=" ".join(sentences))


def as_check(model: Entailment) -> Entails:
    """The check the validator calls: whether the person's sentences entail the memory."""

    def entailed(sentences: Sequence[str], memory: str) -> bool:
        return model.entails(premise_of(sentences), memory)

    return entailed


def entailment_index(id2label: dict[int, str]) -> int:
    """Which of the model's outputs is "entailment"; raises EntailmentUnavailable when none is."""
    for index, label in id2label.items():
        if str(label).strip().lower().startswith("entail"):
            return int(index)
    raise EntailmentUnavailable(f"the model's labels ({', '.join(map(str, id2label.values()))}) name no "
                                "entailment: use an NLI cross-encoder")


@dataclass
class CrossEncoderEntailment:
    model: Any  # sentence_transformers.CrossEncoder
    index: int  # the entailment output
    threshold: float  # the lowest probability of entailment that counts

    def entails(self, premise: str, hypothesis: str) -> bool:
        scores = self.model.predict([(premise, hypothesis)], apply_softmax=True, show_progress_bar=False)
        return float(scores[0][self.index]) >= self.threshold


def load_entailment(path: str, threshold: float) -> CrossEncoderEntailment:
    """The NLI cross-encoder in directory ``path``, read from disk only."""
    where = Path(path).expanduser()
    if not where.is_dir():
        raise EntailmentUnavailable(f"[memory] entailment_model: {where} is not a directory holding a model")
    try:
        from sentence_transformers import CrossEncoder  # heavy, and an optional extra: only when configured
    except ImportError:
        raise EntailmentUnavailable("[memory] entailment_model needs the local-embed extra "
                                    "(pip install 'kith[local-embed]')") from None
    try:
        model = CrossEncoder(str(where), local_files_only=True)
    except Exception as exc:
        raise EntailmentUnavailable(f"[memory] entailment_model: {where} could not be loaded "
                                    f"({type(exc).__name__})") from None
    return CrossEncoderEntailment(model, entailment_index(dict(model.config.id2label)), threshold)


def optional_entailment(path: str, threshold: float) -> Entails | None:
    """The check for ``[memory] entailment_model``, or None when it is unset or cannot be loaded (logged)."""
    if not path:
        return None
    try:
        return as_check(load_entailment(path, threshold))
    except EntailmentUnavailable as exc:
        log.error("entailment check off: %s", exc)
        return None
