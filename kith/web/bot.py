"""What of the running bot the page uses (:class:`kith.app.lifecycle.App` has it all): named here, so the page's
modules never import the app they are started by."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from conversation.memory_commands import MemoryCommands
    from ground.config import Settings
    from ground.db import Database
    from ground.types import Channel
    from heartbeat.scheduler import HeartbeatScheduler
    from memory.service import MemoryService


class Bot(Protocol):
    settings: Settings
    db: Database
    memory: MemoryService
    memory_commands: MemoryCommands  # the person's own controls (conflicts, the listing /memory shows)
    channels: dict[str, Channel]
    scheduler: HeartbeatScheduler | None
    clock: Callable[[], datetime]
