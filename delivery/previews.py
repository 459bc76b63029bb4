"""Where a reply's preview message stands, for the platforms that preview by posting a message and editing it
(Discord, Slack): so the final reply edits that message into the whole reply instead of posting a second one, even
after a crash in the middle of the stream.

A preview message is noted here as soon as the platform took it, under the reply's delivery key (platform, chat,
the message it answers: the outbox's ``source``). The outbox's send of that reply's first chunk edits the noted
message and lets go of the row once that chunk is recorded (killed in between, the next start edits the same
message again, which changes nothing); a turn taken up again after a restart finds the row and goes on editing the
same message. The one window: a crash between the platform taking
the preview and this row's commit leaves that preview as it was (a partial reply above the whole one).

A row whose reply never went (refused, expired) is of no use once no turn can take it up and no send can use it:
:mod:`delivery.retention` prunes rows older than ``KEPT``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, UtcDateTime, metadata
from ground.tunables import SEND_MAX_LATE_H

# A message is answered within SEND_MAX_LATE_H (INBOX_REPLAY_MAX_AGE_H), and its reply sent within SEND_MAX_LATE_H
# of being queued, or never: a row older than both is no longer needed by anyone.
KEPT = timedelta(hours=2 * SEND_MAX_LATE_H)

previews = sa.Table(
    "reply_previews",
    metadata,
    sa.Column("platform", sa.String(32), primary_key=True),
    sa.Column("chat_id", sa.String(255), primary_key=True),
    sa.Column("source", sa.String(255), primary_key=True),  # the message the reply answers (the outbox's source)
    sa.Column("message_id", sa.String(255), nullable=False),  # the preview message, as the channel names it
    sa.Column("created_at", UtcDateTime(), nullable=False),
)


@dataclass(frozen=True, slots=True)
class PreviewKey:
    platform: str
    chat_id: str
    source: str


def noted(conn: Connection, key: PreviewKey) -> str | None:
    """The preview message of that reply, if one stands."""
    return conn.execute(sa.select(previews.c.message_id).where(
        previews.c.platform == key.platform, previews.c.chat_id == key.chat_id,
        previews.c.source == key.source)).scalar()


def note(conn: Connection, key: PreviewKey, message_id: str, now: datetime) -> None:
    """The platform took the preview message ``message_id`` for that reply."""
    if noted(conn, key) is None:
        conn.execute(previews.insert().values(platform=key.platform, chat_id=key.chat_id, source=key.source,
                                              message_id=message_id, created_at=now))


def let_go(conn: Connection, key: PreviewKey) -> int:
    """The reply replaced its preview (or the preview is gone): the row goes."""
    return conn.execute(previews.delete().where(previews.c.platform == key.platform,
                                                previews.c.chat_id == key.chat_id,
                                                previews.c.source == key.source)).rowcount


def prune(conn: Connection, *, before: datetime) -> int:
    """Forget the rows noted before ``before`` (a handful at most: one a reply that never went); how many went."""
    return conn.execute(previews.delete().where(previews.c.created_at < before)).rowcount


class PreviewBook:
    """The preview rows, for the preview that notes its message and the turn taken up again that finds it."""

    def __init__(self, db: Database, clock: Callable[[], datetime]) -> None:
        self.db = db
        self.clock = clock

    async def noted(self, key: PreviewKey) -> str | None:
        return await self.db.run_short(noted, key)

    async def note(self, key: PreviewKey, message_id: str) -> None:
        await self.db.run_short(note, key, message_id, self.clock())
