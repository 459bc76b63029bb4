"""One person across platforms: one-time link codes, confirmed at both ends, and the owner's people command.

``/link`` in a DM gives a short code. Sending ``/link CODE`` from the person's account on another
platform claims it; nothing is linked yet. The account that asked for the code is asked "Link
telegram:… to you?" with Yes and No buttons (``/link yes`` and ``/link no`` type the same), and only
its Yes joins the second account to the same person, so memory, pins and policy follow the person.

Both ends must be someone kith talks to: ``/link CODE`` is a command like any other and reaches
this module only after the policy let its sender in, so a stranger cannot get past pairing by
holding a code. An account may send at most ``LINK_FAILURES_PER_HOUR`` wrong or expired codes an
hour; past that its codes are not even looked at, and every refusal is logged by account id.
Codes are single-use and expire after ``LINK_CODE_TTL_S``.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from delivery.posting import Outbound
from ground.db import Database, UtcDateTime, metadata
from ground.person_data import PersonData, when
from ground.tunables import LINK_CODE_LENGTH, LINK_CODE_TTL_S, LINK_FAILURE_WINDOW_S, LINK_FAILURES_PER_HOUR
from ground.types import Button, ButtonPress, ChatKind, InboundMessage, OutboundMessage, reply_to
from people import directory, moves
from policy.pairing import PAIRING_ALPHABET, normalize_code

log = logging.getLogger("kith.linking")

link_codes = sa.Table(
    "link_codes",
    metadata,
    sa.Column("code", sa.String(16), primary_key=True),
    sa.Column("person", sa.String(64), nullable=False),
    sa.Column("account", sa.String(255), nullable=False),  # the account that asked for it
    sa.Column("created_at", UtcDateTime(), nullable=False),
    # Added after the first release (older files gain them at open): where to ask the first account, and
    # the account that claimed the code, waiting for that answer.
    sa.Column("chat_id", sa.String(255), nullable=True),
    sa.Column("claimed_by", sa.String(255), nullable=True),
    sa.Column("claimed_chat", sa.String(255), nullable=True),
    sa.Column("claimed_at", UtcDateTime(), nullable=True),
)

link_failures = sa.Table(
    "link_failures",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("account", sa.String(255), nullable=False),
    sa.Column("failed_at", UtcDateTime(), nullable=False),
    sa.Index("ix_link_failures_account", "account", "failed_at"),
)


def requests_of(conn: Connection, person: str) -> list[dict[str, Any]]:
    """Links the person asked for, or their accounts asked for or claimed, not yet settled, as their export
    lists them. The code itself is left out: it is a one-time secret."""
    accounts = [a.account for a in directory.accounts_of(conn, person)]
    c = link_codes.c
    rows = conn.execute(sa.select(link_codes).where(
        sa.or_(c.person == person, c.account.in_(accounts), c.claimed_by.in_(accounts)))
        .order_by(c.created_at)).all()
    return [{"asked_by": r.account, "asked_at": when(r.created_at), "claimed_by": r.claimed_by,
             "claimed_at": when(r.claimed_at)} for r in rows]


def failures_of(conn: Connection, person: str) -> list[dict[str, Any]]:
    """The codes that did not work from the person's accounts, as their export lists them."""
    accounts = [a.account for a in directory.accounts_of(conn, person)]
    rows = conn.execute(sa.select(link_failures).where(link_failures.c.account.in_(accounts))
                        .order_by(link_failures.c.failed_at)).all()
    return [{"account": r.account, "failed_at": when(r.failed_at)} for r in rows]


LINK_REQUESTS_DATA = PersonData(
    "link_requests", tables=(link_codes,), export_rows=requests_of,
    stays="a code belongs to the person who asked for it until it is used or expires",
    kept_by_forget="accounts and times, no words")
LINK_FAILURES_DATA = PersonData(
    "link_failures", tables=(link_failures,), export_rows=failures_of, stays="kept by account, not by person",
    kept_by_forget="accounts and times, no words")


@dataclass(frozen=True, slots=True)
class LinkResult:
    person: str
    old_person: str | None  # the person the account left (its memory moves to ``person``), if any


@dataclass(frozen=True, slots=True)
class Claim:
    """A code claimed by ``second``, waiting for ``first`` (the account that asked for it) to confirm."""

    code: str
    person: str
    first: str  # account key
    first_chat: str
    second: str
    second_chat: str


@dataclass(frozen=True, slots=True)
class Confirmed:
    claim: Claim
    linked: LinkResult | None  # None: the first account said no


class LinkError(Exception):
    """The code is unknown, expired, or names the same account."""


class LinkLimited(LinkError):
    """Too many failed redemptions from one account within the hour."""


def may_redeem(failures_in_window: int, limit: int = LINK_FAILURES_PER_HOUR) -> bool:
    """Pure rule: an account that sent ``limit`` bad codes this hour gets no more looks."""
    return failures_in_window < limit


