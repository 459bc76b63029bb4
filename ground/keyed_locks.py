"""One asyncio lock per key (a memory id, a person), made on first use and dropped when nobody needs it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager


class KeyedLocks:
    """One asyncio lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}  # key -> its lock, and how many hold or wait for it

    def busy(self, key: str) -> bool:
        """Whether anyone holds ``key``'s lock or waits for it: one more :meth:`hold` would wait. Not the lock's
        ``locked()``: a lock just let go still has its queued waiter to wake, and a newcomer waits behind it."""
        return key in self._locks

    @asynccontextmanager
    async def hold(self, keys: Iterable[str]) -> AsyncIterator[None]:
        ordered = sorted(set(keys))  # one global order: no deadlock between multi-key holders
        registered: list[str] = []
        acquired: list[asyncio.Lock] = []
        try:
            for key in ordered:
                lock, users = self._locks.get(key, (asyncio.Lock(), 0))
                self._locks[key] = (lock, users + 1)
                registered.append(key)
                await lock.acquire()
                acquired.append(lock)
            yield
        finally:
            for lock in reversed(acquired):
                lock.release()
            for key in registered:
                lock, users = self._locks[key]
                if users <= 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)
