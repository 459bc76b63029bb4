"""Fetching the files a Discord message carries: the attachment's CDN URL, through discord.py's own HTTP session.

Discord's CDN needs no token (an attachment URL is signed in its query, and expires after about a day), so nothing
secret travels with the request; the URL itself is never logged all the same. A URL that no longer works (a turn
taken up again a day later, after an outage) is asked for again by fetching the message it came in, the way
Discord documents: a message read through the API carries freshly signed URLs. discord.py's one public way in,
``HTTPClient.get_from_cdn``, reads a body whole and waits as long as its session does (300 s), so the download
goes through the session it keeps (its connector, its proxy) with a size cap and kith's own timeout instead.
"""

from __future__ import annotations

import urllib.parse

import aiohttp
import discord

from channels.downloads import read_capped
from ground.types import Attachment, AttachmentError


def refuse_oversized(attachment: Attachment, max_bytes: int) -> None:
    """``too_large`` before any request when Discord said the file is larger than ``max_bytes``."""
    if attachment.size is not None and attachment.size > max_bytes:
        raise AttachmentError(f"discord: the file is {attachment.size} bytes, over {max_bytes}", too_large=True)


def attachment_id(url: str) -> str:
    """The attachment's id from its CDN URL (``/attachments/<channel>/<id>/<name>``), for logs; "?" if none."""
    parts = urllib.parse.urlsplit(url).path.split("/")
    return parts[-2] if len(parts) >= 3 and parts[-2].isdigit() else "?"


def cdn_session(http: discord.http.HTTPClient) -> aiohttp.ClientSession | None:
    """The aiohttp session discord.py opened at login, or None (not logged in, closed, or a discord.py that keeps
    it elsewhere: then fetches fail, retryably, and the attachment tests say so)."""
    session = getattr(http, "_HTTPClient__session", None)  # name-mangled: HTTPClient.__session
    return session if isinstance(session, aiohttp.ClientSession) and not session.closed else None


async def download(http: discord.http.HTTPClient, url: str, max_bytes: int, timeout: aiohttp.ClientTimeout) -> bytes:
    """The bytes at ``url``; AttachmentError for a refusal, a failure, or a body past ``max_bytes``."""
    if urllib.parse.urlsplit(url).scheme not in ("https", "http"):
        raise AttachmentError("discord: the attachment has no web address")
    session = cdn_session(http)
    if session is None:
        raise AttachmentError("discord: no HTTP session to fetch with")
    try:
        async with session.get(url, timeout=timeout, proxy=http.proxy, proxy_auth=http.proxy_auth) as response:
            if response.status != 200:
                raise AttachmentError(_refusal(response.status), gone=response.status in (403, 404))
            return await read_capped(response, max_bytes, "discord")
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise AttachmentError(f"discord: network {type(exc).__name__}") from None


async def fresh_url(http: discord.http.HTTPClient, origin: str, url: str) -> str | None:
    """The attachment's URL as Discord signs it now, read from the message it came in (``origin``,
    "<channel id>:<message id>"): a message fetched through the API carries URLs valid from then on. None when the
    message, or the attachment in it, is gone; AttachmentError (retryable) when Discord could not be asked."""
    channel_id, _, message_id = origin.partition(":")
    wanted = attachment_id(url)
    if not (channel_id.isdigit() and message_id.isdigit()) or wanted == "?":
        return None
    try:
        message = await http.get_message(int(channel_id), int(message_id))
    except (discord.NotFound, discord.Forbidden):
        return None
    except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise AttachmentError(f"discord: the message could not be read again ({type(exc).__name__})") from None
    for item in message.get("attachments", []):
        if str(item.get("id")) == wanted and isinstance(item.get("url"), str):
            return str(item["url"])
    return None


def _refusal(status: int) -> str:
    if status in (403, 404):
        # Deleted, or its signed URL expired (Discord signs them for about a day).
        return f"discord: the attachment is not available (HTTP {status})"
    return f"discord: the CDN answered HTTP {status}"


__all__ = ["attachment_id", "cdn_session", "download", "fresh_url", "refuse_oversized"]
