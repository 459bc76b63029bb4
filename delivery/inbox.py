"""The inbox: messages taken in and not yet answered, so that a restart loses none of them.

The journal (``delivery.inbound``) makes a redelivery harmless; it also means the platform will
not send that message again. Between taking a message in and committing its reply there are
seconds (the queue before the policy decision, the debounce window, the model call) in which a
crash, a deploy or a power cut would lose it for good. So a message is kept here:

* by its channel, in the transaction that journals its event, when the channel passes the message
  along (Telegram does: its batches can wait in a queue); such a row is not yet *decided*;
* by the policy decision's own transaction, which marks it decided (keeping it) when the access
  rules let it through and forgets it when they refuse it;
* the turn notes the history row it opened for it; the transaction that records the reply (or
  queues a command's answer, or the honest failure reply) removes it.

At the next start whatever is left is taken up again: an undecided message goes through the
policy as if it had just come in; a decided one is answered, and a turn that had opened goes on
from its history row, never written twice.

Waiting is not trying: a message is charged an attempt only when a process starts working on it
(its turn opens, in the transaction that records it, or a command starts), never for a restart
that did not reach it. One that has used INBOX_REPLAYS_MAX attempts (a poison message, or a fault
that outlasts the retries) gets UNHANDLED_REPLY instead, queued in the transaction that removes it;
never silence. One older than INBOX_REPLAY_MAX_AGE_H is no longer answered: logged by id and dropped.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, UtcDateTime, metadata
from ground.person_data import PersonData, when
from ground.prepared import Prepared
from ground.redaction import redact
from ground.tunables import INBOX_REPLAY_MAX_AGE_H, INBOX_REPLAYS_MAX
from ground.turns import merge
from ground.types import Attachment, ChatKind, InboundMessage, utcnow
from people import directory

log = logging.getLogger("kith.inbox")

# The honest answer to a message kith tried INBOX_REPLAYS_MAX times and could not answer.
UNHANDLED_REPLY = "Sorry, I could not handle that message: something went wrong on my side."

inbox = sa.Table(
    "inbox",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),  # the order messages came in
    sa.Column("platform", sa.String(32), nullable=False),
    sa.Column("message_id", sa.String(255), nullable=False),
    sa.Column("payload", sa.Text, nullable=False),  # the InboundMessage, as JSON
    sa.Column("received_at", UtcDateTime(), nullable=False),
    sa.Column("decided", sa.Boolean, nullable=False, server_default=sa.false()),  # past its policy decision
    sa.Column("turn_row", sa.Integer, nullable=True),  # the history row of the turn opened for it
    # Times a process started working on it (added after the first release: older files gain it at open).
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.UniqueConstraint("platform", "message_id", name="uq_inbox_message"),
)

# Built once: they run for every message.
_KEEP = Prepared(inbox.insert())
_DECIDED = Prepared(inbox.update().where(inbox.c.platform == sa.bindparam("for_platform"),
                                         inbox.c.message_id == sa.bindparam("for_message"))
                    .values(decided=True, payload=sa.bindparam("payload")))
_KEPT_OF = Prepared(sa.select(inbox.c.message_id).where(
    inbox.c.platform == sa.bindparam("for_platform"), inbox.c.message_id.in_(sa.bindparam("ids", expanding=True))))
_UNDECIDED = Prepared(inbox.delete().where(inbox.c.platform == sa.bindparam("for_platform"),
                                           inbox.c.message_id == sa.bindparam("for_message"),
                                           inbox.c.decided.is_(False)))
_OPENED = Prepared(inbox.update().where(inbox.c.platform == sa.bindparam("for_platform"),
                                        inbox.c.message_id.in_(sa.bindparam("ids", expanding=True)))
                   .values(turn_row=sa.bindparam("row"), attempts=inbox.c.attempts + sa.bindparam("charge")))
_CHARGE = Prepared(inbox.update().where(inbox.c.platform == sa.bindparam("for_platform"),
                                        inbox.c.message_id.in_(sa.bindparam("ids", expanding=True)))
                   .values(attempts=inbox.c.attempts + 1))
_STATE = Prepared(sa.select(inbox.c.turn_row, inbox.c.attempts).where(
    inbox.c.platform == sa.bindparam("for_platform"), inbox.c.message_id == sa.bindparam("for_message")))
_DONE = Prepared(inbox.delete().where(inbox.c.platform == sa.bindparam("for_platform"),
                                      inbox.c.message_id.in_(sa.bindparam("ids", expanding=True))))


class PayloadError(ValueError):
    """A stored message that cannot be read back as an InboundMessage."""


_PAYLOAD_FIELDS = tuple(f.name for f in dataclasses.fields(InboundMessage) if f.name != "opened_row")


def to_payload(message: InboundMessage) -> str:
    """The message as JSON (without ``opened_row``, which a replay sets)."""
    # Field by field rather than dataclasses.asdict, which deep-copies: this runs for every message.
    fields: dict[str, object] = {name: getattr(message, name) for name in _PAYLOAD_FIELDS}
    fields["chat_kind"] = message.chat_kind.value
    fields["timestamp"] = message.timestamp.isoformat()
    fields["merged_ids"] = list(message.merged_ids)
    fields["attachments"] = [a.to_json() for a in message.attachments]
    # ASCII escapes keep any text, lone surrogates included, through the database's text column.
    return json.dumps(fields, ensure_ascii=True)


def from_payload(payload: str) -> InboundMessage:
    try:
        fields = json.loads(payload)
        fields["chat_kind"] = ChatKind(fields["chat_kind"])
        fields["timestamp"] = datetime.fromisoformat(fields["timestamp"])
        fields["merged_ids"] = tuple(str(i) for i in fields.get("merged_ids") or ())
        fields["unreadable"] = str(fields.get("unreadable") or "")  # a message kept before the field existed has none
        fields["attachments"] = tuple(Attachment.from_json(a) for a in fields.get("attachments") or ())
        fields["medium"] = str(fields.get("medium") or "")
        return InboundMessage(**fields)
    except (ValueError, TypeError, KeyError) as exc:
        raise PayloadError(type(exc).__name__) from None


@dataclass(frozen=True, slots=True)
class Kept:
    id: int
    message: InboundMessage
    turn_row: int | None
    decided: bool = True
    attempts: int = 0


@dataclass(frozen=True, slots=True)
class Resumed:
    """What a previous process left: turns to answer, messages it took in but never decided on, and
    turns past their attempts, for UNHANDLED_REPLY."""

    turns: list[InboundMessage]
    undecided: list[InboundMessage]
    exhausted: list[InboundMessage] = dataclasses.field(default_factory=list)
    attempts: dict[str, int] = dataclasses.field(default_factory=dict)  # a turn's message id -> attempts used


def resumed_turns(kept: Sequence[Kept]) -> list[InboundMessage]:
    """The turns to answer after a restart, in the order their messages came.

    Messages whose turn had opened become that turn again (merged as before, on its history row);
    the others are a turn each: nothing of them reached history, and merging them anew could fold
    one into a turn it was never part of.
    """
    turns: list[tuple[int, InboundMessage]] = []
    opened: dict[int, list[Kept]] = {}
    for k in sorted(kept, key=lambda k: k.id):
        if k.turn_row is None:
            turns.append((k.id, k.message))
        else:
            opened.setdefault(k.turn_row, []).append(k)
    for row, group in opened.items():
        turns.append((group[0].id, dataclasses.replace(merge([k.message for k in group]), opened_row=row)))
    return [message for _id, message in sorted(turns, key=lambda t: t[0])]


def _row(message: InboundMessage, payload: str, now: datetime, *, decided: bool) -> dict[str, object]:
    return {"platform": message.platform, "message_id": message.message_id, "payload": payload,
            "received_at": now, "attempts": 0, "decided": decided}


def keep_taken(conn: Connection, platform: str, messages: Sequence[InboundMessage], now: datetime) -> None:
    """Keep messages a channel of ``platform`` has just taken in, before any decision on them (its
    journal's transaction). One kept already (the same message in another event) stays as it is."""
    kept = {r.message_id for r in _KEPT_OF.all(conn, {"for_platform": platform,
                                                    "ids": list({m.message_id for m in messages})})}
    new = {m.message_id: m for m in messages if m.message_id not in kept}
    if new:
        _KEEP.insert_many(conn, [_row(m, to_payload(m), now, decided=False) for m in new.values()])


def keep(conn: Connection, message: InboundMessage, now: datetime) -> None:
    """The policy let ``message`` through: keep it until it is answered (kept already when its channel did).

    Kept as the policy saw it: a channel may have completed it since (Slack looks up the sender's name).
    """
    payload = to_payload(message)
    if _DECIDED.run(conn, {"for_platform": message.platform, "for_message": message.message_id,
                           "payload": payload}) == 0:
        _KEEP.run(conn, _row(message, payload, now, decided=True))


def drop_undecided(conn: Connection, message: InboundMessage) -> None:
    """``message`` needs no answer (refused, a redelivery, a link code): forget it unless it was let through."""
    _UNDECIDED.run(conn, {"for_platform": message.platform, "for_message": message.message_id})


def opened(conn: Connection, row: int, message: InboundMessage, *, charge: bool = True) -> None:
    """The turn answering ``message`` opened on its history row ``row`` (recorded now, or before a restart):
    an attempt, unless ``charge`` is False (charged already, when it started as a command)."""
    _OPENED.run(conn, {"for_platform": message.platform, "ids": list(message.answers), "row": row,
                       "charge": int(charge)})


def charge(conn: Connection, message: InboundMessage) -> None:
    """A process starts working on ``message`` outside a turn (a command): that is an attempt."""
    _CHARGE.run(conn, {"for_platform": message.platform, "ids": list(message.answers)})


def state(conn: Connection, message: InboundMessage) -> tuple[int | None, int] | None:
    """(turn row, attempts) of the turn answering ``message``, or None once it is answered."""
    row = _STATE.first(conn, {"for_platform": message.platform, "for_message": message.message_id})
    return None if row is None else (row.turn_row, int(row.attempts))


def done(conn: Connection, message: InboundMessage) -> None:
    _DONE.run(conn, {"for_platform": message.platform, "ids": list(message.answers)})


@dataclass(frozen=True, slots=True)
class Leftover:
    """One inbox row as a new process found it at start-up, before taking anything in itself."""

    id: int
    platform: str
    message_id: str
    payload: str
    received_at: datetime
    turn_row: int | None
    decided: bool
    attempts: int


def _leftovers(conn: Connection) -> list[Leftover]:
    rows = conn.execute(sa.select(inbox).order_by(inbox.c.id)).all()
    return [Leftover(r.id, r.platform, r.message_id, r.payload, r.received_at, r.turn_row, bool(r.decided),
                     int(r.attempts)) for r in rows]


def export_of(conn: Connection, person: str) -> list[dict[str, object]]:
    """Their messages taken in and not yet answered, as their export lists them. Kept as sent until then, so
    redacted here as history is."""
    accounts = {a.account for a in directory.accounts_of(conn, person)}
    out: list[dict[str, object]] = []
    for row in conn.execute(sa.select(inbox.c.payload, inbox.c.received_at).order_by(inbox.c.id)).all():
        try:
            message = from_payload(row.payload)
        except PayloadError:
            continue  # the inbox answers an unreadable row honestly and drops it
        if message.account not in accounts:
            continue
        out.append({"account": message.account, "platform": message.platform,
                    "chat_kind": message.chat_kind.value, "chat_id": message.chat_id, "thread_id": message.thread_id,
                    "message_id": message.message_id, "at": when(message.timestamp),
                    "received_at": when(row.received_at), "text": redact(message.text),
                    "forwarded": message.forwarded})
    return out


WAITING_DATA = PersonData(
    "waiting", tables=(inbox,), export_rows=export_of, forgotten_by="memory.forgetting.scrub.scan",
    stays="kept by account and chat, not by person")


def _take_up(conn: Connection, left: Sequence[Leftover], now: datetime,
             max_age: timedelta) -> tuple[list[Kept], list[tuple[str, str, str]]]:
    """``left`` to take up; those too old (or unreadable) are dropped. A restart charges nothing: only
    working on a message does (``opened``, ``charge``).

    Returns (to take up, dropped as (platform, message id, why)).
    """
    taken: list[Kept] = []
    dropped: list[tuple[str, str, str]] = []
    drop_rows: list[int] = []
    for r in left:
        why = "too_old" if now - r.received_at > max_age else ""
        message: InboundMessage | None = None
        if not why:
            try:
                message = from_payload(r.payload)
            except PayloadError:
                why = "unreadable"
        if why or message is None:
            dropped.append((r.platform, r.message_id, why))
            drop_rows.append(r.id)
            continue
        taken.append(Kept(r.id, message, r.turn_row, r.decided, r.attempts))
    if drop_rows:
        conn.execute(inbox.delete().where(inbox.c.id.in_(drop_rows)))
    return taken, dropped


class Inbox:
    """The store's side of the inbox; ``conversation.keeping`` says when each of these runs."""

    def __init__(self, db: Database, *, clock: Callable[[], datetime] = utcnow,
                 max_age_h: float = INBOX_REPLAY_MAX_AGE_H, max_replays: int = INBOX_REPLAYS_MAX) -> None:
        self.db = db
        self._clock = clock
        self.max_age = timedelta(hours=max_age_h)
        self.max_replays = max_replays

    def keep_taken_within(self, conn: Connection, platform: str, messages: Sequence[InboundMessage]) -> None:
        keep_taken(conn, platform, messages, self._clock())

    def decided_within(self, conn: Connection, message: InboundMessage, allowed: bool) -> None:
        """The policy's step in its own transaction: keep what it let through, forget what it refused."""
        if allowed:
            keep(conn, message, self._clock())
        else:
            drop_undecided(conn, message)

    async def forget(self, message: InboundMessage) -> None:
        """The message needs no answer after all (e.g. the rate limit refused it after it was kept)."""
        await self.db.run_short(done, message)

    async def forget_undecided(self, message: InboundMessage) -> None:
        await self.db.run_short(drop_undecided, message)

    async def charge(self, message: InboundMessage) -> None:
        await self.db.run_short(charge, message)

    async def state(self, message: InboundMessage) -> tuple[int | None, int] | None:
        return await self.db.run_short(state, message)

    async def leftovers(self) -> list[Leftover]:
        """What a previous process left. Read before this one's channels take anything in, so that
        nothing this process takes in itself is mistaken for it."""
        return await self.db.run(_leftovers)

    async def resume(self, left: Sequence[Leftover], platforms: Sequence[str]) -> Resumed:
        """The ``left`` of ``platforms`` to take up now, oldest first: turns (``resumed_turns``), messages
        still to be decided on, and turns that used up their attempts (to be answered UNHANDLED_REPLY).

        Other platforms' wait for a process whose channel for them is running.
        """
        running = set(platforms)
        mine = [r for r in left if r.platform in running]
        kept, dropped = await self.db.run(_take_up, mine, self._clock(), self.max_age)
        for platform, message_id, why in dropped:
            log.warning("inbox dropped platform=%s message=%s reason=%s", platform, message_id, why)
        decided = [k for k in kept if k.decided]
        turns = resumed_turns(decided)
        used = {k.message.message_id: k.attempts for k in decided}
        attempts = {t.message_id: max(used.get(i, 0) for i in t.answers) for t in turns}
        resumed = Resumed([t for t in turns if attempts[t.message_id] < self.max_replays],
                          [k.message for k in kept if not k.decided],
                          [t for t in turns if attempts[t.message_id] >= self.max_replays], attempts)
        if kept:
            log.info("inbox resumed turns=%d undecided=%d exhausted=%d messages=%d", len(resumed.turns),
                     len(resumed.undecided), len(resumed.exhausted), len(kept))
        return resumed
