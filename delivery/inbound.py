"""Inbound reliability: a journal of platform events already taken in, and persisted cursors.

Platforms redeliver: Telegram resends updates whose offset was not confirmed, Slack retries an
event it did not see acknowledged in time, Discord replays after a resume. A channel records each
event here BEFORE acknowledging it; a second record of the same id is a redelivery and is dropped,
so a person is never answered twice for one message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from delivery.inbox import Inbox
from ground.db import Database, UtcDateTime, metadata
from ground.prepared import Prepared
from ground.tunables import INBOUND_BATCH_ATTEMPTS, INBOUND_DEDUPE_DAYS, RETENTION_BATCH_ROWS
from ground.types import InboundMessage, utcnow

inbound_events = sa.Table(
    "inbound_events",
    metadata,
    sa.Column("platform", sa.String(32), primary_key=True),
    sa.Column("event_id", sa.String(255), primary_key=True),
    sa.Column("received_at", UtcDateTime(), nullable=False),
    sa.Index("ix_inbound_events_received_at", "received_at"),
)

cursors = sa.Table(
    "cursors",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
)


_INSERT_EVENT = Prepared(inbound_events.insert())  # built once: it runs for every event
_SEEN = Prepared(sa.select(inbound_events.c.event_id).where(
    inbound_events.c.platform == sa.bindparam("platform"),
    inbound_events.c.event_id.in_(sa.bindparam("event_ids", expanding=True))))


def _insert_event(conn: Connection, platform: str, event_id: str, now: datetime) -> None:
    _INSERT_EVENT.run(conn, {"platform": platform, "event_id": event_id, "received_at": now})


def _record_new(conn: Connection, platform: str, event_ids: Sequence[str], now: datetime) -> list[str]:
    """Record each event not recorded before; returns those, in order. Two statements for a whole batch."""
    ids = list(dict.fromkeys(event_ids))
    seen = {r.event_id for r in _SEEN.all(conn, {"platform": platform, "event_ids": ids})}
    fresh = [event_id for event_id in ids if event_id not in seen]
    if fresh:
        _INSERT_EVENT.insert_many(conn, [{"platform": platform, "event_id": event_id, "received_at": now}
                                         for event_id in fresh])
    return fresh


def _prune_events(conn: Connection, before: datetime, limit: int) -> int:
    """Forget about ``limit`` of the oldest events received before ``before``: under ``limit`` only when
    that was the last of them. Every event of a polled batch has one stamp, so a batch may go a little over."""
    received = inbound_events.c.received_at
    bound = conn.execute(sa.select(received).where(received < before).order_by(received)
                         .offset(limit - 1).limit(1)).scalar_one_or_none()
    older = received < before if bound is None else received <= bound
    return int(conn.execute(inbound_events.delete().where(older)).rowcount)


class Redelivered(Exception):
    """The platform event was taken in before: drop it (its transaction rolled back)."""


class InboundJournal:
    """With an ``inbox``, the messages a channel passes along with their events are kept there too, in
    the same transaction, until the core has decided on them (see ``delivery.inbox``)."""

    def __init__(self, db: Database, *, clock: Callable[[], datetime] = utcnow,
                 retention_days: float = INBOUND_DEDUPE_DAYS, inbox: Inbox | None = None) -> None:
        self.db = db
        self._clock = clock
        self.retention = timedelta(days=retention_days)
        self.inbox = inbox

    async def record(self, platform: str, event_id: str, *, message: InboundMessage | None = None) -> bool:
        """Note an event as taken in. False means it was seen before: drop it, but still acknowledge it.

        ``message``: the message the event carries.
        """

        def take(conn: Connection) -> None:
            self.record_within(conn, platform, event_id)
            if message is not None and self.inbox is not None:
                self.inbox.keep_taken_within(conn, platform, [message])

        try:
            await self.db.run_short(take)
        except Redelivered:
            return False
        return True

    def record_within(self, conn: Connection, platform: str, event_id: str) -> None:
        """``record`` as the first step of another transaction; raises Redelivered, which rolls it back."""
        try:
            _insert_event(conn, platform, event_id, self._clock())
        except sa.exc.IntegrityError:
            # The primary key decides, so two processes racing on one event cannot both win.
            raise Redelivered(f"{platform}:{event_id}") from None

    async def record_batch(self, platform: str, event_ids: Sequence[str], *, cursor: str,
                           cursor_to: int, messages: Mapping[str, InboundMessage] | None = None) -> set[str]:
        """Record a batch of events and move ``cursor`` forward to ``cursor_to``, in one transaction.

        Returns the ids taken in now; the others are redeliveries. ``messages``: event id -> the message
        that event carries. The cursor moves with the journal, never ahead of it: a batch whose
        transaction fails comes again. It is set to
        ``cursor_to`` even when that is lower: Telegram restarts its update ids at a lower number
        after a long silence, and a stored offset above them would confirm (drop) every new update
        at the next start. The journal, not the cursor, keeps a redelivery out.
        """
        if not event_ids:
            return set()
        now = self._clock()

        def take(conn: Connection) -> list[str]:
            fresh = _record_new(conn, platform, event_ids, now)
            _set_cursor(conn, cursor, cursor_to, now)
            carried = [messages[e] for e in fresh if e in messages] if messages else []
            if carried and self.inbox is not None:
                self.inbox.keep_taken_within(conn, platform, carried)
            return fresh

        for attempt in range(1, INBOUND_BATCH_ATTEMPTS + 1):
            try:
                return set(await self.db.run_short(take))
            except sa.exc.IntegrityError:
                # Another process recorded one of them (or created the cursor) between our read and our
                # write; nothing of ours was kept. Again, whole: the read now sees its rows.
                if attempt == INBOUND_BATCH_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    async def prune(self, *, batch: int = RETENTION_BATCH_ROWS) -> int:
        """Forget events older than the retention (a platform never redelivers that late), ``batch`` rows
        a transaction so a long-unpruned journal never holds the database for long. Returns how many."""
        before = self._clock() - self.retention
        total = 0
        while True:
            removed = await self.db.run(_prune_events, before, batch)
            total += removed
            if removed < batch:
                return total


# Built once: a polling channel moves its cursor with every batch.
_CURSOR = sa.select(cursors.c.value).where(cursors.c.name == sa.bindparam("cursor_name"))
_CURSOR_SET = Prepared(cursors.update().where(cursors.c.name == sa.bindparam("cursor_name"))
               .values(value=sa.bindparam("to"), updated_at=sa.bindparam("at")))
_CURSOR_INSERT = cursors.insert()


def _get_cursor(conn: Connection, name: str) -> int | None:
    value = conn.execute(_CURSOR, {"cursor_name": name}).scalar_one_or_none()
    return int(value) if value is not None else None


def _set_cursor(conn: Connection, name: str, value: int, now: datetime) -> None:
    if _CURSOR_SET.run(conn, {"cursor_name": name, "to": value, "at": now}) == 0:
        conn.execute(_CURSOR_INSERT, {"name": name, "value": value, "updated_at": now})


class Cursors:
    """Small persisted counters (e.g. Telegram's update offset), read at start; a polling channel moves
    its cursor with the batch it records (``InboundJournal.record_batch``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, name: str) -> int | None:
        return await self.db.run(_get_cursor, name)

    async def named(self, prefix: str, *, since: datetime, limit: int) -> dict[str, int]:
        """The cursors whose names start with ``prefix`` and that moved since ``since``: name -> value, the
        ``limit`` most recently moved (e.g. Discord's newest message taken in, per channel)."""
        query = (sa.select(cursors.c.name, cursors.c.value)
                 .where(cursors.c.name.startswith(prefix, autoescape=True), cursors.c.updated_at >= since)
                 .order_by(cursors.c.updated_at.desc()).limit(limit))

        def read(conn: Connection) -> dict[str, int]:
            return {row.name: int(row.value) for row in conn.execute(query)}

        return await self.db.run(read)
