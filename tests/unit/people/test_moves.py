"""A link's move, recorded with the link: finished once, in the order the links were made, and towards the person
who has the accounts now (an earlier move still recorded towards a person a later link emptied follows it)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from people import moves
from tests.support.database import open_db

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


class Moves:
    """A move that remembers each (old, new) it ran, and fails for the ``failing`` old person."""

    def __init__(self, failing: str = "") -> None:
        self.ran: list[tuple[str, str]] = []
        self.failing = failing

    async def __call__(self, old: str, new: str) -> int:
        if old == self.failing:
            raise OSError("disk full")
        self.ran.append((old, new))
        return 1


async def test_an_unfinished_move_towards_a_person_a_later_link_emptied_follows_it(tmp_path: Path) -> None:
    db = open_db(tmp_path, moves.link_moves)
    try:
        await db.run(moves.record, "p_a", "p_b", NOW)  # the process stopped before this move ran
        await db.run(moves.record, "p_b", "p_c", NOW)  # then p_b's last account was linked to p_c
        move = Moves()
        assert await moves.finish_unfinished(db, move) == 2
        assert move.ran == [("p_a", "p_c"), ("p_b", "p_c")]
        assert await moves.finish_unfinished(db, move) == 0  # each was done once, and is no longer recorded
    finally:
        db.close()


async def test_a_move_that_fails_stays_recorded_and_the_others_still_run(tmp_path: Path) -> None:
    db = open_db(tmp_path, moves.link_moves)
    try:
        await db.run(moves.record, "p_a", "p_b", NOW)
        await db.run(moves.record, "p_x", "p_y", NOW)
        assert await moves.finish_unfinished(db, Moves(failing="p_a")) == 2
        move = Moves()
        assert await moves.finish_unfinished(db, move) == 1
        assert move.ran == [("p_a", "p_b")]
        with pytest.raises(OSError):
            await db.run(moves.record, "p_q", "p_r", NOW)
            await moves.finish(db, Moves(failing="p_q"), "p_q", "p_r")
        assert await moves.finish_unfinished(db, move) == 1  # a failed finish leaves its record too
    finally:
        db.close()
