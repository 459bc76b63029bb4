"""The bot's side of the control channel: one request per connection, answered as a stream of frames.

Requests that write run one at a time (they would otherwise race each other, and the writes they stand
for ran one at a time as processes too); reads run as they come. A request that is not understood gets
an error frame and exit code 2; a body that fails gets one line and exit code 1, and the bot logs the
error's type (never a traceback with a person's data in it). A client that goes away mid-command costs
nothing: the command finishes (its writes are whole) and its output is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ground.tunables import CONTROL_REQUEST_MAX_BYTES, CONTROL_STOP_GRACE_S
from kith.control.endpoint import (
    TcpTicket,
    Transport,
    clear_stale_socket,
    new_token,
    socket_path,
    token_path,
    transport_for,
    write_ticket,
)
from kith.control.frames import BadRequest, FrameStream, Request, encode, parse_request
from kith.control.parts import Console

log = logging.getLogger("kith.control")

Handler = Callable[[Request, Console], Awaitable[int]]
Writes = Callable[[Request], bool]


async def answer(request: Request, send: Callable[[dict[str, Any]], None], handler: Handler, writes: Writes,
                 one_writer: asyncio.Lock) -> int:
    """Run ``request``'s body, its output sent as frames, the last one its exit code; the code. However it came
    (this socket, or a row of the shared database: :mod:`kith.control.remote_server`), a request that writes
    waits for ``one_writer``."""
    code = 2
    try:
        console = Console(FrameStream(send, "out"), FrameStream(send, "err"), lambda v: send({"data": v}))
        if writes(request):
            async with one_writer:
                code = await handler(request, console)
        else:
            code = await handler(request, console)
    except BadRequest as exc:
        send({"err": f"kith: bad control request: {exc}\n"})
        code = 2
    except asyncio.CancelledError:
        send({"err": "kith: the bot stopped before the command finished\n"})
        code = 1
        raise
    except Exception as exc:
        log.error("control command failed command=%s error=%s", request.command, type(exc).__name__)
        send({"err": f"kith: the command failed in the bot ({type(exc).__name__}); see the bot's log\n"})
        code = 1
    finally:
        send({"exit": code})
    return code


class ControlServer:
    """Listens in ``data_dir`` while the bot runs; ``handler`` runs each request's body."""

    def __init__(self, data_dir: Path, handler: Handler, *, writes: Writes = lambda _r: True,
                 transport: Transport | None = None, one_writer: asyncio.Lock | None = None) -> None:
        self.data_dir = data_dir
        self.handler = handler
        self.writes = writes
        self.transport = transport or transport_for(data_dir)
        self._server: asyncio.AbstractServer | None = None
        self._token: str | None = None
        self.one_writer = one_writer or asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._bound: Path | None = None
        self._bound_inode: int | None = None

    async def start(self) -> None:
        """Listen; the caller holds the data directory's lock, so anything left in its place is stale."""
        if self.transport is Transport.UNIX:
            path = socket_path(self.data_dir)
            clear_stale_socket(path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            previous = os.umask(0o177)  # born owner-only: no moment at which another user could connect
            try:
                sock.bind(str(path))
            except BaseException:
                sock.close()
                raise
            finally:
                os.umask(previous)
            os.chmod(path, 0o600)
            self._bound, self._bound_inode = path, path.lstat().st_ino
            self._server = await asyncio.start_unix_server(self._connection, sock=sock,
                                                           limit=CONTROL_REQUEST_MAX_BYTES + 1)
        else:
            self._token = new_token()
            self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0,
                                                      limit=CONTROL_REQUEST_MAX_BYTES + 1)
            port = self._server.sockets[0].getsockname()[1]
            write_ticket(token_path(self.data_dir), TcpTicket(port, self._token))
            self._bound = token_path(self.data_dir)
        log.info("control channel listening transport=%s", self.transport.value)

    async def close(self) -> None:
        """Stop listening; a command still running gets ``CONTROL_STOP_GRACE_S`` and is then cancelled."""
        if self._server is not None:
            self._server.close()
        if self._bound is not None:
            with contextlib.suppress(OSError):
                if self._bound_inode is None or self._bound.lstat().st_ino == self._bound_inode:
                    self._bound.unlink()
        if self._tasks:
            _done, pending = await asyncio.wait(set(self._tasks), timeout=CONTROL_STOP_GRACE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        self._server = None

    def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(reader, writer), name="control-request")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        started = time.perf_counter()

        def send(frame: dict[str, Any]) -> None:
            if not writer.is_closing():
                writer.write(encode(frame))

        command = "-"
        code = 2
        try:
            try:
                request = await self._read(reader)
                command = request.command
                code = await answer(request, send, self.handler, self.writes, self.one_writer)
            except BadRequest as exc:
                send({"err": f"kith: bad control request: {exc}\n"})
                code = 2
                send({"exit": code})
            finally:
                with contextlib.suppress(ConnectionError, OSError):
                    await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()
            log.info("control command command=%s exit=%d ms=%.1f", command, code,
                     (time.perf_counter() - started) * 1000)

    async def _read(self, reader: asyncio.StreamReader) -> Request:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError:
            raise BadRequest("the request is too long") from None
        except asyncio.IncompleteReadError:
            raise BadRequest("the connection closed before the request ended") from None
        request = parse_request(line)
        if self._token is not None and not hmac.compare_digest((request.token or "").encode(), self._token.encode()):
            raise BadRequest("the request's token is not this bot's")
        return request
