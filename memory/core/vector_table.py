"""One person's memory vectors as rows of a float32 matrix, searched exactly with numpy.

Rows are stored at unit length, so a dot product is the cosine Chroma's cosine space gives.
A dropped row is filled with the last one, so the rows stay dense; capacity doubles as it
grows. 10,000 vectors of 384 dimensions take 15 MB and one query over them about a
millisecond: recall searches here, Chroma stays the durable store.

The product runs on the calling thread (``einsum``, not BLAS): OpenBLAS's own threads fight
the event loop and the embedder for two cores, and measured here a 10k-row product then took
8 ms at the median instead of under 1 ms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from memory.core.records import Scope

FloatArray = npt.NDArray[np.float32]

_SCOPE_CODES = {scope: code for code, scope in enumerate(Scope)}
_MIN_CAPACITY = 16


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two vectors (0.0 when either is zero), for the few compared one pair at a time: a query's
    vector with a staged note's, two items of one capture."""
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def unit_rows(values: npt.ArrayLike, dim: int) -> FloatArray:
    """``values`` as float32 rows of length ``dim``, each scaled to unit length (zero rows stay zero)."""
    rows = np.asarray(values, dtype=np.float32).reshape(-1, dim)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


class VectorTable:
    """Vectors by memory id, with each memory's scope, for exact top-k by cosine."""

    def __init__(self, dim: int, capacity: int = _MIN_CAPACITY) -> None:
        self.dim = dim
        self._matrix: FloatArray = np.zeros((max(_MIN_CAPACITY, capacity), dim), dtype=np.float32)
        self._scopes = np.zeros(self._matrix.shape[0], dtype=np.int8)
        self._ids: list[str] = []
        self._rows: dict[str, int] = {}

    @classmethod
    def build(cls, dim: int, ids: Sequence[str], values: npt.ArrayLike, scopes: Sequence[Scope]) -> VectorTable:
        table = cls(dim, capacity=len(ids))
        if ids:
            table._matrix[: len(ids)] = unit_rows(values, dim)
            table._scopes[: len(ids)] = [_SCOPE_CODES[s] for s in scopes]
            table._ids = list(ids)
            table._rows = {memory_id: row for row, memory_id in enumerate(ids)}
        return table

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._rows

    def put(self, memory_id: str, vector: npt.ArrayLike, scope: Scope) -> bool:
        """Store (or replace) a memory's vector; ``False`` when its size is not this table's."""
        values = np.asarray(vector, dtype=np.float32)
        if values.size != self.dim:
            return False
        row = self._rows.get(memory_id)
        if row is None:
            row = len(self._ids)
            if row == self._matrix.shape[0]:
                self._grow()
            self._ids.append(memory_id)
            self._rows[memory_id] = row
        self._matrix[row] = unit_rows(values, self.dim)[0]
        self._scopes[row] = _SCOPE_CODES[scope]
        return True

    def set_scope(self, memory_id: str, scope: Scope) -> None:
        row = self._rows.get(memory_id)
        if row is not None:
            self._scopes[row] = _SCOPE_CODES[scope]

    def drop(self, memory_id: str) -> None:
        row = self._rows.pop(memory_id, None)
        if row is None:
            return
        last = len(self._ids) - 1
        if row != last:
            moved = self._ids[last]
            self._matrix[row] = self._matrix[last]
            self._scopes[row] = self._scopes[last]
            self._ids[row] = moved
            self._rows[moved] = row
        self._ids.pop()

    def nearest(self, query: npt.ArrayLike, k: int, scope: Scope | None = None) -> list[tuple[str, float]]:
        """The ``k`` memories (of ``scope``, if given) with the highest cosine to ``query``, best first."""
        count = len(self._ids)
        values = np.asarray(query, dtype=np.float32)
        if k <= 0 or count == 0 or values.size != self.dim:
            return []
        scores = np.einsum("ij,j->i", self._matrix[:count], unit_rows(values, self.dim)[0])
        rows: npt.NDArray[np.intp] | None = None
        if scope is not None:
            rows = np.flatnonzero(self._scopes[:count] == _SCOPE_CODES[scope])
            scores = scores[rows]
        if scores.size == 0:
            return []
        k = min(k, scores.size)
        top = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
        top = top[np.argsort(-scores[top], kind="stable")]
        picked = rows[top] if rows is not None else top
        return [(self._ids[int(row)], float(score)) for row, score in zip(picked, scores[top], strict=True)]

    def _grow(self) -> None:
        capacity = self._matrix.shape[0] * 2
        matrix = np.zeros((capacity, self.dim), dtype=np.float32)
        matrix[: len(self._ids)] = self._matrix[: len(self._ids)]
        scopes = np.zeros(capacity, dtype=np.int8)
        scopes[: len(self._ids)] = self._scopes[: len(self._ids)]
        self._matrix, self._scopes = matrix, scopes


__all__ = ["VectorTable", "unit_rows"]
