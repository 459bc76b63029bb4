"""Embedders: each one either works or says, in one line, why not and what to do; memory keeps working."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

from ground.db import Database
from llm.client import LLMClient
from memory.encoders.embedders import (
    ChromaDefaultEmbedder,
    EmbedderStatus,
    LiteLLMEmbedder,
    SentenceTransformerEmbedder,
    check_embedder,
    hashed_vector,
    open_embedder,
    probe_embedder,
)
from memory.service import MemoryService
from memory.store.chroma import VECTOR_KEY, Collection
from tests.fakes.openai_api import FakeOpenAI
from tests.support.clock import FakeClock
from tests.support.memory import (
    POSTGRES,
    T0,
    TableEmbedder,
    answer,
    candidate,
    fact,
    memory_settings,
    reply,
    say,
)
from tests.support.ports import free_port


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_the_hashed_vector_is_deterministic_and_never_empty() -> None:
    a = hashed_vector("Ana plays the cello")
    assert a == hashed_vector("Ana plays the cello") and len(a) == 256
    assert math.isclose(math.sqrt(sum(v * v for v in a)), 1.0)
    assert cosine(a, hashed_vector("the cello, Ana plays it")) > cosine(a, hashed_vector("Bob fixes bikes"))
    assert any(hashed_vector("", 8))  # Chroma gets a usable vector even for no words


async def test_litellm_embeddings_come_from_the_configured_endpoint(
    tmp_path: Path, db: Database, fake_llm: FakeOpenAI
) -> None:
    settings = memory_settings(
        tmp_path,
        llm_base=fake_llm.base_url,
        embedder="litellm:openai/fake-embed",
        embedder_api_base=fake_llm.base_url,
    )
    embedder, status = await open_embedder(settings)
    assert status.ready and status.dim == 64 and isinstance(embedder, LiteLLMEmbedder)
    assert fake_llm.embedding_requests[0]["model"] == "fake-embed"
    service = await MemoryService.open(
        settings, db, LLMClient(settings.llm), clock=FakeClock(T0), embedder=embedder, status=status
    )
    try:
        await service.gate.admit("p_ana", candidate("Ana plays the cello"))
        result = await service.search("p_ana", "cello")
        assert not result.lexical_only and result.hits[0].cosine is not None
        assert len(fake_llm.embedding_requests) >= 3  # probe, the write, the query
    finally:
        await service.close()
    check = await check_embedder(settings)
    assert check.ok and "64 dimensions" in check.detail


async def test_a_failing_embedding_endpoint_is_reported_with_what_to_check(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.embed_status = 500
    settings = memory_settings(tmp_path, llm_base=fake_llm.base_url, embedder="litellm:openai/fake-embed")
    embedder, status = await open_embedder(settings)
    assert embedder is None and not status.ready
    assert fake_llm.base_url in status.reason and "memory.embedder_api_base" in status.reason
    check = await check_embedder(settings)
    # Memory works without it, on keywords: a warning for the operator, not a failed check.
    assert check.ok and check.warn and check.line().startswith("warn  embedder:") and "keywords" in check.detail


async def test_chroma_default_without_network_is_unavailable_and_memory_still_works(
    tmp_path: Path, db: Database, fake_llm: FakeOpenAI
) -> None:
    # No network here: Chroma's model fetch is pointed at a closed loopback port, so the failure is
    # the real one (a refused connection) without anything leaving 127.0.0.1.
    offline = ChromaDefaultEmbedder(
        cache_dir=tmp_path / "onnx", model_url=f"http://127.0.0.1:{free_port()}/onnx.tar.gz"
    )
    status = await probe_embedder("chroma-default", offline)
    assert not status.ready and not status.disabled
    assert "all-MiniLM-L6-v2" in status.reason and "ConnectError" in status.reason
    assert "set memory.embedder =" in status.reason and "\n" not in status.reason
    assert status.line().startswith("embedder chroma-default: unavailable")
    await offline.close()

    settings = memory_settings(tmp_path, llm_base=fake_llm.base_url, embedder="chroma-default")
    service = await MemoryService.open(
        settings, db, LLMClient(settings.llm), clock=FakeClock(T0), embedder=None, status=status
    )
    try:
        ana, _ = await say(db, "console:ana", "My dog Luna needs the vet tomorrow.")
        last = await reply(db, "I hope Luna is fine.")
        fake_llm.reply(answer(fact("Ana's dog is called Luna", "My dog Luna")))
        assert (await service.capture.run("console:ana", last)).written == 1
        assert (await service.promote(ana)).outcomes == {"new": 1}
        result = await service.search(ana, "Luna")
        # Found lexically, and the result says why it is lexical instead of quietly coming back empty.
        assert [h.record.text for h in result.hits] == ["Ana's dog is called Luna"]
        assert result.lexical_only and "all-MiniLM-L6-v2" in result.reason
    finally:
        await service.close()


async def test_sentence_transformers_works_or_says_how_to_install_it() -> None:
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    status = await probe_embedder("sentence-transformers:all-MiniLM-L6-v2", embedder)
    await embedder.close()
    if importlib.util.find_spec("sentence_transformers") is None:
        assert not status.ready
        assert "sentence-transformers is not installed" in status.reason
        assert "pip install 'kith[local-embed]'" in status.reason
    else:
        assert status.ready and status.dim == 384, status.reason


async def test_none_and_unknown_embedders(tmp_path: Path) -> None:
    off = await check_embedder(memory_settings(tmp_path, embedder="none"))
    assert off.ok and "lexical" in off.detail
    _embedder, status = await open_embedder(memory_settings(tmp_path, embedder="word2vec"))
    assert not status.ready and "unknown memory.embedder 'word2vec'" in status.reason
    unknown = await check_embedder(memory_settings(tmp_path, embedder="word2vec"))
    assert unknown.warn and "unknown memory.embedder 'word2vec'" in unknown.detail


async def test_the_next_start_with_an_embedder_re_embeds_what_was_stored_lexically(
    tmp_path: Path, db: Database
) -> None:
    settings = memory_settings(tmp_path)
    llm = LLMClient(settings.llm)
    lexical = await MemoryService.open(settings, db, llm, clock=FakeClock(T0))
    first = await lexical.gate.admit("p_ana", candidate("I use Postgres"))
    await lexical.close()

    embedder = TableEmbedder({"I use Postgres": POSTGRES})
    ready = EmbedderStatus("test", ready=True, dim=3)
    settings = dataclasses.replace(settings, memory=dataclasses.replace(settings.memory, embedder="test"))
    service = await MemoryService.open(
        settings, db, llm, clock=FakeClock(T0), embedder=embedder, status=ready
    )
    try:
        # The collection held 256-dimension hashed vectors; it was rebuilt for the embedder's 3.
        memory = await service.get(first.memory_id or "")
        assert memory is not None and memory.text == "I use Postgres"
        hits = await service.store.nearest("p_ana", await service.store.vectors(["I use Postgres"]), 3)
        assert [(h.record.id, h.trusted) for h in hits] == [(first.memory_id, True)]
        assert service.status.ready
    finally:
        await service.close()


async def test_a_failure_while_re_embedding_leaves_this_start_lexical(tmp_path: Path, db: Database) -> None:
    settings = memory_settings(tmp_path)
    llm = LLMClient(settings.llm)
    lexical = await MemoryService.open(settings, db, llm, clock=FakeClock(T0))
    first = await lexical.gate.admit("p_ana", candidate("I use Postgres"))
    await lexical.close()

    embedder = TableEmbedder({})
    embedder.fail = True
    service = await MemoryService.open(
        settings,
        db,
        llm,
        clock=FakeClock(T0),
        embedder=embedder,
        status=EmbedderStatus("test", ready=True, dim=256),
    )
    try:
        assert not service.status.ready and "re-embedding" in service.status.reason
        assert [h.record.id for h in (await service.search("p_ana", "postgres")).hits] == [first.memory_id]
        chroma = service.store.chroma
        raw = await chroma.run(chroma.collection(Collection.MEMORIES).get, include=["metadatas"])
        assert json.dumps(raw["metadatas"]).count(f'"{VECTOR_KEY}": "hash"') == 1
    finally:
        await service.close()


async def test_the_traced_minilm_gives_encodes_vectors_faster_path_or_none() -> None:
    pytest.importorskip("sentence_transformers")
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    try:
        texts = ["where did we hike in May?", "mój pies ma na imię Burek", "猫の名前はミソです", "x"]
        batch = await embedder.embed(texts)  # loads the model, and traces it when that agrees with encode()
        one = (await embedder.embed(texts[1:2]))[0]
        assert embedder.traced is not None
        model = embedder._model
        expected = model.encode(texts, normalize_embeddings=True).tolist()
        for got, want in [*zip(batch, expected, strict=True), (one, expected[1])]:
            assert sum(a * b for a, b in zip(got, want, strict=True)) > 0.9999
    finally:
        await embedder.close()


def test_a_traced_encoder_that_would_disagree_with_encode_is_not_used(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer

    from memory.encoders.embedders import resolve_sentence_transformer
    from memory.encoders.traced_encoder import traced_encoder

    model = SentenceTransformer(resolve_sentence_transformer("all-MiniLM-L6-v2"), device="cpu",
                                local_files_only=True)
    real = model.encode
    # As if the model pooled differently (its first token's vector): the traced mean must not stand in.
    model.encode = lambda texts, **kw: _first_token(real, texts)
    with caplog.at_level("INFO", logger="kith.memory.embedders"):
        assert traced_encoder(model) is None
    assert "disagrees with encode()" in caplog.text


def _first_token(real: Any, texts: list[str]) -> Any:
    import numpy as np

    vectors = np.array([t[0].numpy() for t in real(texts, output_value="token_embeddings")])
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_a_model_with_a_projection_after_pooling_keeps_encode() -> None:
    pytest.importorskip("sentence_transformers")
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from memory.encoders.embedders import resolve_sentence_transformer
    from memory.encoders.traced_encoder import traced_encoder

    model = SentenceTransformer(resolve_sentence_transformer("all-MiniLM-L6-v2"), device="cpu",
                                local_files_only=True)
    real = model.encode
    model.encode = lambda texts, **kw: real(texts, **kw)[:, :256] / np.sqrt(256 / 384)  # as if a Dense 384 -> 256
    assert traced_encoder(model) is None  # no crash: the embedder keeps encode()
