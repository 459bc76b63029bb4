"""Operator commands as rows of a shared database: how a command reaches the active bot from another machine.

A command's process on any machine with the database's URL writes a ``control_requests`` row and notifies the
channel :data:`REQUESTS_CHANNEL`; the active bot takes it (``waiting`` → ``running``), runs it as it runs a command
from its socket, and writes its output as ``control_frames`` rows (the same frames as the socket's,
:mod:`kith.control.frames`), notifying :data:`FRAMES_CHANNEL` with the request's id. The client relays them and
deletes the rows once it has the exit code; the bot deletes answered rows no client collected after
:data:`~ground.tunables.CONTROL_REMOTE_KEEP_S`. The client side reads and writes these tables in plain SQL
(:mod:`kith.control.remote_client`), so the names here are its contract too.
"""

from __future__ import annotations

import sqlalchemy as sa

from ground.db import UtcDateTime, metadata

REQUESTS_CHANNEL = "kith_control"
FRAMES_CHANNEL = "kith_control_frames"

WAITING, RUNNING, DONE = "waiting", "running", "done"

control_requests = sa.Table(
    "control_requests",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("command", sa.String(100), nullable=False),
    sa.Column("args", sa.Text, nullable=False),  # JSON: the parsed arguments, as the socket's request carries them
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("done_at", UtcDateTime, nullable=True),
)

control_frames = sa.Table(
    "control_frames",
    metadata,
    sa.Column("request_id", sa.Integer, primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("frame", sa.Text, nullable=False),  # JSON: {"out": …}, {"err": …}, {"data": …} or {"exit": code}
)

__all__ = ["DONE", "FRAMES_CHANNEL", "REQUESTS_CHANNEL", "RUNNING", "WAITING", "control_frames", "control_requests"]
