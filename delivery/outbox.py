"""The durable outbox: every reply is written here before any attempt to send it.

A reply the core produced survives a crash because it is a row, not a coroutine. Each row
remembers how far delivery got (``chunks_sent``), so a restart resends only what the platform
has not yet acknowledged. The functions take a ``Connection`` like :mod:`people.history`, so a
caller may enqueue in the same transaction that stores the assistant turn.

A chunk whose send timed out after the request left may have been posted; it is sent again and
the doubt is written down in ``outbox_doubts`` (a table of its own, so the outbox's schema stays
what older databases have), which is how anyone can count the duplicates a crash or a slow
platform may have caused.

kith never repeats a secret back: a message's text is redacted (:func:`ground.redaction.redact`) as it is
written here, so no waiting row, no frame of the database's write-ahead log and no platform message carries
a card number or a password the model echoed. A file an entry carries (an ``/export``) is built from stores
that hold only redacted text, and is dropped once delivered.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import UtcDateTime, metadata
from ground.person_data import PersonData, when
from ground.prepared import Prepared
from ground.redaction import redact
from ground.tunables import RETENTION_BATCH_ROWS
from ground.types import Button, ChatKind, OutboundMessage
from people import directory, history

MAX_ERROR_CHARS = 64  # last_error holds an error class or code, never content

outbox = sa.Table(
    "outbox",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("platform", sa.String(32), nullable=False),
    sa.Column("chat_id", sa.String(255), nullable=False),
    sa.Column("thread_id", sa.String(255), nullable=True),
    sa.Column("reply_to", sa.String(255), nullable=True),
    sa.Column("text", sa.Text, nullable=False),  # Markdown as the model wrote it
    sa.Column("buttons", sa.Text, nullable=False, server_default="[]"),  # JSON [[label, data], ...]
    sa.Column("attachment_name", sa.String(255), nullable=True),
    sa.Column("attachment", sa.LargeBinary, nullable=True),
    sa.Column("source", sa.String(255), nullable=True),  # e.g. the inbound platform message id
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, server_default="pending"),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_attempt_at", UtcDateTime(), nullable=True),
    sa.Column("last_error", sa.String(MAX_ERROR_CHARS), nullable=True),
    sa.Column("chunks_sent", sa.Integer, nullable=False, server_default="0"),
    sa.Column("sent_ids", sa.Text, nullable=False, server_default="[]"),  # JSON list of platform message ids
    sa.Column("chat_kind", sa.String(8), nullable=False, server_default="dm"),
    sa.Column("recipient_id", sa.String(255), nullable=True),
    sa.Column("notice", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Index("ix_outbox_status_lane", "status", "platform", "chat_id", "thread_id", "id"),
)

outbox_doubts = sa.Table(
    "outbox_doubts",  # one row per send that may have been posted although it counted as failed
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("entry_id", sa.Integer, nullable=False),  # an outbox id; pruned with its entry
    sa.Column("chunk", sa.Integer, nullable=False),  # 0-based
    sa.Column("recorded_at", UtcDateTime(), nullable=False),
    sa.Index("ix_outbox_doubts_entry", "entry_id"),
)


class OutboxStatus(enum.StrEnum):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"


Lane = tuple[str, str, str | None]  # (platform, chat_id, thread_id): messages in one lane go out in order


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    id: int
    message: OutboundMessage
    source: str | None
    created_at: datetime
    status: OutboxStatus
    attempts: int  # consecutive failed attempts at the current chunk that named no wait (no retry_after)
    next_attempt_at: datetime | None
    last_error: str | None
    chunks_sent: int
    sent_ids: tuple[str, ...]

    @property
    def lane(self) -> Lane:
        return lane_of(self.message)


def lane_of(message: OutboundMessage) -> Lane:
    return (message.platform, message.chat_id, message.thread_id)


def _entry(r: sa.Row) -> OutboxEntry:
    buttons = tuple(Button(label, data) for label, data in json.loads(r.buttons))
    message = OutboundMessage(platform=r.platform, chat_id=r.chat_id, text=r.text, thread_id=r.thread_id,
                              reply_to_message_id=r.reply_to, buttons=buttons,
                              attachment_name=r.attachment_name, attachment_bytes=r.attachment,
                              chat_kind=ChatKind(r.chat_kind), recipient_id=r.recipient_id, notice=bool(r.notice),
                              delivery_key=f"{r.id}@{r.created_at.isoformat()}")
    return OutboxEntry(id=r.id, message=message, source=r.source, created_at=r.created_at,
                       status=OutboxStatus(r.status), attempts=r.attempts,
                       next_attempt_at=r.next_attempt_at, last_error=r.last_error,
                       chunks_sent=r.chunks_sent, sent_ids=tuple(json.loads(r.sent_ids)))


# The statements every delivery runs, built once: building one costs more than SQLite running it.
_INSERT = Prepared(outbox.insert())
_PENDING = outbox.c.status == OutboxStatus.PENDING.value
_LANE_HEAD = Prepared(sa.select(outbox)
                      .where(_PENDING, outbox.c.platform == sa.bindparam("platform"),
                             outbox.c.chat_id == sa.bindparam("chat_id"),
                             outbox.c.thread_id.is_not_distinct_from(sa.bindparam("thread_id")))  # NULL: no thread
                      .order_by(outbox.c.id).limit(1))
_PROGRESS = Prepared(outbox.update().where(outbox.c.id == sa.bindparam("b_id"),
                                           outbox.c.chunks_sent == sa.bindparam("b_index"), _PENDING))


def short_error(error: str) -> str:
    return error[:MAX_ERROR_CHARS]


def enqueue(conn: Connection, message: OutboundMessage, *, source: str | None, now: datetime) -> int:
    buttons = json.dumps([[b.label, b.data] for b in message.buttons])
    return _INSERT.insert(conn, {
        "platform": message.platform, "chat_id": message.chat_id, "thread_id": message.thread_id,
        "reply_to": message.reply_to_message_id, "text": redact(message.text), "buttons": buttons,
        "attachment_name": message.attachment_name, "attachment": message.attachment_bytes, "source": source,
        "created_at": now, "updated_at": now, "status": OutboxStatus.PENDING.value, "attempts": 0,
        "chunks_sent": 0, "sent_ids": "[]", "chat_kind": message.chat_kind.value,
        "recipient_id": message.recipient_id, "notice": message.notice})


def enqueue_with_head(conn: Connection, message: OutboundMessage, *, source: str | None,
                      now: datetime) -> tuple[int, OutboxEntry | None]:
    """Enqueue, and read the lane's head (the new entry unless older work waits) in the same transaction."""
    entry_id = enqueue(conn, message, source=source, now=now)
    return entry_id, next_in_lane(conn, lane_of(message))


