"""The heartbeat's tables, for the wiring's list of every table (kith.app.schema)."""

from __future__ import annotations

from heartbeat import consolidation, decay, due, runs

TABLES = (consolidation.consolidation_days, consolidation.consolidation_chunks, decay.decay_runs,
          decay.decay_retirements, due.heartbeat_items, runs.job_runs)

