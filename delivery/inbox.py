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

A message that keeps failing is tried at most INBOX_REPLAYS_MAX times across restarts, and one
older than INBOX_REPLAY_MAX_AGE_H is no longer answered: both are logged by id and dropped.
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

from core.db import Database, UtcDateTime, metadata
from core.prepared import Prepared
from core.tunables import INBOX_REPLAY_MAX_AGE_H, INBOX_REPLAYS_MAX
from core.types import ChatKind, InboundMessage, utcnow
from delivery.debounce import merge

log = logging.getLogger("kith.inbox")

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
    sa.Column("replays", sa.Integer, nullable=False, server_default="0"),
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
                   .values(turn_row=sa.bindparam("row")))
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
    # ASCII escapes keep any text, lone surrogates included, through the database's text column.
    return json.dumps(fields, ensure_ascii=True)


def from_payload(payload: str) -> InboundMessage:
    try:
        fields = json.loads(payload)
        fields["chat_kind"] = ChatKind(fields["chat_kind"])
        fields["timestamp"] = datetime.fromisoformat(fields["timestamp"])
        fields["merged_ids"] = tuple(str(i) for i in fields.get("merged_ids") or ())
        return InboundMessage(**fields)
    except (ValueError, TypeError, KeyError) as exc:
        raise PayloadError(type(exc).__name__) from None


@dataclass(frozen=True, slots=True)
class Kept:
    id: int
    message: InboundMessage
    turn_row: int | None
    decided: bool = True


@dataclass(frozen=True, slots=True)
class Resumed:
    """What a previous process left: turns to answer, and messages it took in but never decided on."""

    turns: list[InboundMessage]
    undecided: list[InboundMessage]


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
            "received_at": now, "replays": 0, "decided": decided}


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


def opened(conn: Connection, row: int, message: InboundMessage) -> None:
    """The turn answering ``message`` recorded it in history as ``row``."""
    _OPENED.run(conn, {"for_platform": message.platform, "ids": list(message.answers), "row": row})


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
    replays: int


def _leftovers(conn: Connection) -> list[Leftover]:
    rows = conn.execute(sa.select(inbox).order_by(inbox.c.id)).all()
    return [Leftover(r.id, r.platform, r.message_id, r.payload, r.received_at, r.turn_row, bool(r.decided),
                     int(r.replays)) for r in rows]


def _take_up(conn: Connection, left: Sequence[Leftover], now: datetime, max_age: timedelta,
             max_replays: int) -> tuple[list[Kept], list[tuple[str, str, str]]]:
    """``left``, each counted as replayed once more; those past the limits (or unreadable) are dropped.

    Returns (to take up, dropped as (platform, message id, why)).
    """
    taken: list[Kept] = []
    dropped: list[tuple[str, str, str]] = []
    drop_rows: list[int] = []
    for r in left:
        why = ("too_old" if now - r.received_at > max_age else
               "replayed_too_often" if r.replays >= max_replays else "")
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
        taken.append(Kept(r.id, message, r.turn_row, r.decided))
    if drop_rows:
        conn.execute(inbox.delete().where(inbox.c.id.in_(drop_rows)))
    if taken:
        conn.execute(inbox.update().where(inbox.c.id.in_([k.id for k in taken]))
                     .values(replays=inbox.c.replays + 1))
    return taken, dropped


class Inbox:
    """The store's side of the inbox; the router composes its ``*_within`` steps into its transactions."""

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

    async def leftovers(self) -> list[Leftover]:
        """What a previous process left. Read before this one's channels take anything in, so that
        nothing this process takes in itself is mistaken for it."""
        return await self.db.run(_leftovers)

    async def resume(self, left: Sequence[Leftover], platforms: Sequence[str]) -> Resumed:
        """The ``left`` of ``platforms`` to take up now, oldest first: turns (``resumed_turns``) and
        messages still to be decided on.

        Other platforms' wait for a process whose channel for them is running.
        """
        running = set(platforms)
        mine = [r for r in left if r.platform in running]
        kept, dropped = await self.db.run(_take_up, mine, self._clock(), self.max_age, self.max_replays)
        for platform, message_id, why in dropped:
            log.warning("inbox dropped platform=%s message=%s reason=%s", platform, message_id, why)
        resumed = Resumed(resumed_turns([k for k in kept if k.decided]), [k.message for k in kept if not k.decided])
        if kept:
            log.info("inbox resumed turns=%d undecided=%d messages=%d", len(resumed.turns), len(resumed.undecided),
                     len(kept))
        return resumed
