"""The page's server: uvicorn serving :mod:`kith.web.routes` as a task on the bot's own event loop.

Started by :meth:`kith.app.lifecycle.App.running` beside the control channel when ``[web] enabled``, closed
before it. The socket is bound here, so an address in use is one clear line and the bot runs on without the
page; the bot keeps its own signal handling (uvicorn's is switched off). Starlette, Jinja2 and uvicorn are
imported only when the page is on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ground.config import WebSettings
from ground.tunables import (
    WEB_LOGIN_TOKEN_TTL_S,
    WEB_LOGIN_TOKENS_MAX,
    WEB_SESSION_TTL_S,
    WEB_SESSIONS_MAX,
    WEB_STOP_GRACE_S,
)
from kith.control.live import LiveParts
from kith.web.door import Door
from kith.web.rules import allowed_hosts, is_loopback

if TYPE_CHECKING:
    from kith.app.lifecycle import App
    from kith.control.serve import ControlChannels

log = logging.getLogger("kith.web")


class WebServer:
    """The memory room of one running bot: its door (login tokens and sessions) and its uvicorn server."""

    def __init__(self, app: App, settings: WebSettings, one_writer: asyncio.Lock) -> None:
        self.app = app
        self.settings = settings
        self.one_writer = one_writer
        self.door = Door(token_ttl_s=WEB_LOGIN_TOKEN_TTL_S, session_ttl_s=WEB_SESSION_TTL_S,
                         tokens_max=WEB_LOGIN_TOKENS_MAX, sessions_max=WEB_SESSIONS_MAX)
        self.port: int | None = None
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None

    @property
    def tls(self) -> bool:
        return bool(self.settings.tls_cert and self.settings.tls_key)

    @property
    def address(self) -> str:
        host = self.settings.host
        shown = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{shown}:{self.port}/"

    def login_url(self) -> str:
        """The page's address with a new single-use login token (printed, never logged)."""
        return f"{self.address}login?token={self.door.issue(time.monotonic())}"

    async def start(self) -> None:
        import uvicorn

        from kith.web.routes import build_routes

        sock = _bound(self.settings.host, self.settings.port)
        self.port = sock.getsockname()[1]
        asgi = build_routes(self.app, LiveParts(self.app), self.door, self.one_writer, secure=self.tls,
                            hosts=allowed_hosts(self.settings.host))
        options: dict[str, Any] = {}
        if self.tls:
            options = {"ssl_certfile": self.settings.tls_cert, "ssl_keyfile": self.settings.tls_key}
        # kith's own log lines say what the page does (ids, counts); uvicorn's would name every request's path.
        config = uvicorn.Config(asgi, lifespan="off", log_config=None, log_level="warning", access_log=False,
                                server_header=False, proxy_headers=False,
                                timeout_graceful_shutdown=int(WEB_STOP_GRACE_S), **options)

        class Served(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:  # the bot's own handlers stay: Ctrl-C stops the bot
                yield

        self._server = Served(config)
        self._task = asyncio.get_running_loop().create_task(self._server.serve(sockets=[sock]), name="web")
        while not self._server.started:
            if self._task.done():
                sock.close()
                self._task.result()  # its failure, raised here
                raise RuntimeError("the web server stopped as it started")
            await asyncio.sleep(0.01)
        log.info("web page listening host=%s port=%d tls=%s", self.settings.host, self.port, self.tls)

    async def close(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), WEB_STOP_GRACE_S + 1)
        except (TimeoutError, Exception) as exc:
            log.warning("web page stop error=%s", type(exc).__name__)
            self._task.cancel()
        self._server = None


def _bound(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def exposure_warning(settings: WebSettings) -> str | None:
    """The loud line for a page served beyond this machine without TLS; None when it needs none."""
    if is_loopback(settings.host) or (settings.tls_cert and settings.tls_key):
        return None
    return (f"WARNING: the memory room listens on {settings.host} without TLS: anyone on that network who gets a "
            "login link, or sees your traffic, can read every person's memories. Set [web] tls_cert and tls_key, "
            "or host = \"127.0.0.1\"")


def writers_lock(control: ControlChannels | None) -> asyncio.Lock:
    """The lock the control channel's writing commands wait for, so the page's writes wait in the same line; a lock
    of the page's own when the bot serves no control channel."""
    return control.one_writer if control is not None else asyncio.Lock()


async def serve_web(app: App, control: ControlChannels | None) -> WebServer | None:
    """The bot's page, listening, with its start-up line; None (said why) if it cannot listen, and the bot runs on.
    ``control`` is the bot's control channel (:func:`kith.control.serve.serve_control`), whose writers the page's
    writes wait behind."""
    settings = app.settings.web
    one_writer = writers_lock(control)
    warning = exposure_warning(settings)
    if warning is not None:
        print(f"kith: {warning}", file=sys.stderr, flush=True)
        log.warning("web page without TLS on a non-loopback address host=%s", settings.host)
    server = WebServer(app, settings, one_writer)
    try:
        await server.start()
    except (OSError, ImportError) as exc:
        log.error("web page failed to start error=%s", type(exc).__name__)
        print(f"kith: the memory room cannot listen on {settings.host}:{settings.port} ({exc}); the bot runs on "
              "without it", file=sys.stderr)
        return None
    print(f"kith: the memory room: {server.login_url()} (one sign-in; `bot.py web url` prints another)",
          file=sys.stderr, flush=True)
    return server
