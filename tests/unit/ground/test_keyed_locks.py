"""ground.keyed_locks: one lock per key, kept only while someone holds or waits for it."""

from __future__ import annotations

import asyncio

from ground.keyed_locks import KeyedLocks


async def test_one_holder_per_key_at_a_time_and_other_keys_go_on() -> None:
    locks = KeyedLocks()
    order: list[str] = []
    first_in = asyncio.Event()
    let_go = asyncio.Event()

    async def first() -> None:
        async with locks.hold(["ana"]):
            order.append("first in")
            first_in.set()
            await let_go.wait()
            order.append("first out")

    async def second() -> None:
        async with locks.hold(["ana"]):
            order.append("second in")

    async def other() -> None:
        async with locks.hold(["bob"]):
            order.append("bob in")

    one = asyncio.create_task(first())
    await first_in.wait()
    two = asyncio.create_task(second())
    await other()  # another key does not wait
    let_go.set()
    await asyncio.gather(one, two)

    assert order == ["first in", "bob in", "first out", "second in"]


async def test_busy_while_held_or_awaited_and_nothing_kept_after() -> None:
    locks = KeyedLocks()
    assert not locks.busy("ana")
    holding = asyncio.Event()
    let_go = asyncio.Event()

    busy_when_let_go: list[bool] = []

    async def holder() -> None:
        async with locks.hold(["ana"]):
            holding.set()
            await let_go.wait()
        # Let go, but the waiter has not run yet: still busy, so a newcomer knows it would wait behind it.
        busy_when_let_go.append(locks.busy("ana"))

    async def waiter() -> None:
        async with locks.hold(["ana"]):
            pass

    held = asyncio.create_task(holder())
    await holding.wait()
    assert locks.busy("ana") and not locks.busy("bob")
    waiting = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    let_go.set()
    await asyncio.gather(held, waiting)

    assert busy_when_let_go == [True]

    assert not locks.busy("ana")
    assert locks._locks == {}  # no lock kept for a key nobody needs: the dict does not grow with every person


async def test_a_waiter_cancelled_leaves_nothing_behind() -> None:
    locks = KeyedLocks()
    let_go = asyncio.Event()

    async def holder() -> None:
        async with locks.hold(["ana"]):
            await let_go.wait()

    async def waiter() -> None:
        async with locks.hold(["ana"]):
            pass

    held = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiting = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    assert locks._locks["ana"][1] == 2  # the waiter is queued behind the holder: it is a waiter that is cancelled
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    let_go.set()
    await held

    assert not locks.busy("ana") and locks._locks == {}


async def test_holders_of_the_same_keys_named_in_opposite_orders_both_finish() -> None:
    """Keys are taken in one order whatever order they are named in: two holders woken at once, each naming
    the other's first key first, cannot each hold what the other waits for."""
    locks = KeyedLocks()
    let_go = asyncio.Event()
    inside: list[str] = []

    async def hold_until_let_go(key: str) -> None:
        async with locks.hold([key]):
            await let_go.wait()

    async def hold(keys: list[str], name: str) -> None:
        async with locks.hold(keys):
            inside.append(name)

    first_holders = [asyncio.create_task(hold_until_let_go(key)) for key in ("ana", "bob")]
    await asyncio.sleep(0)
    both = asyncio.gather(hold(["ana", "bob"], "one"), hold(["bob", "ana"], "two"))
    await asyncio.sleep(0)
    let_go.set()
    await asyncio.wait_for(asyncio.gather(both, *first_holders), 5)

    assert sorted(inside) == ["one", "two"] and locks._locks == {}


async def test_a_holder_of_several_keys_cancelled_while_it_waits_lets_go_of_the_ones_it_took() -> None:
    locks = KeyedLocks()
    let_go = asyncio.Event()

    async def holder() -> None:
        async with locks.hold(["bob"]):
            await let_go.wait()

    async def both() -> None:
        async with locks.hold(["ana", "bob"]):
            pass

    held = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiting = asyncio.create_task(both())
    await asyncio.sleep(0)
    assert locks.busy("ana") and locks._locks["bob"][1] == 2  # it took ana and waits for bob
    ana_lock = locks._locks["ana"][0]
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)

    assert not locks.busy("ana") and not ana_lock.locked()  # let go at once, while bob is still held
    async with locks.hold(["ana"]):
        pass
    let_go.set()
    await held
    assert locks._locks == {}
