"""Where a bot's control channel listens, and how each side checks it is the one it should talk to.

A Unix domain socket in the data directory, readable and writable by its owner only: only the user
who owns the data can command the bot. Where there is no AF_UNIX, or the socket's path is longer than
the platforms allow (about 104 bytes), the bot listens on a loopback TCP port instead and writes the
port and a random per-start token to a file only its owner can read; a request must carry the token.
"""

from __future__ import annotations

import enum
import json
import os
import secrets
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from ground.tunables import CONTROL_UNIX_PATH_MAX

SOCKET_FILE = "control.sock"
TOKEN_FILE = "control.token"


class Transport(enum.StrEnum):
    UNIX = "unix"
    TCP = "tcp"


class ControlRefused(Exception):
    """The control endpoint in the data directory is not one this user may trust or use."""


def transport_for(data_dir: Path) -> Transport:
    """The transport both sides derive alike from the data directory alone."""
    path = os.fsencode(data_dir / SOCKET_FILE)
    if hasattr(socket, "AF_UNIX") and len(path) <= CONTROL_UNIX_PATH_MAX:
        return Transport.UNIX
    return Transport.TCP


def socket_path(data_dir: Path) -> Path:
    return data_dir / SOCKET_FILE


def token_path(data_dir: Path) -> Path:
    return data_dir / TOKEN_FILE


def _mine(info: os.stat_result) -> bool:
    getuid = getattr(os, "getuid", None)
    return getuid is None or info.st_uid == getuid()


def check_socket(path: Path) -> None:
    """``ControlRefused`` unless ``path`` is a socket of this user's (never follow something planted there)."""
    info = path.lstat()  # FileNotFoundError: nothing listens
    if not stat.S_ISSOCK(info.st_mode):
        raise ControlRefused(f"{path} is not a socket; remove it")
    if not _mine(info):
        raise ControlRefused(f"{path} belongs to another user; remove it")


def clear_stale_socket(path: Path) -> None:
    """Remove a socket left by a bot that died (the caller holds the lock, so nothing listens on it)."""
    try:
        check_socket(path)
    except FileNotFoundError:
        return
    path.unlink()


@dataclass(frozen=True, slots=True)
class TcpTicket:
    port: int
    token: str


def new_token() -> str:
    return secrets.token_urlsafe(32)


def write_ticket(path: Path, ticket: TcpTicket) -> None:
    """The port and token, in a file only this user can read, replacing the last bot's."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"port": ticket.port, "token": ticket.token, "pid": os.getpid()}, f)


def read_ticket(path: Path) -> TcpTicket:
    """The running bot's port and token; FileNotFoundError when no bot listens."""
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode) or not _mine(info) or info.st_mode & 0o077:
        raise ControlRefused(f"{path} is not a private file of this user's; remove it")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return TcpTicket(int(data["port"]), str(data["token"]))
    except (ValueError, KeyError, TypeError):
        raise FileNotFoundError(path) from None  # half written by a bot starting now: not listening yet
