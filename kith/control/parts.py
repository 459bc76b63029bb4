"""What an operator command's body works with: the open parts of its host, and its output streams.

The same body runs in a running bot (:class:`kith.control.live.LiveParts`, the bot's own database,
memory store and heartbeat) and in a command holding the data directory's lock with no bot running
(:class:`kith.control.local.LocalParts`, parts it opens on demand and closes after).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the client's path imports none of these
    from ground.checks import CheckResult
    from ground.config import Settings
    from ground.db import Database
    from ground.person_data import PersonData
    from heartbeat.service import Heartbeat
    from memory.service import MemoryService


class Stream(Protocol):
    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


@dataclass
class Console:
    """Where a body writes: its standard output and error, and structured data for the client."""

    out: Stream
    err: Stream
    send_data: Callable[[Any], None] = lambda _value: None


class Parts(Protocol):
    settings: Settings
    db: Database
    live: bool  # a running bot: what a command changes it sees at once, and its outbox goes out now

    def clock(self) -> datetime: ...

    async def memory(self, *, embedder: bool = False) -> MemoryService:
        """The memory service; ``embedder``: with its vectors (search), else lexical is enough."""
        ...

    async def heartbeat(self) -> Heartbeat: ...

    async def person_data(self) -> tuple[PersonData, ...]:
        """Everything kept about a person (:func:`kith.app.person_data.gathered`): what a link moves, what an
        export holds."""
        ...

    def changed(self, person: str, conversations: tuple[str, ...] = ()) -> None:
        """``person``'s memories changed outside the conversation: forget what was cached of them, and of
        ``conversations`` whose history a forget rewrote (so the next reply reads the redacted rows)."""
        ...

    async def store_checks(self) -> list[CheckResult]:
        """doctor's database, Chroma and embedder checks, on this host's own stores."""
        ...
