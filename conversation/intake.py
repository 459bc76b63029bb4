"""The path every inbound message takes, whatever the platform: an ordered list of small named steps.

    admit (dedupe → policy, linked accounts included → inbox, in one transaction)
    → rate limit → notice → unreadable → debounce → the turn (commands → pending answers → conversation)

Each step does one thing and says whether the message goes on. The three parts of admission share one
transaction so that a redelivered event, the access decision (and any pairing code it wrote) and the message's
place in the inbox stand or fall together. The turn's own steps run in :mod:`conversation.router`
(:meth:`~conversation.router.Router.take_turn`), the conversation in :mod:`conversation.core`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from conversation.debounce import Debouncer
from conversation.keeping import Keeping
from delivery.inbound import InboundJournal, Redelivered
from ground.db import Connection, Database
from ground.types import InboundMessage, OutboundMessage, reply_to
from ground.wording import unreadable_reply
from policy.gate import PolicyGate
from policy.pairing import AccessState
from policy.rules import Decision, Reason, Verdict

log = logging.getLogger("kith.router")

_RATE_LIMITED = frozenset({Reason.RATE_LIMITED, Reason.RATE_LIMITED_NOTIFIED})


@dataclass
class Arrival:
    """One message on its way in, with what the steps so far decided about it."""

    message: InboundMessage
    keeping: Keeping
    resuming: bool = False  # taken in by a previous process and decided on now
    decision: Decision | None = None
    access: AccessState | None = None  # as the policy left it, for the gate's cache once committed


class Step(Protocol):
    name: str

    async def __call__(self, arrival: Arrival) -> bool:
        """Do this step's part; False when the message goes no further."""
        ...


class AdmissionStep(Protocol):
    name: str

    def __call__(self, conn: Connection, arrival: Arrival) -> None:
        """This step's write in the admission transaction; raising rolls the whole admission back."""
        ...


class Dedupe:
    """An event the journal holds already is a redelivery: it raises ``Redelivered``, which ends admission."""

    name = "dedupe"

    def __init__(self, journal: InboundJournal) -> None:
        self.journal = journal

    def __call__(self, conn: Connection, arrival: Arrival) -> None:
        message = arrival.message
        self.journal.record_within(conn, message.platform, f"msg:{message.message_id}")


class Policy:
    """Pairing, allowlists, group rules and mention gating; an account linked to an allowed one is allowed.
    A /link CODE is no pass past it."""

    name = "policy"

    def __init__(self, gate: PolicyGate) -> None:
        self.gate = gate

    def __call__(self, conn: Connection, arrival: Arrival) -> None:
        arrival.decision, arrival.access = self.gate.decide_within(conn, arrival.message)


class KeepInInbox:
    name = "inbox"

    def __call__(self, conn: Connection, arrival: Arrival) -> None:
        assert arrival.decision is not None
        arrival.keeping.admitted_within(conn, arrival.decision.allowed)


class Admit:
    """Runs the admission steps in one transaction."""

    name = "admit"

    def __init__(self, db: Database, gate: PolicyGate, steps: Sequence[AdmissionStep]) -> None:
        self.db = db
        self.gate = gate
        self.steps = tuple(steps)

    async def __call__(self, arrival: Arrival) -> bool:
        def admit(conn: Connection) -> None:
            for step in self.steps:
                step(conn, arrival)

        message = arrival.message
        try:
            version, _ = await self.db.run_versioned(self.gate.access_topic, admit, short=True)
        except Redelivered:
            log.info("redelivery dropped platform=%s chat=%s message=%s", message.platform, message.chat_id,
                     message.message_id)
            await arrival.keeping.redelivered()
            return False
        assert arrival.access is not None
        self.gate.remember(arrival.access, version)
        return True


