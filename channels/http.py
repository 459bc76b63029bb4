"""The small HTTP server a channel runs for pushed events (Telegram webhooks, Slack HTTP events)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp
from aiohttp import web

from ground.types import ChannelStartError


async def serve_posts(handler: Callable[[web.Request], Awaitable[web.StreamResponse]], host: str, port: int,
                      platform: str) -> web.AppRunner:
    """Serve every POST on host:port with ``handler``; a port that cannot be bound is a start error."""
    server = web.Application()
    server.router.add_post("/{tail:.*}", handler)
    runner = web.AppRunner(server, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        await runner.cleanup()
        raise ChannelStartError(f"{platform}: cannot listen on {host}:{port} ({exc.strerror})") from None
    return runner


def answer_lost(exc: BaseException) -> bool:
    """Did an HTTP request fail after it went out (its answer timed out, or the connection dropped)?

    Then the platform may have carried it out. A failure to connect (or to get a pooled connection in
    time) reached nobody.
    """
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError):
        return False
    return isinstance(exc, TimeoutError | aiohttp.ClientError | OSError)
