"""The lemma dictionaries open from a cached block index, and read exactly as simplemma's own do."""

from __future__ import annotations

from pathlib import Path

import pytest
from simplemma import Lemmatizer
from simplemma.strategies import DefaultStrategy

from memory.core.lemma_dictionaries import cached_lemmatizer, indexed_stream

WORDS = {"en": ["went", "children", "better", "running"], "fr": ["habite", "allions", "yeux", "fait"]}


@pytest.fixture(scope="module")
def reference() -> Lemmatizer:
    return Lemmatizer(lemmatization_strategy=DefaultStrategy(low_memory=True))


def _lemmas(lemmatizer: Lemmatizer) -> dict[str, list[str]]:
    return {lang: [lemmatizer.lemmatize(w, lang=lang) for w in words] for lang, words in WORDS.items()}


def test_the_first_open_builds_the_index_and_later_opens_read_it_with_the_same_lemmas(
        tmp_path: Path, reference: Lemmatizer) -> None:
    built = cached_lemmatizer(tmp_path)
    assert _lemmas(built) == _lemmas(reference)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert [f.split("-")[0] for f in files] == ["en", "fr"]
    assert all((tmp_path / f).stat().st_mode & 0o077 == 0 for f in files)  # the owner's alone

    stamps = {f: (tmp_path / f).stat().st_mtime_ns for f in files}
    assert _lemmas(cached_lemmatizer(tmp_path)) == _lemmas(reference)
    assert {f: (tmp_path / f).stat().st_mtime_ns for f in files} == stamps  # read, not built again


def test_a_damaged_index_is_built_again(tmp_path: Path, reference: Lemmatizer) -> None:
    indexed_stream("fr", tmp_path)
    (index,) = tmp_path.iterdir()
    index.write_bytes(b"\x00not an index")
    assert _lemmas(cached_lemmatizer(tmp_path))["fr"] == _lemmas(reference)["fr"]
    assert index.read_bytes() != b"\x00not an index"


def test_an_unwritable_cache_still_gives_the_lemmas(tmp_path: Path, reference: Lemmatizer) -> None:
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    assert _lemmas(cached_lemmatizer(blocked / "lemmas")) == _lemmas(reference)


def test_a_later_open_maps_the_file_rather_than_reading_it(tmp_path: Path) -> None:
    import mmap

    indexed_stream("en", tmp_path)
    mapped = indexed_stream("en", tmp_path)
    assert isinstance(mapped._data, mmap.mmap)  # type: ignore[attr-defined]  # pages come in as look-ups read them
    assert mapped.get("went") == "go"


@pytest.mark.parametrize("damage", ["cut short", "one byte changed"])
def test_a_torn_or_altered_index_is_found_and_built_again(
        tmp_path: Path, reference: Lemmatizer, damage: str) -> None:
    # Written whole or not at all (a temporary file renamed), but a file cut short by a full disk or altered on
    # it keeps its header: the length and the digest of everything after it catch what the magic cannot.
    indexed_stream("fr", tmp_path)
    (index,) = tmp_path.iterdir()
    whole = index.read_bytes()
    damaged = whole[:len(whole) // 2] if damage == "cut short" else (
        whole[:-100] + bytes([whole[-100] ^ 0xFF]) + whole[-99:])
    index.write_bytes(damaged)
    assert _lemmas(cached_lemmatizer(tmp_path))["fr"] == _lemmas(reference)["fr"]
    assert index.read_bytes() == whole
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left
