"""One rate gate per chat, shared by everything that writes to it: a reply's previews, their edits, its final send.

A platform's "wait N seconds" (HTTP 429 ``retry_after``) is about the chat (and the bot), not about the request
that got it: a preview that keeps editing through it earns a longer ban and delays the real reply. So every 429 a
chat gets is noted here, whoever got it, and everyone asks here before writing to that chat. A preview also keeps
its own pace (``min_gap_s`` between two of its writes), so that it spends no more of the chat's budget than a
person can read. In memory only: a restart forgets it, and the outbox keeps the platform's word for its replies.
"""

from __future__ import annotations

import time
from collections.abc import Callable

ChatKey = tuple[str, str]  # (platform, chat id)


class RateGate:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._closed_until: dict[ChatKey, float] = {}

    def wait_s(self, platform: str, chat_id: str) -> float:
        """How long anything must wait before writing to this chat (0: go)."""
        key = (platform, chat_id)
        until = self._closed_until.get(key)
        if until is None:
            return 0.0
        left = until - self._clock()
        if left <= 0:
            del self._closed_until[key]
            return 0.0
        return left

    def refused(self, platform: str, chat_id: str, retry_after: float) -> None:
        """The platform asked this chat's writers to wait ``retry_after`` seconds."""
        key = (platform, chat_id)
        until = self._clock() + max(0.0, retry_after)
        self._closed_until[key] = max(until, self._closed_until.get(key, 0.0))
