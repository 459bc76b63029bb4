"""One chat's work runs in the order it came, however long each piece takes; other chats never wait."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from ground.ordering import OrderedLanes


def step(done: list[str], name: str, gate: asyncio.Event | None = None) -> Callable[[], Awaitable[None]]:
    async def work() -> None:
        if gate is not None:
            await gate.wait()
        done.append(name)
    return work


async def test_a_slow_first_message_is_still_handled_first() -> None:
    lanes: OrderedLanes[str] = OrderedLanes()
    done: list[str] = []
    slow = asyncio.Event()
    lanes.after("chat", step(done, "first", slow))
    lanes.after("chat", step(done, "second"))
    lanes.after("chat", step(done, "third"))
    await asyncio.sleep(0.01)
    assert done == []  # the later two wait for the first, though they could run at once
    slow.set()
    await lanes.drain()
    assert done == ["first", "second", "third"]


async def test_another_chat_does_not_wait_for_a_stuck_one() -> None:
    lanes: OrderedLanes[str] = OrderedLanes()
    done: list[str] = []
    stuck = asyncio.Event()
    lanes.after("chat a", step(done, "a", stuck))
    await lanes.after("chat b", step(done, "b"))
    assert done == ["b"]
    stuck.set()
    await lanes.drain()
    assert done == ["b", "a"]


async def test_a_failure_does_not_stop_what_was_queued_after_it() -> None:
    lanes: OrderedLanes[str] = OrderedLanes()
    done: list[str] = []

    async def fails() -> None:
        raise RuntimeError("handler bug")

    failed = lanes.after("chat", fails)
    lanes.after("chat", step(done, "next"))
    await lanes.drain()
    assert done == ["next"]
    with pytest.raises(RuntimeError, match="handler bug"):
        failed.result()


async def test_drain_waits_for_work_queued_while_draining() -> None:
    lanes: OrderedLanes[str] = OrderedLanes()
    done: list[str] = []

    async def queues_more() -> None:
        done.append("first")
        lanes.after("chat", step(done, "queued meanwhile"))

    lanes.after("chat", queues_more)
    await lanes.drain()
    assert done == ["first", "queued meanwhile"]
    assert not lanes.running

