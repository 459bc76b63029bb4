"""Tombstones: what a forget leaves behind so that the forgotten fact cannot come back.

A forget (:mod:`memory.forgetting.forgetter`) leaves a tombstone per forgotten text, evidence quote and receipt
sentence, so that a later capture or promotion over the same old transcript cannot resurrect the fact.
A tombstone holds a salted SHA-256 of the normalised text and the time of forgetting, never
the text. It blocks a candidate only when none of the candidate's sources is newer than the
forgetting: a person who says it again afterwards is heard again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, UtcDateTime, as_utc, metadata
from ground.person_data import PersonData
from memory.core.records import MemoryCandidate, Source
from memory.core.text import normalize

DIGEST_DOMAIN = b"kith-tombstone-v1\x00"

tombstones = sa.Table(
    "memory_tombstones",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("person", sa.String(64), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("forgotten_at", UtcDateTime(), nullable=False),
    sa.Index("ix_memory_tombstones_person_digest", "person", "digest"),
)

def digest(text: str) -> str:
    """The tombstone key of a text or quote: case and spacing do not matter, the words do."""
    return hashlib.sha256(DIGEST_DOMAIN + normalize(text).casefold().encode("utf-8")).hexdigest()


def digests_of(text: str, evidence: Iterable[str], sentences: Iterable[str] = ()) -> set[str]:
    return {digest(text)} | {digest(q) for q in evidence} | {digest(s) for s in sentences}


def source_digest(source: Source) -> str:
    """The tombstone key of a message a forgotten memory was quoted from.

    Re-reading that message (the nightly consolidation) may word the fact and pick its quote
    differently; a candidate drawn only from forgotten messages is the forgotten fact again.
    """
    key = "\x00".join(("source", source.platform, source.chat_id, source.message_id))
    return hashlib.sha256(DIGEST_DOMAIN + key.encode("utf-8")).hexdigest()


def is_blocked(forgotten_at: datetime | None, source_times: Sequence[datetime]) -> bool:
    """Pure rule: a match blocks unless some source was said after the forgetting."""
    if forgotten_at is None:
        return False
    if not source_times:
        return True
    return max(as_utc(t) for t in source_times) <= as_utc(forgotten_at)


# --- relational access -------------------------------------------------------------------
def _add(conn: Connection, person: str, digests: Iterable[str], now: datetime) -> int:
    wanted = sorted(set(digests))
    # A forget finished after a restart leaves its tombstones once, not twice.
    there = set(conn.execute(sa.select(tombstones.c.digest).where(
        tombstones.c.person == person, tombstones.c.forgotten_at == now,
        tombstones.c.digest.in_(wanted))).scalars()) if wanted else set()
    rows = [{"person": person, "digest": d, "forgotten_at": now} for d in wanted if d not in there]
    if rows:
        conn.execute(tombstones.insert(), rows)
    return len(rows)


def _forgotten(conn: Connection, person: str, digests: Sequence[str]) -> dict[str, datetime]:
    """Each of ``digests`` that is a tombstone of ``person``, with when it was last forgotten."""
    if not digests:
        return {}
    rows = conn.execute(
        sa.select(tombstones.c.digest, sa.func.max(tombstones.c.forgotten_at))
        .where(tombstones.c.person == person, tombstones.c.digest.in_(list(digests)))
        .group_by(tombstones.c.digest)
    ).all()
    return {str(d): at for d, at in rows}


def _reassign(conn: Connection, old: str, new: str) -> int:
    return conn.execute(tombstones.update().where(tombstones.c.person == old).values(person=new)).rowcount


def _count(conn: Connection, person: str) -> int:
    return int(
        conn.execute(
            sa.select(sa.func.count()).select_from(tombstones).where(tombstones.c.person == person)
        ).scalar_one()
    )


TOMBSTONES_DATA = PersonData(
    "tombstones", tables=(tombstones,), move_rows=_reassign, export_rows=_count,  # a count: the rows are hashes
    kept_by_forget="a forget writes them, so that what it removed is not captured again")


class TombstoneBook:
    """The tombstones of every person, in the relational store."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, person: str, digests: Iterable[str], now: datetime) -> int:
        return await self.db.run(_add, person, list(digests), now)

    async def blocks_candidate(self, person: str, candidate: MemoryCandidate) -> bool:
        """Blocked when its words match a forgotten memory, or when every message it was drawn from was a
        forgotten memory's source, said before that forgetting. One read for both."""
        words = digests_of(candidate.text, candidate.evidence, candidate.evidence_sentences)
        sources = {source_digest(s): s.timestamp for s in candidate.sources}
        forgotten = await self.db.run(_forgotten, person, sorted(words | set(sources)))
        word_times = [forgotten[d] for d in words if d in forgotten]
        if is_blocked(max(word_times, default=None), [s.timestamp for s in candidate.sources]):
            return True
        return bool(sources) and all(
            key in forgotten and is_blocked(forgotten[key], [said]) for key, said in sources.items())

    async def count(self, person: str) -> int:
        return await self.db.run(_count, person)


__all__ = [
    "TOMBSTONES_DATA",
    "TombstoneBook",
    "digest",
    "digests_of",
    "is_blocked",
    "source_digest",
    "tombstones",
]
