"""The LoCoMo benchmark's choice of parameters: leave-one-conversation-out never looks at the conversation it
scores, and its fast grid ranking orders candidates exactly as the recall engine does."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from bench.locomo_grid import KS, Axes, best_on_all, grid_recall, leave_one_out, question_arrays, rank_grid
from ground.config import RecallSettings
from ground.db import Database
from kith.app.schema import create_schema
from memory.core.records import MemoryKind, MemoryRecord, Scope, Source
from memory.recall.engine import Gathered, RecallEngine
from memory.recall.graph_reach import NAMED, GraphGroup
from memory.recall.ranking import RecallMatch
from memory.recall.when import query_windows
from memory.store.memory_store import MemoryStore
from tests.support.recall import open_store

NOW = datetime(2023, 11, 15, 14, 0, tzinfo=UTC)


def test_each_conversation_is_scored_with_what_the_others_chose_never_with_its_own_best() -> None:
    # Three conversations of two questions each: way 0 is far better on conversations 0 and 1, way 1 on 2.
    conversation = np.array([0, 0, 1, 1, 2, 2])
    results = np.zeros((2, 6, len(KS)))
    results[0] = np.array([0.9, 0.9, 0.9, 0.9, 0.2, 0.2])[:, None]
    results[1] = np.array([0.5, 0.5, 0.5, 0.5, 0.9, 0.9])[:, None]
    loo = leave_one_out(results, conversation, [0, 1])
    # Held out, conversation 2 gets what 0 and 1 prefer (way 0), not its own best; 0 and 1 each get way 1,
    # which the other two prefer on average.
    assert loo.chosen == {0: 1, 1: 1, 2: 0}
    assert loo.held_out[:, 0].tolist() == [0.5, 0.5, 0.5, 0.5, 0.2, 0.2]
    # Offered alone, a way is what every fold gets; a tie goes to the way offered first.
    assert set(leave_one_out(results, conversation, [1]).chosen.values()) == {1}
    tied = np.stack([results[0], results[0]])
    assert leave_one_out(tied, conversation, [1, 0]).chosen == {0: 1, 1: 1, 2: 1}
    assert best_on_all(results, [0, 1]) == 0


def record(memory_id: str, minutes: float, *, importance: float = 0.5) -> MemoryRecord:
    when = NOW - timedelta(days=40) + timedelta(minutes=minutes)
    return MemoryRecord(id=memory_id, person="p", kind=MemoryKind.EPISODE, text=memory_id, evidence=("x",),
                        sources=(Source("locomo", "c", memory_id, when),), scope=Scope.DM, importance=importance,
                        created_at=when, updated_at=when)


def gathered(rng: random.Random, n: int, vector_path: bool) -> Gathered:
    records = [record(f"m{rng.randrange(10**6):06d}_{i}", rng.choice([i, i * 200]), importance=rng.random())
               for i in range(n + 5)]
    # The last five are there only through the graph; the groups mix them with neighbours and plain matches.
    through_graph = frozenset(r.id for r in records[n:])
    groups = tuple(GraphGroup(f"e{g}", rng.choice([1, 2]), rng.choice([NAMED, 0, 3, 7]),
                              frozenset(r.id for r in rng.sample(records, rng.randrange(1, 9)))) for g in range(6))
    matches = [RecallMatch(r, round(rng.random(), 2) if vector_path else None,
                           rng.choice([0.0, 0.0, round(rng.random(), 2)])) for r in records]
    links: dict[str, dict[str, int]] = {}
    for i in range(n):
        for j in range(i + 1, min(n, i + 4)):
            if rng.random() < 0.6:
                links.setdefault(records[i].id, {})[records[j].id] = j - i
                links.setdefault(records[j].id, {})[records[i].id] = j - i
    fetched = frozenset(r.id for r in rng.sample(records[:n], n // 5))
    return Gathered(matches, links, fetched, query_windows("what happened on 6 October 2023", NOW), NOW,
                    vector_path, "", 0.0, groups, through_graph)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    db = Database(f"sqlite:///{tmp_path / 'kith.db'}")
    create_schema(db)
    opened = await open_store(tmp_path / "data", None, db)
    yield opened
    await opened.close()
    db.close()


async def test_the_grid_orders_every_candidate_as_the_engine_does_under_every_setting(store: MemoryStore) -> None:
    engine = RecallEngine(store, RecallSettings(), lambda: NOW)
    axes = Axes((0.7, 0.5, 1.0), (0.0, 30.0), (0.0, 0.5, 1.5), (1, 2, 3), (1.0, 2.0),
                ((0.0, 1, 0), (0.5, 1, 0), (1.0, 2, 5), (0.75, 1, 5), (0.5, 2, 0)))
    rng = random.Random(7)
    base = RecallSettings()
    compared = 0
    for trial in range(6):
        found = gathered(rng, 40, vector_path=trial % 3 != 0)
        evidence = {m.record.id for m in rng.sample(found.matches, 3)}
        arrays = question_arrays(found, base, evidence, lambda i: i)
        rankings = rank_grid(arrays, axes, limit=25)
        orders = rankings.order.reshape(len(axes.points()), -1)
        valid = rankings.valid.reshape(len(axes.points()), -1)
        recall = grid_recall(arrays, rankings).reshape(len(axes.points()), len(KS))
        for at, point in enumerate(axes.points()):
            expected = [r.record.id for r in engine.order(found, point.settings(base))[:25]]
            assert [arrays.ids[i] for i in orders[at][valid[at]]] == expected, point
            for j, k in enumerate(KS):
                assert recall[at, j] == pytest.approx(len(evidence & set(expected[:k])) / len(evidence))
            compared += 1
    assert compared == 6 * len(axes.points())
    await engine.close()


def test_observations_stand_in_for_proposals_each_pointing_at_its_evidence_turns_memory() -> None:
    from bench.locomo_graph import Observation, build, things_in

    text = "Melanie took her kids to the Grand Canyon and painted it afterwards."
    assert things_in(text, "Melanie") == ["Grand Canyon", "took", "kids", "painted", "afterwards"]
    memories = {"D1:2": "m-d1-2", "D3:4": "m-d3-4"}
    graph = build("p", [Observation("Melanie", text, ("D1:2", "D9:9"), NOW),
                        Observation("Caroline", "Caroline visited the Grand Canyon.", ("D3:4",), NOW)],
                  memories.get, "conv", NOW)
    canyon = graph.resolve("Grand Canyon")
    assert canyon is not None
    # Both speakers' relations meet at the place; each points at the memory of its evidence turn, never a
    # turn that is not there.
    assert sorted(r.memory_id or "" for r in graph.touching(canyon)) == ["m-d1-2", "m-d3-4"]
    assert {r.memory_id for r in graph.relations.values()} == {"m-d1-2", "m-d3-4"}
    assert graph.mentioned("what did Melanie do at the grand canyon?") == [graph.resolve("Melanie"), canyon]
