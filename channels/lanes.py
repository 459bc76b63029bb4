"""Per-chat ordering of handler work inside a channel: one chat's events run in arrival order,
other chats never wait for it, and stop() gives running work a grace period."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any


class HandlerLanes:
    def __init__(self, platform: str, log: logging.Logger) -> None:
        self.platform = platform
        self.log = log
        self._lanes: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def enqueue(self, lane: str, work: Callable[[], Awaitable[None]], event: object) -> None:
        """Run ``work`` after everything already queued for the same chat; other chats do not wait."""
        previous = self._lanes.get(lane)
        task = self.spawn(self._run(previous, work, event))
        self._lanes[lane] = task
        task.add_done_callback(partial(self._done, lane))

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """A task that stop() waits for (e.g. acknowledging a button), outside any lane."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self, grace_s: float) -> None:
        """Let running work finish for up to ``grace_s``, then cancel the rest."""
        if not self._tasks:
            return
        _done, pending = await asyncio.wait(set(self._tasks), timeout=grace_s)
        for task in pending:
            task.cancel()
        if pending:
            self.log.warning("%s stop cancelled handlers count=%d", self.platform, len(pending))
            await asyncio.gather(*pending, return_exceptions=True)

    async def _run(self, previous: asyncio.Task[None] | None, work: Callable[[], Awaitable[None]],
                   event: object) -> None:
        if previous is not None and not previous.done():
            await asyncio.wait([previous])  # its outcome is its own; only its end matters here
        started = time.monotonic()
        try:
            await work()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.log.error("%s handler failed event=%s error=%s", self.platform, event, type(exc).__name__)
            return
        self.log.debug("%s handled event=%s ms=%.0f", self.platform, event, (time.monotonic() - started) * 1000)

    def _done(self, lane: str, task: asyncio.Task[None]) -> None:
        if self._lanes.get(lane) is task:
            del self._lanes[lane]