class RateLimit:
    """The sender's rate limit, after admission committed; a kept message it refuses leaves the inbox."""

    name = "rate limit"

    def __init__(self, gate: PolicyGate) -> None:
        self.gate = gate

    async def __call__(self, arrival: Arrival) -> bool:
        assert arrival.decision is not None
        arrival.decision = self.gate.rate_limit(arrival.message, arrival.decision)
        if arrival.decision.reason in _RATE_LIMITED:
            await arrival.keeping.rate_limited()
        return True


class Notice:
    """A pairing code or a notice ("slow down") is the message's whole answer; anything else refused ends
    here without one."""

    name = "notice"

    def __init__(self, post: Callable[..., Awaitable[int]]) -> None:
        self.post = post

    async def __call__(self, arrival: Arrival) -> bool:
        decision = arrival.decision
        assert decision is not None
        if decision.verdict in (Verdict.PAIRING_CODE, Verdict.NOTICE) and decision.notice:
            # In a group everyone reads it: like any reply there, it quotes the message it answers.
            notice = reply_to(arrival.message, decision.notice, notice=True)
            await self.post(notice, source=arrival.message.message_id)
            return False
        return decision.allowed


def unreadable_answer(message: InboundMessage) -> OutboundMessage:
    """The whole answer to a message with nothing kith can read: one fixed honest line, no model, no memory."""
    return reply_to(message, unreadable_reply(message.unreadable))


class Unreadable:
    """A message with nothing kith can read (a voice message, a photo alone) is a turn of its own, answered with
    ``unreadable_answer`` unless :mod:`media` reads it (a voice note's words); so is any message carrying files. It
    passed the same admission, rate limit and notices as text; it is never merged into a burst (whose text would
    reach the model without it), and it waits behind what the sender wrote before it, so the answers keep the
    order of the messages. On a platform answered line by line (the terminal) every turn is alone already, and
    taken in turn by the next step: a file's turn finishes before the next line is read."""

    name = "unreadable"

    def __init__(self, debouncer: Debouncer, resumed: asyncio.Event,
                 immediate: frozenset[str] = frozenset()) -> None:
        self.debouncer = debouncer
        self.resumed = resumed
        self.immediate = immediate

    async def __call__(self, arrival: Arrival) -> bool:
        message = arrival.message
        # A message carrying files goes alone too: merged into a burst, its files would be left behind.
        if (not message.unreadable and not message.attachments) or message.platform in self.immediate:
            return True
        if not arrival.resuming and not self.resumed.is_set():
            await self.resumed.wait()
        self.debouncer.submit_alone(message)
        return False


class Debounce:
    """A burst becomes one turn. The terminal answers line by line (scripts rely on one reply per line), so
    its messages skip it. New messages wait until the turns a previous process left are queued, so a
    person's new message is answered after the one they sent before the restart."""

    name = "debounce"

    def __init__(self, debouncer: Debouncer, take_turn: Callable[[InboundMessage], Awaitable[None]],
                 wait_idle: Callable[[], Awaitable[None]], resumed: asyncio.Event,
                 immediate: frozenset[str]) -> None:
        self.debouncer = debouncer
        self.take_turn = take_turn
        self.wait_idle = wait_idle
        self.resumed = resumed
        self.immediate = immediate

    async def __call__(self, arrival: Arrival) -> bool:
        message = arrival.message
        if message.platform in self.immediate:
            await self.take_turn(message)
            await self.wait_idle()
            return False
        if not arrival.resuming and not self.resumed.is_set():
            await self.resumed.wait()
        await self.debouncer.submit(message)
        return False


class Intake:
    """Runs a message through the steps, in order, until one says it goes no further."""

    def __init__(self, steps: Sequence[Step], keeping: Callable[[InboundMessage], Keeping]) -> None:
        self.steps = tuple(steps)
        self.keeping = keeping

    @property
    def names(self) -> list[str]:
        return [step.name for step in self.steps]

    async def __call__(self, message: InboundMessage, *, resuming: bool = False) -> None:
        arrival = Arrival(message, self.keeping(message), resuming=resuming)
        for step in self.steps:
            if not await step(arrival):
                return