def get(conn: Connection, entry_id: int) -> OutboxEntry | None:
    row = conn.execute(sa.select(outbox).where(outbox.c.id == entry_id)).first()
    return _entry(row) if row is not None else None


def next_in_lane(conn: Connection, lane: Lane) -> OutboxEntry | None:
    """The oldest pending entry of a lane: the only one that may be sent now."""
    platform, chat_id, thread_id = lane
    row = _LANE_HEAD.first(conn, {"platform": platform, "chat_id": chat_id, "thread_id": thread_id})
    return _entry(row) if row is not None else None


def pending_lanes(conn: Connection, *, due_by: datetime | None = None) -> list[Lane]:
    """Every lane with pending work, oldest work first; with ``due_by``, only those whose head may be
    tried by then (a head waiting out a long backoff holds its whole lane, in order)."""
    heads = (sa.select(sa.func.min(outbox.c.id).label("id"))
             .where(outbox.c.status == OutboxStatus.PENDING.value)
             .group_by(outbox.c.platform, outbox.c.chat_id, outbox.c.thread_id).subquery())
    query = (sa.select(outbox.c.platform, outbox.c.chat_id, outbox.c.thread_id)
             .join(heads, heads.c.id == outbox.c.id).order_by(outbox.c.id))
    if due_by is not None:
        query = query.where(sa.or_(outbox.c.next_attempt_at.is_(None), outbox.c.next_attempt_at <= due_by))
    return [(r.platform, r.chat_id, r.thread_id) for r in conn.execute(query).all()]


