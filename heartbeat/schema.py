"""The heartbeat's tables. core/schema.py should import this module so ``Database.create_all`` makes them;
:func:`ensure_tables` makes them either way (it is idempotent)."""

from __future__ import annotations

from ground.db import Database
from heartbeat import consolidation, decay, due, goals, runs

TABLES = (consolidation.consolidation_days, consolidation.consolidation_chunks, decay.decay_runs,
          decay.decay_retirements, due.heartbeat_items, goals.goals, runs.job_runs)


def ensure_tables(db: Database) -> None:
    for table in TABLES:
        table.create(db.engine, checkfirst=True)
