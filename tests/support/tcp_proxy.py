"""A loopback TCP proxy that breaks connections on purpose, for fault tests of any protocol.

It sits between kith and a fake server on 127.0.0.1 and knows nothing of HTTP or websockets: it moves
bytes, and while a fault is switched on it

* ``cut``: closes a connection (both sides, by reset) as soon as the server starts to answer, so the
  server has done what the request asked but the client never hears of it: the worst moment for a send;
* ``refuse``: resets every new connection at once, before a byte reaches the server;
* ``delay_s``: holds each piece of the server's answer that long before passing it on, so a client with
  a shorter timeout gives up on a request the server has accepted.

Switching a fault off affects new bytes only; what is already held is let through.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass

CHUNK_BYTES = 65_536


@dataclass
class ProxyStats:
    connections: int = 0
    cut: int = 0  # connections closed as the server began to answer
    refused: int = 0
    delayed: int = 0  # pieces of an answer held back


class FaultProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target_port``; see the module docstring."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.cut = False
        self.refuse = False
        self.delay_s = 0.0
        self.stats = ProxyStats()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            _reset(writer)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def heal(self) -> None:
        self.cut = self.refuse = False
        self.delay_s = 0.0

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        if self.refuse:
            self.stats.refused += 1
            _reset(client_writer)
            return
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            _reset(client_writer)  # the server is down: the client sees a refused connection, as it would
            return
        self._writers.update((client_writer, server_writer))
        up = asyncio.create_task(self._pipe(client_reader, server_writer, answer=False, peer=client_writer))
        down = asyncio.create_task(self._pipe(server_reader, client_writer, answer=True, peer=server_writer))
        for task in (up, down):
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            await asyncio.gather(up, down, return_exceptions=True)
        finally:
            for writer in (client_writer, server_writer):
                self._writers.discard(writer)
                with contextlib.suppress(Exception):
                    writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, answer: bool,
                    peer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(CHUNK_BYTES):
                if answer and self.cut:
                    self.stats.cut += 1
                    _reset(writer)
                    _reset(peer)
                    return
                if answer and self.delay_s > 0:
                    self.stats.delayed += 1
                    await asyncio.sleep(self.delay_s)
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, asyncio.IncompleteReadError):
            _reset(writer)
            _reset(peer)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a reset (SO_LINGER 0), as a dropped connection looks to the other side."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    transport = writer.transport
    with contextlib.suppress(Exception):
        transport.abort()
