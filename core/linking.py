"""One person across platforms: one-time link codes and the owner's people command.

``/link`` in a DM gives a short code; sending ``/link CODE`` from the person's account on
another platform joins that account to the same person, so memory, pins and policy follow
the person. Codes are single-use and expire after LINK_CODE_TTL_S.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from core import people
from core.conversation import reply_to
from core.db import Database, UtcDateTime, metadata
from core.tunables import LINK_CODE_LENGTH, LINK_CODE_TTL_S
from core.types import ChatKind, InboundMessage, OutboundMessage
from policy.pairing import PAIRING_ALPHABET, normalize_code

log = logging.getLogger("kith.linking")

link_codes = sa.Table(
    "link_codes",
    metadata,
    sa.Column("code", sa.String(16), primary_key=True),
    sa.Column("person", sa.String(64), nullable=False),
    sa.Column("account", sa.String(255), nullable=False),  # the account that asked for it
    sa.Column("created_at", UtcDateTime(), nullable=False),
)


@dataclass(frozen=True, slots=True)
class LinkResult:
    person: str
    old_person: str | None  # the person the account left (its memory moves to ``person``), if any


class LinkError(Exception):
    """The code is unknown, expired, or names the same account."""


def issue_code(conn: Connection, account: str, display_name: str, now: datetime) -> str:
    person = people.resolve(conn, account, display_name, now)
    conn.execute(link_codes.delete().where(link_codes.c.account == account))
    conn.execute(link_codes.delete().where(link_codes.c.created_at < now - timedelta(seconds=LINK_CODE_TTL_S)))
    code = "".join(secrets.choice(PAIRING_ALPHABET) for _ in range(LINK_CODE_LENGTH))
    conn.execute(link_codes.insert().values(code=code, person=person, account=account, created_at=now))
    return code


def redeem(conn: Connection, code: str, account: str, now: datetime) -> LinkResult:
    row = conn.execute(sa.select(link_codes).where(link_codes.c.code == normalize_code(code))).first()
    if row is None or row.created_at + timedelta(seconds=LINK_CODE_TTL_S) <= now:
        raise LinkError("that link code is unknown or has expired; ask for a new one with /link")
    if row.account == account:
        raise LinkError("send this code from your account on another platform")
    conn.execute(link_codes.delete().where(link_codes.c.code == row.code))
    return link_account(conn, account, row.person, now)


def link_account(conn: Connection, account: str, person: str, now: datetime) -> LinkResult:
    """Join ``account`` to ``person``; the old person's memory moves only if no account is left behind."""
    old = people.link(conn, account, person, now)
    if old is not None and people.accounts_of(conn, old):
        old = None
    return LinkResult(person, old)


def looks_like_link(text: str) -> str | None:
    """The code in ``/link CODE`` (or ``/link@bot CODE``), else None."""
    head, _, rest = text.strip().partition(" ")
    if head.split("@", 1)[0].lower() != "/link" or not rest.strip():
        return None
    return rest.strip()


LINK_ISSUED = ("Your link code is {code}. Within {minutes} minutes, send `/link {code}` to me in a DM from your "
               "account on another platform, and I'll know both accounts are you.")
LINKED = "Linked: I know this account is you too. What you told me elsewhere now comes along here."


class Linker:
    """The chat side of linking; ``on_moved(old_person, new_person)`` moves memory after a link."""

    def __init__(self, db: Database, clock: Callable[[], datetime],
                 on_moved: Callable[[str, str], Awaitable[object]] | None = None) -> None:
        self.db = db
        self.clock = clock
        self.on_moved = on_moved

    async def issue(self, message: InboundMessage, _args: str) -> OutboundMessage:
        if message.chat_kind is not ChatKind.DM:
            return reply_to(message, "Linking works in a direct message only.")
        code = await self.db.run(issue_code, message.account, message.sender_name, self.clock())
        return reply_to(message, LINK_ISSUED.format(code=code, minutes=LINK_CODE_TTL_S // 60))

    def wants(self, message: InboundMessage) -> bool:
        """Whether ``message`` is a ``/link CODE`` for :meth:`redeem_message` (cheap, no I/O)."""
        return message.chat_kind is ChatKind.DM and looks_like_link(message.text) is not None

    async def redeem_message(self, message: InboundMessage) -> OutboundMessage | None:
        """Answer ``/link CODE`` sent in a DM (before policy: a valid code is itself the proof); else None.

        The answer to a linked account is a notice, which delivery sends whatever the policy says. The
        answer to a code that is unknown or expired is not: only someone the policy lets in is told, so a
        stranger cannot get past pairing, the rate limit or a disabled DM policy by guessing codes.
        """
        code = looks_like_link(message.text)
        if code is None or message.chat_kind is not ChatKind.DM:
            return None
        try:
            result = await self.db.run(redeem, code, message.account, self.clock())
        except LinkError as exc:
            return reply_to(message, str(exc))
        if result.old_person and self.on_moved is not None:
            await self.on_moved(result.old_person, result.person)
        log.info("account linked platform=%s person=%s moved=%s", message.platform, result.person,
                 bool(result.old_person))
        return reply_to(message, LINKED, notice=True)

