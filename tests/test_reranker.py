"""The optional cross-encoder reranker computes what the reference implementation computes, or says why not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memory.encoder_files import locate
from memory.reranker import CrossEncoderReranker, RerankerUnavailable, check_reranker, reranked
from tests.support.cross_encoder import make_cross_encoder

REFERENCE = json.loads(
    (Path(__file__).parent / "data" / "cross_encoder_reference.json").read_text(encoding="utf-8")
)


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_cross_encoder(tmp_path_factory.mktemp("cross-encoder"))


async def test_pair_scores_match_the_reference_implementation(cross_encoder: Path, tmp_path: Path) -> None:
    reranker = CrossEncoderReranker(str(cross_encoder), cache_dir=tmp_path / "cache")
    try:
        alone = [(await reranker.scores(query, [passage]))[0] for query, passage in REFERENCE["pairs"]]
        query = REFERENCE["pairs"][0][0]
        together = await reranker.scores(query, [REFERENCE["pairs"][0][1], REFERENCE["pairs"][1][1]])
    finally:
        await reranker.close()
    # transformers' BertForSequenceClassification on the same checkpoint, padded and cut the same way
    # (a passage past 256 tokens and non-Latin text included).
    for mine, theirs in zip(alone, REFERENCE["scores"], strict=True):
        assert abs(mine - theirs) < 1e-5
    assert together == pytest.approx(alone[:2], abs=1e-5)  # padding to a longer pair changes nothing


async def test_a_sentence_encoder_is_not_taken_for_a_reranker(tmp_path: Path) -> None:
    copy = tmp_path / "encoder"
    shutil.copytree(locate("all-MiniLM-L6-v2").directory, copy)
    reranker = CrossEncoderReranker(str(copy), cache_dir=tmp_path / "cache")
    with pytest.raises(RerankerUnavailable, match=r"no tensor 'classifier\.weight': not a BERT cross-encoder"):
        await reranker.load()
    await reranker.close()


async def test_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    reranker = CrossEncoderReranker(str(tmp_path / "nowhere"), cache_dir=tmp_path / "cache")
    with pytest.raises(RerankerUnavailable) as caught:
        await reranker.load()
    await reranker.close()
    assert "nowhere" in str(caught.value) and "\n" not in str(caught.value)


def test_the_reranker_reorders_only_the_top_it_scored() -> None:
    ranked = ["a", "b", "c", "d", "e"]
    assert reranked(ranked, [0.1, 0.9, 0.5]) == ["b", "c", "a", "d", "e"]
    assert reranked(ranked, [0.2, 0.2]) == ranked  # a tie keeps recall's order
    assert reranked(ranked, []) == ranked


async def test_doctor_says_whether_a_reranker_is_on(cross_encoder: Path, tmp_path: Path) -> None:
    off = await check_reranker("")
    assert off.ok and not off.warn and off.detail.startswith("off")
    broken = await check_reranker(str(tmp_path / "nowhere"))
    assert broken.ok and broken.warn and "recall keeps its own order" in broken.detail
    loads = await check_reranker(str(cross_encoder))
    assert loads.ok and not loads.warn and "reorders recall's top candidates" in loads.detail
