"""The typing indicator shown while the model thinks.

Platforms show "typing…" for a few seconds per request, so it is refreshed until the reply is
ready. It is cosmetic: a failing or hanging indicator must never delay or break the reply, so
every error stays in here and each request is bounded by the refresh interval. Nor may
indicators crowd out replies when kith is busy: past a platform's ``TypingBudget`` one is
skipped, not queued.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Protocol

from core.tunables import TYPING_SKIP_RETRY_S

log = logging.getLogger("kith.typing")


class TypingChannel(Protocol):
    name: str

    async def typing(self, chat_id: str, thread_id: str | None) -> None: ...


class TypingBudget:
    """How many typing requests may be on their way to one platform at once.

    When many are, the platform is slow to answer or kith is too busy to hear back. More would then
    compete with the replies for connections, CPU and the platform's flood limits, and a late one
    can land after the reply it announced, leaving "typing…" up with nothing coming. So past the
    budget an indicator is skipped and tried again a little later, never queued.
    """

    def __init__(self, max_in_flight: int) -> None:
        self.max_in_flight = max_in_flight
        self.in_flight = 0

    def take(self) -> bool:
        if self.in_flight >= self.max_in_flight:
            return False
        self.in_flight += 1
        return True

    def give_back(self) -> None:
        self.in_flight -= 1


class TypingIndicator:
    """``async with TypingIndicator(channel, chat_id, thread_id, refresh_s=...):`` around the model call."""

    def __init__(self, channel: TypingChannel, chat_id: str, thread_id: str | None = None, *,
                 refresh_s: float, delay_s: float = 0.0, budget: TypingBudget | None = None,
                 skip_retry_s: float = TYPING_SKIP_RETRY_S,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.channel = channel
        self.chat_id = chat_id
        self.thread_id = thread_id
        self.refresh_s = refresh_s
        # A reply ready within delay_s needs no indicator: that saves a platform request per fast reply.
        self.delay_s = delay_s
        self.budget = budget  # shared by every indicator on the channel's platform
        self.skip_retry_s = skip_retry_s
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._stopped = False
        self.sent = 0  # indicators the platform accepted
        self.failures = 0
        self.skipped = 0  # not sent: the platform's budget was spent

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
            if self.budget is not None and not self.budget.take():
                self.skipped += 1
                await self._sleep(min(self.skip_retry_s, self.refresh_s))
                continue
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
            finally:
                if self.budget is not None:
                    self.budget.give_back()
            if self._stopped:
                return
            await self._sleep(self.refresh_s)
