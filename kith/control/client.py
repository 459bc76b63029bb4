"""The operator command's side of the control channel: send one request, relay the bot's answer.

Plain blocking sockets and ``json``: the process that sends a command through a running bot loads
no event loop, no database library, no Chroma and no litellm, so a small command costs little more
than the interpreter's start.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from kith.control.endpoint import Transport, check_socket, read_ticket, socket_path, token_path
from kith.control.frames import Request, encode_request
from kith.control.parts import Console


class NoBot(Exception):
    """No bot listens on this data directory's control channel (none runs, or it is still starting)."""


class BotGone(Exception):
    """The bot closed the connection before the command's exit code came."""


def connect(data_dir: Path, transport: Transport) -> tuple[socket.socket, str | None]:
    """A connection to the running bot and the token its requests carry; ``NoBot`` if none listens."""
    try:
        if transport is Transport.UNIX:
            path = socket_path(data_dir)
            check_socket(path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(path))
            except BaseException:
                sock.close()
                raise
            return sock, None
        ticket = read_ticket(token_path(data_dir))
        return socket.create_connection(("127.0.0.1", ticket.port)), ticket.token
    except (FileNotFoundError, ConnectionRefusedError):
        raise NoBot from None


def relay(frame: dict[str, Any], console: Console) -> int | None:
    """One answer frame passed on to ``console``; the exit code when it is the last."""
    if "out" in frame:
        console.out.write(frame["out"])
    elif "err" in frame:
        console.out.flush()  # what came before it shows before it, as on one terminal
        console.err.write(frame["err"])
        console.err.flush()
    elif "data" in frame:
        console.send_data(frame["data"])
    elif "exit" in frame:
        console.out.flush()
        return int(frame["exit"])
    return None


def call(sock: socket.socket, request: Request, console: Console) -> int:
    """Send ``request``, relay its frames to ``console`` as they come, and return its exit code."""
    try:
        sock.sendall(encode_request(request))
        with sock.makefile("rb") as frames:
            for line in frames:
                code = relay(json.loads(line), console)
                if code is not None:
                    return code
    except (ConnectionError, ValueError):
        pass
    finally:
        sock.close()
    raise BotGone
