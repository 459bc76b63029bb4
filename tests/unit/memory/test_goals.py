"""Goals: tracked with a status and a number; active ones shape replies, done and paused ones stop."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from conversation.chat_commands import ChatCommands
from ground.db import Database
from ground.tunables import GOALS_MAX_OPEN
from ground.types import ChatKind
from memory.goals import GoalBook, GoalsCommand, GoalStatus
from memory.goals import book as goals
from memory.goals.command import parse_goal_args
from people import directory
from tests.support.clock import FakeClock
from tests.support.messages import inbound

BACKENDS = ("sqlite", "postgres")  # the relational store under test: both (tests/conftest.py)
# Goals cached between replies: SQLite tells a process when another one wrote; on PostgreSQL every reply reads them.
SQLITE_CACHE = pytest.mark.backends("sqlite")

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
def book(db: Database) -> GoalBook:
    return GoalBook(db, FakeClock(NOW), ZoneInfo("Europe/Warsaw"))


@pytest.fixture
def commands(book: GoalBook) -> ChatCommands:
    registry = ChatCommands("Kith")
    registry.register("goals", GoalsCommand.description, GoalsCommand(book))
    return registry


async def say(commands: ChatCommands, text: str, **kw: object) -> str:
    reply = await commands(inbound(text, **kw))  # type: ignore[arg-type]
    assert reply is not None
    return reply.text


async def ana(db: Database) -> str:
    person = await db.run(directory.person_of, "console:ana")
    assert person is not None
    return person


async def test_goals_added_finished_and_paused_through_the_command(
    commands: ChatCommands, book: GoalBook, db: Database
) -> None:
    assert "No goals yet" in await say(commands, "/goals")
    assert await say(commands, "/goals add Learn Rust due 2026-12-31") == "Added goal #1: Learn Rust (due 2026-12-31)"
    assert await say(commands, "/goals add Run a half marathon") == "Added goal #2: Run a half marathon"
    assert await say(commands, "/goals add Read War and Peace") == "Added goal #3: Read War and Peace"
    assert await say(commands, "/goals done 1") == "Done: #1 Learn Rust"
    assert await say(commands, "/goals pause 3") == "Paused: #3 Read War and Peace"
    listing = await say(commands, "/goals")
    assert listing == "Active:\n#2 Run a half marathon\nPaused:\n#3 Read War and Peace\nDone:\n#1 Learn Rust"
    # Numbers stay with their goals: #3 is still War and Peace after #1 was finished.
    assert await say(commands, "/goals resume 3") == "Resumed: #3 Read War and Peace"
    statuses = {g.text: g.status for g in await book.list(await ana(db))}
    assert statuses == {"Learn Rust": GoalStatus.DONE, "Run a half marathon": GoalStatus.ACTIVE,
                        "Read War and Peace": GoalStatus.ACTIVE}


async def test_active_goals_are_rendered_for_the_prompt_and_finished_ones_are_not(
    commands: ChatCommands, book: GoalBook, db: Database
) -> None:
    await say(commands, "/goals add Learn Rust due 2026-11-01")
    await say(commands, "/goals add Call grandma every Sunday")
    await say(commands, "/goals add Finish the thesis")
    await say(commands, "/goals done 3")
    await say(commands, "/goals pause 2")
    slot = await book.slot(await ana(db), limit_chars=800)
    assert "stored data" in slot.splitlines()[0]
    assert slot.splitlines()[1:] == ["- Learn Rust (due 2026-11-01, overdue)"]
    await say(commands, "/goals done 1")
    assert await book.slot(await ana(db), limit_chars=800) == ""


async def test_the_goals_slot_stays_within_its_budget(book: GoalBook) -> None:
    for i in range(12):
        await book.add("p_ana", f"goal number {i} " + "x" * 60)
    slot = await book.slot("p_ana", limit_chars=300)
    assert len(slot) <= 300 and slot.count("\n- ") >= 1
    assert len((await book.slot("p_ana", limit_chars=10_000)).splitlines()) == 1 + 10  # at most ten goals


async def test_goal_numbers_and_people_are_separate(commands: ChatCommands, book: GoalBook, db: Database) -> None:
    await say(commands, "/goals add Learn Rust")
    assert await say(commands, "/goals add Learn Go", sender_id="bob", chat_id="bob",
                     sender_name="Bob") == "Added goal #1: Learn Go"
    assert await say(commands, "/goals done 2", sender_id="bob", chat_id="bob") == (
        "You have no goal #2. /goals lists them.")
    assert [g.text for g in await book.list(await ana(db))] == ["Learn Rust"]


async def test_goals_stay_private_in_groups(commands: ChatCommands, book: GoalBook) -> None:
    text = await say(commands, "/goals add Quit smoking", chat_kind=ChatKind.GROUP, chat_id="club")
    assert "direct message" in text
    assert await book.db.run(directory.person_of, "console:ana") is None  # nothing was stored


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ("add", "What is the goal?"),
        ("add Learn Rust due 2026-02-30", "is not a date"),
        ("done two", "Which goal?"),
        ("finish 1", "Usage"),
        ("add " + "x" * 400, "under 300"),
    ],
)
async def test_requests_that_cannot_be_understood_say_why(commands: ChatCommands, args: str, error: str) -> None:
    assert error in await say(commands, f"/goals {args}")


def test_due_dates_are_parsed_only_at_the_end() -> None:
    request = parse_goal_args("add Plan the trip due to the strike due 2027-01-15")
    assert request.text == "Plan the trip due to the strike" and request.due == date(2027, 1, 15)
    assert parse_goal_args("add Pay what is due").due is None


async def test_open_goals_are_capped(book: GoalBook) -> None:
    for i in range(GOALS_MAX_OPEN):
        assert await book.add("p_ana", f"goal {i}") is not None
    assert await book.add("p_ana", "one too many") is None
    await book.set_status("p_ana", 1, GoalStatus.DONE)
    assert await book.add("p_ana", "room again") is not None


async def test_goals_follow_the_person_when_accounts_are_linked(book: GoalBook) -> None:
    await book.add("p_phone", "Learn Rust")
    await book.add("p_laptop", "Run a 10k")
    await book.add("p_laptop", "Read more")
    moved = await book.db.run(goals.reassign, "p_laptop", "p_phone")
    assert moved == 2
    assert [(g.number, g.text) for g in await book.list("p_phone")] == [
        (1, "Learn Rust"), (2, "Run a 10k"), (3, "Read more")]
    assert await book.list("p_laptop") == []


@SQLITE_CACHE
async def test_the_goals_slot_follows_writes_of_this_process_and_of_another(
    commands: ChatCommands, book: GoalBook, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    await say(commands, "/goals add Learn Rust")
    person = await db.run(directory.person_of, "console:ana")
    assert person is not None
    reads: list[str] = []
    real = goals.of_person
    monkeypatch.setattr(goals, "of_person", lambda conn, p, s=None: reads.append(p) or real(conn, p, s))
    assert "Learn Rust" in await book.slot(person, limit_chars=500)
    assert "Learn Rust" in await book.slot(person, limit_chars=500)
    assert len(reads) == 1  # unchanged since: the second reply's goals came from memory
    await say(commands, "/goals add Run a marathon")  # this process writes
    assert "Run a marathon" in await book.slot(person, limit_chars=500)
    other = Database(db.url)  # another process's connection, e.g. kith's heartbeat in a second install
    try:
        await other.run(goals.add, person, "Read Dune", None, NOW)
    finally:
        other.close()
    await db.run(lambda conn: None)  # the turn's own transaction, as before every reply
    assert "Read Dune" in await book.slot(person, limit_chars=500)


@SQLITE_CACHE
async def test_after_warm_up_a_newcomer_has_no_goals_without_a_read(
    commands: ChatCommands, book: GoalBook, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    await say(commands, "/goals add Learn Rust")
    ana = await db.run(directory.person_of, "console:ana")
    assert ana is not None
    assert await book.warm() == 1
    reads: list[str] = []
    real = goals.of_person
    monkeypatch.setattr(goals, "of_person", lambda conn, p, s=None: reads.append(p) or real(conn, p, s))
    await db.run(lambda conn: None)  # the turn's own transaction, as before every reply
    assert "Learn Rust" in await book.slot(ana, limit_chars=500)
    assert await book.slot("p_newcomer", limit_chars=500) == ""
    assert reads == []
    await say(commands, "/goals add Learn Go", sender_id="bob", chat_id="bob", sender_name="Bob")
    bob = await db.run(directory.person_of, "console:bob")
    assert bob is not None and "Learn Go" in await book.slot(bob, limit_chars=500)  # written since: read


async def _warm_then_written_elsewhere(commands: ChatCommands, book: GoalBook, db: Database) -> str:
    """Ana's goal read at warm-up, then another process (or the scheduler's job store, on a connection of
    its own) adds one for Zoe. Returns Ana's person id."""
    await say(commands, "/goals add Learn Rust")
    ana = await db.run(directory.person_of, "console:ana")
    assert ana is not None
    await book.warm()
    other = Database(db.url)
    try:
        await other.run(goals.add, "p_zoe", "Swim a mile", None, NOW)
    finally:
        other.close()
    return ana


