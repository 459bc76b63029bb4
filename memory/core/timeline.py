"""Each chat's memories in the order they were said: who was said next to whom.

A :class:`ChatTimelines` keeps, for every chat (platform and chat id) a person's memories came
from, their ids sorted by when each was said there (a memory's sources: a memory said in two
chats sits in both). Recall asks it for a memory's neighbours: the memories said right before and
after it in the same chat, no further apart in time than a gap (a long pause ends an exchange).
Inserting and removing cost a binary search and a list shift; asking costs a binary search.
"""

from __future__ import annotations

import bisect
from datetime import timedelta

from memory.core.records import MemoryRecord

ChatKey = tuple[str, str]  # (platform, chat id)
Entry = tuple[float, str]  # (said at, as a POSIX timestamp; memory id)


def _entries(record: MemoryRecord) -> list[tuple[ChatKey, Entry]]:
    return [((s.platform, s.chat_id), (s.timestamp.timestamp(), record.id)) for s in record.sources]


class ChatTimelines:
    """One person's memories by chat, in said-at order; kept in step by the store's ``PersonIndex``."""

    def __init__(self) -> None:
        self._chats: dict[ChatKey, list[Entry]] = {}
        self._placed: dict[str, list[tuple[ChatKey, Entry]]] = {}  # memory id -> where it sits

    def __len__(self) -> int:
        return len(self._placed)

    def put(self, record: MemoryRecord) -> None:
        self.drop(record.id)
        placed = list(dict.fromkeys(_entries(record)))
        for chat, entry in placed:
            bisect.insort(self._chats.setdefault(chat, []), entry)
        if placed:
            self._placed[record.id] = placed

    def drop(self, memory_id: str) -> None:
        for chat, entry in self._placed.pop(memory_id, ()):
            line = self._chats[chat]
            at = bisect.bisect_left(line, entry)
            if at < len(line) and line[at] == entry:
                del line[at]
            if not line:
                del self._chats[chat]

    def neighbours(self, memory_id: str, width: int, gap: timedelta) -> dict[str, int]:
        """The memories said within ``width`` places before or after ``memory_id`` in each chat it was said
        in, each at most ``gap`` from the one before it (so a pause ends the run): id -> how many places away
        (the fewest, where it is near in more than one chat)."""
        out: dict[str, int] = {}
        limit = gap.total_seconds()
        for chat, entry in self._placed.get(memory_id, ()):
            line = self._chats[chat]
            at = bisect.bisect_left(line, entry)
            for step in (-1, 1):
                last = entry[0]
                i = at + step
                taken = 0
                while 0 <= i < len(line) and taken < width:
                    said, other = line[i]
                    if abs(said - last) > limit:
                        break
                    if other != memory_id:
                        taken += 1
                        out[other] = min(taken, out.get(other, taken))
                    last = said
                    i += step
        return out
