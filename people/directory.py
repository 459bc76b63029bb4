"""People, not accounts: every platform account maps to a person; links merge accounts.

An account (``telegram:42``, ``slack:T1:U2``, ``console:ana``) is its own person until the
owner or the person links it to another; memory, pins and policy follow the person.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import UtcDateTime, metadata
from ground.prepared import Prepared

accounts = sa.Table(
    "accounts",
    metadata,
    sa.Column("account", sa.String(255), primary_key=True),
    sa.Column("person", sa.String(64), nullable=False, index=True),
    sa.Column("display_name", sa.String(255), nullable=False, server_default=""),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("linked_at", UtcDateTime(), nullable=True),
)


@dataclass(frozen=True, slots=True)
class Account:
    account: str
    person: str
    display_name: str


def new_person_id() -> str:
    return "p_" + secrets.token_hex(8)


# Built once: every message resolves its sender, and building a statement costs more than running it.
_ACCOUNT = Prepared(sa.select(accounts.c.person, accounts.c.display_name)
                    .where(accounts.c.account == sa.bindparam("account")))
_ACCOUNTS_OF = (sa.select(accounts).where(accounts.c.person == sa.bindparam("person"))
                .order_by(accounts.c.account))


def resolve(conn: Connection, account: str, display_name: str, now: datetime) -> str:
    """The person behind an account, creating a new person the first time the account speaks."""
    row = _ACCOUNT.first(conn, {"account": account})
    if row is not None:
        if display_name and row.display_name != display_name:
            conn.execute(accounts.update().where(accounts.c.account == account)
                         .values(display_name=display_name))
        return str(row.person)
    person = new_person_id()
    try:
        with conn.begin_nested():
            conn.execute(accounts.insert().values(account=account, person=person, display_name=display_name,
                                                  created_at=now))
    except sa.exc.IntegrityError:
        return str(conn.execute(sa.select(accounts.c.person).where(accounts.c.account == account)).scalar_one())
    return person


def person_of(conn: Connection, account: str) -> str | None:
    row = _ACCOUNT.first(conn, {"account": account})
    return str(row.person) if row is not None else None


def by_account(conn: Connection, accounts_wanted: Sequence[str]) -> dict[str, Account]:
    """Those of ``accounts_wanted`` that kith knows, each with its person and display name."""
    if not accounts_wanted:
        return {}
    rows = conn.execute(sa.select(accounts).where(accounts.c.account.in_(list(accounts_wanted)))).all()
    return {r.account: Account(r.account, r.person, r.display_name) for r in rows}


def accounts_of(conn: Connection, person: str) -> list[Account]:
    rows = conn.execute(_ACCOUNTS_OF, {"person": person}).all()
    return [Account(r.account, r.person, r.display_name) for r in rows]


def all_accounts(conn: Connection) -> list[Account]:
    rows = conn.execute(sa.select(accounts).order_by(accounts.c.person, accounts.c.account)).all()
    return [Account(r.account, r.person, r.display_name) for r in rows]


def link(conn: Connection, account: str, to_person: str, now: datetime) -> str | None:
    """Move ``account`` to ``to_person``; returns the person it left (whose memory the caller moves)."""
    old = person_of(conn, account)
    if old is None:
        conn.execute(accounts.insert().values(account=account, person=to_person, display_name="",
                                              created_at=now, linked_at=now))
        return None
    if old == to_person:
        return None
    conn.execute(accounts.update().where(accounts.c.account == account).values(person=to_person, linked_at=now))
    return old


def export_of(conn: Connection, person: str) -> list[dict[str, Any]]:
    """The person's accounts as their export lists them: each with its platform, name and dates."""
    rows = conn.execute(_ACCOUNTS_OF, {"person": person}).all()
    return [{"account": r.account, "platform": r.account.partition(":")[0], "display_name": r.display_name,
             "first_seen": r.created_at.isoformat(), "linked_at": r.linked_at.isoformat() if r.linked_at else None}
            for r in rows]


def unlink(conn: Connection, account: str, now: datetime) -> str | None:
    """Give ``account`` a person of its own again; returns the new person id. Nothing moves back: what the
    account said and what kith kept of it while it was linked stay with the person it leaves."""
    if person_of(conn, account) is None:
        return None
    person = new_person_id()
    conn.execute(accounts.update().where(accounts.c.account == account).values(person=person, linked_at=now))
    return person
