"""The inbox: what a restart finds of the messages taken in and not yet answered."""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from delivery import inbox
from delivery.inbox import Inbox, Kept, PayloadError, Resumed, from_payload, resumed_turns, to_payload
from ground.db import Database
from ground.tunables import INBOX_REPLAYS_MAX
from ground.types import InboundMessage
from tests.support.clock import FakeClock
from tests.support.database import open_db
from tests.support.messages import inbound

BACKENDS = ("sqlite", "postgres")  # the relational store under test: both (tests/conftest.py)

ODD = "caf\u00e9 \U0001f600 \u05e9\u05dc\u05d5\u05dd \ud800 nul:\x00 e\u0301 \u202e"


async def _resume(book: Inbox, platforms: list[str]) -> Resumed:
    """What a start-up takes up: the leftovers read first, then those of ``platforms``."""
    return await book.resume(await book.leftovers(), platforms)


async def _let_through(db: Database, book: Inbox, message: InboundMessage) -> None:
    """The policy's transaction letting ``message`` through."""
    await db.run(book.decided_within, message, True)


def _message(text: str, message_id: str, *, platform: str = "telegram", sender: str = "ana") -> InboundMessage:
    return inbound(text, platform=platform, chat_id=sender, sender_id=sender, message_id=message_id)


def test_a_message_comes_back_from_its_payload_exactly_whatever_its_text() -> None:
    message = dataclasses.replace(_message(ODD, "7"), merged_ids=("5", "6"), thread_id="t1",
                                  reply_to_message_id="3")
    assert from_payload(to_payload(message)) == message


@pytest.mark.parametrize("payload", ["", "{", "[]", '{"platform": "telegram"}', '{"chat_kind": "nope"}'])
def test_an_unreadable_payload_raises_payload_error(payload: str) -> None:
    with pytest.raises(PayloadError):
        from_payload(payload)


def test_turns_opened_before_a_restart_come_back_whole_in_the_order_their_messages_came() -> None:
    a1, b1, a2, c1 = (_message("first half", "1"), _message("hi", "2", sender="ben"),
                      _message("second half", "3"), _message("hey", "4", sender="cleo"))
    turns = resumed_turns([Kept(3, a2, 40), Kept(1, a1, 40), Kept(4, c1, None), Kept(2, b1, None)])
    assert [t.text for t in turns] == ["first half\nsecond half", "hi", "hey"]
    assert turns[0].opened_row == 40 and turns[0].message_id == "3" and turns[0].merged_ids == ("1",)
    assert turns[1].opened_row is None and turns[2].opened_row is None


async def test_a_kept_message_is_resumed_until_its_turn_is_answered(db: Database) -> None:
    book = Inbox(db)
    first, second = _message("one", "1"), _message("two", "2")
    for m in (first, second):
        await _let_through(db, book, m)
    merged = dataclasses.replace(second, text="one\ntwo", merged_ids=("1",))
    await db.run(inbox.opened, 99, merged)
    (turn,) = (await _resume(book, ["telegram"])).turns
    assert turn.text == "one\ntwo" and turn.opened_row == 99
    await db.run(inbox.done, turn)
    assert (await _resume(book, ["telegram"])).turns == []


async def test_restarts_that_never_reach_a_message_do_not_use_up_its_attempts(db: Database) -> None:
    book = Inbox(db)
    await _let_through(db, book, _message("waiting behind a slow turn", "13"))
    for _ in range(INBOX_REPLAYS_MAX + 3):
        resumed = await _resume(book, ["telegram"])
        assert [t.message_id for t in resumed.turns] == ["13"] and resumed.exhausted == []


async def test_a_message_whose_turn_opened_too_often_is_handed_back_for_the_honest_reply(
        db: Database) -> None:
    book = Inbox(db)
    first, second = _message("crashes the bot somehow", "13"), _message("and this too", "14")
    for m in (first, second):
        await _let_through(db, book, m)
    merged = dataclasses.replace(second, text="crashes the bot somehow\nand this too", merged_ids=("13",))
    for attempt in range(1, INBOX_REPLAYS_MAX + 1):
        await db.run(inbox.opened, 40, merged)  # each process opened the turn, then died
        resumed = await _resume(book, ["telegram"])
        assert resumed.attempts == {"14": attempt}
        if attempt < INBOX_REPLAYS_MAX:
            assert [t.message_id for t in resumed.turns] == ["14"] and resumed.exhausted == []
    assert resumed.turns == [] and [t.answers for t in resumed.exhausted] == [("13", "14")]
    assert resumed.exhausted[0].opened_row == 40
    # Still kept until the honest reply is queued with its removal.
    assert [t.message_id for t in (await _resume(book, ["telegram"])).exhausted] == ["14"]
    await db.run(inbox.done, resumed.exhausted[0])
    assert (await _resume(book, ["telegram"])) == Resumed([], [], [], {})


async def test_a_command_is_charged_when_it_starts_and_its_turn_not_charged_again(db: Database) -> None:
    book = Inbox(db)
    command = _message("/memory", "20")
    await _let_through(db, book, command)
    await db.run(inbox.charge, command)
    await db.run(inbox.opened, 41, command, charge=False)
    assert await db.run(inbox.state, command) == (41, 1)


