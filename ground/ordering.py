"""Work queued under one key runs one piece at a time, in the order queued; other keys never wait.

The channels order each chat's events this way, and the debouncer each sender's turns: a person's
messages are answered in the order sent, while other chats and people go on alongside.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from functools import partial
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class OrderedLanes(Generic[K]):
    def __init__(self) -> None:
        self._tails: dict[K, asyncio.Task[None]] = {}  # the newest work of each key still running
        self._tasks: set[asyncio.Task[Any]] = set()

    def after(self, key: K, work: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Run ``work`` once everything queued before it under ``key`` has ended, however that ended.

        ``work`` handles its own errors: one that escapes ends its task, and the next work still runs.
        """
        task = self.spawn(_after(self._tails.get(key), work))
        self._tails[key] = task
        task.add_done_callback(partial(self._untail, key))
        return task

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A task outside any key's order that ``running`` still counts (a timer, an acknowledgement)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def running(self) -> set[asyncio.Task[Any]]:
        return set(self._tasks)

    async def drain(self) -> None:
        """Wait until every task has ended, including those spawned meanwhile."""
        while self._tasks:
            await asyncio.gather(*self.running, return_exceptions=True)

    def _untail(self, key: K, task: asyncio.Task[None]) -> None:
        if self._tails.get(key) is task:
            del self._tails[key]


async def _after(previous: asyncio.Task[None] | None, work: Callable[[], Awaitable[None]]) -> None:
    if previous is not None and not previous.done():
        await asyncio.wait({previous})  # its outcome is its own; only its end matters here
    await work()
