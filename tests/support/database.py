"""kith's SQLite file for a test, with every table or only the ones a test needs."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from ground.db import Database
from kith.app.schema import create_schema


def open_db(path: Path, *tables: sa.Table, url: str = "") -> Database:
    """kith's SQLite file under ``path``, with every table, or with only ``tables`` when given.

    Each call is a new engine on the same file, as another kith process would open it. The tests of
    a single store (outbox, inbound journal) create just its tables, so they show it needs no other.
    """
    db = Database(url or f"sqlite:///{path / 'kith.db'}")
    if not tables:
        create_schema(db)
    for table in tables:
        table.create(db.engine, checkfirst=True)
    return db
