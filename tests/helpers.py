"""Small builders shared by tests."""

from __future__ import annotations

import asyncio
import itertools
import socket
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from ground.db import Database
from ground.types import ButtonPress, ChatKind, InboundMessage
from kith.app.schema import create_schema

_ids = itertools.count(1)

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)  # the tests' "now" unless they need the wall clock


def free_port() -> int:
    """A local port nothing listens on right now: for a server to start on, or for an address that is down."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def open_db(path: Path, *tables: sa.Table) -> Database:
    """kith's SQLite file under ``path``, with every table, or with only ``tables`` when given.

    Each call is a new engine on the same file, as another kith process would open it. The tests of
    a single store (outbox, inbound journal) create just its tables, so they show it needs no other.
    """
    db = Database(f"sqlite:///{path / 'kith.db'}")
    if not tables:
        create_schema(db)
    for table in tables:
        table.create(db.engine, checkfirst=True)
    return db


def inbound(text: str, *, platform: str = "console", chat_id: str = "ana", sender_id: str = "ana",
            sender_name: str = "Ana", chat_kind: ChatKind = ChatKind.DM, mentioned: bool = True,
            thread_id: str | None = None, message_id: str | None = None,
            timestamp: datetime | None = None) -> InboundMessage:
    return InboundMessage(platform=platform, bot_account="kith", chat_id=chat_id, chat_kind=chat_kind,
                          sender_id=sender_id, sender_name=sender_name, text=text,
                          message_id=message_id or f"m{next(_ids)}", thread_id=thread_id, mentioned=mentioned,
                          timestamp=timestamp or datetime.now(UTC))


class FakeClock:
    """A controllable clock for code that takes ``clock: Callable[[], datetime]``."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


class Inbox:
    """A channel's handlers in a test: what the core would have received, in arrival order.

    ``gate`` holds a message back until its event is set: a callable picks the event per message,
    a plain event holds every message.
    """

    def __init__(self, gate: Callable[[InboundMessage], asyncio.Event | None] | asyncio.Event | None = None) -> None:
        self.messages: list[InboundMessage] = []
        self.presses: list[ButtonPress] = []
        self.started = asyncio.Event()  # a message reached the handler (before any gate)
        self._gate = gate
        self._changed = asyncio.Event()

    async def on_message(self, message: InboundMessage) -> None:
        self.started.set()
        event = self._gate if isinstance(self._gate, asyncio.Event) else self._gate(message) if self._gate else None
        if event is not None:
            await event.wait()
        self.messages.append(message)
        self._notify()

    async def on_button(self, press: ButtonPress) -> None:
        self.presses.append(press)
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.messages]

    async def wait_for(self, n: int, timeout: float = 5.0) -> list[InboundMessage]:
        """Wait until ``n`` messages and button presses arrived in all; returns the messages."""
        async with asyncio.timeout(timeout):
            while len(self.messages) + len(self.presses) < n:
                await self._changed.wait()
        return list(self.messages)