async def test_an_inbox_from_before_attempts_were_counted_keeps_its_messages(tmp_path: Path) -> None:
    path = tmp_path / "old"
    path.mkdir()
    with sqlite3.connect(path / "kith.db") as conn:  # the table as the first release created it
        conn.executescript("""
            CREATE TABLE inbox (id INTEGER NOT NULL PRIMARY KEY, platform VARCHAR(32) NOT NULL,
                message_id VARCHAR(255) NOT NULL, payload TEXT NOT NULL, received_at DATETIME NOT NULL,
                decided BOOLEAN DEFAULT 0 NOT NULL, turn_row INTEGER, replays INTEGER DEFAULT '0' NOT NULL,
                CONSTRAINT uq_inbox_message UNIQUE (platform, message_id));
        """)
        conn.execute("INSERT INTO inbox (platform, message_id, payload, received_at, decided, turn_row, replays) "
                     "VALUES ('telegram', '7', ?, ?, 1, NULL, 2)",
                     (to_payload(_message("from before the upgrade", "7")), datetime.now(UTC).isoformat(" ")))
    for _ in range(2):  # opening it again adds nothing twice
        db = open_db(path)
        try:
            book = Inbox(db)
            resumed = await _resume(book, ["telegram"])
            assert [t.text for t in resumed.turns] == ["from before the upgrade"] and resumed.attempts == {"7": 0}
            await _let_through(db, book, _message("after it", "8"))
            await db.run(inbox.opened, 3, _message("after it", "8"))
            assert await db.run(inbox.state, _message("after it", "8")) == (3, 1)
            await db.run(inbox.done, _message("after it", "8"))
        finally:
            db.close()


async def test_a_message_older_than_a_day_is_not_answered_after_a_restart(db: Database) -> None:
    clock = FakeClock()
    book = Inbox(db, clock=clock)
    await _let_through(db, book, _message("yesterday's question", "1"))
    clock.advance(hours=23)
    await _let_through(db, book, _message("today's", "2"))
    clock.advance(hours=1, seconds=1)
    assert [t.message_id for t in (await _resume(book, ["telegram"])).turns] == ["2"]


async def test_another_platforms_messages_wait_for_a_process_that_runs_its_channel(db: Database) -> None:
    book = Inbox(db)
    await _let_through(db, book, _message("from slack", "s1", platform="slack"))
    await _let_through(db, book, _message("from telegram", "t1"))
    for _ in range(3):  # processes without Slack, started again and again, leave its message untouched
        assert [t.text for t in (await _resume(book, ["telegram"])).turns] == ["from telegram"]
    assert [t.text for t in (await _resume(book, ["slack"])).turns] == ["from slack"]


async def test_an_unreadable_row_is_dropped_and_the_others_still_answered(
        db: Database, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    book = Inbox(db, clock=clock)
    await _let_through(db, book, _message("fine", "1"))
    await db.run(lambda conn: conn.execute(inbox.inbox.insert().values(
        platform="telegram", message_id="2", payload="{not json", received_at=clock())))
    with caplog.at_level(logging.WARNING, logger="kith.inbox"):
        assert [t.text for t in (await _resume(book, ["telegram"])).turns] == ["fine"]
    assert "message=2 reason=unreadable" in caplog.text
    left = await db.run(lambda conn: conn.execute(sa.select(inbox.inbox.c.message_id)).scalars().all())
    assert left == ["1"]


async def test_a_message_its_channel_kept_is_decided_on_again_after_a_restart(db: Database) -> None:
    book = Inbox(db)
    taken, refused, let_through = _message("queued", "1"), _message("a stranger", "2"), _message("fine", "3")
    await db.run(book.keep_taken_within, "telegram", [taken, refused, let_through])
    await db.run(book.keep_taken_within, "telegram", [taken])  # the same message in another event: kept once
    await db.run(book.decided_within, refused, False)
    await db.run(book.decided_within, let_through, True)
    resumed = await _resume(book, ["telegram"])
    assert [m.text for m in resumed.undecided] == ["queued"]
    assert [m.text for m in resumed.turns] == ["fine"]


async def test_letting_through_a_message_nobody_kept_keeps_it(db: Database) -> None:
    book = Inbox(db)
    await db.run(book.decided_within, _message("from a channel that keeps nothing itself", "9"), True)
    resumed = await _resume(book, ["telegram"])
    assert resumed.undecided == [] and [m.message_id for m in resumed.turns] == ["9"]


async def test_a_message_is_kept_as_the_policy_saw_it(db: Database) -> None:
    book = Inbox(db)
    taken = dataclasses.replace(_message("hi", "1"), sender_name="")  # its channel looks the name up later
    await db.run(book.keep_taken_within, "telegram", [taken])
    await db.run(book.decided_within, dataclasses.replace(taken, sender_name="Alice"), True)
    (turn,) = (await _resume(book, ["telegram"])).turns
    assert turn.sender_name == "Alice"
