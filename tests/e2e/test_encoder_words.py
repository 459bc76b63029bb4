"""The built encoder graph keeps its word table in a file of its own beside it: written before the graph, each
whole or not at all, and a table that does not match its graph is found and both are built again."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.encoders.encoder_files import encoder_graph, locate, open_graph, words_of
from memory.encoders.onnx_encoder import EncoderBuildError

MODEL = "all-MiniLM-L6-v2"


def _vector(graph: Path) -> list[float]:
    import numpy as np

    session, tokenizer = open_graph(graph, locate(MODEL).tokenizer, 128)
    encoded = tokenizer.encode("a word table")
    ids = np.array([encoded.ids], dtype=np.int64)
    mask = np.array([encoded.attention_mask], dtype=np.int64)
    (vectors,) = session.run(["sentence"], {"input_ids": ids, "attention_mask": mask})
    return [float(x) for x in vectors[0]]


def test_a_graph_whose_word_table_is_missing_or_cut_short_is_built_again(tmp_path: Path) -> None:
    files = locate(MODEL)
    graph = encoder_graph(files, tmp_path, MODEL)
    words = words_of(graph)
    whole = words.read_bytes()
    assert graph.is_file() and len(whole) > 0
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left
    expected = _vector(graph)

    words.unlink()  # a graph alone (its table removed): built again, not opened without it
    assert encoder_graph(files, tmp_path, MODEL) == graph and words.read_bytes() == whole

    words.write_bytes(whole[:len(whole) // 2])  # a table cut short: the graph does not load, and both go
    with pytest.raises(EncoderBuildError, match="the next start builds it again"):
        _vector(graph)
    assert not graph.exists() and not words.exists()
    assert encoder_graph(files, tmp_path, MODEL) == graph and words.read_bytes() == whole
    assert _vector(graph) == expected
