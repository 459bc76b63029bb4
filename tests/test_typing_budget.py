"""Typing indicators give way to replies: past a platform's budget one is skipped, never queued."""

from __future__ import annotations

import asyncio

from delivery.typing import TypingBudget, TypingIndicator
from tests.support.delivery import SteppedSleep


class SlowPlatform:
    """Takes typing requests and answers them only when the test says so (or fails them, when told)."""

    name = "slow"

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.answer = asyncio.Event()
        self.fail = False

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        self.requests.append(chat_id)
        await self.answer.wait()
        if self.fail:
            raise ConnectionError("platform refused")


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_an_indicator_past_the_budget_is_skipped_then_sent_once_there_is_room() -> None:
    platform, budget = SlowPlatform(), TypingBudget(1)
    sleep_a, sleep_b = SteppedSleep(), SteppedSleep()
    async with TypingIndicator(platform, "chat a", refresh_s=4.0, budget=budget, sleep=sleep_a):
        async with TypingIndicator(platform, "chat b", refresh_s=4.0, budget=budget, skip_retry_s=0.5,
                                   sleep=sleep_b) as b:
            await settle()
            # chat a's request is still on its way: chat b's is not queued behind it
            assert platform.requests == ["chat a"]
            assert b.skipped == 1 and sleep_b.waits == [0.5]
            platform.answer.set()
            await settle()
            assert sleep_a.waits == [4.0]  # chat a's was answered: its slot is free again
            await sleep_b.end_one()
            assert platform.requests == ["chat a", "chat b"] and b.sent == 1
    assert budget.in_flight == 0


async def test_failed_and_abandoned_indicators_give_their_place_back() -> None:
    platform, budget = SlowPlatform(), TypingBudget(1)
    async with TypingIndicator(platform, "chat a", refresh_s=4.0, budget=budget, sleep=SteppedSleep()):
        await settle()
    # the reply was ready while the platform still held the request: abandoned, and its place freed
    assert platform.requests == ["chat a"] and budget.in_flight == 0

    platform.fail = True
    platform.answer.set()
    sleep = SteppedSleep()
    async with TypingIndicator(platform, "chat b", refresh_s=4.0, budget=budget, sleep=sleep) as b:
        await settle()
        await sleep.end_one()
        assert b.failures == 2 and b.skipped == 0  # each failure gave its place back for the next try
    assert platform.requests == ["chat a", "chat b", "chat b"] and budget.in_flight == 0


async def test_without_pressure_every_chat_gets_its_indicator() -> None:
    platform, budget = SlowPlatform(), TypingBudget(4)
    platform.answer.set()
    indicators = [TypingIndicator(platform, f"chat {i}", refresh_s=4.0, budget=budget, sleep=SteppedSleep())
                  for i in range(4)]
    for indicator in indicators:
        await indicator.__aenter__()
    await settle()
    for indicator in indicators:
        await indicator.__aexit__(None, None, None)
    assert sorted(platform.requests) == [f"chat {i}" for i in range(4)]
    assert all(i.sent == 1 and i.skipped == 0 for i in indicators)
