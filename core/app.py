"""Wiring: build the parts of a running kith from settings. No decisions live here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from core.background import BackgroundTasks
from core.config import Settings
from core.conversation import ConversationCore
from core.db import Database
from core.router import Router
from core.types import Channel, utcnow
from persona.llm import LLMClient, import_litellm

log = logging.getLogger("kith.app")


@dataclass
class App:
    settings: Settings
    db: Database
    llm: LLMClient
    core: ConversationCore
    background: BackgroundTasks
    channels: dict[str, Channel] = field(default_factory=dict)
    router: Router | None = None

    async def start_channels(self, channels: list[Channel]) -> list[str]:
        """Start every channel; one failing to start does not stop the others. Returns the started names."""
        self.channels = {c.name: c for c in channels}
        self.router = Router(self.core, self.channels)
        started = []
        for channel in channels:
            try:
                await channel.start(self.router.on_message)
                started.append(channel.name)
            except Exception as exc:
                log.error("channel failed to start name=%s error=%s", channel.name, type(exc).__name__)
        return started

    async def close(self) -> None:
        for channel in self.channels.values():
            try:
                await channel.stop()
            except Exception as exc:
                log.warning("channel stop failed name=%s error=%s", channel.name, type(exc).__name__)
        await self.background.drain(timeout=5)
        await self.background.cancel_all()
        self.db.close()


def open_database(settings: Settings) -> Database:
    settings.storage.data_path().mkdir(parents=True, exist_ok=True)
    db = Database(settings.storage.resolved_database_url())
    db.create_all()
    return db


async def build_app(settings: Settings, *, clock: Callable[[], datetime] = utcnow,
                    warm_llm: bool = True) -> App:
    db = open_database(settings)
    llm = LLMClient(settings.llm)
    background = BackgroundTasks()
    if warm_llm:
        # litellm takes seconds to import: do it off the event loop while channels connect.
        background.spawn(asyncio.to_thread(import_litellm), name="import-litellm")
    core = ConversationCore(settings=settings, db=db, llm=llm, clock=clock, background=background)
    return App(settings=settings, db=db, llm=llm, core=core, background=background)
