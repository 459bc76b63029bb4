"""A cross-encoder checkpoint for tests: all-MiniLM-L6-v2's encoder with a fixed, untrained score head.

No trained cross-encoder can be installed here (none is published on PyPI), so the tests check
that kith computes exactly what the reference implementation (Hugging Face transformers'
BertForSequenceClassification) computes for the same checkpoint; how well a trained one ranks is
the benchmark's business.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np

from memory.encoders.encoder_files import locate
from memory.encoders.onnx_encoder import read_safetensors

HEAD_SEED = 7


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header: dict[str, object] = {}
    offset = 0
    blobs = []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    raw = json.dumps(header).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def make_cross_encoder(directory: Path) -> Path:
    source = locate("all-MiniLM-L6-v2").directory
    directory.mkdir(parents=True, exist_ok=True)
    weights = {
        f"bert.{name}": array.astype(np.float32)
        for name, array in read_safetensors(source / "model.safetensors").items()
        if array.dtype == np.float32
    }
    rng = np.random.default_rng(HEAD_SEED)
    weights["classifier.weight"] = rng.normal(0.0, 0.2, size=(1, 384)).astype(np.float32)
    weights["classifier.bias"] = np.array([0.1], dtype=np.float32)
    write_safetensors(directory / "model.safetensors", weights)
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    config.update(architectures=["BertForSequenceClassification"], num_labels=1)
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    shutil.copy(source / "tokenizer.json", directory / "tokenizer.json")
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(source / name, directory / name)
    return directory
