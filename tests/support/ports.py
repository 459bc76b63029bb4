"""Local ports for the loopback servers tests start."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A local port nothing listens on right now: for a server to start on, or for an address that is down."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
