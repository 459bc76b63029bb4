"""The event loop every kith command runs on: uvloop where it is installed, asyncio's own otherwise.

uvloop (libuv under asyncio's API) takes a fifth off the per-message time inside kith and
raises litellm's calls per second by a third on these machines (``bench.core_overhead``,
``bench.telegram_e2e``). Platforms without a uvloop wheel (Windows) keep asyncio's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor, or ``None`` (asyncio's default) where uvloop is not installed."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the best loop available."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
