"""Fetching the files a Slack message shares: a GET of the file's private URL with the bot token.

Slack serves a file's ``url_private_download`` (or ``url_private``) only to a request with
``Authorization: Bearer <token>``; without it, or with a token that lacks ``files:read``, it answers its
HTML login page with status 200 instead of the file, which is a failure here, never a file. The token goes
only to Slack's file host (``files.slack.com``; ``files.<host>`` of a configured API URL; a fake's own
address when the API URL is on a loopback or bare IP): a ref on any other host is refused before any
request, and redirects are followed by hand, the token sent again only to that same host (Slack's CDN hops
carry their own signature). The URL and the token are never logged.

slack_sdk has no download helper in every version kith supports, so this is aiohttp, on the channel's own
session.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from dataclasses import dataclass

import aiohttp

from channels.downloads import read_capped
from ground.types import Attachment, AttachmentError

DEFAULT_FILES_HOST = "files.slack.com"
MAX_REDIRECTS = 3
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_LOOPBACK_NAMES = frozenset({"localhost"})


@dataclass(frozen=True, slots=True)
class Origin:
    """Scheme, host and port: where a URL's request goes."""

    scheme: str
    host: str
    port: int


def origin_of(url: str) -> Origin | None:
    """The origin of ``url``; None for anything that is not an http(s) URL with a host."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in ("https", "http") or not host:
        return None
    return Origin(scheme, host, port if port is not None else (443 if scheme == "https" else 80))


def files_origin(api_url: str) -> Origin:
    """Where Slack serves files for a Web API at ``api_url``: ``files.<its host>`` over https, or, for an API on
    a loopback name or a bare IP (a test's fake, which serves both), that API's own origin."""
    api = origin_of(api_url)
    if api is None:
        return Origin("https", DEFAULT_FILES_HOST, 443)
    if api.host in _LOOPBACK_NAMES or _is_ip(api.host):
        return api
    return Origin("https", "files." + api.host.removeprefix("www."), 443)


def refuse_oversized(attachment: Attachment, max_bytes: int) -> None:
    """``too_large`` before any request when Slack said the file is larger than ``max_bytes``."""
    if attachment.size is not None and attachment.size > max_bytes:
        raise AttachmentError(f"slack: the file is {attachment.size} bytes, over {max_bytes}", too_large=True)


def file_id(url: str) -> str:
    """The file's id from its private URL (``/files-pri/<team>-<file>/<name>``), for logs; "?" if none."""
    parts = urllib.parse.urlsplit(url).path.split("/")
    owner = parts[2] if len(parts) > 2 and parts[1] == "files-pri" else ""
    candidate = owner.rpartition("-")[2]
    return candidate if candidate.startswith("F") and candidate.isalnum() else "?"


async def download(session: aiohttp.ClientSession, attachment: Attachment, token: str, host: Origin,
                   max_bytes: int, timeout: aiohttp.ClientTimeout) -> bytes:
    """The file's bytes; AttachmentError for a foreign host, a refusal, a login page, a failure, or a body past
    ``max_bytes``."""
    url = attachment.ref
    if origin_of(url) != host:
        raise AttachmentError("slack: the file is not on Slack's file host; the token is not sent there", gone=True)
    try:
        for _ in range(MAX_REDIRECTS + 1):
            at = origin_of(url)
            headers = {"Authorization": f"Bearer {token}"} if at == host else {}
            async with session.get(url, headers=headers, allow_redirects=False, timeout=timeout) as response:
                if response.status in _REDIRECTS:
                    url = _redirect_target(url, response.headers.get("Location"), host)
                    continue
                return await _body(response, attachment, max_bytes)
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise AttachmentError(f"slack: network {type(exc).__name__}") from None
    raise AttachmentError("slack: too many redirects")


def _redirect_target(url: str, location: str | None, host: Origin) -> str:
    if not location:
        raise AttachmentError("slack: a redirect without a location")
    target = urllib.parse.urljoin(url, location)
    at = origin_of(target)
    # Off Slack's file host only over https (the token stays behind either way).
    if at is None or (at != host and at.scheme != "https"):
        raise AttachmentError("slack: a redirect to an address that is not https")
    return target


async def _body(response: aiohttp.ClientResponse, attachment: Attachment, max_bytes: int) -> bytes:
    status = response.status
    if status != 200:
        if status in (401, 403, 404, 410):
            raise AttachmentError(f"slack: the file is not available (HTTP {status})", gone=True)
        raise AttachmentError(f"slack: the file host answered HTTP {status}")
    if response.content_type == "text/html" and not attachment.mime.startswith("text/html"):
        # Slack's login page: the token was refused, or lacks files:read.
        raise AttachmentError("slack: Slack answered a login page, not the file (does the token have files:read?)",
                              gone=True)
    return await read_capped(response, max_bytes, "slack")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


__all__ = ["DEFAULT_FILES_HOST", "Origin", "download", "file_id", "files_origin", "origin_of", "refuse_oversized"]
