"""The one way to post an outbound message: write it to the outbox inside a transaction, then hand it to delivery.

Replies, the honest failure reply, policy notices, heartbeat turns, questions about conflicting memories and
/link's messages all go out this way. The outbox row is written in the same transaction as whatever the message
belongs to (the reply's history row, the heartbeat's handled marks, the inbox letting go of the message it
answers), so both stand or fall together; delivery is told only after that transaction is over.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from delivery import outbox
from delivery.outbox import Lane, OutboxEntry
from ground.db import Connection
from ground.types import OutboundMessage, utcnow


class Delivery(Protocol):
    """What a posting tells once its transaction is over: the running delivery worker."""

    def now(self) -> datetime: ...

    def lane_ends(self) -> int: ...

    def lane_ended_since(self, lane: Lane, mark: int) -> bool: ...

    def schedule(self, lane: Lane, *, head: OutboxEntry | None = None) -> None: ...


class Posting:
    """Writes a message to the outbox inside someone else's transaction, then (``schedule``) hands it to
    delivery. Without a delivery (an operator command while no bot runs) the row waits for the next start."""

    def __init__(self, delivery: Delivery | None, *, source: str | None = None,
                 also: Callable[[Connection], None] | None = None,
                 clock: Callable[[], datetime] = utcnow) -> None:
        self.delivery = delivery
        self.source = source
        self.also = also  # another write of the same transaction, after the enqueue (the inbox's "done")
        self._clock = delivery.now if delivery is not None else clock
        self.queued: list[tuple[Lane, OutboxEntry | None, int]] = []  # lane, its head, the lane-end mark

    def __call__(self, conn: Connection, message: OutboundMessage, *, source: str | None = None) -> int:
        """Write ``message`` (with ``source``, else the posting's) in the caller's transaction."""
        # Marked on the database thread before the head is read: a lane task that ends after this
        # may have sent that head, and one that ended before had its last write seen by the read.
        mark = self.delivery.lane_ends() if self.delivery is not None else 0
        entry_id, head = outbox.enqueue_with_head(conn, message, source=source or self.source, now=self._clock())
        self.queued.append((outbox.lane_of(message), head, mark))
        if self.also is not None:
            self.also(conn)
        return entry_id

    def schedule(self, *, committed: bool = True) -> bool:
        """After the transaction: deliver. False when nothing was posted.

        ``committed=False`` when the transaction raised: the row may have been rolled back (a full
        disk at the commit), so the lane is read again from the database rather than trusting the
        head read inside it. What did commit still goes out; what did not is never sent.
        """
        if not self.queued:
            return False
        for lane, head, mark in self.queued:
            if self.delivery is None:
                continue  # the next start's worker takes it up
            if not committed or self.delivery.lane_ended_since(lane, mark):
                head = None  # the lane's task ended since the head was read (it may have sent it): read it again
            self.delivery.schedule(lane, head=head)
        self.queued.clear()
        return True


class Outbound(Protocol):
    """Where the parts that speak first (heartbeat turns, questions, /link) post their messages."""

    def posting(self, *, source: str | None = None, also: Callable[[Connection], None] | None = None) -> Posting: ...


class PostedAtNextStart:
    """An outbound for a command run while no bot runs: the rows wait in the outbox for the bot's next start."""

    def __init__(self, clock: Callable[[], datetime] = utcnow) -> None:
        self._clock = clock

    def posting(self, *, source: str | None = None, also: Callable[[Connection], None] | None = None) -> Posting:
        return Posting(None, source=source, also=also, clock=self._clock)