def issue_code(conn: Connection, account: str, display_name: str, now: datetime, chat_id: str | None = None) -> str:
    person = directory.resolve(conn, account, display_name, now)
    conn.execute(link_codes.delete().where(link_codes.c.account == account))
    conn.execute(link_codes.delete().where(link_codes.c.created_at < now - timedelta(seconds=LINK_CODE_TTL_S)))
    code = "".join(secrets.choice(PAIRING_ALPHABET) for _ in range(LINK_CODE_LENGTH))
    conn.execute(link_codes.insert().values(code=code, person=person, account=account, created_at=now,
                                            chat_id=chat_id))
    return code


def failures(conn: Connection, account: str, now: datetime) -> int:
    since = now - timedelta(seconds=LINK_FAILURE_WINDOW_S)
    return int(conn.execute(sa.select(sa.func.count()).select_from(link_failures).where(
        link_failures.c.account == account, link_failures.c.failed_at > since)).scalar_one())


def _failed(conn: Connection, account: str, now: datetime) -> None:
    conn.execute(link_failures.delete().where(
        link_failures.c.failed_at <= now - timedelta(seconds=LINK_FAILURE_WINDOW_S)))
    conn.execute(link_failures.insert().values(account=account, failed_at=now))


def claim(conn: Connection, code: str, account: str, chat_id: str, now: datetime,
          ask: Callable[[Connection, Claim], None] | None = None) -> Claim:
    """``account`` (in DM ``chat_id``) claims ``code``; ``ask`` runs in the same transaction (the question
    to the first account goes out with the claim or not at all). Raises LinkError or LinkLimited; a failed
    attempt is counted in a transaction of its own, so the error cannot roll it back."""
    if not may_redeem(failures(conn, account, now)):
        raise LinkLimited("too many link codes that did not work; try again in an hour")
    row = conn.execute(sa.select(link_codes).where(link_codes.c.code == normalize_code(code))).first()
    if row is None or row.created_at + timedelta(seconds=LINK_CODE_TTL_S) <= now:
        raise LinkError("that link code is unknown or has expired; ask for a new one with /link")
    if row.account == account:
        raise LinkError("send this code from your account on another platform")
    if row.chat_id is None:
        raise LinkError("that link code is from an older version; ask for a new one with /link")
    conn.execute(link_codes.update().where(link_codes.c.code == row.code).values(
        claimed_by=account, claimed_chat=chat_id, claimed_at=now))
    found = Claim(row.code, row.person, row.account, row.chat_id, account, chat_id)
    if ask is not None:
        ask(conn, found)
    return found


def record_failure(conn: Connection, account: str, now: datetime) -> int:
    _failed(conn, account, now)
    return failures(conn, account, now)


def confirm(conn: Connection, first: str, now: datetime, yes: bool, code: str | None = None) -> Confirmed | None:
    """The first account's answer to a claim of its code (``code``, or its latest claimed one).

    None when nothing of ``first``'s waits for an answer. The code is used up either way.
    """
    query = sa.select(link_codes).where(link_codes.c.account == first, link_codes.c.claimed_by.is_not(None),
                                        link_codes.c.created_at > now - timedelta(seconds=LINK_CODE_TTL_S))
    if code is not None:
        query = query.where(link_codes.c.code == normalize_code(code))
    row = conn.execute(query.order_by(link_codes.c.claimed_at.desc()).limit(1)).first()
    if row is None:
        return None
    conn.execute(link_codes.delete().where(link_codes.c.code == row.code))
    found = Claim(row.code, row.person, row.account, row.chat_id or "", row.claimed_by, row.claimed_chat or "")
    return Confirmed(found, link_account(conn, row.claimed_by, row.person, now) if yes else None)


def link_account(conn: Connection, account: str, person: str, now: datetime) -> LinkResult:
    """Join ``account`` to ``person``; the old person's memory moves only if no account is left behind, and
    that move is recorded with the link (:func:`people.moves.record`), so that it finishes even if the process
    stops before it does."""
    old = directory.link(conn, account, person, now)
    if old is not None and directory.accounts_of(conn, old):
        old = None
    if old is not None:
        moves.record(conn, old, person, now)
    return LinkResult(person, old)


def looks_like_link(text: str) -> str | None:
    """The code in ``/link CODE`` (or ``/link@bot CODE``), else None."""
    head, _, rest = text.strip().partition(" ")
    if head.split("@", 1)[0].lower() != "/link" or not rest.strip():
        return None
    return rest.strip()


def _dm(account: str, chat_id: str, text: str, *, buttons: tuple[Button, ...] = (),
        notice: bool = False) -> OutboundMessage:
    platform, _, sender = account.partition(":")
    return OutboundMessage(platform=platform, chat_id=chat_id, text=text, chat_kind=ChatKind.DM,
                           recipient_id=sender or None, buttons=buttons, notice=notice)


LINK_ISSUED = ("Your link code is {code}. Within {minutes} minutes, send `/link {code}` to me in a DM from your "
               "account on another platform; I'll then ask you here to confirm.")
ASK_FIRST = ("Link {account} to you? Only if that account is yours: it will see and change everything I remember "
             "about you. Tap a button, or reply /link yes or /link no.")
