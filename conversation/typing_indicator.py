"""The typing indicator shown while the model thinks.

Platforms show "typing…" for a few seconds per request, so it is refreshed until the reply is
ready. It is cosmetic: a failing or hanging indicator must never delay or break the reply, so
every error stays in here and each request is bounded by the refresh interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Protocol

log = logging.getLogger("kith.typing")


class TypingChannel(Protocol):
    name: str

    async def typing(self, chat_id: str, thread_id: str | None) -> None: ...


class TypingIndicator:
    """``async with TypingIndicator(channel, chat_id, thread_id, refresh_s=...):`` around the model call."""

    def __init__(self, channel: TypingChannel, chat_id: str, thread_id: str | None = None, *,
                 refresh_s: float, delay_s: float = 0.0,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.channel = channel
        self.chat_id = chat_id
        self.thread_id = thread_id
        self.refresh_s = refresh_s
        # A reply ready within delay_s needs no indicator: that saves a platform request per fast reply.
        self.delay_s = delay_s
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._stopped = False
        self.sent = 0  # indicators the platform accepted
        self.failures = 0

    async def __aenter__(self) -> TypingIndicator:
        if self.delay_s > 0:
            # A timer rather than a sleeping task: most replies are ready before it fires.
            self._timer = asyncio.get_running_loop().call_later(self.delay_s, self._begin)
            return self
        self._begin()
        # Let the first indicator go out before the caller starts its (long) work.
        await asyncio.sleep(0)
        return self

    def _begin(self) -> None:
        self._timer = None
        if not self._stopped:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name=f"typing:{self.channel.name}")

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        # asyncio.wait never raises the task's own outcome; a cancel of the caller still propagates from here.
        await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved so asyncio does not report it; _loop already logged it

    async def _loop(self) -> None:
        while not self._stopped:
            try:
                async with asyncio.timeout(self.refresh_s):
                    await self.channel.typing(self.chat_id, self.thread_id)
                self.sent += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.failures += 1
                log.debug("typing indicator failed platform=%s chat=%s error=%s", self.channel.name,
                          self.chat_id, type(exc).__name__)
            if self._stopped:
                return
            await self._sleep(self.refresh_s)
