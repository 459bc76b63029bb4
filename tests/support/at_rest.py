"""What kith left on disk, read as another process would: a database's rows as text, and which files hold some
words. The tests that promise words are gone (forget) or never kept (secrets) read the data directory with these."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def rows_as_text(db_file: Path, *tables: str) -> str:
    """Every value of every row of ``tables`` (of every table when none is named), one a line, bytes decoded."""
    conn = sqlite3.connect(db_file)
    try:
        names = tables or [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                         for name in names for row in conn.execute(f'SELECT * FROM "{name}"') for value in row)
    finally:
        conn.close()


def files_holding(directory: Path, needle: bytes) -> list[str]:
    """The files below ``directory`` whose bytes, lower-cased, hold ``needle`` (give it lower-case)."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*")
                  if p.is_file() and needle in p.read_bytes().lower())
