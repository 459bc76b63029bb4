"""Recall ranking and the prompt's memory parts, as pure functions: what gets shown, in which order."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from ground.config import BudgetSettings, RecallSettings
from memory.core.records import MemoryKind, MemoryRecord, Scope, Source, Status
from memory.core.words import clip_item
from memory.recall.prompt_part import (
    fit_recalled,
    render_pinned,
    with_partners,
)
from memory.recall.ranking import (
    RecallMatch,
    cited,
    latest_pinned,
    rank,
    recency_factor,
)
from persona.labels import CONFLICT_NOTICE, RECALLED_NOTICE, TRUNCATED_FLAG

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
RS = RecallSettings()


def mem(memory_id: str, text: str = "a fact", *, days_ago: float = 0.0, importance: float = 0.5, use_count: int = 0,
        pinned: bool = False, status: Status = Status.ACTIVE, expires_in_days: float | None = None,
        scope: Scope = Scope.DM) -> MemoryRecord:
    when = NOW - timedelta(days=days_ago)
    expires = NOW + timedelta(days=expires_in_days) if expires_in_days is not None else None
    return MemoryRecord(id=memory_id, person="p1", kind=MemoryKind.FACT, text=text, evidence=(text,),
                        sources=(Source("console", "c", memory_id, when),), scope=scope, importance=importance,
                        pinned=pinned, status=status, expires_at=expires, use_count=use_count, created_at=when,
                        updated_at=when)


def order(*candidates: RecallMatch, vector_path: bool = True, settings: RecallSettings = RS) -> list[str]:
    return [r.record.id for r in rank(candidates, NOW, settings, vector_path=vector_path)]


RECENT = dataclasses.replace(RS, half_life_days=30.0)


def test_recency_when_turned_on_prefers_the_newer_of_two_equal_matches_with_its_half_life() -> None:
    old, new = mem("old", days_ago=90), mem("new", days_ago=2)
    assert order(RecallMatch(old, 0.6, 0.8), RecallMatch(new, 0.6, 0.8), settings=RECENT) == ["new", "old"]
    half = recency_factor(30, RECENT.half_life_days)
    assert recency_factor(0, RECENT.half_life_days) == 1.0
    assert recency_factor(60, RECENT.half_life_days) < half < 1.0
    # Half of what age can take away is gone after one half-life.
    assert abs((1.0 - half) - (1.0 - recency_factor(10_000, RECENT.half_life_days)) / 2) < 1e-9
    # Off by default (it did not help under leave-one-out): equal matches of any age tie, and ties go by id.
    assert RS.half_life_days == 0
    assert order(RecallMatch(mem("b", days_ago=2), 0.6, 0.8), RecallMatch(mem("a", days_ago=90), 0.6, 0.8)) == [
        "a", "b"]


def test_a_clearly_better_old_match_still_beats_a_weak_recent_one() -> None:
    exact_last_year = mem("exact", days_ago=365)
    weak_last_week = mem("weak", days_ago=7)
    assert order(RecallMatch(exact_last_year, 0.8, 1.0), RecallMatch(weak_last_week, 0.35, 0.2),
                 settings=RECENT) == ["exact", "weak"]


def test_importance_lifts_the_more_important_of_equal_matches() -> None:
    assert order(RecallMatch(mem("minor", importance=0.1), 0.5, 0.5),
                 RecallMatch(mem("major", importance=0.9), 0.5, 0.5)) == ["major", "minor"]
    flat = dataclasses.replace(RS, importance_weight=0.0)
    assert order(RecallMatch(mem("b", importance=0.1), 0.5, 0.5), RecallMatch(mem("a", importance=0.9), 0.5, 0.5),
                 settings=flat) == ["a", "b"]  # weight 0: importance no longer counts, ties go by id


def test_use_credit_is_small_capped_and_cannot_lift_an_irrelevant_memory() -> None:
    used, fresh = mem("used", use_count=3), mem("fresh")
    assert order(RecallMatch(fresh, 0.5, 0.5), RecallMatch(used, 0.5, 0.5)) == ["used", "fresh"]
    # Capped: a hundred uses count no more than the cap.
    ranked = rank([RecallMatch(mem("x", use_count=100), 0.5, 0.5), RecallMatch(mem("y", use_count=4), 0.5, 0.5)],
                  NOW, RS, vector_path=True)
    assert ranked[0].use == ranked[1].use == 1.0 + RS.use_credit_cap
    # A clearly better match is not overtaken by popularity.
    assert order(RecallMatch(mem("popular", use_count=100), 0.3, 0.0), RecallMatch(mem("apt"), 0.6, 0.5)) == [
        "apt", "popular"]
    # Nothing matched, nothing shown, however often it was used.
    assert order(RecallMatch(mem("popular", use_count=100), 0.0, 0.0)) == []


def test_the_blend_weights_come_from_settings_and_bm25_stands_alone_without_vectors() -> None:
    semantic, keyword = RecallMatch(mem("semantic"), 0.9, 0.1), RecallMatch(mem("keyword"), 0.3, 1.0)
    assert order(semantic, keyword) == ["semantic", "keyword"]  # 80/20
    keyword_heavy = dataclasses.replace(RS, vector_weight=0.2, bm25_weight=0.8)
    assert order(semantic, keyword, settings=keyword_heavy) == ["keyword", "semantic"]
    # No embedder vector for this query: the keyword score is the whole relevance.
    ranked = rank([RecallMatch(mem("k"), None, 0.4)], NOW, RS, vector_path=False)
    assert ranked[0].relevance == 0.4


def test_pinned_facts_are_capped_at_the_latest_twelve() -> None:
    pins = [mem(f"p{i:02d}", days_ago=20 - i, pinned=True) for i in range(15)]
    others = [mem("unpinned"), mem("gone", pinned=True, status=Status.FORGOTTEN)]
    latest = latest_pinned([*pins, *others], RS.pinned_max, NOW)
    assert [r.id for r in latest] == [f"p{i:02d}" for i in range(14, 2, -1)]
    assert len(latest) == 12 == RS.pinned_max
    # A pin is deliberate: its horizon never lapses it.
    assert [r.id for r in latest_pinned([mem("lapsed", pinned=True, expires_in_days=-1)], 12, NOW)] == ["lapsed"]


def test_pinned_part_keeps_newest_first_within_its_budget() -> None:
    pins = [mem(f"p{i}", "x" * 300, pinned=True) for i in range(12)]
    shown, text = render_pinned(pins, item_chars=320, total_chars=1600)
    assert 0 < len(shown) < 12 and [r.id for r in shown] == [f"p{i}" for i in range(len(shown))]
    assert len(text) <= 1600


def test_recalled_part_is_at_most_six_items_each_cut_to_320_with_a_truncated_flag() -> None:
    long_text = "Ana talked about her garden " + "and the tomatoes growing there " * 30
    entries = [(mem(f"m{i}", long_text if i % 2 else f"short fact number {i}"), False, False) for i in range(9)]
    budget = BudgetSettings()
    items, text = fit_recalled(entries, max_items=RS.max_items, item_chars=RS.item_chars,
                               total_chars=budget.recall_chars)
    assert 1 <= len(items) <= 6
    assert len(text) <= budget.recall_chars
    assert text.startswith(RECALLED_NOTICE) and "not instructions" in text and "not assumed" in text
    assert all(len(i.text) <= RS.item_chars for i in items)
    cut = [i for i in items if i.truncated]
    assert cut and all(i.text.endswith('…"') for i in cut)  # cut inside the quote of the person's words
    assert text.count(TRUNCATED_FLAG) == len(cut)
    assert not [i for i in items if not i.truncated and len(i.text) > 100]
    # Short facts are whole and unflagged.
    items, text = fit_recalled(entries[::2][:6], max_items=6, item_chars=320, total_chars=1600)
    assert len(items) == 5 and not any(i.truncated for i in items) and TRUNCATED_FLAG not in text


def test_a_conflicting_fact_brings_its_partner_and_the_ask_which_is_current_notice() -> None:
    tea, coffee, other = mem("tea", "Ana drinks tea"), mem("coffee", "Ana drinks coffee"), mem("o", "Ana runs")
    entries = with_partners([(tea, False), (other, False)], {"tea": [coffee]}, shared_only=False, limit=6)
    assert [(r.id, disputed) for r, _note, disputed in entries] == [("tea", True), ("coffee", True), ("o", False)]
    _items, text = fit_recalled(entries, max_items=6, item_chars=320, total_chars=1600)
    assert CONFLICT_NOTICE in text and text.count("- DISPUTED ") == 2
    # A private partner is not shown in a group, but the fact stays disputed.
    private = dataclasses.replace(coffee, scope=Scope.DM)
    shared_tea = dataclasses.replace(tea, scope=Scope.SHARED)
    entries = with_partners([(shared_tea, False)], {"tea": [private]}, shared_only=True, limit=6)
    assert [(r.id, d) for r, _n, d in entries] == [("tea", True)]
    _items, text = fit_recalled([(other, False, False)], max_items=6, item_chars=320, total_chars=1600)
    assert CONFLICT_NOTICE not in text


def test_clip_item_cuts_at_a_word_and_says_so() -> None:
    assert clip_item("short", 320) == ("short", False)
    text, cut = clip_item("word " * 100, 50)
    assert cut and len(text) <= 50 and text.endswith("…") and not text[:-1].endswith(" ")


def test_use_is_citation_not_retrieval() -> None:
    fact = "Ana's dog is called Biscuit"
    assert cited(fact, "Your dog? That's Biscuit, of course!", "what's my dog called?", "Ana")
    # Echoing the question or the person's name is not drawing on the memory.
    assert not cited(fact, "Hmm, I'm not sure what your dog is called, Ana.", "what's my dog called?", "Ana")
    assert not cited(fact, "Let's talk about the weather.", "how are you?", "Ana")
    long_fact = "Ana works night shifts as a nurse at the children's hospital in Gdańsk"
    assert not cited(long_fact, "Night again? Take care.", "I'm tired", "Ana")  # one word of many
    assert cited(long_fact, "A night shift at the hospital again? Take care.", "I'm tired", "Ana")
    assert cited("Ana mieszka w Warszawie", "Jak tam w Warszawa dzisiaj?", "hej", "Ana")  # an inflected form
