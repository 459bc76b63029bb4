"""One person's export: everything kith stores about them, as one JSON document (its fields: docs/export.md).

Each package gives its own part for a person: their accounts (:mod:`people.directory`), their messages and
their private threads' summaries (:mod:`people.history`), memories, notes and tombstones (the memory
service), their conflict questions (:mod:`memory.controls.questions`), their pause
(:mod:`memory.controls.person_controls`) and
their goals (:mod:`memory.goals`). This module joins those and reads the few tables that keep no
per-person view of their own: the inbox and outbox (which hold messages, not people), access approvals,
link requests, the heartbeat's check-ins, decay's retirements and the nightly consolidation's summaries.

The chat's ``/export`` and ``bot.py memory export`` both come from here, so they hold the same document; only
memory texts are worded for their reader ("You live in Berlin", or with the person's display name).
The relational parts are read in one transaction, so they agree with each other.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from conversation.linking import link_codes, link_failures
from delivery.inbox import PayloadError, from_payload, inbox
from delivery.outbox import outbox
from ground.db import Database, as_utc
from ground.redaction import redact
from heartbeat.consolidation import consolidation_chunks
from heartbeat.decay import decay_retirements, decay_runs
from heartbeat.due import heartbeat_items
from memory import goals
from memory.controls import export_questions, pause_of
from memory.service import MemoryService
from people import directory, history
from policy import store as access

SCHEMA_VERSION = 1  # raised whenever a field changes meaning or goes; new fields are added under the same version


def _when(value: datetime | None) -> str | None:
    return as_utc(value).isoformat() if value is not None else None


def _accounts(conn: Connection, person: str) -> list[dict[str, Any]]:
    """The directory's accounts, each with what the access rules keep about it."""
    state, _revision = access.load(conn)
    out = []
    for account in directory.export_of(conn, person):
        name = account["account"]
        pending = state.pending_for(name)
        out.append(account | {"approved": name in state.approved, "owner": name == state.owner,
                              "pairing_code_issued_at": _when(pending.issued_at) if pending else None})
    return out


def _waiting(conn: Connection, accounts: set[str]) -> list[dict[str, Any]]:
    """Their messages taken in and not yet answered. Kept as sent until then, so redacted here as history is."""
    out = []
    for row in conn.execute(sa.select(inbox.c.payload, inbox.c.received_at).order_by(inbox.c.id)).all():
        try:
            message = from_payload(row.payload)
        except PayloadError:
            continue  # the inbox answers an unreadable row honestly and drops it
        if message.account not in accounts:
            continue
        out.append({"account": message.account, "platform": message.platform,
                    "chat_kind": message.chat_kind.value, "chat_id": message.chat_id, "thread_id": message.thread_id,
                    "message_id": message.message_id, "at": _when(message.timestamp),
                    "received_at": _when(row.received_at), "text": redact(message.text),
                    "forwarded": message.forwarded})
    return out


