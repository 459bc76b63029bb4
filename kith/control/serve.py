"""Start a running bot's control channel over its parts (:meth:`kith.app.lifecycle.App.running` calls this once
started)."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

from kith.control.endpoint import ControlRefused
from kith.control.frames import Request
from kith.control.live import LiveParts
from kith.control.operations import OPERATIONS, run_operation
from kith.control.parts import Console
from kith.control.server import ControlServer

if TYPE_CHECKING:  # the app serves this channel (App.running): it imports this module
    from kith.app.lifecycle import App

log = logging.getLogger("kith.control")


async def serve_control(app: App) -> ControlServer | None:
    """The bot's control server, listening; None (said why) if it cannot listen, and the bot runs on."""
    parts = LiveParts(app)

    async def handle(request: Request, console: Console) -> int:
        return await run_operation(parts, request.command, request.args, console)

    def writes(request: Request) -> bool:
        op = OPERATIONS.get(request.command)
        return op is None or (op.writes and not op.heartbeat_job)

    server = ControlServer(app.settings.storage.data_path(), handle, writes=writes)
    try:
        await server.start()
    except (OSError, ValueError, ControlRefused) as exc:
        log.error("control channel failed to start error=%s", type(exc).__name__)
        print(f"kith: operator commands cannot reach this bot ({exc}); they wait for it and then give up",
              file=sys.stderr)
        return None
    return server
