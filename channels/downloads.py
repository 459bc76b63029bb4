"""A file's body read over aiohttp within a size cap: what the Discord and Slack channels fetch attachments with
(Telegram's goes through python-telegram-bot's own download, capped in its transport)."""

from __future__ import annotations

import aiohttp

from ground.types import AttachmentError

CHUNK_BYTES = 64 * 1024


async def read_capped(response: aiohttp.ClientResponse, max_bytes: int, platform: str) -> bytes:
    """The body, refused at once when its declared length is past ``max_bytes``, else read in pieces and given up
    once past it: a huge file is never held whole."""
    if response.content_length is not None and response.content_length > max_bytes:
        raise AttachmentError(f"{platform}: the file is {response.content_length} bytes, over {max_bytes}",
                              too_large=True)
    body = bytearray()
    async for piece in response.content.iter_chunked(CHUNK_BYTES):
        body += piece
        if len(body) > max_bytes:
            raise AttachmentError(f"{platform}: the file is over {max_bytes} bytes", too_large=True)
    return bytes(body)
