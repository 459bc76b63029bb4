"""When a message enters and leaves the inbox, in one place.

The inbox keeps every message a person sent until it has its answer, so a crash never loses one:

* **taken**: the channel journals the platform's event and keeps its message, undecided, in one transaction
  (``delivery.inbound``);
* **admitted**: in the transaction where the policy decides, a message it let through stays kept and one it
  refused leaves (:meth:`Keeping.admitted_within`); a redelivered event leaves its undecided copy;
* **rate limited**: it leaves, needing no answer;
* **opened**: the turn's opening transaction records its history row and charges an attempt (a command is
  charged when it starts): only work begun counts against the message, never waiting;
* **answered**: it leaves in the transaction that posts its reply (:meth:`Keeping.answered_within`), or its
  honest "could not handle" reply once its attempts are used up.

The terminal's messages are never kept (a :class:`Keeping` without an inbox): its person is watching.
"""

from __future__ import annotations

from delivery import inbox as inbox_rows
from delivery.inbox import Inbox
from ground.db import Connection
from ground.types import InboundMessage


class Keeping:
    """One message's place in the inbox; with no inbox (the terminal's messages) every step does nothing."""

    def __init__(self, inbox: Inbox | None, message: InboundMessage) -> None:
        self.inbox = inbox
        self.message = message

    @property
    def kept(self) -> bool:
        return self.inbox is not None

    def admitted_within(self, conn: Connection, allowed: bool) -> None:
        """The policy's transaction: keep what it let through, let go of what it refused."""
        if self.inbox is not None:
            self.inbox.decided_within(conn, self.message, allowed)

    async def redelivered(self) -> None:
        """The event was taken in before: this copy leaves; the first is answered."""
        if self.inbox is not None:
            await self.inbox.forget_undecided(self.message)

    async def rate_limited(self) -> None:
        if self.inbox is not None:
            await self.inbox.forget(self.message)

    def opened_within(self, conn: Connection, row: int, *, charge: bool) -> None:
        """The turn's opening transaction, given the message's history row: charged an attempt unless the
        command step already charged it."""
        if self.inbox is not None:
            inbox_rows.opened(conn, row, message=self.message, charge=charge)

    async def command_started(self) -> None:
        """A command that brings the process down is a try too."""
        if self.inbox is not None:
            await self.inbox.charge(self.message)

    def answered_within(self, conn: Connection) -> None:
        """The transaction that posts the message's reply: it needs keeping no more."""
        if self.inbox is not None:
            inbox_rows.done(conn, message=self.message)
