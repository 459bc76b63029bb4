"""What every loopback fake server shares: serving on 127.0.0.1 and waiting for a change."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web


class ChangeSignal:
    """Wakes every waiter once per change, so that each re-checks its condition against fresh state."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        changed, self._event = self._event, asyncio.Event()
        changed.set()

    async def wait(self, timeout: float) -> bool:
        """Wait for the next change; False when ``timeout`` passed first."""
        event = self._event
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            return False
        return True

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    await self._event.wait()
        except TimeoutError:
            raise TimeoutError(f"condition not met within {timeout} s") from None


async def serve(app: web.Application, port: int, **runner_options: Any) -> web.AppRunner:
    """Start ``app`` on 127.0.0.1:``port`` (0: any free port); the runner, already cleaned up on failure."""
    runner = web.AppRunner(app, access_log=None, **runner_options)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
