"""The forgets applied lately, and the per-person lock a forget and a capture's staging share.

Work that was under way when a forget landed must not bring the words back: a capture waiting on
its model, a reply or an export being written. :class:`RecentForgets` keeps, for as long as a shown plan
would be kept, each applied forget's eraser, so such work can check what it is about to store against the
forgets applied since it began; a capture stages its notes under the same per-person lock a forget holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ground.keyed_locks import KeyedLocks
from ground.tunables import FORGET_PLAN_TTL_S
from memory.forgetting.scrub import Eraser


@dataclass(frozen=True, slots=True)
class Applied:
    """A forget applied in this process, kept a while so work that was under way can be held to it."""

    seq: int
    person: str
    eraser: Eraser
    conversations: tuple[str, ...]
    through_id: int  # the newest history row its scan saw
    at: float  # time.monotonic()


class RecentForgets:
    """The forgets applied lately, in order, and the per-person lock a forget and a capture's staging share.

    Kept as long as a shown plan is (the words are in this process's memory no longer than a plan keeps them):
    capture, replies and exports take longer than that only when their model is already past its deadline."""

    def __init__(self, keep_s: float = FORGET_PLAN_TTL_S, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.keep_s = keep_s
        self.monotonic = monotonic
        self.locks = KeyedLocks()
        self._seq = 0
        self._applied: list[Applied] = []
        # Marks of work under way (:meth:`watching`) -> how many: a forget applied after the oldest is kept
        # until that work is done, however long its model takes.
        self._watching: dict[int, int] = {}
        self._timer: asyncio.TimerHandle | None = None

    def mark(self) -> int:
        """Where the forgets stand now; :meth:`since` with it names those applied later."""
        return self._seq

    @contextmanager
    def watching(self) -> Iterator[int]:
        """A mark for work that reads words now and stores what it made of them later: every forget applied
        after it is kept (with its words) until the work is done, however long that takes."""
        mark = self._seq
        self._watching[mark] = self._watching.get(mark, 0) + 1
        try:
            yield mark
        finally:
            left = self._watching.pop(mark) - 1
            if left:
                self._watching[mark] = left
            self._prune()

    @property
    def held(self) -> int:
        """How many applied forgets (and so their words) this process holds now."""
        return len(self._applied)

    def since(self, mark: int, person: str) -> list[Eraser]:
        """The erasers of ``person``'s forgets applied after ``mark``: what work begun at it must not keep."""
        self._prune()
        return [a.eraser for a in self._applied if a.seq > mark and a.person == person]

    def recent(self) -> list[Applied]:
        self._prune()
        return list(self._applied)

    def record(self, person: str, eraser: Eraser, conversations: tuple[str, ...], through_id: int) -> None:
        self._seq += 1
        self._applied.append(Applied(self._seq, person, eraser, conversations, through_id, self.monotonic()))
        self._prune()

    def _prune(self) -> None:
        cutoff = self.monotonic() - self.keep_s
        oldest = min(self._watching, default=None)
        self._applied = [a for a in self._applied if a.at > cutoff or self._watched(a, oldest)]
        self._schedule(oldest)

    @staticmethod
    def _watched(applied: Applied, oldest: int | None) -> bool:
        return oldest is not None and applied.seq > oldest

    def _schedule(self, oldest: int | None) -> None:
        """Let the words go when their time is up, whether or not anything asks again: held until some later
        call would otherwise keep them in this process for as long as the bot stays quiet."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due = [a.at for a in self._applied if not self._watched(a, oldest)]
        if not due:
            return  # nothing, or only what running work holds: its end prunes
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(max(0.0, min(due) + self.keep_s - self.monotonic()) + 0.001, self._prune)


__all__ = ["Applied", "RecentForgets"]