def _outbox(conn: Connection, accounts: Sequence[str], private_chats: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """kith's messages to them still in the outbox: waiting to go, or delivered and kept a few days. Replies
    to commands are only here (history keeps conversation). A file one carries (an earlier export) is named,
    not included."""
    recipients = {tuple(a.split(":", 1)) for a in accounts if ":" in a}
    platforms = sorted({r[0] for r in recipients} | {p for p, _c in private_chats})
    if not platforms:
        return []
    rows = conn.execute(sa.select(outbox).where(outbox.c.platform.in_(platforms)).order_by(outbox.c.id)).all()
    return [{"platform": r.platform, "chat_kind": r.chat_kind, "chat_id": r.chat_id, "thread_id": r.thread_id,
             "status": r.status, "created_at": _when(r.created_at), "text": redact(r.text),
             "attachment_name": r.attachment_name}
            for r in rows
            if (r.platform, r.recipient_id or "") in recipients
            or (r.chat_kind == "dm" and (r.platform, r.chat_id) in private_chats)]


def _link_requests(conn: Connection, person: str, accounts: Sequence[str]) -> list[dict[str, Any]]:
    """Links asked for and not yet settled. The code itself is left out: it is a one-time secret."""
    c = link_codes.c
    rows = conn.execute(sa.select(link_codes).where(
        sa.or_(c.person == person, c.account.in_(list(accounts)), c.claimed_by.in_(list(accounts))))
        .order_by(c.created_at)).all()
    return [{"asked_by": r.account, "asked_at": _when(r.created_at), "claimed_by": r.claimed_by,
             "claimed_at": _when(r.claimed_at)} for r in rows]


def _link_failures(conn: Connection, accounts: Sequence[str]) -> list[dict[str, Any]]:
    rows = conn.execute(sa.select(link_failures).where(link_failures.c.account.in_(list(accounts)))
                        .order_by(link_failures.c.failed_at)).all()
    return [{"account": r.account, "failed_at": _when(r.failed_at)} for r in rows]


def _check_ins(conn: Connection, person: str) -> list[dict[str, Any]]:
    rows = conn.execute(sa.select(heartbeat_items).where(heartbeat_items.c.person == person)
                        .order_by(heartbeat_items.c.handled_at)).all()
    return [{"item": r.item_key, "handled_at": _when(r.handled_at)} for r in rows]


def _decay(conn: Connection, person: str) -> list[dict[str, Any]]:
    r_, run = decay_retirements, decay_runs
    rows = conn.execute(sa.select(r_.c.memory_id, r_.c.reason, r_.c.prev_status, run.c.started_at, run.c.undone_at)
                        .select_from(r_.join(run, run.c.id == r_.c.run_id)).where(r_.c.person == person)
                        .order_by(r_.c.id)).all()
    return [{"memory": r.memory_id, "reason": r.reason, "previous_status": r.prev_status,
             "retired_at": _when(r.started_at), "undone_at": _when(r.undone_at)} for r in rows]


def _day_summaries(conn: Connection, person: str) -> list[dict[str, Any]]:
    """The nightly consolidation's summary of their day, one per thread and chunk it read."""
    c = consolidation_chunks.c
    out = []
    for row in conn.execute(sa.select(c.day, c.summaries).where(c.summaries.contains(person))
                            .order_by(c.day, c.id)).all():
        try:
            by_person = json.loads(row.summaries)
        except ValueError:
            continue
        summary = by_person.get(person) if isinstance(by_person, dict) else None
        if isinstance(summary, str) and summary:
            out.append({"day": row.day, "summary": summary})
    return out


def _stored(conn: Connection, person: str) -> dict[str, Any]:
    """Every relational part, in the document's order, read in one transaction."""
    accounts = _accounts(conn, person)
    names = [a["account"] for a in accounts]
    messages = history.export_of(conn, person, names)
    private_chats = {(m["platform"], m["chat_id"]) for m in messages if m["chat_kind"] == "dm"}
    return {
        "accounts": accounts,
        "capture": pause_of(conn, person),
        "questions": export_questions(conn, person),
        "goals": goals.export_of(conn, person),
        "messages": messages,
        "waiting": _waiting(conn, set(names)),
        "outbox": _outbox(conn, names, private_chats),
        "summaries": history.summaries_of(conn, person, names),
        "day_summaries": _day_summaries(conn, person),
        "check_ins": _check_ins(conn, person),
        "decay": _decay(conn, person),
        "link_requests": _link_requests(conn, person, names),
        "link_failures": _link_failures(conn, names),
    }


class PersonExport:
    """Builds the export document; who may have it is the caller's to check (memory.controls, the CLI)."""

    def __init__(self, db: Database, memory: MemoryService, clock: Callable[[], datetime]) -> None:
        self.db = db
        self.memory = memory
        self.clock = clock

    async def document(self, person: str, *, you: bool = False, name: str = "") -> dict[str, Any]:
        """The whole document; memory texts worded for ``you`` (the person reads it) or with ``name``."""
        exported_at = self.clock()
        kept = await self.memory.export(person, you=you, name=name)
        stored = await self.db.run(_stored, person)
        return {"schema": SCHEMA_VERSION, "exported_at": _when(exported_at), "person": person,
                "accounts": stored.pop("accounts"), "capture": stored.pop("capture"),
                "memories": kept["memories"], "notes": kept["notes"], "tombstones": kept["tombstones"], **stored}

    async def yours(self, person: str) -> dict[str, Any]:
        """The document as the person reads it, for ``/export`` (a :data:`memory.controls.person_controls.Exporter`)."""
        return await self.document(person, you=True)


__all__ = ["SCHEMA_VERSION", "PersonExport"]
