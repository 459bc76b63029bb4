"""The in-memory vector table recall searches: exactly the nearest memories, after any writes and drops."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memory.core.records import Scope
from memory.core.vector_table import VectorTable

DIM = 12


def brute_force(vectors: dict[str, tuple[list[float], Scope]], query: list[float], k: int,
                scope: Scope | None = None) -> list[str]:
    q = np.asarray(query) / np.linalg.norm(query)
    scored = [(float(np.dot(np.asarray(v) / np.linalg.norm(v), q)), i)
              for i, (v, s) in vectors.items() if scope is None or s is scope]
    return [i for _c, i in sorted(scored, reverse=True)[:k]]


def test_nearest_is_exact_after_puts_replacements_and_drops() -> None:
    rng = random.Random(7)
    table = VectorTable(DIM)  # starts small: the writes below make it grow several times
    truth: dict[str, tuple[list[float], Scope]] = {}
    for step in range(600):
        memory_id = f"m{rng.randrange(200)}"
        if rng.random() < 0.25:
            table.drop(memory_id)
            truth.pop(memory_id, None)
        else:
            vector = [rng.gauss(0, 1) for _ in range(DIM)]
            scope = rng.choice(list(Scope))
            assert table.put(memory_id, vector, scope)
            truth[memory_id] = (vector, scope)
        if step % 50 == 0:
            query = [rng.gauss(0, 1) for _ in range(DIM)]
            for scope_filter in (None, Scope.SHARED, Scope.DM):
                found = table.nearest(query, 7, scope_filter)
                assert [i for i, _c in found] == brute_force(truth, query, 7, scope_filter)
                assert all(-1.0 - 1e-5 <= c <= 1.0 + 1e-5 for _i, c in found)
    assert len(table) == len(truth)


def test_a_memory_whose_scope_changed_is_found_only_in_its_new_scope() -> None:
    table = VectorTable(3)
    table.put("m_dog", [1.0, 0.0, 0.0], Scope.SHARED)
    table.put("m_cat", [0.0, 1.0, 0.0], Scope.SHARED)
    assert table.nearest([1.0, 0.0, 0.0], 1, Scope.SHARED) == [("m_dog", pytest.approx(1.0))]
    table.set_scope("m_dog", Scope.DM)  # merged with something said in private: private now
    assert [i for i, _c in table.nearest([1.0, 0.0, 0.0], 2, Scope.SHARED)] == ["m_cat"]
    assert [i for i, _c in table.nearest([1.0, 0.0, 0.0], 2)] == ["m_dog", "m_cat"]


def test_a_vector_of_another_size_is_refused_not_mixed_in() -> None:
    table = VectorTable.build(3, ["m1"], [[0.0, 0.0, 2.0]], [Scope.DM])
    assert not table.put("m2", [1.0, 0.0], Scope.DM)
    assert table.nearest([1.0, 0.0], 3) == []
    assert table.nearest([0.0, 0.0, 1.0], 3) == [("m1", pytest.approx(1.0))]
