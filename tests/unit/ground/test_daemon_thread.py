"""Work handed to a daemon thread is awaited like a coroutine: its result and its failure reach the caller."""

from __future__ import annotations

import threading

import pytest

from ground.background import on_daemon_thread


async def test_the_work_runs_on_a_daemon_thread_and_its_end_is_awaited() -> None:
    seen: list[threading.Thread] = []
    await on_daemon_thread(lambda: seen.append(threading.current_thread()), name="probe")
    assert len(seen) == 1 and seen[0].daemon and seen[0].name == "probe"
    assert seen[0] is not threading.current_thread()


async def test_a_failure_of_the_work_is_raised_to_whoever_awaits_it() -> None:
    def fail() -> None:
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        await on_daemon_thread(fail, name="probe")
