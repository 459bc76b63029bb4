"""Persistence of the access state (approved accounts, owner, pending pairing codes).

The state is small, so it is stored as one JSON document with a revision: every change is
a compare-and-swap, so the bot and the ``bot.py pairing`` command (another process) never
overwrite each other's changes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from types import MappingProxyType
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, metadata
from ground.person_data import PersonData, when
from ground.prepared import Prepared
from ground.tunables import ACCESS_CAS_ATTEMPTS
from people import directory
from policy.pairing import AccessState, PendingCode

ACCESS_TOPIC = "access"  # Database.mark topic: the access state, for caches of it in this process

access_state = sa.Table(
    "access_state",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("revision", sa.Integer, nullable=False),
)

T = TypeVar("T")


def _dump(state: AccessState) -> str:
    return json.dumps({
        "approved": sorted(state.approved),
        "owner": state.owner,
        "pending": [{"code": p.code, "platform": p.platform, "account": p.account,
                     "issued_at": p.issued_at.isoformat(), "sent_at": p.sent_at.isoformat()} for p in state.pending],
        "full_notified": {a: at.isoformat() for a, at in state.full_notified.items()},
    }, sort_keys=True)


def _load(text: str) -> AccessState:
    raw: dict[str, Any] = json.loads(text)
    return AccessState(
        approved=frozenset(raw.get("approved", [])),
        owner=raw.get("owner"),
        pending=tuple(PendingCode(p["code"], p["platform"], p["account"], datetime.fromisoformat(p["issued_at"]),
                                  datetime.fromisoformat(p["sent_at"])) for p in raw.get("pending", [])),
        full_notified=MappingProxyType({a: datetime.fromisoformat(at)
                                        for a, at in raw.get("full_notified", {}).items()}),
    )


_LOAD = Prepared(sa.select(access_state).where(access_state.c.id == 1))  # built once: every inbound message reads it


def load(conn: Connection) -> tuple[AccessState, int]:
    row = _LOAD.first(conn, {})
    if row is None:
        return AccessState(), 0
    return _load(row.state), int(row.revision)


def _save(conn: Connection, state: AccessState, expected_revision: int) -> bool:
    if expected_revision == 0:
        try:
            with conn.begin_nested():
                conn.execute(access_state.insert().values(id=1, state=_dump(state), revision=1))
            return True
        except sa.exc.IntegrityError:
            return False
    result = conn.execute(access_state.update().where(access_state.c.id == 1,
                                                      access_state.c.revision == expected_revision)
                          .values(state=_dump(state), revision=expected_revision + 1))
    return result.rowcount == 1


class StaleAccessState(Exception):
    """Another writer kept changing the access state; the change was not applied."""


def update(conn: Connection, change: Callable[[AccessState], tuple[T, AccessState]]) -> T:
    """Apply ``change`` to the current state and store it with compare-and-swap.

    ``change`` returns (result, new_state); the same state object means nothing to write.
    """
    for _ in range(ACCESS_CAS_ATTEMPTS):
        state, revision = load(conn)
        result, new_state = change(state)
        if new_state is state or _save(conn, new_state, revision):
            return result
    raise StaleAccessState("the access state kept changing under this write")


def update_outside_the_gate(db: Database, change: Callable[[AccessState], tuple[T, AccessState]]) -> T:
    """``update`` for a writer other than the policy gate (the pairing command), marked so that a gate in
    this same process sees the change at its next send; another process's gate sees it anyway."""
    result = db.run_sync(update, change)
    db.mark(ACCESS_TOPIC)
    return result


def export_of(conn: Connection, person: str) -> list[dict[str, Any]]:
    """The person's accounts as their export lists them (:func:`people.directory.export_of`), each with what the
    access rules keep about it."""
    state, _revision = load(conn)
    out = []
    for account in directory.export_of(conn, person):
        name = account["account"]
        pending = state.pending_for(name)
        out.append(account | {"approved": name in state.approved, "owner": name == state.owner,
                              "pairing_code_issued_at": when(pending.issued_at) if pending else None})
    return out


ACCOUNTS_DATA = PersonData(
    "accounts", tables=(directory.accounts, access_state), export_rows=export_of,
    stays="the link itself moves the account to its new person (people.directory.link)",
    kept_by_forget="who the person is on each platform, not anything they said; bot.py people unlink separates an "
                   "account")
