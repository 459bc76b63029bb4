"""The local models memory may run: the sentence embedder, the optional reranker and entailment check.

* ``embedders``: the embedder ``[memory] embedder`` names, its status, and the doctor check.
* ``encoder_files``: where an encoder's files come from, their hashes, and the built graph's cache.
* ``onnx_encoder``: a BERT sentence encoder built as an ONNX graph on this machine.
* ``traced_encoder``: a sentence-transformers model traced for short queries (the ``local-embed`` extra).
* ``reranker``: the optional cross-encoder over the top of a ranking.
* ``entailment``: the optional NLI check of a receipt.
"""

from memory.encoders.embedders import Embedder, EmbedderStatus, Vector, check_embedder, embedder_result, open_embedder
from memory.encoders.entailment import EntailmentUnavailable, load_entailment
from memory.encoders.reranker import CrossEncoderReranker, check_reranker, open_reranker

__all__ = [
    "CrossEncoderReranker",
    "Embedder",
    "EmbedderStatus",
    "EntailmentUnavailable",
    "Vector",
    "check_embedder",
    "check_reranker",
    "embedder_result",
    "load_entailment",
    "open_embedder",
    "open_reranker",
]
