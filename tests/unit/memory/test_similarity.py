"""The merge/conflict decision: one fact for a repeat, a flag for a disagreement."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ground.tunables import MERGE_THRESHOLD, SINGLE_WORD_LINK_SCORE
from memory.core.similarity import Action, Via, best_match, decide, lexical_similarity, matches


@dataclass(frozen=True)
class Stored:
    id: str
    text: str
    kind: str


def test_a_restated_fact_merges_on_the_lexical_path() -> None:
    decision = decide("I use Postgres", "Database is Postgres", same_kind=True)
    assert decision.action is Action.MERGE
    assert decision.via is Via.LEXICAL


def test_prefix_rule_merges_postgres_and_postgresql() -> None:
    assert decide("I use Postgres", "Database is PostgreSQL", same_kind=True).action is Action.MERGE


def test_merge_does_not_need_the_same_kind() -> None:
    assert decide("I use Postgres", "Database is Postgres", same_kind=False).action is Action.MERGE


def test_sqlite_against_postgres_shares_no_word_so_lexical_alone_says_new() -> None:
    decision = decide("I moved to SQLite", "I use Postgres", same_kind=True)
    assert decision.lexical.shared == 0
    assert decision.action is Action.NEW


def test_sqlite_against_postgres_conflicts_when_the_embedder_puts_them_in_the_band() -> None:
    decision = decide("I moved to SQLite", "I use Postgres", cosine=0.7, cosine_from_embedder=True, same_kind=True)
    assert decision.action is Action.CONFLICT
    assert decision.via is Via.EMBEDDING
    assert decision.score == pytest.approx(0.7)


def test_a_cosine_that_did_not_come_from_the_embedder_cannot_manufacture_a_conflict() -> None:
    decision = decide("I moved to SQLite", "I use Postgres", cosine=0.7, cosine_from_embedder=False, same_kind=True)
    assert decision.action is Action.NEW


def test_a_cosine_that_did_not_come_from_the_embedder_cannot_merge() -> None:
    decision = decide("I moved to SQLite", "I use Postgres", cosine=0.97, cosine_from_embedder=False, same_kind=True)
    assert decision.action is Action.NEW


def test_embedder_conflict_needs_the_same_kind() -> None:
    decision = decide("I moved to SQLite", "I use Postgres", cosine=0.7, cosine_from_embedder=True, same_kind=False)
    assert decision.action is Action.NEW


def test_embedder_cosine_above_the_merge_line_merges() -> None:
    decision = decide("Moved to SQLite", "Now on SQLite3", cosine=0.9, cosine_from_embedder=True, same_kind=True)
    assert decision.action is Action.MERGE
    assert decision.via is Via.EMBEDDING


def test_embedder_cosine_below_the_band_is_new() -> None:
    decision = decide("I moved to SQLite", "I use Postgres", cosine=0.5, cosine_from_embedder=True, same_kind=True)
    assert decision.action is Action.NEW


def test_a_score_exactly_on_the_merge_line_is_a_conflict_not_lost_between_rules() -> None:
    decision = decide(
        "I moved to SQLite", "I use Postgres", cosine=MERGE_THRESHOLD, cosine_from_embedder=True, same_kind=True
    )
    assert decision.action is Action.CONFLICT


def test_sister_moving_cities_is_a_lexical_conflict() -> None:
    # {sister, lives, berlin} vs {sister, lives, munich} ("now" is filler): two agreeing words,
    # Jaccard 2/4 = 0.5, both short, so the single-word link lifts the score to 0.6.
    decision = decide("My sister lives in Berlin", "My sister lives in Munich now", same_kind=True)
    assert decision.action is Action.CONFLICT
    assert decision.via is Via.LEXICAL
    assert decision.lexical.shared == 2
    assert decision.lexical.jaccard == pytest.approx(0.5)
    assert decision.score == pytest.approx(SINGLE_WORD_LINK_SCORE)


def test_same_words_of_different_kinds_never_conflict() -> None:
    decision = decide("My sister lives in Berlin", "My sister lives in Munich now", same_kind=False)
    assert decision.action is Action.NEW


def test_two_word_facts_cannot_contradict() -> None:
    decision = decide("Likes Berlin", "Likes Munich", same_kind=True)
    assert decision.lexical.link == pytest.approx(SINGLE_WORD_LINK_SCORE)  # in the band...
    assert decision.action is Action.NEW  # ...but one shared word is ambiguous


def test_long_facts_do_not_link_on_one_shared_word() -> None:
    score = lexical_similarity(
        "My brother Tom repairs vintage motorbikes in his garage",
        "Tom bought a new guitar for the summer festival",
    )
    assert score.shared == 1
    assert score.link == 0.0
    assert score.score < 0.55


def test_a_repeated_preference_with_added_detail_merges_through_containment() -> None:
    decision = decide("I like green tea", "I like green tea in the morning", same_kind=True)
    assert decision.lexical.jaccard < MERGE_THRESHOLD  # Jaccard alone would keep two facts
    assert decision.lexical.containment > MERGE_THRESHOLD
    assert decision.action is Action.MERGE


def test_containment_only_fires_when_every_word_of_the_shorter_fact_is_in_the_longer() -> None:
    score = lexical_similarity("I like green tea", "I like black coffee in the morning")
    assert score.containment == 0.0


def test_a_negated_repeat_is_flagged_never_merged() -> None:
    decision = decide("I like coffee in the morning", "I don't like coffee in the morning", same_kind=True)
    assert decision.lexical.negation_mismatch
    assert decision.action is Action.CONFLICT


def test_a_negated_repeat_is_not_merged_even_when_the_embedder_calls_it_identical() -> None:
    decision = decide(
        "I like coffee in the morning",
        "I don't like coffee in the morning",
        cosine=0.96,
        cosine_from_embedder=True,
        same_kind=True,
    )
    assert decision.action is Action.CONFLICT


def test_polish_inflected_repeat_merges() -> None:
    decision = decide("Mój kot nazywa się Filemon", "Mam kota, który nazywa się Filemon", same_kind=True)
    assert decision.action is Action.MERGE


def test_polish_city_in_another_case_merges() -> None:
    assert decide("Mieszkam w Warszawie", "Mieszkam teraz w Warszawie", same_kind=True).action is Action.MERGE
    assert decide("Warszawa to moje miasto", "Moje miasto: Warszawie", same_kind=True).action is Action.MERGE


def test_chinese_repeat_without_spaces_merges() -> None:
    assert decide("我喜欢喝咖啡", "我很喜欢喝咖啡", same_kind=True).action is Action.MERGE


def test_chinese_negated_repeat_is_not_merged() -> None:
    assert decide("我喜欢喝咖啡", "我不喜欢喝咖啡", same_kind=True).action is not Action.MERGE


def test_japanese_repeat_merges() -> None:
    assert decide("私は猫が好きです", "猫が好き", same_kind=True).action is Action.MERGE


def test_empty_or_filler_only_text_is_new() -> None:
    assert decide("ok thanks", "ok thanks", same_kind=True).action is Action.NEW


def test_best_match_prefers_a_merge_over_a_stronger_looking_conflict() -> None:
    existing = [
        Stored("m1", "My sister lives in Munich", "fact"),
        Stored("m2", "My sister lives in Berlin", "fact"),
    ]
    match = best_match("My sister lives in Berlin", "fact", existing)
    assert match is not None
    assert match.id == "m2"
    assert match.decision.action is Action.MERGE


def test_matches_lists_every_merge_and_conflict_strongest_first() -> None:
    existing = [
        Stored("unrelated", "Has a beagle", "fact"),
        Stored("conflict", "My sister lives in Munich", "fact"),
        Stored("other-kind", "My sister lives in Munich", "preference"),
        Stored("merge", "Sister lives in Berlin", "fact"),
    ]
    found = matches("My sister lives in Berlin", "fact", existing)
    assert [(m.id, m.decision.action) for m in found] == [("merge", Action.MERGE), ("conflict", Action.CONFLICT)]


def test_best_match_uses_cosines_only_for_the_ids_the_embedder_scored() -> None:
    existing = [
        Stored("pg", "I use Postgres", "fact"),
        Stored("cold", "Database is MySQL", "fact"),  # not yet embedded: lexical only
    ]
    match = best_match("I moved to SQLite", "fact", existing, cosines={"pg": 0.72})
    assert match is not None
    assert match.id == "pg"
    assert match.decision.action is Action.CONFLICT
    assert [m.id for m in matches("I moved to SQLite", "fact", existing, cosines={"pg": 0.72})] == ["pg"]


def test_best_match_with_nothing_related_is_none() -> None:
    assert best_match("I moved to SQLite", "fact", [Stored("dog", "Has a beagle named Biscuit", "fact")]) is None
    assert best_match("I moved to SQLite", "fact", []) is None
