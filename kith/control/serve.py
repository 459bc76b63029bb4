"""Start a running bot's control channels over its parts (:meth:`kith.app.lifecycle.App.running` calls this once
started): its socket, and on a shared PostgreSQL database the command rows other machines leave there."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TYPE_CHECKING

from ground.active_bot import needs_active_lock
from kith.control.endpoint import ControlRefused
from kith.control.frames import Request
from kith.control.live import LiveParts
from kith.control.operations import OPERATIONS, run_operation
from kith.control.parts import Console
from kith.control.server import ControlServer

if TYPE_CHECKING:  # the app serves this channel (App.running): it imports this module
    from kith.app.lifecycle import App
    from kith.control.remote_server import DatabaseControl

log = logging.getLogger("kith.control")


class ControlChannels:
    """The channels a running bot answers operator commands on, closed together."""

    def __init__(self, socket: ControlServer | None, rows: DatabaseControl | None, one_writer: asyncio.Lock) -> None:
        self.socket = socket
        self.rows = rows
        self.one_writer = one_writer  # what every writing command waits for, whichever way it came (the page too)

    async def close(self) -> None:
        if self.rows is not None:
            await self.rows.close()
        if self.socket is not None:
            await self.socket.close()


async def serve_control(app: App) -> ControlChannels:
    """The bot's control channels, listening; one that cannot start is said why, and the bot runs on."""
    parts = LiveParts(app)

    async def handle(request: Request, console: Console) -> int:
        return await run_operation(parts, request.command, request.args, console)

    def writes(request: Request) -> bool:
        op = OPERATIONS.get(request.command)
        return op is None or (op.writes and not op.heartbeat_job)

    one_writer = asyncio.Lock()  # a command from the socket and one from the database never write side by side
    server: ControlServer | None = None
    try:
        server = ControlServer(app.settings.storage.data_path(), handle, writes=writes, one_writer=one_writer)
        await server.start()
    except (OSError, ValueError, ControlRefused) as exc:
        log.error("control channel failed to start error=%s", type(exc).__name__)
        print(f"kith: operator commands cannot reach this bot ({exc}); they wait for it and then give up",
              file=sys.stderr)
        server = None
    rows: DatabaseControl | None = None
    url = app.settings.storage.resolved_database_url()
    if needs_active_lock(url):  # this bot is the active one on a database other machines share
        from kith.control.remote_server import DatabaseControl

        rows = DatabaseControl(app.db, url, handle, writes, one_writer)
        try:
            await rows.start()
        except Exception as exc:
            log.error("control rows failed to start error=%s", type(exc).__name__)
            print(f"kith: operator commands from other machines cannot reach this bot ({type(exc).__name__})",
                  file=sys.stderr)
            rows = None
    return ControlChannels(server, rows, one_writer)
