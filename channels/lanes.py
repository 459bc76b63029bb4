"""Per-chat ordering of handler work inside a channel: one chat's events run in arrival order,
other chats never wait for it, and stop() gives running work a grace period."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any

from ground.ordering import OrderedLanes


class HandlerLanes:
    def __init__(self, platform: str, log: logging.Logger) -> None:
        self.platform = platform
        self.log = log
        self._ordered: OrderedLanes[str] = OrderedLanes()

    def enqueue(self, lane: str, work: Callable[[], Awaitable[None]], event: object) -> None:
        """Run ``work`` after everything already queued for the same chat; other chats do not wait."""
        self._ordered.after(lane, partial(self._run, work, event))

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """A task that stop() waits for (e.g. acknowledging a button), outside any lane."""
        return self._ordered.spawn(coro)

    async def stop(self, grace_s: float) -> None:
        """Let running work finish for up to ``grace_s``, then cancel the rest."""
        running = self._ordered.running
        if not running:
            return
        _done, pending = await asyncio.wait(running, timeout=grace_s)
        for task in pending:
            task.cancel()
        if pending:
            self.log.warning("%s stop cancelled handlers count=%d", self.platform, len(pending))
            await asyncio.gather(*pending, return_exceptions=True)

    async def _run(self, work: Callable[[], Awaitable[None]], event: object) -> None:
        started = time.monotonic()
        try:
            await work()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.log.error("%s handler failed event=%s error=%s", self.platform, event, type(exc).__name__)
            return
        self.log.debug("%s handled event=%s ms=%.0f", self.platform, event, (time.monotonic() - started) * 1000)