ASKED = "I asked you on your other account to confirm. Once you say yes there, this account is linked."
LINKED = "Linked: I know this account is you too. What you told me elsewhere now comes along here."
LINKED_FIRST = "Linked: {account} is you too."
DECLINED = "Not linked: the code is used up. /link gives a new one."
NOTHING_WAITING = "No link is waiting for your answer."
NOT_YOURS = "Only the account that asked for this code can answer."
LIMITED = "Too many link codes that did not work from this account; try again in an hour."
DM_ONLY = "Linking works in a direct message only."


class Linker:
    """The chat side of linking; ``on_moved(old_person, new_person)`` moves memory after a link.

    ``outbound`` posts what goes to the other end (the question to the first account, the "Linked" to the
    second); without a running bot it waits in the outbox for the next start.
    """

    def __init__(self, db: Database, clock: Callable[[], datetime], outbound: Outbound,
                 on_moved: Callable[[str, str], Awaitable[object]] | None = None) -> None:
        self.db = db
        self.clock = clock
        self.on_moved = on_moved
        self.outbound = outbound

    async def issue(self, message: InboundMessage, args: str) -> OutboundMessage:
        """``/link`` (a new code), ``/link CODE`` (claim it), ``/link yes`` or ``/link no`` (answer a claim)."""
        if message.chat_kind is not ChatKind.DM:
            return reply_to(message, DM_ONLY)
        word = args.strip().casefold()
        if word in ("yes", "no"):
            return await self._answer(message.account, message, word == "yes")
        if word:
            return await self._claim(message, args.strip())
        code = await self.db.run(issue_code, message.account, message.sender_name, self.clock(), message.chat_id)
        return reply_to(message, LINK_ISSUED.format(code=code, minutes=LINK_CODE_TTL_S // 60))

    async def _claim(self, message: InboundMessage, code: str) -> OutboundMessage:
        now = self.clock()
        posting = self.outbound.posting()

        def ask(conn: Connection, found: Claim) -> None:
            question = _dm(found.first, found.first_chat, ASK_FIRST.format(account=found.second),
                           buttons=(Button("Yes", f"l:{found.code}:yes"), Button("No", f"l:{found.code}:no")))
            posting(conn, question, source=f"link:{found.code}")

        try:
            await self.db.run(claim, code, message.account, message.chat_id, now, ask)
        except LinkLimited:
            log.warning("link refused platform=%s account=%s reason=limit", message.platform, message.account)
            return reply_to(message, LIMITED)
        except LinkError as exc:
            count = await self.db.run(record_failure, message.account, now)
            log.warning("link code failed platform=%s account=%s failures=%d", message.platform, message.account,
                        count)
            return reply_to(message, str(exc))
        posting.schedule()
        log.info("link claimed platform=%s account=%s", message.platform, message.account)
        return reply_to(message, ASKED)

    async def press(self, press: ButtonPress, rest: str) -> OutboundMessage | None:
        """The ``l:<code>:yes|no`` buttons on the question to the first account."""
        code, _, value = rest.rpartition(":")
        if value not in ("yes", "no") or not code:
            return None
        presser = f"{press.platform}:{press.sender_id}"
        owner = await self.db.run(lambda conn: conn.execute(
            sa.select(link_codes.c.account).where(link_codes.c.code == normalize_code(code))).scalar_one_or_none())
        text = NOTHING_WAITING
        if owner is not None and owner != presser:
            log.warning("link answer refused platform=%s account=%s", press.platform, presser)
            text = NOT_YOURS
        elif owner is not None:
            text = await self._settle(presser, value == "yes", code)
        return OutboundMessage(platform=press.platform, chat_id=press.chat_id, text=text, chat_kind=press.chat_kind,
                               recipient_id=press.sender_id)

    async def _answer(self, first: str, message: InboundMessage, yes: bool) -> OutboundMessage:
        return reply_to(message, await self._settle(first, yes, None))

    async def _settle(self, first: str, yes: bool, code: str | None) -> str:
        now = self.clock()
        posting = self.outbound.posting()

        def answer(conn: Connection) -> Confirmed | None:
            confirmed = confirm(conn, first, now, yes, code)
            if confirmed is not None and confirmed.linked is not None:
                found = confirmed.claim
                # A notice: the second account learns of it whatever the policy said before the link.
                posting(conn, _dm(found.second, found.second_chat, LINKED, notice=True), source=f"link:{found.code}")
            return confirmed

        confirmed = await self.db.run(answer)
        if confirmed is None:
            return NOTHING_WAITING
        if confirmed.linked is None:
            log.info("link declined account=%s", first)
            return DECLINED
        result = confirmed.linked
        if result.old_person and self.on_moved is not None:
            await moves.finish(self.db, self.on_moved, result.old_person, result.person)
        posting.schedule()
        log.info("account linked account=%s person=%s moved=%s", confirmed.claim.second, result.person,
                 bool(result.old_person))
        return LINKED_FIRST.format(account=confirmed.claim.second)
