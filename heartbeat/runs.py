"""A log of the scheduled runs (consolidation, decay): when, how long, and their counts, never content."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import UtcDateTime, metadata

job_runs = sa.Table(
    "heartbeat_job_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job", sa.String(32), nullable=False),
    sa.Column("started_at", UtcDateTime(), nullable=False),
    sa.Column("finished_at", UtcDateTime(), nullable=True),
    sa.Column("ok", sa.Boolean, nullable=True),  # None while running (or when the process died mid-run)
    sa.Column("counts", sa.Text, nullable=False, server_default="{}"),
    sa.Index("ix_heartbeat_job_runs_job", "job", "id"),
)


@dataclass(frozen=True, slots=True)
class JobRun:
    id: int
    job: str
    started_at: datetime
    finished_at: datetime | None
    ok: bool | None
    counts: dict[str, int]


def start(conn: Connection, job: str, now: datetime) -> int:
    return int(conn.execute(job_runs.insert().values(job=job, started_at=now)).inserted_primary_key[0])


def finish(conn: Connection, run_id: int, ok: bool, counts: dict[str, int], now: datetime) -> None:
    conn.execute(job_runs.update().where(job_runs.c.id == run_id)
                 .values(finished_at=now, ok=ok, counts=json.dumps(counts, sort_keys=True)))


def recent(conn: Connection, job: str, limit: int = 10) -> list[JobRun]:
    rows = conn.execute(sa.select(job_runs).where(job_runs.c.job == job).order_by(job_runs.c.id.desc())
                        .limit(limit)).all()
    return [JobRun(r.id, r.job, r.started_at, r.finished_at,
                   r.ok, json.loads(r.counts)) for r in rows]
