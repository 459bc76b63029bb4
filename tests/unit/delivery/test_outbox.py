"""The outbox table: what a reply looks like at rest, and how delivery progress is kept."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from delivery import outbox
from delivery.outbox import OutboxStatus
from ground.db import Database
from ground.types import Button, OutboundMessage
from tests.support.clock import FakeClock

BACKENDS = ("sqlite", "postgres")  # the relational store under test: both (tests/conftest.py)

DB_TABLES = (outbox.outbox, outbox.outbox_doubts)  # the outbox needs no other table (see the ``db`` fixture)


def reply(text: str = "hello", *, chat_id: str = "c1", thread_id: str | None = None,
          platform: str = "telegram") -> OutboundMessage:
    return OutboundMessage(platform=platform, chat_id=chat_id, text=text, thread_id=thread_id)


def test_entry_round_trips_every_field(db: Database, tmp_path: Path) -> None:
    clock = FakeClock()
    message = OutboundMessage(platform="slack", chat_id="C9", text="**hi** there", thread_id="171.5",
                              reply_to_message_id="170.1",
                              buttons=(Button("Yes", "y:1"), Button("No", "n:1")),
                              attachment_name="notes.txt", attachment_bytes=b"\x00\x01bytes")
    entry_id = db.run_sync(outbox.enqueue, message, source="170.1", now=clock())
    db.close()
    reopened = Database(db.url)
    try:
        entry = reopened.run_sync(outbox.get, entry_id)
    finally:
        reopened.close()
    assert entry is not None
    assert entry.message == message
    assert entry.source == "170.1"
    assert entry.created_at == clock()
    assert entry.status is OutboxStatus.PENDING
    assert (entry.attempts, entry.chunks_sent, entry.sent_ids) == (0, 0, ())


def test_lanes_keep_their_own_order_and_threads_apart(db: Database) -> None:
    now = FakeClock()()
    first = db.run_sync(outbox.enqueue, reply("1"), source=None, now=now)
    db.run_sync(outbox.enqueue, reply("other chat", chat_id="c2"), source=None, now=now)
    db.run_sync(outbox.enqueue, reply("in thread", thread_id="t1"), source=None, now=now)
    second = db.run_sync(outbox.enqueue, reply("2"), source=None, now=now)

    head = db.run_sync(outbox.next_in_lane, ("telegram", "c1", None))
    assert head is not None and head.id == first
    threaded = db.run_sync(outbox.next_in_lane, ("telegram", "c1", "t1"))
    assert threaded is not None and threaded.message.text == "in thread"

    db.run_sync(outbox.mark_sent, first, now=now)
    head = db.run_sync(outbox.next_in_lane, ("telegram", "c1", None))
    assert head is not None and head.id == second
    assert db.run_sync(outbox.pending_lanes) == [("telegram", "c2", None), ("telegram", "c1", "t1"),
                                                  ("telegram", "c1", None)]


def test_chunk_progress_never_skips_or_repeats(db: Database) -> None:
    now = FakeClock()()
    entry_id = db.run_sync(outbox.enqueue, reply("a|b|c"), source=None, now=now)
    assert db.run_sync(outbox.record_chunk, entry_id, 0, ["pm1"], now=now)
    assert not db.run_sync(outbox.record_chunk, entry_id, 0, ["pm1-again"], now=now)  # already recorded
    assert not db.run_sync(outbox.record_chunk, entry_id, 2, ["pm1", "pm2", "pm3"], now=now)  # 2 not sent yet
    assert db.run_sync(outbox.record_chunk, entry_id, 1, ["pm1", "pm2"], now=now)
    entry = db.run_sync(outbox.get, entry_id)
    assert entry is not None
    assert (entry.chunks_sent, entry.sent_ids) == (2, ("pm1", "pm2"))
    db.run_sync(outbox.mark_failed, entry_id, error="SendError:permanent", now=now)
    # A failed (or sent) entry takes no more progress, whoever still holds it.
    assert not db.run_sync(outbox.record_chunk, entry_id, 2, ["pm1", "pm2", "pm3"], now=now)
    with pytest.raises(ValueError, match="needs 3 sent ids"):
        db.run_sync(outbox.record_chunk, entry_id, 2, ["pm3"], now=now)


def test_retry_state_then_failure_is_kept_with_a_short_code(db: Database) -> None:
    clock = FakeClock()
    entry_id = db.run_sync(outbox.enqueue, reply(), source="m1", now=clock())
    due = clock() + timedelta(seconds=30)
    db.run_sync(outbox.schedule_retry, entry_id, attempts=2, next_attempt_at=due,
                error="SendError:rate_limited", now=clock())
    entry = db.run_sync(outbox.get, entry_id)
    assert entry is not None
    assert (entry.attempts, entry.next_attempt_at, entry.last_error) == (2, due, "SendError:rate_limited")

    db.run_sync(outbox.mark_failed, entry_id, error="X" * 500, now=clock(), attempts=6)
    failed = db.run_sync(outbox.by_status, OutboxStatus.FAILED)
    assert [e.id for e in failed] == [entry_id]
    assert failed[0].last_error == "X" * outbox.MAX_ERROR_CHARS
    assert db.run_sync(outbox.pending_lanes) == []


def test_prune_forgets_old_sent_entries_but_keeps_failures(db: Database) -> None:
    clock = FakeClock()
    old_sent = db.run_sync(outbox.enqueue, reply("old"), source=None, now=clock())
    db.run_sync(outbox.mark_sent, old_sent, now=clock())
    old_failed = db.run_sync(outbox.enqueue, reply("failed"), source=None, now=clock())
    db.run_sync(outbox.mark_failed, old_failed, error="SendError:permanent", now=clock())
    clock.advance(days=10)
    new_sent = db.run_sync(outbox.enqueue, reply("new"), source=None, now=clock())
    db.run_sync(outbox.mark_sent, new_sent, now=clock())

    assert db.run_sync(outbox.prune_sent, before=clock() - timedelta(days=7)) == 1
    assert db.run_sync(outbox.get, old_sent) is None
    assert db.run_sync(outbox.get, old_failed) is not None
    assert db.run_sync(outbox.get, new_sent) is not None


def test_prune_goes_in_batches_and_takes_the_doubts_with_their_entries(db: Database) -> None:
    clock = FakeClock()
    old = [db.run_sync(outbox.enqueue, reply(f"old {n}"), source=None, now=clock()) for n in range(5)]
    for entry_id in old:
        db.run_sync(outbox.schedule_retry, entry_id, attempts=0, next_attempt_at=clock(),
                    error="SendError:maybe_delivered", now=clock(), doubted_chunk=0)
        db.run_sync(outbox.mark_sent, entry_id, now=clock())
    clock.advance(days=10)
    kept = db.run_sync(outbox.enqueue, reply("recent"), source=None, now=clock())
    db.run_sync(outbox.schedule_retry, kept, attempts=0, next_attempt_at=clock(), error="SendError:maybe_delivered",
                now=clock(), doubted_chunk=0)
    db.run_sync(outbox.mark_sent, kept, now=clock())

    before = clock() - timedelta(days=7)
    assert [db.run_sync(outbox.prune_sent, before=before, limit=2) for _ in range(4)] == [2, 2, 1, 0]
    assert db.run_sync(outbox.doubts) == [(kept, 0)]
    assert db.run_sync(outbox.get, kept) is not None


def test_a_lane_whose_head_waits_out_a_long_backoff_is_not_due_until_then(db: Database) -> None:
    clock = FakeClock()
    parked = db.run_sync(outbox.enqueue, reply("parked"), source=None, now=clock())
    db.run_sync(outbox.enqueue, reply("behind it"), source=None, now=clock())
    db.run_sync(outbox.enqueue, reply("elsewhere", chat_id="c2"), source=None, now=clock())
    db.run_sync(outbox.schedule_retry, parked, attempts=7, next_attempt_at=clock() + timedelta(hours=1),
                error="SendError:transient", now=clock())

    assert db.run_sync(outbox.pending_lanes) == [("telegram", "c1", None), ("telegram", "c2", None)]
    assert db.run_sync(outbox.pending_lanes, due_by=clock()) == [("telegram", "c2", None)]
    assert db.run_sync(outbox.pending_lanes, due_by=clock() + timedelta(hours=1)) == [
        ("telegram", "c1", None), ("telegram", "c2", None)]


def test_a_platform_that_answers_again_releases_only_its_guessed_waits(db: Database) -> None:
    clock = FakeClock()
    later = clock() + timedelta(minutes=5)

    def waiting(chat_id: str, error: str, *, platform: str = "telegram") -> int:
        entry_id = db.run_sync(outbox.enqueue, reply(chat_id, chat_id=chat_id, platform=platform), source=None,
                               now=clock())
        db.run_sync(outbox.schedule_retry, entry_id, attempts=7, next_attempt_at=later, error=error, now=clock())
        return entry_id

    guessed = waiting("down", "SendError:transient")
    dropped = waiting("dropped", "ConnectError")
    skipped = waiting("woken before", "SendError:transient")
    named = waiting("named", "SendError:retry_after")
    elsewhere = waiting("slack", "SendError:transient", platform="slack")
    woken = db.run_sync(outbox.release_guessed, platform="telegram", keep_errors=("SendError:retry_after",),
                        skip={skipped}, now=clock())
    assert woken == [(guessed, ("telegram", "down", None)), (dropped, ("telegram", "dropped", None))]
    for entry_id, due in ((guessed, None), (dropped, None), (skipped, later), (named, later), (elsewhere, later)):
        entry = db.run_sync(outbox.get, entry_id)
        assert entry is not None and entry.next_attempt_at == due
        assert entry.attempts == 7  # a chat whose own sends keep failing still grows its backoff
