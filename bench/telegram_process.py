"""The loopback fake Bot API in a process of its own, for benchmarks: Telegram's CPU is not kith's.

Run as ``python -m bench.telegram_process``: it prints ``<bot api port> <control port>`` and serves
until killed. The control port takes what the benchmark would otherwise do in kith's process:

* ``POST /push`` ``{"items": [[chat_id, text], ...], "rate": R}``: push the items as private
  text messages, all at once (``rate`` 0) or R per second, each stamped when pushed;
* ``GET /wait?n=N&timeout=S``: wait until N messages were sent, then return every push and send
  with its stamp;
* ``POST /reset``: forget the pushes and sends so far;
* ``GET /calls``: how many Bot API calls came so far;
* ``GET /first?method=M&since=N&timeout=S``: wait for the first call of M after the first N calls, and return
  its stamp (the fake's clock, ``time.monotonic()``, is the same as the benchmark's).

Stamps are ``time.perf_counter()``, the system's monotonic clock on Linux, so they compare with
stamps taken in the benchmark's own process.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import ClientSession, web

from ground import loop
from tests.fakes.loopback import serve
from tests.fakes.telegram_api import FakeTelegramApi, RecordedMessage


class _StampedSends(list[RecordedMessage]):
    """The fake's ``sent`` list, stamping the moment each sendMessage is accepted."""

    def __init__(self) -> None:
        super().__init__()
        self.stamps: list[float] = []

    def append(self, message: RecordedMessage) -> None:
        super().append(message)
        self.stamps.append(time.perf_counter())

    def clear(self) -> None:
        super().clear()
        self.stamps.clear()


class _Control:
    def __init__(self, tg: FakeTelegramApi) -> None:
        self.tg = tg
        self.sends = _StampedSends()
        tg.sent = self.sends
        self.pushes: list[tuple[int, float]] = []  # (chat id, stamp) in push order
        self.calls_before = 0  # the fake's API calls before the latest reset
        self._pushing: set[asyncio.Task[None]] = set()

    async def push(self, request: web.Request) -> web.Response:
        body = await request.json()
        items = [(int(chat), str(text)) for chat, text in body["items"]]
        task = asyncio.create_task(self._push(items, float(body.get("rate", 0))))
        self._pushing.add(task)
        task.add_done_callback(self._pushing.discard)
        return web.json_response({"ok": True})

    async def _push(self, items: list[tuple[int, str]], rate: float) -> None:
        for chat, text in items:
            self.tg.push_text(chat, chat, text)
            self.pushes.append((chat, time.perf_counter()))
            if rate > 0:
                await asyncio.sleep(1 / rate)

    async def wait(self, request: web.Request) -> web.Response:
        n, timeout = int(request.query["n"]), float(request.query.get("timeout", "600"))
        try:
            await self.tg.wait_for_sent(n, timeout=timeout)
        except TimeoutError as exc:
            return web.json_response({"error": str(exc)}, status=504)
        sends = [[m.chat_id, m.text, t] for m, t in zip(self.sends, self.sends.stamps, strict=True)]
        typing = sum(1 for c in self.tg.calls[self.calls_before:] if c.method.lower() == "sendchataction")
        return web.json_response({"pushes": self.pushes, "sends": sends, "typing": typing})

    async def calls(self, request: web.Request) -> web.Response:
        return web.json_response(len(self.tg.calls))

    async def first(self, request: web.Request) -> web.Response:
        method, since = request.query["method"].lower(), int(request.query["since"])
        deadline = time.monotonic() + float(request.query.get("timeout", "120"))
        while time.monotonic() < deadline:
            stamps = [c.at for c in self.tg.calls[since:] if c.method.lower() == method]
            if stamps:
                return web.json_response(stamps[0])
            await asyncio.sleep(0.002)
        return web.json_response({"error": f"no {method} call"}, status=504)

    async def reset(self, request: web.Request) -> web.Response:
        self.sends.clear()
        self.pushes.clear()
        self.calls_before = len(self.tg.calls)
        return web.json_response({"ok": True})


async def _serve() -> None:
    tg = FakeTelegramApi()
    await tg.start()
    control = _Control(tg)
    app = web.Application()
    app.router.add_post("/push", control.push)
    app.router.add_get("/wait", control.wait)
    app.router.add_post("/reset", control.reset)
    app.router.add_get("/calls", control.calls)
    app.router.add_get("/first", control.first)
    runner = await serve(app, 0)
    print(tg.port, runner.addresses[0][1], flush=True)
    await asyncio.Event().wait()


@dataclass(frozen=True, slots=True)
class Traffic:
    """What the fake saw between two resets: pushes as (chat, stamp), sends as (chat, text, stamp), and
    how many typing indicators were sent."""

    pushes: list[tuple[int, float]]
    sends: list[tuple[int, str, float]]
    typing: int


class TelegramProcess:
    """The benchmark's handle on the fake: its Bot API base URL and the control calls."""

    def __init__(self, base_url: str, control_url: str, session: ClientSession, pid: int) -> None:
        self.base_url = base_url
        self.pid = pid
        self._control = control_url
        self._session = session

    async def push(self, items: list[tuple[int, str]], rate: float = 0) -> None:
        async with self._session.post(f"{self._control}/push", json={"items": items, "rate": rate}) as r:
            r.raise_for_status()

    async def wait(self, n: int, timeout: float = 900) -> Traffic:
        async with self._session.get(f"{self._control}/wait", params={"n": n, "timeout": timeout}) as r:
            body: dict[str, Any] = await r.json()
        if "error" in body:
            raise TimeoutError(body["error"])
        return Traffic([(int(c), float(t)) for c, t in body["pushes"]],
                       [(int(c), str(x), float(t)) for c, x, t in body["sends"]], int(body["typing"]))

    async def reset(self) -> None:
        async with self._session.post(f"{self._control}/reset") as r:
            r.raise_for_status()

    async def calls(self) -> int:
        """How many Bot API calls came so far."""
        async with self._session.get(f"{self._control}/calls") as r:
            return int(await r.json())

    async def first(self, method: str, since: int, timeout: float = 120) -> float | None:
        """The stamp of the first call of ``method`` after the first ``since`` calls; None if none came in time."""
        params = {"method": method, "since": since, "timeout": timeout}
        async with self._session.get(f"{self._control}/first", params=params) as r:
            body = await r.json()
        return None if isinstance(body, dict) else float(body)


@asynccontextmanager
async def telegram_process() -> AsyncIterator[TelegramProcess]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bench.telegram_process",
                                                stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        api_port, control_port = (int(p) for p in (await proc.stdout.readline()).split())
        async with ClientSession() as session:
            yield TelegramProcess(f"http://127.0.0.1:{api_port}/bot", f"http://127.0.0.1:{control_port}", session,
                                  proc.pid)
    finally:
        proc.kill()
        await proc.wait()


if __name__ == "__main__":
    # On kith's own loop: this fake stands in for Telegram's servers, whose CPU is not on kith's machine.
    loop.run(_serve())
