"""Each thread's recent window kept between turns: always what a fresh read of history would give."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conversation import history_window
from conversation.history_window import Window, WindowCache, extend, read_window, still_tail, window_after
from ground.db import Database
from kith.app.schema import create_schema
from kith.app.wiring import build_app
from people import history
from people.history import StoredMessage, Summary
from tests.support.messages import inbound

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _msg(i: int) -> StoredMessage:
    return StoredMessage(i, "console:ana", "user", "console:ana", None, "console", "ana", None, "dm", None,
                         f"m{i}", T0, False)


def test_extending_a_full_window_moves_its_oldest_row_to_the_part_awaiting_the_summary() -> None:
    window = Window(tuple(_msg(i) for i in (3, 5, 8)), Summary("console:ana", "early days", 4), older=0)
    grown = extend(window, _msg(9), size=3)
    assert [r.id for r in grown.rows] == [5, 8, 9]
    assert grown.older == 0  # message 3 is already in the summary (through 4)
    grown = extend(grown, _msg(12), size=3)
    assert [r.id for r in grown.rows] == [8, 9, 12] and grown.older == 1  # message 5 now waits for the summary
    short = extend(Window((), Summary("console:ana", "", 0), 0), _msg(1), size=3)
    assert [r.id for r in short.rows] == [1] and short.older == 0


def test_the_cache_keeps_the_most_recently_active_threads() -> None:
    cache = WindowCache(capacity=2)
    empty = Window((), Summary("x", "", 0), 0)
    for thread in ("a", "b", "a", "c"):
        cache.put(thread, empty)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (empty, None, empty)
    assert len(cache) == 2


def test_the_cache_holds_a_bounded_amount_of_text_whatever_people_paste() -> None:
    cache = WindowCache(capacity=10, max_chars=100)

    def window(text: str) -> Window:
        row = StoredMessage(1, "t", "user", "console:ana", None, "console", "ana", None, "dm", None, text, T0, False)
        return Window((row,), Summary("t", "", 0), 0)

    cache.put("a", window("x" * 40))
    cache.put("b", window("y" * 40))
    cache.put("a", window("x" * 50))  # replacing a thread's window replaces its share
    assert cache.chars == 90 and cache.get("b") is not None
    cache.put("c", window("z" * 30))  # over the limit: the least recent thread goes first
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    assert cache.chars == 80
    cache.put("d", window("w" * 500))  # a paste larger than the whole cache is not kept, nor pushes others out
    assert cache.get("d") is None and cache.get("a") is not None and cache.chars == 80


def _append(conn, i: int, role: str, when: datetime) -> StoredMessage:
    return history.append_row(conn, conversation="console:ana", role=role,
                              author="console:ana" if role == "user" else "kith", platform="console",
                              chat_id="ana", text=f"{role} {i}", created_at=when, person="p_ana" if role == "user"
                              else None)


async def test_kept_windows_match_fresh_reads_whoever_writes_in_between(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Turns as the core runs them, mixed with heartbeat rows, other processes' rows, failed replies and
    summaries; after every step the kept window is exactly the database's."""
    db = Database(f"sqlite:///{tmp_path / 'kith.db'}")
    other = Database(f"sqlite:///{tmp_path / 'kith.db'}")  # another process's connection to the same file
    create_schema(db)
    rng = random.Random(7)
    cache = WindowCache()
    size, through, reread = 6, 0, 0
    fresh_reads = []
    monkeypatch.setattr(history_window, "read_window",
                        lambda *args: fresh_reads.append(args) or read_window(*args))
    try:
        for step in range(300):
            when = T0 + timedelta(minutes=step)
            kept = cache.get("console:ana")

            def user_turn(conn, kept=kept, when=when, step=step):
                row = _append(conn, step, "user", when)
                return row, window_after(conn, kept, "console:ana", row, size)

            _row, window = await db.run(user_turn)
            cache.put("console:ana", window)
            assert window == await db.run(read_window, "console:ana", size)
            roll = rng.random()
            if roll < 0.15:  # a heartbeat row from this process lands before the reply
                await db.run(_append, step, "heartbeat", when)
            elif roll < 0.25:  # another process writes to the thread
                await other.run(_append, step, "assistant", when)
            elif roll < 0.35 and window.older:  # the summarizer folds the part awaiting it
                newest = window.rows[0].id - 1
                assert await db.run(history.advance_summary, "console:ana", expected_through=through,
                                    new_through=newest, text=f"through {newest}", now=when)
                through = newest
            if rng.random() < 0.1:
                continue  # the model failed: no reply recorded

            def reply(conn, window=window, when=when, step=step):
                row = _append(conn, step, "assistant", when)
                return row, still_tail(conn, window, "console:ana", row)

            row, follows = await db.run(reply)
            if follows:
                cache.put("console:ana", extend(window, row, size))
            else:
                cache.drop("console:ana")
                reread += 1
            kept = cache.get("console:ana")
            if kept is not None:  # its summary is checked when the next turn uses it
                assert kept.rows == (await db.run(read_window, "console:ana", size)).rows
    finally:
        db.close()
        other.close()
    assert len(fresh_reads) < 150 and reread > 10  # both paths ran, many times


async def test_a_heartbeat_message_between_turns_reaches_the_next_prompt(fake_llm, make_settings) -> None:
    app = await build_app(make_settings(fake_llm), warm_llm=False)
    try:
        fake_llm.reply("Good morning!")
        await app.core.handle(inbound("morning"))
        await app.db.run(lambda conn: _append(conn, 0, "assistant", datetime.now(UTC)))  # a proactive turn
        fake_llm.reply("Glad you liked it.")
        await app.core.handle(inbound("thanks for the nudge"))
        assert [m["content"] for m in fake_llm.requests[-1]["messages"][1:]] == [
            "morning", "Good morning!", "assistant 0", "thanks for the nudge"]
    finally:
        await app.close()
