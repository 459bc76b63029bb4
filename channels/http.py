"""The small HTTP server a channel runs for pushed events (Telegram webhooks, Slack HTTP events)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from core.types import ChannelStartError


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
