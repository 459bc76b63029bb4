"""Conversation history: the message log and each thread's rolling summary.

History is what was said, in order, with provenance. It is not memory: memory is chosen
from it later. Secrets (keys, passwords, card and id numbers) are redacted before a row or a
summary is written: the model sees the person's original words in the turn they were said only,
and every later turn reads the redacted row. The summary of a thread's older part advances a ``summary_through`` cursor
with a conditional update, so two summarizers can neither skip nor duplicate messages. A message
keeps the person who said it; when a link joins that person to another, their messages go along
(:func:`move_messages`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import UtcDateTime, as_utc, metadata
from ground.person_data import PersonData
from ground.prepared import Prepared
from ground.redaction import redact
from people import directory

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("conversation", sa.String(255), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),  # user | assistant | heartbeat | command
    sa.Column("author", sa.String(255), nullable=False),  # account key, or "kith"
    sa.Column("person", sa.String(64), nullable=True),  # person id of a user turn
    sa.Column("platform", sa.String(32), nullable=False),
    sa.Column("chat_id", sa.String(255), nullable=False),
    sa.Column("thread_id", sa.String(255), nullable=True),
    sa.Column("chat_kind", sa.String(8), nullable=False, server_default="dm"),
    sa.Column("platform_message_id", sa.String(255), nullable=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("silent", sa.Boolean, nullable=False, server_default=sa.false()),
    # How a user turn's words came: "" typed, "voice" a voice note's transcript (its receipts say so).
    sa.Column("medium", sa.String(16), nullable=False, server_default=""),
    sa.Index("ix_messages_conversation_id", "conversation", "id"),
)

summaries = sa.Table(
    "summaries",
    metadata,
    sa.Column("conversation", sa.String(255), primary_key=True),
    sa.Column("summary", sa.Text, nullable=False, server_default=""),
    sa.Column("summary_through", sa.Integer, nullable=False, server_default="0"),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    conversation: str
    role: str
    author: str
    person: str | None
    platform: str
    chat_id: str
    thread_id: str | None
    chat_kind: str
    platform_message_id: str | None
    text: str
    created_at: datetime
    silent: bool = False
    medium: str = ""


@dataclass(frozen=True, slots=True)
class Summary:
    conversation: str
    text: str
    through: int  # id of the last message the summary covers


# The statements every turn runs, built once: building one costs more than SQLite running it.
_INSERT_MESSAGE = Prepared(messages.insert())
_RECENT = (sa.select(messages).where(messages.c.conversation == sa.bindparam("conversation"))
           .order_by(messages.c.id.desc()).limit(sa.bindparam("limit")))
_RECENT_THROUGH = (sa.select(messages).where(messages.c.conversation == sa.bindparam("conversation"),
                                             messages.c.id <= sa.bindparam("through_id"))
                   .order_by(messages.c.id.desc()).limit(sa.bindparam("limit")))
_SUMMARY = sa.select(summaries).where(summaries.c.conversation == sa.bindparam("conversation"))
_COUNT_BETWEEN = sa.select(sa.func.count()).select_from(messages).where(
    messages.c.conversation == sa.bindparam("conversation"), messages.c.id > sa.bindparam("after_id"),
    messages.c.id < sa.bindparam("before_id"))
_THREAD = sa.bindparam("conversation")
# History is append-only, so the newest id before a given one says whether a copy of the thread's
# tail is still its tail; the summary cursor says whether the copy's summary is still current.
_NEWEST_BEFORE_AND_THROUGH = Prepared(sa.select(
    sa.select(sa.func.max(messages.c.id))
    .where(messages.c.conversation == _THREAD, messages.c.id < sa.bindparam("before_id")).scalar_subquery(),
    sa.select(summaries.c.summary_through).where(summaries.c.conversation == _THREAD).scalar_subquery()))


def _row(r: sa.Row) -> StoredMessage:
    return StoredMessage(r.id, r.conversation, r.role, r.author, r.person, r.platform, r.chat_id, r.thread_id,
                         r.chat_kind, r.platform_message_id, r.text, r.created_at, bool(r.silent), r.medium or "")


def append(conn: Connection, *, conversation: str, role: str, author: str, platform: str, chat_id: str,
           text: str, created_at: datetime, person: str | None = None, thread_id: str | None = None,
           chat_kind: str = "dm", platform_message_id: str | None = None, silent: bool = False) -> int:
    """Store one message, its secrets redacted."""
    return _insert(conn, conversation=conversation, role=role, author=author, platform=platform, chat_id=chat_id,
                   text=redact(text), created_at=created_at, person=person, thread_id=thread_id,
                   chat_kind=chat_kind, platform_message_id=platform_message_id, silent=silent)


def _insert(conn: Connection, *, conversation: str, role: str, author: str, platform: str, chat_id: str,
            text: str, created_at: datetime, person: str | None, thread_id: str | None, chat_kind: str,
            platform_message_id: str | None, silent: bool, medium: str = "") -> int:
    return _INSERT_MESSAGE.insert(conn, {
        "conversation": conversation, "role": role, "author": author, "person": person, "platform": platform,
        "chat_id": chat_id, "thread_id": thread_id, "chat_kind": chat_kind,
        "platform_message_id": platform_message_id, "text": text, "created_at": created_at, "silent": silent,
        "medium": medium})


def append_row(conn: Connection, *, conversation: str, role: str, author: str, platform: str, chat_id: str,
               text: str, created_at: datetime, person: str | None = None, thread_id: str | None = None,
               chat_kind: str = "dm", platform_message_id: str | None = None, silent: bool = False,
               medium: str = "") -> StoredMessage:
    """``append``, returning the message as a later read would (redacted: a kept window is a later read)."""
    text = redact(text)
    row_id = _insert(conn, conversation=conversation, role=role, author=author, platform=platform, chat_id=chat_id,
                     text=text, created_at=created_at, person=person, thread_id=thread_id, chat_kind=chat_kind,
                     platform_message_id=platform_message_id, silent=silent, medium=medium)
    return StoredMessage(row_id, conversation, role, author, person, platform, chat_id, thread_id, chat_kind,
                         platform_message_id, text, as_utc(created_at), silent, medium)


def newest_before(conn: Connection, conversation: str, before_id: int) -> tuple[int | None, int]:
    """(the id of the thread's newest message older than ``before_id``, its summary's ``through``)."""
    row = _NEWEST_BEFORE_AND_THROUGH.first(conn, {"conversation": conversation, "before_id": before_id})
    return (None if row[0] is None else int(row[0])), int(row[1] or 0)


def get(conn: Connection, row_id: int) -> StoredMessage | None:
    row = conn.execute(sa.select(messages).where(messages.c.id == row_id)).first()
    return _row(row) if row is not None else None


def recent(conn: Connection, conversation: str, limit: int, *, through_id: int | None = None) -> list[StoredMessage]:
    """The last ``limit`` messages of a thread (up to ``through_id`` when given), oldest first."""
    if through_id is None:
        rows = conn.execute(_RECENT, {"conversation": conversation, "limit": limit}).all()
    else:
        rows = conn.execute(_RECENT_THROUGH, {"conversation": conversation, "through_id": through_id,
                                              "limit": limit}).all()
    return [_row(r) for r in reversed(rows)]


def between(conn: Connection, conversation: str, after_id: int, through_id: int | None,
            limit: int) -> list[StoredMessage]:
    q = sa.select(messages).where(messages.c.conversation == conversation, messages.c.id > after_id)
    if through_id is not None:
        q = q.where(messages.c.id <= through_id)
    rows = conn.execute(q.order_by(messages.c.id).limit(limit)).all()
    return [_row(r) for r in rows]


def count(conn: Connection, conversation: str) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(messages)
                            .where(messages.c.conversation == conversation)).scalar_one())


def since(conn: Connection, after: datetime, before: datetime, after_id: int = 0,
          limit: int = 1000) -> list[StoredMessage]:
    """Messages of every thread written in [after, before), in id order (for consolidation sweeps)."""
    rows = conn.execute(sa.select(messages).where(
        messages.c.created_at >= after, messages.c.created_at < before, messages.c.id > after_id)
        .order_by(messages.c.id).limit(limit)).all()
    return [_row(r) for r in rows]


def get_summary(conn: Connection, conversation: str) -> Summary:
    row = conn.execute(_SUMMARY, {"conversation": conversation}).first()
    if row is None:
        return Summary(conversation, "", 0)
    return Summary(conversation, row.summary, row.summary_through)


def advance_summary(conn: Connection, conversation: str, *, expected_through: int, new_through: int,
                    text: str, now: datetime) -> bool:
    """Store a summary, its secrets redacted, only if nobody advanced the cursor meanwhile (compare-and-swap)."""
    if new_through <= expected_through:
        return False
    text = redact(text)  # the model may repeat a secret the messages it folded had held
    if expected_through == 0:
        exists = conn.execute(sa.select(summaries.c.conversation)
                              .where(summaries.c.conversation == conversation)).first()
        if exists is None:
            try:
                with conn.begin_nested():
                    conn.execute(summaries.insert().values(conversation=conversation, summary=text,
                                                           summary_through=new_through, updated_at=now))
                return True
            except sa.exc.IntegrityError:
                return False
    result = conn.execute(summaries.update().where(
        summaries.c.conversation == conversation, summaries.c.summary_through == expected_through)
        .values(summary=text, summary_through=new_through, updated_at=now))
    return result.rowcount == 1


def count_between(conn: Connection, conversation: str, after_id: int, before_id: int) -> int:
    """How many messages of a thread lie strictly between two ids (the part awaiting a summary)."""
    return int(conn.execute(_COUNT_BETWEEN, {"conversation": conversation, "after_id": after_id,
                                             "before_id": before_id}).scalar_one())


def _theirs(table: sa.FromClause, person: str, accounts: Sequence[str]) -> sa.ColumnElement[bool]:
    """The person's own rows of ``table`` (``messages`` or an alias of it): their words, and what they
    forwarded (recorded as no one's words, so found by the account that sent it)."""
    c = table.c
    return sa.and_(c.role == "user", sa.or_(c.person == person,
                                            sa.and_(c.person.is_(None), c.author.in_(list(accounts)))))


def _private_threads(person: str, accounts: Sequence[str]) -> sa.Select[Any]:
    mine = messages.alias("mine")
    return sa.select(mine.c.conversation).where(_theirs(mine, person, accounts), mine.c.chat_kind == "dm").distinct()


def _accounts_of(conn: Connection, person: str) -> list[str]:
    return [a.account for a in directory.accounts_of(conn, person)]


def private_chats(conn: Connection, person: str) -> set[tuple[str, str]]:
    """The person's private chats with kith, as (platform, chat id): where their export's messages are DMs."""
    m = messages
    rows = conn.execute(sa.select(m.c.platform, m.c.chat_id).where(
        _theirs(m, person, _accounts_of(conn, person)), m.c.chat_kind == "dm").distinct()).all()
    return {(str(r.platform), str(r.chat_id)) for r in rows}


def export_of(conn: Connection, person: str) -> list[dict[str, Any]]:
    """What the person's export holds of history, oldest first: every message they sent (forwards and
    what they said while remembering was paused included), every message of kith's in their private
    chats, and in a group kith's reply to each of their messages (the row after it: a thread's turns
    are taken one at a time). Other people's words are not theirs to export."""
    accounts = _accounts_of(conn, person)
    m = messages
    mine, later = messages.alias("mine"), messages.alias("later")
    following = (sa.select(sa.func.min(later.c.id))
                 .where(later.c.conversation == mine.c.conversation, later.c.id > mine.c.id)
                 .correlate(mine).scalar_subquery())
    after_theirs = sa.select(following).where(_theirs(mine, person, accounts), mine.c.chat_kind != "dm")
    kiths = sa.and_(m.c.role == "assistant", m.c.silent.is_(False),
                    sa.or_(m.c.conversation.in_(_private_threads(person, accounts)), m.c.id.in_(after_theirs)))
    rows = conn.execute(sa.select(m).where(sa.or_(_theirs(m, person, accounts), kiths)).order_by(m.c.id)).all()
    return [{"from": "person" if r.role == "user" else "kith",
             "account": r.author if r.role == "user" else None,
             "platform": r.platform, "chat_kind": r.chat_kind, "chat_id": r.chat_id, "thread_id": r.thread_id,
             "message_id": r.platform_message_id, "at": as_utc(r.created_at).isoformat(), "text": r.text,
             "forwarded": r.role == "user" and r.person is None, "voice": r.medium == "voice"} for r in rows]


def summaries_of(conn: Connection, person: str) -> list[dict[str, Any]]:
    """The rolling summaries of the person's private threads. A group thread's summary is left out: it is
    of everyone's words, not theirs alone."""
    private = _private_threads(person, _accounts_of(conn, person))
    rows = conn.execute(sa.select(summaries).where(summaries.c.conversation.in_(private), summaries.c.summary != "")
                        .order_by(summaries.c.conversation)).all()
    return [{"thread": r.conversation, "summary": r.summary, "updated_at": as_utc(r.updated_at).isoformat()}
            for r in rows]


def move_messages(conn: Connection, old: str, new: str) -> int:
    """A link's move of history: every message person ``old`` said becomes person ``new``'s, so the words an
    account said before it was linked are in the person's export and a forget of theirs reaches them (and,
    through them, their threads' summaries and kith's messages in those threads). Returns how many moved.

    An unlink moves nothing back, as memories do not go back: what the account said while it was the
    person's stays the person's (they may export it and forget it), and the account starts afresh as a
    person of its own (:func:`people.directory.unlink`). Only the person column changes: a copy of a thread's
    messages kept in memory still holds their text as it is."""
    return conn.execute(messages.update().where(messages.c.person == old).values(person=new)).rowcount


MESSAGES_DATA = PersonData(
    "messages", tables=(messages,), move_rows=move_messages, export_rows=export_of,
    forgotten_by="people.history.forget_text")
SUMMARIES_DATA = PersonData(
    "summaries", tables=(summaries,), export_rows=summaries_of, forgotten_by="people.history.forget_text",
    stays="kept by thread, not by person: a thread's summary is the person's through the messages they said "
          "in it, which a link moves (move_messages)")


def forget_text(conn: Connection, *, person: str, accounts: Sequence[str], redact: Callable[[str], str],
                apply: bool) -> tuple[int, int, set[str], set[tuple[str, str]]]:
    """A confirmed forget in history: ``redact`` over the person's own messages (forwards they sent
    included), kith's messages in the threads they wrote in, and those threads' summaries.

    Counts only unless ``apply``. Returns (messages, summaries) that hold matching text, the threads
    the person wrote in, and their chats as (platform, chat id). The one place history is rewritten:
    it is otherwise append-only, so a caller that keeps windows of these threads must drop them.
    """
    m = messages
    theirs = sa.or_(m.c.person == person, sa.and_(m.c.person.is_(None), m.c.author.in_(list(accounts))))
    threads = conn.execute(sa.select(m.c.conversation, m.c.platform, m.c.chat_id)
                           .where(m.c.role == "user", theirs).distinct()).all()
    conversations = {str(t.conversation) for t in threads}
    chats = {(str(t.platform), str(t.chat_id)) for t in threads}
    if not conversations:
        return 0, 0, conversations, chats
    rows = conn.execute(sa.select(m.c.id, m.c.text).where(
        sa.or_(sa.and_(m.c.role == "user", theirs),
               sa.and_(m.c.role != "user", m.c.conversation.in_(sorted(conversations))))).order_by(m.c.id)).all()
    changed = 0
    for row in rows:
        text = redact(row.text)
        if text != row.text:
            changed += 1
            if apply:
                conn.execute(m.update().where(m.c.id == row.id).values(text=text))
    summarized = 0
    for row in conn.execute(sa.select(summaries.c.conversation, summaries.c.summary)
                            .where(summaries.c.conversation.in_(sorted(conversations)))).all():
        text = redact(row.summary)
        if text != row.summary:
            summarized += 1
            if apply:
                conn.execute(summaries.update().where(summaries.c.conversation == row.conversation)
                             .values(summary=text))
    return changed, summarized, conversations, chats
