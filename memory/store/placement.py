"""Where memories live: Chroma or the memory tables of kith's own database (pure)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

Place = Literal["chroma", "database"]


def memory_place(store: str, *, chroma_url: str, server_database: bool,
                 database_holds_memories: Callable[[], bool]) -> Place:
    """``[memory] store`` resolved: "chroma" and "database" as they say; "auto" is the Chroma server when one is
    named, else the database when it is a server (PostgreSQL: one place for everything, replicated with the rest)
    or already holds memories (a store moved back from PostgreSQL by ``bot.py migrate``), else embedded Chroma."""
    if store == "chroma":
        return "chroma"
    if store == "database":
        return "database"
    if chroma_url:
        return "chroma"
    if server_database or database_holds_memories():
        return "database"
    return "chroma"


__all__ = ["Place", "memory_place"]
