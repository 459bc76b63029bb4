"""Proactive turns: every ``every_minutes`` inside active hours, a short message to a person with
something due, or nothing at all.

The rules, each enforced here in code rather than asked of the model:

* outside ``active_hours`` (local time) a tick does nothing, not even a query;
* a person with nothing due costs no model call (see :mod:`heartbeat.due`);
* a person whose conversation is mid-reply (``ConversationCore.busy_people``) is deferred;
* the prompt is small and isolated: the persona card and the due items, no history, within
  ``token_budget`` tokens, the answer included;
* the persona answers with a message or ``[SILENT]``. A silent answer is recorded in the
  transcript (role ``heartbeat``, ``silent``) and posts nothing; the token is stripped from any
  answer, so it never reaches a person;
* a failed model call is retried with backoff through a persisted one-off job, not dropped.

A message goes to the person's DM on the platform they last used in a DM. The transcript row,
the outbox row and the "handled" marks are written in one transaction, and the delivery worker
(which still asks policy) is then told about the lane; with no worker running, the next start
delivers it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from conversation.context import clip
from delivery.posting import Outbound, PostedAtNextStart, Posting
from ground.config import Settings
from ground.db import Database
from ground.tunables import CHARS_PER_TOKEN, HEARTBEAT_CONCURRENCY, HEARTBEAT_REPLY_TOKENS
from ground.types import ChatKind, OutboundMessage
from heartbeat.due import DueFinder, DueItem, claim
from heartbeat.settings import HeartbeatSettings, in_active_hours, parse_active_hours, retry_delay
from llm.client import LLMClient, LLMError
from memory.forgetting import RecentForgets
from people import directory, history
from persona.card import render_card
from persona.instructions import HEARTBEAT_INSTRUCTION, SILENT_TOKEN
from persona.labels import due_items_heading

log = logging.getLogger("kith.heartbeat")


_SILENT = re.compile(r"\[\s*silent\s*\]", re.I)  # SILENT_TOKEN, however the model spaced or cased it
_LEFTOVER = " \t\r\n.,;:!?-–—…*_`\"'"


class TurnOutcome(enum.StrEnum):
    POSTED = "posted"
    SILENT = "silent"
    DEFERRED = "deferred"  # mid-reply: tried again shortly
    RETRY_SCHEDULED = "retry_scheduled"
    FAILED = "failed"  # retries exhausted; the items stay due for a later tick
    NO_DESTINATION = "no_destination"  # never wrote in a DM: nowhere private to write to
    NOTHING_DUE = "nothing_due"
    QUIET_HOURS = "quiet_hours"
    RETRY_PENDING = "retry_pending"  # a persisted retry owns this person for now
    HANDLED_ELSEWHERE = "handled_elsewhere"  # another turn wrote about these items since they were found
    # The person had words forgotten while the model wrote, and the message holds them: not sent, not kept; what
    # is still due (without those words) is written about at a later tick.
    FORGOTTEN_MEANWHILE = "forgotten_meanwhile"


class FollowUps(Protocol):
    """Persisted one-off runs of a person's heartbeat (the scheduler implements it)."""

    def schedule_person(self, person: str, delay_s: float, attempt: int) -> None: ...

    def has_pending(self, person: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class Destination:
    platform: str
    chat_id: str
    thread_id: str | None
    recipient_id: str
    conversation: str
    name: str


@dataclass
class TickReport:
    quiet: bool = False
    due_people: int = 0
    llm_calls: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    elapsed_ms: float = 0.0


# --- pure parts ---------------------------------------------------------------------------------
def strip_silent(text: str) -> str | None:
    """What may be posted of an answer, or None when it is (only) the silent token."""
    cleaned = _SILENT.sub(" ", text)
    cleaned = "\n".join(" ".join(line.split()) for line in cleaned.splitlines()).strip()
    return cleaned if cleaned.strip(_LEFTOVER) else None


def reply_tokens(token_budget: int) -> int:
    return max(1, min(HEARTBEAT_REPLY_TOKENS, token_budget // 3))


def build_messages(card: str, name: str, items: Sequence[DueItem], token_budget: int) -> list[dict[str, str]]:
    """The isolated prompt: persona card and instructions, then the due items as data, within budget."""
    budget = (token_budget - reply_tokens(token_budget)) * CHARS_PER_TOKEN
    system = clip(card, budget // 2) + "\n\n" + HEARTBEAT_INSTRUCTION
    header = due_items_heading(name)
    body = clip("\n".join(f"- {item.text}" for item in items), max(0, budget - len(system) - len(header)))
    return [{"role": "system", "content": system}, {"role": "user", "content": header + body}]


# --- relational access --------------------------------------------------------------------------
def destinations(conn: Connection, persons: Sequence[str]) -> dict[str, Destination]:
    """Each person's DM on the platform they last wrote to kith in a DM."""
    if not persons:
        return {}
    m = history.messages
    latest = (sa.select(sa.func.max(m.c.id)).where(m.c.person.in_(list(persons)), m.c.role == "user",
                                                   m.c.chat_kind == ChatKind.DM.value).group_by(m.c.person))
    rows = conn.execute(sa.select(m.c.person, m.c.platform, m.c.chat_id, m.c.thread_id, m.c.author,
                                  m.c.conversation, directory.accounts.c.display_name)
                        .select_from(m.outerjoin(directory.accounts, directory.accounts.c.account == m.c.author))
                        .where(m.c.id.in_(latest))).all()
    out = {}
    for r in rows:
        prefix = f"{r.platform}:"
        recipient = r.author[len(prefix):] if r.author.startswith(prefix) else r.author
        out[r.person] = Destination(r.platform, r.chat_id, r.thread_id, recipient, r.conversation,
                                    r.display_name or "")
    return out


class HandledElsewhere(Exception):
    """A turn found an item due, and before it could write, another turn handled it."""


def _record(conn: Connection, person: str, dest: Destination, text: str | None, items: Sequence[DueItem],
            now: datetime, posting: Posting) -> OutboundMessage | None:
    """Transcript row, outbox row and handled marks, in the caller's one transaction.

    ``HandledElsewhere`` (nothing written) when any of ``items`` was marked handled since it was found: a turn
    that ran beside this one (another process's, or a tick and a retry at once) already wrote to the person
    about it, and a second message would say it twice. The rest stay due for a later tick.
    """
    if not claim(conn, person, items, now):
        raise HandledElsewhere
    row = {"conversation": dest.conversation, "author": "kith", "platform": dest.platform,
             "chat_id": dest.chat_id, "thread_id": dest.thread_id, "chat_kind": ChatKind.DM.value, "created_at": now}
    if text is None:
        history.append(conn, role="heartbeat", text=SILENT_TOKEN, silent=True, **row)
        return None
    # An assistant turn, so that the person's answer to it reads in context in the next reply.
    row_id = history.append(conn, role="assistant", text=text, **row)
    message = OutboundMessage(platform=dest.platform, chat_id=dest.chat_id, text=text, thread_id=dest.thread_id,
                              chat_kind=ChatKind.DM, recipient_id=dest.recipient_id)
    posting(conn, message, source=f"heartbeat:{row_id}")
    return message


class HeartbeatTurns:
    def __init__(self, *, settings: Settings, hb: HeartbeatSettings, db: Database, llm: LLMClient,
                 finder: DueFinder, clock: Callable[[], datetime], tz: tzinfo, busy: Collection[str] = frozenset(),
                 outbound: Outbound | None = None,
                 follow_ups: FollowUps | None = None, forgets: RecentForgets | None = None) -> None:
        self.settings = settings
        self.hb = hb
        self.db = db
        self.llm = llm
        self.finder = finder
        self.clock = clock
        self.tz = tz
        self.busy = busy
        # No outbound given (a command run while no bot runs): the posts wait in the outbox for the next start.
        self.outbound: Outbound = outbound or PostedAtNextStart(clock)
        self.follow_ups = follow_ups
        # The forgets this process applied: a check-in written from words forgotten meanwhile is held to them.
        self.forgets = forgets or RecentForgets()
        self.hours = parse_active_hours(hb.active_hours)

    def is_active_hour(self, now: datetime) -> bool:
        return in_active_hours(now.astimezone(self.tz).time(), *self.hours)

    async def tick(self, *, any_hour: bool = False) -> TickReport:
        """One heartbeat for everyone: a turn for each person with something due."""
        started = time.perf_counter()
        report = TickReport()
        now = self.clock()
        if not any_hour and not self.is_active_hour(now):
            report.quiet = True
            return report
        due = await self.finder.find()
        report.due_people = len(due)
        if due:
            dests = await self.db.run(destinations, sorted(due))
            gate = asyncio.Semaphore(HEARTBEAT_CONCURRENCY)

            async def one(person: str, items: list[DueItem]) -> None:
                if self.follow_ups is not None and self.follow_ups.has_pending(person):
                    report.outcomes[TurnOutcome.RETRY_PENDING.value] += 1
                    return
                async with gate:
                    outcome = await self._turn(person, items, dests.get(person), 0, report)
                report.outcomes[outcome.value] += 1

            await asyncio.gather(*(one(p, items) for p, items in sorted(due.items())))
        report.elapsed_ms = (time.perf_counter() - started) * 1000
        log.info("heartbeat tick due_people=%d llm_calls=%d ms=%.1f %s", report.due_people, report.llm_calls,
                 report.elapsed_ms, " ".join(f"{k}={v}" for k, v in sorted(report.outcomes.items())))
        return report

    async def person_turn(self, person: str, attempt: int = 0) -> TurnOutcome:
        """A deferred or retried heartbeat of one person; what is due is looked up afresh."""
        if not self.is_active_hour(self.clock()):
            return TurnOutcome.QUIET_HOURS  # the items stay due: the first tick in active hours has them
        items = (await self.finder.find(person)).get(person)
        if not items:
            return TurnOutcome.NOTHING_DUE
        dest = (await self.db.run(destinations, [person])).get(person)
        return await self._turn(person, items, dest, attempt, TickReport())

    async def _turn(self, person: str, items: list[DueItem], dest: Destination | None, attempt: int,
                    report: TickReport) -> TurnOutcome:
        if dest is None:
            return TurnOutcome.NO_DESTINATION
        if person in self.busy:
            if self.follow_ups is None:
                return TurnOutcome.DEFERRED
            self.follow_ups.schedule_person(person, self.hb.busy_defer_s, attempt)
            log.info("heartbeat deferred person=%s reason=mid_reply", person)
            return TurnOutcome.DEFERRED
        with self.forgets.watching() as mark:
            now = self.clock()
            card = render_card(self.settings.persona, now=now.astimezone(self.tz))
            messages = build_messages(card, dest.name, items, self.hb.token_budget)
            report.llm_calls += 1
            try:
                reply = await self.llm.complete(messages, max_tokens=reply_tokens(self.hb.token_budget),
                                                max_retries=0, purpose="heartbeat")
            except LLMError as exc:
                return self._failed(person, attempt, exc)
            text = strip_silent(reply.text)
            posting = self.outbound.posting()
            # Under the forget's per-person lock: a forget either rewrote the rows before this one is written, or
            # applied since the prompt was built and is checked here; the message never outlives the words.
            async with self.forgets.locks.hold([person]):
                if text is not None and any(r.matches(text) for r in self.forgets.since(mark, person)):
                    log.info("heartbeat turn person=%s items=%d attempt=%d outcome=forgotten_meanwhile", person,
                             len(items), attempt)
                    return TurnOutcome.FORGOTTEN_MEANWHILE
                try:
                    message = await self.db.run(_record, person, dest, text, items, self.clock(), posting)
                except HandledElsewhere:
                    log.info("heartbeat turn person=%s items=%d attempt=%d outcome=handled_elsewhere", person,
                             len(items), attempt)
                    return TurnOutcome.HANDLED_ELSEWHERE
        posting.schedule()
        log.info("heartbeat turn person=%s items=%d attempt=%d outcome=%s chars=%d", person, len(items), attempt,
                 "posted" if message else "silent", len(text or ""))
        return TurnOutcome.POSTED if message is not None else TurnOutcome.SILENT

    def _failed(self, person: str, attempt: int, exc: LLMError) -> TurnOutcome:
        next_attempt = attempt + 1
        if self.follow_ups is None or next_attempt > self.hb.max_retries:
            log.warning("heartbeat failed person=%s attempt=%d kind=%s; left for a later tick", person, attempt,
                        exc.kind)
            return TurnOutcome.FAILED
        delay = retry_delay(next_attempt, self.hb.retry_base_s, self.hb.retry_max_s)
        self.follow_ups.schedule_person(person, delay, next_attempt)
        log.warning("heartbeat failed person=%s attempt=%d kind=%s; retry in %.0f s", person, attempt, exc.kind,
                    delay)
        return TurnOutcome.RETRY_SCHEDULED


def count_outcomes(outcomes: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) or "nothing due"