def _waiting_on_a_guess(keep_errors: Sequence[str]) -> sa.ColumnElement[bool]:
    """Pending entries waiting out a backoff kith guessed, not one the platform named (``keep_errors``)."""
    return sa.and_(_PENDING, outbox.c.next_attempt_at.is_not(None),
                   sa.or_(outbox.c.last_error.is_(None), outbox.c.last_error.not_in(list(keep_errors))))


def release_backoffs(conn: Connection, *, keep_errors: Sequence[str], now: datetime) -> int:
    """Make pending entries due now, except those whose last error asks to wait (a platform's retry_after):
    those keep the due time the platform gave, sent at once if it has passed.

    For a new process: the backoff of the last one guessed at a trouble that a restart may have ended.
    """
    result = conn.execute(outbox.update().where(_waiting_on_a_guess(keep_errors))
                          .values(next_attempt_at=None, attempts=0, updated_at=now))  # and a fresh budget of attempts
    return int(result.rowcount)


def release_guessed(conn: Connection, *, platform: str, keep_errors: Sequence[str], skip: Collection[int],
                    now: datetime) -> list[tuple[int, Lane]]:
    """Make due now the platform's entries still waiting on a guessed backoff, but those in ``skip``; returns
    each one's id and lane. For a platform that answers again: the guess that it was down is wrong.

    Their attempts stay: a chat whose own sends keep failing still grows its backoff.
    """
    rows = conn.execute(sa.select(outbox.c.id, outbox.c.platform, outbox.c.chat_id, outbox.c.thread_id)
                        .where(_waiting_on_a_guess(keep_errors), outbox.c.platform == platform,
                               outbox.c.next_attempt_at > now)
                        .order_by(outbox.c.id)).all()
    woken = [(r.id, (r.platform, r.chat_id, r.thread_id)) for r in rows if r.id not in skip]
    if woken:
        conn.execute(outbox.update().where(outbox.c.id.in_([entry_id for entry_id, _lane in woken]), _PENDING)
                     .values(next_attempt_at=None, updated_at=now))
    return woken


def by_status(conn: Connection, status: OutboxStatus, limit: int = 100) -> list[OutboxEntry]:
    rows = conn.execute(sa.select(outbox).where(outbox.c.status == status.value)
                        .order_by(outbox.c.id).limit(limit)).all()
    return [_entry(r) for r in rows]


def record_chunk(conn: Connection, entry_id: int, index: int, sent_ids: Sequence[str], *,
                 now: datetime, final: bool = False) -> bool:
    """Note that chunk ``index`` is delivered (``final``: the last one, so the entry is sent).

    ``sent_ids``: the platform ids of chunks 0..index, this one last. Compare-and-swap on
    ``chunks_sent`` so progress never skips; only this swap ever writes ``sent_ids``, so while it
    holds, the ids the sender kept are the stored ones plus this chunk's.
    """
    if len(sent_ids) != index + 1:
        raise ValueError(f"chunk {index} needs {index + 1} sent ids, got {len(sent_ids)}")
    values: dict[str, object] = {"b_id": entry_id, "b_index": index, "chunks_sent": index + 1,
                                 "sent_ids": json.dumps(list(sent_ids)), "attempts": 0, "next_attempt_at": None,
                                 "last_error": None, "updated_at": now}
    if final:
        values["status"] = OutboxStatus.SENT.value
        values["attachment"] = None  # delivered: a file (an /export) is not kept a moment longer
    return _PROGRESS.run(conn, values) == 1


def record_final_chunk(conn: Connection, entry_id: int, index: int, sent_ids: Sequence[str], lane: Lane, *,
                       now: datetime) -> tuple[bool, OutboxEntry | None]:
    """The last chunk is delivered: mark the entry sent and read the lane's next entry in one transaction."""
    recorded = record_chunk(conn, entry_id, index, sent_ids, now=now, final=True)
    return recorded, next_in_lane(conn, lane)


