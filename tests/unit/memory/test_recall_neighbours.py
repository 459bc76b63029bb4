"""Neighbours: a memory said right next to a strong match in the same chat comes up with it.

The chat timelines (who was said next to whom), the scoring rule (a share of the best neighbour's
score) and the engine over a real store with a change log: only the person's own live memories,
only from the same chat, only without a long pause between, and never a private one in a group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ground.config import RecallSettings
from ground.db import Database
from memory.core.records import MemoryKind, MemoryRecord, Scope, Source, Status
from memory.core.timeline import ChatTimelines
from memory.recall.engine import RecallEngine
from memory.recall.ranking import RecallMatch, neighbour_lift, rank, score
from memory.store.memory_store import MemoryStore
from tests.support.clock import FakeClock
from tests.support.memory import T0
from tests.support.recall import open_store, remember

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
ANA = "p-ana"


def said(memory_id: str, minutes: float, chat: str = "c1", *more: tuple[str, float]) -> MemoryRecord:
    when = NOW + timedelta(minutes=minutes)
    sources = [Source("telegram", chat, memory_id, when)]
    sources += [Source("telegram", other, memory_id, NOW + timedelta(minutes=m)) for other, m in more]
    return MemoryRecord(id=memory_id, person=ANA, kind=MemoryKind.FACT, text=f"fact {memory_id}",
                        evidence=("x",), sources=tuple(sources), scope=Scope.DM, created_at=when, updated_at=when)


def test_a_timeline_gives_the_memories_said_just_before_and_after_in_the_same_chat() -> None:
    line = ChatTimelines()
    for record in (said("a", 0), said("b", 1), said("c", 2), said("d", 3), said("e", 4), said("x", 2, "c2")):
        line.put(record)
    assert line.neighbours("c", 1, HOUR) == {"b": 1, "d": 1}
    assert line.neighbours("c", 2, HOUR) == {"b": 1, "d": 1, "a": 2, "e": 2}
    assert line.neighbours("a", 1, HOUR) == {"b": 1}
    assert line.neighbours("x", 3, HOUR) == {}  # alone in its chat, whatever was said at that time elsewhere
    line.drop("d")
    assert line.neighbours("c", 1, HOUR) == {"b": 1, "e": 1}
    assert line.neighbours("d", 1, HOUR) == {}
    assert len(line) == 5


def test_a_pause_longer_than_the_gap_ends_the_exchange() -> None:
    line = ChatTimelines()
    for record in (said("morning", 0), said("reply", 5), said("evening", 5 + 8 * 60), said("later", 6 + 8 * 60)):
        line.put(record)
    assert line.neighbours("reply", 3, HOUR) == {"morning": 1}
    assert line.neighbours("evening", 3, HOUR) == {"later": 1}
    assert line.neighbours("reply", 3, timedelta(hours=9)) == {"morning": 1, "evening": 1, "later": 2}


def test_a_memory_said_in_two_chats_has_neighbours_in_both_and_moves_when_rewritten() -> None:
    line = ChatTimelines()
    line.put(said("both", 0, "c1", ("c2", 30)))
    line.put(said("in-c1", 1, "c1"))
    line.put(said("in-c2", 31, "c2"))
    assert line.neighbours("both", 1, HOUR) == {"in-c1": 1, "in-c2": 1}
    line.put(said("both", 0, "c3"))  # rewritten: now said only in c3
    assert line.neighbours("both", 1, HOUR) == {}
    assert line.neighbours("in-c1", 1, HOUR) == {}


def test_the_reply_next_to_the_matching_message_rises_above_a_weak_unrelated_match() -> None:
    settings = RecallSettings()
    question = RecallMatch(said("question", 0), 0.8, 1.0)  # names the topic
    answer = RecallMatch(said("answer", 1), 0.2, 0.0)  # carries the answer, in other words
    unrelated = RecallMatch(said("unrelated", 500), 0.35, 0.3)
    near = {"question": ["answer"], "answer": ["question"]}
    ranked = rank([question, answer, unrelated], NOW, settings, vector_path=True, neighbours=near)
    # Each lends the other its score, so the pair ties at the top (ties go by id).
    assert [r.record.id for r in ranked] == ["answer", "question", "unrelated"]
    lifted = next(r for r in ranked if r.record.id == "answer")
    assert lifted.lift == pytest.approx(settings.neighbour_share * score(question, NOW, settings,
                                                                          vector_path=True).score)
    # Share 0 turns it off: relevance alone orders them.
    off = dataclasses.replace(settings, neighbour_share=0.0)
    assert [r.record.id for r in rank([question, answer, unrelated], NOW, off, vector_path=True,
                                      neighbours=near)] == ["question", "unrelated", "answer"]


def test_lifts_come_from_scores_before_lifting_so_they_do_not_run_down_a_chat() -> None:
    settings = RecallSettings()
    chain = [RecallMatch(said(name, i), rel, 0.0) for i, (name, rel) in enumerate(
        (("strong", 0.9), ("next", 0.0), ("after", 0.0)))]
    scored = [score(m, NOW, settings, vector_path=True) for m in chain]
    lifted = {r.record.id: r for r in neighbour_lift(scored, {"next": ["strong", "after"], "after": ["next"]},
                                                        settings.neighbour_share)}
    assert lifted["next"].lift > 0
    assert lifted["after"].lift == 0  # its only neighbour had nothing of its own to lend


# --- the engine over a real store -----------------------------------------------------------
@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0 + timedelta(days=1))


@pytest.fixture
async def store(tmp_path: Path, db: Database) -> AsyncIterator[MemoryStore]:
    opened = await open_store(tmp_path / "data", None, db)
    yield opened
    await opened.close()


async def found(store: MemoryStore, clock: FakeClock, query: str, *, shared_only: bool = False,
                **recall: object) -> list[str]:
    engine = RecallEngine(store, RecallSettings(**recall), clock)  # type: ignore[arg-type]
    try:
        result = await engine.search(ANA, query, limit=6, shared_only=shared_only, budget_s=None)
        return [r.record.text for r in result.items]
    finally:
        await engine.close()


async def test_what_was_said_right_after_a_match_comes_back_though_it_shares_no_word_with_the_question(
        store: MemoryStore, clock: FakeClock) -> None:
    await remember(store, ANA, "Ana asked which bakery in Lisbon is best", when=T0)
    await remember(store, ANA, "Ana loved the croissants at Manteigaria on Rua do Loreto",
                   when=T0 + timedelta(minutes=1))
    await remember(store, ANA, "Ana's sister lives in Porto", when=T0 - timedelta(days=3))
    shown = await found(store, clock, "which bakery did I like?")
    assert shown == ["Ana asked which bakery in Lisbon is best",
                     "Ana loved the croissants at Manteigaria on Rua do Loreto"] or shown == [
        "Ana loved the croissants at Manteigaria on Rua do Loreto", "Ana asked which bakery in Lisbon is best"]
    assert await found(store, clock, "which bakery did I like?", neighbour_share=0.0) == [
        "Ana asked which bakery in Lisbon is best"]


async def test_nothing_comes_along_from_another_chat_or_after_a_long_pause(store: MemoryStore,
                                                                             clock: FakeClock) -> None:
    await remember(store, ANA, "Ana asked which bakery in Lisbon is best", when=T0)
    await remember(store, ANA, "Ana booked a dentist for Friday", when=T0 + timedelta(minutes=1), chat="c2")
    await remember(store, ANA, "Ana repainted the kitchen blue", when=T0 + timedelta(hours=5))
    assert await found(store, clock, "which bakery did I like?") == ["Ana asked which bakery in Lisbon is best"]


async def test_in_a_group_a_private_neighbour_never_comes_along(store: MemoryStore, clock: FakeClock) -> None:
    await remember(store, ANA, "Ana asked which bakery in Lisbon is best", when=T0, scope=Scope.SHARED)
    await remember(store, ANA, "Ana's bakery loan was refused by the bank", scope=Scope.DM,
                   when=T0 + timedelta(minutes=1))
    await remember(store, ANA, "Ana's doctor changed her medication", scope=Scope.DM,
                   when=T0 + timedelta(minutes=2))
    in_group = await found(store, clock, "which bakery?", shared_only=True)
    assert in_group == ["Ana asked which bakery in Lisbon is best"]
    in_dm = await found(store, clock, "which bakery?")
    assert "Ana's doctor changed her medication" in in_dm  # the same neighbour, where it may be seen


async def test_a_forgotten_or_lapsed_neighbour_never_comes_along(store: MemoryStore, clock: FakeClock) -> None:
    await remember(store, ANA, "Ana asked which bakery in Lisbon is best", when=T0)
    await remember(store, ANA, "Ana's ex recommended a cafe", when=T0 + timedelta(minutes=1),
                   status=Status.FORGOTTEN)
    await remember(store, ANA, "Ana wants pastries tonight", when=T0 + timedelta(minutes=2),
                   expires_at=T0 + timedelta(hours=2))
    assert await found(store, clock, "which bakery?") == ["Ana asked which bakery in Lisbon is best"]
