"""The control channel on its own: what a client sees for good, bad and abandoned requests, on a Unix socket and on
the loopback port with a token that stands in for it where there is no AF_UNIX."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import stat
from pathlib import Path

import pytest

from kith.control import client
from kith.control.endpoint import ControlRefused, Transport, socket_path, token_path
from kith.control.frames import Request
from kith.control.parts import Console
from kith.control.server import ControlServer
from tests.support.waiting import until

TRANSPORTS = [Transport.UNIX, Transport.TCP]


async def _echo(request: Request, console: Console) -> int:
    """A body that writes what it was asked, shows a progress line on standard error, and exits with args' code."""
    if request.command == "slow":
        for i in range(50):
            console.out.write(f"line {i}\n")
            await asyncio.sleep(0.02)
        return 0
    console.err.write("\rworking [#####] 1/1\n")
    console.out.write(json.dumps(request.args, ensure_ascii=False) + "\n")
    console.send_data({"seen": request.command})
    return int(request.args.get("code", 0))


def _call(data_dir: Path, transport: Transport, request: Request) -> tuple[int, str, str, list[object]]:
    out, err, data = io.StringIO(), io.StringIO(), []
    sock, token = client.connect(data_dir, transport)
    code = client.call(sock, Request(request.command, request.args, token if request.token is None else request.token),
                       Console(out, err, data.append))
    return code, out.getvalue(), err.getvalue(), data


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_request_streams_its_output_progress_data_and_exit_code(tmp_path: Path, transport: Transport) -> None:
    server = ControlServer(tmp_path, _echo, transport=transport)
    await server.start()
    try:
        code, out, err, data = await asyncio.to_thread(_call, tmp_path, transport,
                                                       Request("people.list", {"code": 3, "who": "Zoë"}))
        assert (code, out, err, data) == (3, '{"code": 3, "who": "Zoë"}\n', "\rworking [#####] 1/1\n",
                                          [{"seen": "people.list"}])
        private = socket_path(tmp_path) if transport is Transport.UNIX else token_path(tmp_path)
        assert stat.S_IMODE(private.stat().st_mode) == 0o600  # only its owner can command the bot
    finally:
        await server.close()
    assert not socket_path(tmp_path).exists() and not token_path(tmp_path).exists()
    with pytest.raises(client.NoBot):
        client.connect(tmp_path, transport)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_bad_requests_get_exit_code_2_and_a_reason_and_the_server_keeps_serving(
        tmp_path: Path, transport: Transport) -> None:
    server = ControlServer(tmp_path, _echo, transport=transport)
    await server.start()
    try:
        def raw(line: bytes) -> list[dict[str, object]]:
            if transport is Transport.UNIX:
                sock = socket.socket(socket.AF_UNIX)
                sock.connect(str(socket_path(tmp_path)))
            else:
                port = json.loads(token_path(tmp_path).read_text())["port"]
                sock = socket.create_connection(("127.0.0.1", port))
            with sock:
                sock.sendall(line)
                return [json.loads(frame) for frame in sock.makefile("rb")]

        for line in (b"not json\n", b"[1, 2]\n", b'{"args": {}}\n'):
            frames = await asyncio.to_thread(raw, line)
            assert frames[-1] == {"exit": 2} and "bad control request" in str(frames[0]["err"])
        if transport is Transport.TCP:  # a request without this start's token is refused
            code, out, err, _ = await asyncio.to_thread(_call, tmp_path, transport, Request("x", {}, "guessed"))
            assert (code, out) == (2, "") and "token" in err
        code, out, _err, _data = await asyncio.to_thread(_call, tmp_path, transport, Request("people.list", {}))
        assert (code, out) == (0, "{}\n")
    finally:
        await server.close()


async def test_a_client_that_leaves_mid_command_costs_the_bot_nothing(tmp_path: Path) -> None:
    finished: list[int] = []

    async def body(request: Request, console: Console) -> int:
        code = await _echo(request, console)
        finished.append(code)
        return code

    server = ControlServer(tmp_path, body, transport=Transport.UNIX)
    await server.start()
    try:
        def leave() -> None:
            sock, _ = client.connect(tmp_path, Transport.UNIX)
            with sock:
                sock.sendall(b'{"command": "slow", "args": {}}\n')
                sock.recv(16)  # it has started

        await asyncio.to_thread(leave)
        await until(lambda: finished == [0], 10, what="the command to run to its end", every=0.02)
        code, out, _err, _data = await asyncio.to_thread(_call, tmp_path, Transport.UNIX, Request("next", {}))
        assert (code, out) == (0, "{}\n")
    finally:
        await server.close()


async def test_a_stale_socket_is_replaced_and_something_else_in_its_place_is_never_followed(tmp_path: Path) -> None:
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(socket_path(tmp_path)))  # a bot killed with -9 leaves its socket file behind
    stale.close()
    with pytest.raises(client.NoBot):
        client.connect(tmp_path, Transport.UNIX)  # nothing listens: no bot
    server = ControlServer(tmp_path, _echo, transport=Transport.UNIX)
    await server.start()
    try:
        code, _out, _err, _data = await asyncio.to_thread(_call, tmp_path, Transport.UNIX, Request("x", {}))
        assert code == 0
    finally:
        await server.close()

    socket_path(tmp_path).symlink_to(tmp_path / "elsewhere.sock")
    with pytest.raises(ControlRefused):
        client.connect(tmp_path, Transport.UNIX)
    with pytest.raises(ControlRefused):
        await ControlServer(tmp_path, _echo, transport=Transport.UNIX).start()
    assert socket_path(tmp_path).is_symlink()  # left as it was for its owner to look at