@SQLITE_CACHE
async def test_a_write_elsewhere_after_warm_up_is_met_with_one_read_of_everyone(
    commands: ChatCommands, book: GoalBook, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    ana = await _warm_then_written_elsewhere(commands, book, db)
    reads: list[str] = []
    real = goals.of_person
    monkeypatch.setattr(goals, "of_person", lambda conn, p, s=None: reads.append(p) or real(conn, p, s))
    await db.run(lambda conn: None)  # the turn's own transaction, as before every reply
    assert "Swim a mile" in await book.slot("p_zoe", limit_chars=500)
    assert await book.slot("p_newcomer", limit_chars=500) == ""
    assert "Learn Rust" in await book.slot(ana, limit_chars=500)
    assert reads == []  # one read of everyone's goals, not one per person


@SQLITE_CACHE
async def test_replies_to_many_people_at_once_after_a_write_elsewhere_share_one_read(
    commands: ChatCommands, book: GoalBook, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    ana = await _warm_then_written_elsewhere(commands, book, db)
    reads: list[str] = []
    real_one, real_all = goals.of_person, goals._all_active
    monkeypatch.setattr(goals, "of_person", lambda conn, p, s=None: reads.append(p) or real_one(conn, p, s))
    monkeypatch.setattr(goals, "_all_active", lambda conn: reads.append("everyone") or real_all(conn))
    await db.run(lambda conn: None)  # the turns' own transaction, as before every reply
    newcomers = [f"p_new{i}" for i in range(30)]
    slots = await asyncio.gather(*(book.slot(p, limit_chars=500) for p in [ana, "p_zoe", *newcomers]))
    assert "Learn Rust" in slots[0] and "Swim a mile" in slots[1] and set(slots[2:]) == {""}
    assert reads == ["everyone"]  # one read shared by every reply, not one per new person
