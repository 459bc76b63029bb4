"""How handled failures reach the log: a database that refuses work is one line with its reason and no
statement or parameters; anything else keeps its traceback, since that is how a bug is found."""

from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy as sa

from ground.failures import describe, traceback_of


def _full_disk_from_sqlalchemy() -> sa.exc.OperationalError:
    return sa.exc.OperationalError("INSERT INTO history (text) VALUES (?)", ("my card is 4111…",),
                                   sqlite3.OperationalError("database or disk is full"))


@pytest.mark.parametrize("exc", [sqlite3.OperationalError("database or disk is full"), _full_disk_from_sqlalchemy()])
def test_a_full_disk_is_described_by_its_reason_without_a_traceback(exc: BaseException) -> None:
    assert traceback_of(exc) is None
    text = describe(exc)
    assert text == "OperationalError (database or disk is full)"
    assert "INSERT" not in text and "card" not in text


def test_a_bug_keeps_its_traceback_and_is_named_by_its_class_only() -> None:
    bug = KeyError("secret words")
    assert traceback_of(bug) is bug
    assert describe(bug) == "KeyError"


def test_a_long_or_multi_line_reason_is_cut_to_its_first_line() -> None:
    exc = sqlite3.OperationalError("disk I/O error\nsecond line " + "x" * 500)
    text = describe(exc)
    assert text.startswith("OperationalError (disk I/O error") and "second line" not in text and len(text) < 200
