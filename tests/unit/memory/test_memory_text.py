"""Text normalisation for evidence, and the multilingual tokens matching runs on."""

from __future__ import annotations

import unicodedata

import pytest

from memory.core.text import content_words, fold, is_negation, normalize, tokens, words_match


def test_normalize_folds_every_kind_of_whitespace_to_one_space() -> None:
    messy = "  I\tlive\n\nin\u00a0Kraków\u3000now  "
    assert normalize(messy) == "I live in Kraków now"


def test_normalize_composes_decomposed_letters() -> None:
    decomposed = unicodedata.normalize("NFD", "Zażółć gęślą jaźń")
    assert decomposed != "Zażółć gęślą jaźń"
    assert normalize(decomposed) == "Zażółć gęślą jaźń"


def test_normalize_keeps_case_and_punctuation() -> None:
    assert normalize("I LOVE Tea!") == "I LOVE Tea!"


def test_polish_words_with_diacritics_stay_whole_even_when_decomposed() -> None:
    decomposed = unicodedata.normalize("NFD", "Zażółć gęślą jaźń")
    assert tokens(decomposed) == ["zażółć", "gęślą", "jaźń"]


def test_words_with_combining_marks_stay_whole() -> None:
    assert tokens("हिन्दी भाषा") == ["हिन्दी", "भाषा"]


def test_tokens_are_case_folded() -> None:
    assert tokens("Postgres POSTGRES postgres") == ["postgres"] * 3


def test_english_contractions_keep_the_negation() -> None:
    assert content_words("I don't like coffee") == ["not", "like", "coffee"]
    assert content_words("I can't swim") == ["not", "swim"]


def test_chinese_without_spaces_becomes_bigrams_minus_function_characters() -> None:
    assert content_words("我的猫叫小白") == ["猫叫", "叫小", "小白"]


def test_a_lone_han_character_between_function_characters_stays_a_unigram() -> None:
    assert content_words("我的猫") == ["猫"]


def test_japanese_particles_and_copula_do_not_become_content() -> None:
    assert content_words("私は猫が好きです") == ["猫", "好き"]
    assert content_words("猫が好き") == ["猫", "好き"]


def test_korean_shares_the_stem_bigram_despite_attached_particles() -> None:
    assert "서울" in content_words("저는 서울에서 살아요")
    assert "서울" in content_words("서울은 커요")
    assert "저는" not in content_words("저는 서울에서 살아요")


def test_mixed_script_text_splits_at_script_boundaries() -> None:
    assert content_words("I love 寿司 and ramen") == ["love", "寿司", "ramen"]


@pytest.mark.parametrize(
    "filler",
    [
        "I use the database for my project stuff",
        "Mam to, ale jest tak i już",
        "yes ok thanks",
    ],
)
def test_filler_has_no_content_words(filler: str) -> None:
    assert content_words(filler) == []


def test_content_words_keep_repeats_for_term_frequency() -> None:
    assert content_words("tea tea coffee") == ["tea", "tea", "coffee"]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("postgres", "postgresql"),
        ("migrate", "migrated"),
        ("warszawa", "warszawie"),
        ("kot", "kota"),
        ("kot", "kotem"),
        ("kota", "kotem"),
        ("kotach", "kotami"),
        ("cat", "cats"),
    ],
)
def test_inflected_and_extended_forms_match(a: str, b: str) -> None:
    assert words_match(a, b)
    assert words_match(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("pos", "postgres"),  # a stub under four letters is not a prefix match
        ("tea", "team"),
        ("berlin", "munich"),
        ("1234", "12345"),  # numbers only match exactly
        ("咖啡", "咖啡店"),  # CJK tokens only match exactly
    ],
)
def test_unrelated_words_and_stubs_do_not_match(a: str, b: str) -> None:
    assert not words_match(a, b)


@pytest.mark.parametrize("word", ["not", "never", "nie", "nigdy", "不喜", "没有"])
def test_negations_are_recognised(word: str) -> None:
    assert is_negation(word)


def test_negations_are_content_words() -> None:
    assert content_words("Nie lubię kawy") == ["nie", "lubię", "kawy"]


def test_fold_reads_look_alike_letters_and_hidden_characters_as_the_plain_word() -> None:
    assert fold("I am kith’s \u043ewner") == "i am kith's owner"  # a Cyrillic о
    assert fold("al\u200bways \uff21\uff44\uff4d\uff49\uff4e") == "always admin"  # zero-width space, full width
    assert fold("Zażółć Größe") == "zażółć grösse"  # Polish and German letters stay themselves
