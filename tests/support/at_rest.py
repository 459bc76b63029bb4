"""What kith left on disk, read as another process would: a database's rows as text, and which files hold some
words. The tests that promise words are gone (forget) or never kept (secrets) read the data directory with these."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def rows_as_text(db_file: Path | str, *tables: str) -> str:
    """Every value of every row of ``tables`` (of every table when none is named), one a line, bytes decoded.
    ``db_file``: an SQLite file, or a database URL (a PostgreSQL one is read through SQLAlchemy)."""
    if isinstance(db_file, str) and not db_file.startswith("sqlite:///"):
        return _server_rows_as_text(db_file, tables)
    conn = sqlite3.connect(str(db_file).removeprefix("sqlite:///"))
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


def _server_rows_as_text(url: str, tables: tuple[str, ...]) -> str:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            names = tables or sa.inspect(conn).get_table_names()
            return "\n".join(_as_text(value) for name in names
                             for row in conn.execute(sa.text(f'SELECT * FROM "{name}"')) for value in row)
    finally:
        engine.dispose()


def _as_text(value: object) -> str:
    if isinstance(value, memoryview):
        value = bytes(value)
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
