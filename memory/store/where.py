"""Chroma's ``where`` filters read without Chroma, and its distances: what the memory tables
(:mod:`memory.store.table_client`) need to answer the store's queries exactly as Chroma does (pure).

The store asks with a small part of Chroma's language: a field equal to a value, ``$eq``, ``$ne``, ``$gt``,
``$gte``, ``$lt``, ``$lte``, ``$in``, ``$nin``, under ``$and`` or ``$or``. Chroma's own rules are kept where they
matter: ``$ne`` and ``$nin`` match a record without the field (the re-embedding planner counts on it: a record
untagged by vector space counts as hashed), the ordering operators only numbers, and a value of one type never
equals one of another (``1`` is not ``True``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

Condition = Mapping[str, Any]

# Fields the memory tables keep in columns of their own, so a filter on them is answered by an index.
COLUMN_FIELDS = ("person", "status")


class UnsupportedFilter(ValueError):
    """A filter using a part of Chroma's language the store never asks with."""


def matches(condition: Condition | None, metadata: Mapping[str, Any]) -> bool:
    """Whether a record with ``metadata`` passes ``condition`` (None passes everything)."""
    if not condition:
        return True
    for key, value in condition.items():
        if key == "$and":
            if not all(matches(part, metadata) for part in value):
                return False
        elif key == "$or":
            if not any(matches(part, metadata) for part in value):
                return False
        elif key.startswith("$"):
            raise UnsupportedFilter(f"unsupported filter operator {key}")
        elif not _field_matches(metadata, key, value):
            return False
    return True


def _same(a: Any, b: Any) -> bool:
    # Chroma stores bools, ints, floats and strings apart: True is not 1, though Python says so.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _ordered(stored: Any, bound: Any) -> bool:
    numbers = (int, float)
    return (isinstance(stored, numbers) and not isinstance(stored, bool)
            and isinstance(bound, numbers) and not isinstance(bound, bool))


def _field_matches(metadata: Mapping[str, Any], field: str, test: Any) -> bool:
    present = field in metadata
    stored = metadata.get(field)
    if not isinstance(test, Mapping):
        return present and _same(stored, test)
    for op, bound in test.items():
        if op == "$eq":
            ok = present and _same(stored, bound)
        elif op == "$ne":
            ok = not present or not _same(stored, bound)
        elif op == "$in":
            ok = present and any(_same(stored, b) for b in bound)
        elif op == "$nin":
            ok = not present or not any(_same(stored, b) for b in bound)
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            ok = present and _ordered(stored, bound) and {
                "$gt": stored > bound, "$gte": stored >= bound, "$lt": stored < bound, "$lte": stored <= bound,
            }[op]
        else:
            raise UnsupportedFilter(f"unsupported filter operator {op}")
        if not ok:
            return False
    return True


def column_values(condition: Condition | None, field: str) -> list[str] | None:
    """The values ``field`` must take for ``condition`` to hold, when the condition says so on its top level or
    under ``$and`` (a narrowing that the full check then confirms); None when it does not bound the field."""
    if not condition:
        return None
    found: list[str] | None = None
    for key, value in condition.items():
        if key == "$and":
            for part in value:
                inner = column_values(part, field)
                if inner is not None:
                    found = inner if found is None else [v for v in found if v in inner]
        elif key == field:
            if isinstance(value, str):
                allowed = [value]
            elif isinstance(value, Mapping) and set(value) == {"$eq"} and isinstance(value["$eq"], str):
                allowed = [value["$eq"]]
            elif isinstance(value, Mapping) and set(value) == {"$in"} and all(isinstance(v, str)
                                                                            for v in value["$in"]):
                allowed = list(value["$in"])
            else:
                continue
            found = allowed if found is None else [v for v in found if v in allowed]
    return found


def distances(space: str, query: npt.NDArray[np.float32], vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """Chroma's distance from ``query`` to each row of ``vectors`` in its ``hnsw:space``: ``cosine`` (1 - cosine
    similarity), ``ip`` (1 - inner product) or ``l2`` (squared Euclidean)."""
    if not len(vectors):
        return np.zeros(0)
    q = np.asarray(query, dtype=np.float64)
    m = np.asarray(vectors, dtype=np.float64)
    if space == "cosine":
        norms = np.linalg.norm(m, axis=1) * (np.linalg.norm(q) or 1.0)
        norms[norms == 0] = 1.0
        return 1.0 - (m @ q) / norms
    if space == "ip":
        return 1.0 - m @ q
    diff = m - q
    return np.einsum("ij,ij->i", diff, diff)


def nearest(space: str, query: npt.NDArray[np.float32], vectors: npt.NDArray[np.float32], k: int
            ) -> tuple[list[int], list[float]]:
    """The rows of the ``k`` nearest vectors, nearest first (ties by row), and their distances."""
    d = distances(space, query, vectors)
    if k <= 0 or not len(d):
        return [], []
    order = np.argsort(d, kind="stable")[:k]
    return [int(i) for i in order], [float(d[i]) for i in order]


__all__ = ["COLUMN_FIELDS", "UnsupportedFilter", "column_values", "distances", "matches", "nearest"]
