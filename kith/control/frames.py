"""The control channel's wire format: one request line, then newline-delimited JSON frames.

Request: ``{"command": name, "args": {...}, "token": str | null}``. Answer frames, in order:
``{"out": text}`` and ``{"err": text}`` (standard output and error, progress bars included),
``{"data": value}`` (a structured result the client acts on, e.g. a forget plan's ids), and last
``{"exit": code}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ground.tunables import CONTROL_REQUEST_MAX_BYTES


class BadRequest(Exception):
    """A request that is not one this bot understands; answered with exit code 2."""


@dataclass(frozen=True, slots=True)
class Request:
    command: str
    args: dict[str, Any] = field(default_factory=dict)
    token: str | None = None


def encode(frame: dict[str, Any]) -> bytes:
    return (json.dumps(frame, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")


def encode_request(request: Request) -> bytes:
    return encode({"command": request.command, "args": request.args, "token": request.token})


def parse_request(line: bytes) -> Request:
    if len(line) > CONTROL_REQUEST_MAX_BYTES:
        raise BadRequest("the request is too long")
    try:
        data = json.loads(line)
    except ValueError:
        raise BadRequest("the request is not JSON") from None
    if not isinstance(data, dict):
        raise BadRequest("the request is not a JSON object")
    command, args, token = data.get("command"), data.get("args", {}), data.get("token")
    if not isinstance(command, str) or not isinstance(args, dict) or not (token is None or isinstance(token, str)):
        raise BadRequest("the request needs a command name and an object of arguments")
    return Request(command, args, token)


class FrameStream:
    """A text stream (``write``/``flush``) whose writes become frames of one kind.

    The operator commands write to it as to ``sys.stdout``; a client gone mid-command makes the
    writes no-ops, never an error in the bot.
    """

    def __init__(self, send: Callable[[dict[str, Any]], None], key: str) -> None:
        self._send = send
        self._key = key

    def write(self, text: str) -> int:
        if text:
            self._send({self._key: text})
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
