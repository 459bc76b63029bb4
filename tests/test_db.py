"""The relational store's moments in time: stored in UTC, read back aware, on SQLite too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from core import history
from core.db import Database


async def test_times_read_back_as_the_same_moment_in_utc(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'kith.db'}")
    db.create_all()
    warsaw_noon = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=1)))
    naive = datetime(2026, 3, 1, 12, 0)  # taken as UTC
    try:
        for i, when in enumerate((warsaw_noon, naive)):
            await db.run(lambda conn, i=i, when=when: history.append(
                conn, conversation="console:ana", role="user", author="console:ana", platform="console",
                chat_id="ana", text=f"m{i}", created_at=when))
        rows = await db.run(history.recent, "console:ana", 5)
    finally:
        db.close()
    assert [r.created_at for r in rows] == [datetime(2026, 3, 1, 11, 0, tzinfo=UTC),
                                            datetime(2026, 3, 1, 12, 0, tzinfo=UTC)]
    assert all(r.created_at.tzinfo is UTC for r in rows)
