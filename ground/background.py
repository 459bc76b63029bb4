"""Background work that must not delay a reply, and must not vanish silently either."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from ground.failures import describe, traceback_of

log = logging.getLogger("kith.background")


class BackgroundTasks:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self.failures = 0

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.failures += 1
            log.error("background task failed name=%s error=%s", task.get_name(), describe(exc),
                      exc_info=traceback_of(exc))

    async def drain(self, timeout: float | None = None) -> None:
        """Wait for every task spawned so far (and those they spawn)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
            if timeout is not None:
                break

    async def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def on_daemon_thread(work: Callable[[], None], *, name: str) -> asyncio.Future[None]:
    """``work`` on a thread of its own, as a future: a daemon thread, so a stop (Ctrl-C while kith starts, say) never
    waits for it, as it would for the default executor's threads."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if not done.done():
            done.set_exception(error) if error is not None else done.set_result(None)

    def run() -> None:
        error: BaseException | None = None
        try:
            work()
        except BaseException as exc:  # handed to the awaiting coroutine
            error = exc
        try:
            loop.call_soon_threadsafe(settle, error)
        except RuntimeError:
            pass  # the loop closed meanwhile: nobody waits any more

    threading.Thread(target=run, name=name, daemon=True).start()
    return done
