"""Waiting in a test for something another task or process does, with a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(condition: Callable[[], bool], timeout: float, *, what: str = "the condition",
                every: float = 0.05) -> None:
    """Return once ``condition()`` holds, checking every ``every`` seconds; fail the test after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(every)
