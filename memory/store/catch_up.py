"""One store's side of the change log (:mod:`memory.store.changes`): it logs what it wrote, and applies what others did.

Other processes (``bot.py memory forget``, ``bot.py people link``, the heartbeat) write to the same
Chroma. Every write of this store, once it reached Chroma, is logged as ``(person, memory id)``
(a staged note's id behind ``note:``). Before an answer from memory, :meth:`CatchUp.with_others`
reads what other writers logged since its cursor and re-reads just those memories from Chroma
into the people's indexes; a note entry drops the person's staged list. A log that cannot say
everything this store missed (trimmed past its cursor, or more than it may re-read) makes it
drop every index: they are built from Chroma afresh. When nobody appended since the last read,
catching up costs no query at all.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Hashable, Iterable, Sequence
from datetime import UTC, datetime

from ground.tunables import CHANGE_CATCHUP_MAX
from memory.core.records import from_metadata
from memory.store.changes import Change, ChangeLog
from memory.store.chroma import ChromaCollections, space_of
from memory.store.person_index import PersonIndexes

log = logging.getLogger("kith.memory.catch_up")

NOTE_CHANGE_PREFIX = "note:"  # change-log entries about a staged note rather than a memory


class CatchUp:
    """Logs this store's writes and applies other processes' to the indexes; does nothing without a log."""

    def __init__(self, changes: ChangeLog | None, indexes: PersonIndexes, chroma: ChromaCollections) -> None:
        self.changes = changes
        self.indexes = indexes
        self.chroma = chroma
        self._writer = secrets.token_hex(8)  # this store's entries in the change log
        self._cursor = 0  # the change log read so far (set to its head by ``start``)
        self._applied: set[int] = set()  # other writers' entries applied within the log's overlap
        self._lock = asyncio.Lock()
        self._caught_up_at: Hashable | None = None  # the change log's version at the last catch-up

    async def start(self) -> None:
        """Begin at the log's head: call it before any index is built, so those builds read whatever was
        logged until now."""
        if self.changes is not None:
            self._cursor = await self.changes.prepare()

    # --- this store's writes ----------------------------------------------------------------------
    async def log(self, entries: Iterable[tuple[str, str]]) -> None:
        """Tell other processes which (person, memory) pairs this store just changed in Chroma."""
        if self.changes is not None:
            await self.changes.append(self._writer, list(entries), datetime.now(UTC))

    async def log_notes(self, entries: Iterable[tuple[str, str]]) -> None:
        """Note writes go in the change log too, so other processes drop their copies of those notes."""
        entries = list(entries)
        self.indexes.notes_touched({person for person, _id in entries})
        await self.log((person, NOTE_CHANGE_PREFIX + note_id) for person, note_id in entries)

    # --- other processes' writes ------------------------------------------------------------------
    def current(self) -> bool:
        """Whether nothing was logged since the last catch-up (so the indexes hold what every process wrote), as
        far as is known without a read."""
        if self.changes is None:
            return False
        version = self.changes.version()
        return version is not None and version == self._caught_up_at

    async def with_others(self) -> None:
        """Apply what other processes logged since the last call: re-read those memories from Chroma."""
        if self.changes is None:
            return
        version = self.changes.version()
        if version is not None and version == self._caught_up_at:
            return  # nobody appended to the log since the last read: nothing to catch up with
        if self._lock.locked():
            # One read serves callers that overlap (a recall's pinned part and its search): a change
            # committed while that read is under way is as concurrent as it gets; the next recall has it.
            # Should that read fail, the waiters go on uncaught-up this once, like the reader itself.
            async with self._lock:
                return
        async with self._lock:
            found = await self.changes.since(self._cursor, self._writer, CHANGE_CATCHUP_MAX)
            if not found.complete:
                log.info(
                    "memory change log out of reach cursor=%d head=%d; indexes rebuilt from chroma",
                    self._cursor,
                    found.head,
                )
                self.indexes.drop_all()
                self._applied.clear()
            else:
                fresh = [c for c in found.changes if c.seq not in self._applied]
                if fresh:
                    await self._apply(fresh)
                    self._applied.update(c.seq for c in fresh)
            self._cursor = max(self._cursor, found.head)
            self._caught_up_at = found.version
            horizon = self._cursor - self.changes.overlap
            self._applied = {seq for seq in self._applied if seq > horizon}

    async def _apply(self, changes: Sequence[Change]) -> None:
        # Only memories some index holds need re-reading: an index built later reads Chroma anyway.
        # A move is logged under both people, so the new owner's index learns it too.
        notes = [c for c in changes if c.memory_id.startswith(NOTE_CHANGE_PREFIX)]
        self.indexes.notes_touched({c.person for c in notes})
        changes = [c for c in changes if not c.memory_id.startswith(NOTE_CHANGE_PREFIX)]
        wanted = [c.memory_id for c in changes if self.indexes.holds(c.person)]
        rows = await self.chroma.run(self.chroma.records_sync, wanted) if wanted else []
        # At once after the read, like a write of this store after its Chroma call.
        for change in changes:
            self.indexes.touched(None, person=change.person, dropped=change.memory_id)
        for md, vector in rows:
            self.indexes.touched(from_metadata(md), space_of(md), vector=vector)
        log.info("memory changes from other processes applied changes=%d reread=%d", len(changes), len(rows))
