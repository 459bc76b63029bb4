"""Small rules for the words kith shows people and operators."""

from __future__ import annotations


def counted(n: int, one: str, many: str) -> str:
    """``n`` with the noun that agrees with it: "1 memory", "0 memories", "2 memories"."""
    return f"{n} {one if n == 1 else many}"
