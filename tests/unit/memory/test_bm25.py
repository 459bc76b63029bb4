"""BM25 keyword recall: rare words win, forms of a word meet, and it stays fast."""

from __future__ import annotations

from memory.core.bm25 import BM25Index, normalize_scores


def _index(docs: dict[str, str]) -> BM25Index:
    index = BM25Index()
    index.add_many(docs.items())
    return index


def test_a_rare_word_outranks_a_common_one() -> None:
    # Same length, one query word each: only the words' rarity separates them.
    docs = {f"coffee-{i}": f"Drinks coffee with colleague number {i}" for i in range(20)}
    docs["a-kombucha"] = "Drinks kombucha with colleague number 99"
    results = _index(docs).search("coffee kombucha", k=3)
    assert results[0][0] == "a-kombucha"
    assert results[0][1] > results[1][1]


def test_a_longer_document_ranks_below_a_focused_one_for_the_same_word() -> None:
    index = _index(
        {
            "focused": "Biscuit the beagle",
            "rambling": "Biscuit came up once in a long story about trains, weather, gardens and holidays",
        }
    )
    assert [doc_id for doc_id, _ in index.search("biscuit", k=2)] == ["focused", "rambling"]


def test_only_documents_with_a_match_are_returned() -> None:
    index = _index({"tea": "Loves green tea", "dog": "Has a beagle"})
    assert [doc_id for doc_id, _ in index.search("tea", k=10)] == ["tea"]


def test_a_query_of_filler_finds_nothing() -> None:
    index = _index({"tea": "Loves green tea"})
    assert index.search("I use the stuff", k=5) == []


def test_removed_documents_are_never_returned() -> None:
    index = _index({"a": "Lives in Berlin", "b": "Works in Berlin"})
    assert index.remove("a")
    assert [doc_id for doc_id, _ in index.search("berlin", k=5)] == ["b"]
    assert "a" not in index
    assert not index.remove("a")


def test_adding_an_existing_id_replaces_its_text() -> None:
    index = _index({"home": "Lives in Berlin"})
    index.add("home", "Lives in Munich")
    assert index.search("berlin", k=5) == []
    assert [doc_id for doc_id, _ in index.search("munich", k=5)] == ["home"]
    assert len(index) == 1


def test_removing_every_document_leaves_an_empty_index() -> None:
    index = _index({"a": "Lives in Berlin"})
    index.remove("a")
    assert len(index) == 0
    assert index.search("berlin", k=5) == []


def test_allowed_ids_restrict_the_ranking_to_one_persons_memories() -> None:
    docs = {f"other-{i}": "Plays chess every weekend" for i in range(50)}
    docs["mine"] = "Plays chess badly"
    results = _index(docs).search("chess", k=10, allowed_ids={"mine"})
    assert [doc_id for doc_id, _ in results] == ["mine"]


def test_k_limits_the_results() -> None:
    index = _index({f"d{i}": f"tea sample {i}" for i in range(10)})
    assert len(index.search("tea", k=3)) == 3
    assert index.search("tea", k=0) == []


def test_prefix_rule_finds_the_longer_spelling() -> None:
    index = _index({"pg": "Runs PostgreSQL 16 at work", "other": "Runs MySQL"})
    assert index.search("postgres", k=5)[0][0] == "pg"


def test_polish_inflections_meet_in_the_index() -> None:
    index = _index(
        {
            "city": "Mieszkam w Warszawie od roku",
            "cat": "Codziennie bawię się z kotem",
            "other": "Lubię góry",
        }
    )
    assert [doc_id for doc_id, _ in index.search("Warszawa", k=5)] == ["city"]
    assert [doc_id for doc_id, _ in index.search("kot", k=5)] == ["cat"]


def test_chinese_query_without_spaces_finds_the_matching_memory() -> None:
    index = _index({"coffee": "我喜欢喝咖啡", "tea": "我喜欢喝茶", "dog": "我的狗叫小白"})
    assert index.search("咖啡", k=5)[0][0] == "coffee"
    assert "tea" not in [doc_id for doc_id, _ in index.search("咖啡", k=5)]
    assert [doc_id for doc_id, _ in index.search("小白是谁", k=5)] == ["dog"]


def test_japanese_query_finds_the_matching_memory() -> None:
    index = _index({"cat": "私は猫が好きです", "sushi": "寿司をよく食べます"})
    assert [doc_id for doc_id, _ in index.search("猫", k=5)] == ["cat"]


def test_normalize_scores_scales_by_the_best_and_keeps_order() -> None:
    normalized = normalize_scores([("a", 4.0), ("b", 2.0), ("c", 1.0)])
    assert normalized == [("a", 1.0), ("b", 0.5), ("c", 0.25)]
    assert normalize_scores([]) == []