def schedule_retry(conn: Connection, entry_id: int, *, attempts: int, next_attempt_at: datetime, error: str,
                   now: datetime, doubted_chunk: int | None = None) -> None:
    """Note a failed send and when to try again; ``doubted_chunk``: that send may have been posted."""
    conn.execute(outbox.update().where(outbox.c.id == entry_id).values(
        attempts=attempts, next_attempt_at=next_attempt_at, last_error=short_error(error), updated_at=now))
    if doubted_chunk is not None:
        conn.execute(outbox_doubts.insert().values(entry_id=entry_id, chunk=doubted_chunk, recorded_at=now))


def doubts(conn: Connection, entry_id: int | None = None) -> list[tuple[int, int]]:
    """(entry id, chunk) of every send that may have been posted twice, oldest first; of one entry with
    ``entry_id``."""
    query = sa.select(outbox_doubts.c.entry_id, outbox_doubts.c.chunk).order_by(outbox_doubts.c.id)
    if entry_id is not None:
        query = query.where(outbox_doubts.c.entry_id == entry_id)
    return [(r.entry_id, r.chunk) for r in conn.execute(query).all()]


def mark_sent(conn: Connection, entry_id: int, *, now: datetime) -> None:
    conn.execute(outbox.update().where(outbox.c.id == entry_id).values(
        status=OutboxStatus.SENT.value, next_attempt_at=None, attachment=None, updated_at=now))


def mark_failed(conn: Connection, entry_id: int, *, error: str, now: datetime,
                attempts: int | None = None) -> None:
    """The entry is over: refused, or too late. Nothing sends a failed entry again, so a file it carried goes."""
    values: dict[str, object] = {"status": OutboxStatus.FAILED.value, "next_attempt_at": None,
                                 "last_error": short_error(error), "attachment": None, "updated_at": now}
    if attempts is not None:
        values["attempts"] = attempts
    conn.execute(outbox.update().where(outbox.c.id == entry_id).values(**values))


def prune_sent(conn: Connection, *, before: datetime, limit: int = RETENTION_BATCH_ROWS) -> int:
    """Forget the oldest ``limit`` delivered entries last touched before ``before``, and the doubts about
    them; failed ones stay for review. Returns how many went: call again until it is under ``limit``.

    The limit keeps each transaction short on a database that has not been pruned for a long time.
    """
    old = (sa.select(outbox.c.id).where(outbox.c.status == OutboxStatus.SENT.value, outbox.c.updated_at < before)
           .order_by(outbox.c.id).limit(limit))
    ids = list(conn.execute(old).scalars())
    if not ids:
        return 0
    conn.execute(outbox_doubts.delete().where(outbox_doubts.c.entry_id.in_(ids)))
    return int(conn.execute(outbox.delete().where(outbox.c.id.in_(ids))).rowcount)


def export_of(conn: Connection, person: str) -> list[dict[str, object]]:
    """kith's messages to the person still in the outbox, as their export lists them: waiting to go, or
    delivered and kept a few days. Replies to commands are only here (history keeps conversation). A file one
    carries (an earlier export) is named, not included."""
    accounts = [a.account for a in directory.accounts_of(conn, person)]
    private_chats = history.private_chats(conn, person)
    recipients = {tuple(a.split(":", 1)) for a in accounts if ":" in a}
    platforms = sorted({r[0] for r in recipients} | {p for p, _c in private_chats})
    if not platforms:
        return []
    rows = conn.execute(sa.select(outbox).where(outbox.c.platform.in_(platforms)).order_by(outbox.c.id)).all()
    return [{"platform": r.platform, "chat_kind": r.chat_kind, "chat_id": r.chat_id, "thread_id": r.thread_id,
             "status": r.status, "created_at": when(r.created_at), "text": redact(r.text),
             "attachment_name": r.attachment_name}
            for r in rows
            if (r.platform, r.recipient_id or "") in recipients
            or (r.chat_kind == "dm" and (r.platform, r.chat_id) in private_chats)]


OUTBOX_DATA = PersonData(
    "outbox", tables=(outbox,), export_rows=export_of, forgotten_by="memory.forgetting.scrub.scan",
    stays="kept by chat and recipient, not by person")
